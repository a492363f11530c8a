"""Check a derivative against central finite differences computed in float64.

A derivative is checked along random directions ``d``, one argument at a time: the
finite difference ``(F(x + h d) - F(x - h d)) / 2h`` (``F`` evaluated in float64,
enabled just for the check and restored afterwards) against the derivative jaxlab
reported, applied to ``d``. Double precision makes the finite difference accurate to
about 1e-10, so the error measured is the reported derivative's own.

>>> check = check_derivative(  # doctest: +SKIP
...     names=("x",), diff=[[jnp.ones(3)]], fun=lambda xs: jnp.sum(xs[0] ** 2),
...     apply=lambda d: jnp.vdot(2 * jnp.ones(3), d[0][0]), dtype=jnp.float32)
>>> check.passed                                                       # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# Relative error a correct derivative stays under, by the dtype it was computed in:
# a few hundred ulps of float32 (long reductions lose that much), ~1e4 ulps of float64.
TOLERANCE = {"float64": 1e-6, "float32": 1e-3, "float16": 5e-2, "bfloat16": 5e-2}


@dataclass(frozen=True)
class ArgCheck:
    """The finite-difference check of one argument."""

    name: str
    rel_error: float  # the worst over the directions tried
    directional_fd: tuple[float, ...]  # ‖(F(x+hd) - F(x-hd)) / 2h‖ per direction
    directional_ad: tuple[float, ...]  # ‖F'(x) d‖ per direction, from the reported derivative
    step: float


@dataclass(frozen=True)
class GradCheck:
    """Per-argument relative errors of a derivative against float64 finite differences."""

    args: tuple[ArgCheck, ...]
    tolerance: float
    directions: int
    seed: int
    x64: bool  # whether the finite differences ran in float64

    @property
    def errors(self) -> dict[str, float]:
        return {a.name: a.rel_error for a in self.args}

    @property
    def passed(self) -> bool:
        return all(a.rel_error <= self.tolerance for a in self.args)

    @property
    def max_error(self) -> float:
        return max((a.rel_error for a in self.args), default=0.0)

    def text(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        parts = ", ".join(f"{a.name}: {a.rel_error:.1e}" for a in self.args)
        where = "float64" if self.x64 else "float32 (the function casts to it)"
        return (
            f"finite-difference check {verdict} (relative error {parts}; tolerance "
            f"{self.tolerance:.0e}; {self.directions} random directions, central "
            f"differences in {where})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "errors": self.errors,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "directions": self.directions,
            "x64": self.x64,
        }


@contextlib.contextmanager
def float64_enabled() -> Iterator[None]:
    """Enable ``jax_enable_x64`` for the block and restore the previous setting after."""
    before = bool(jax.config.read("jax_enable_x64"))
    try:
        if not before:
            jax.config.update("jax_enable_x64", True)
        yield
    finally:
        if not before:
            jax.config.update("jax_enable_x64", False)


def tolerance_for(dtype: Any) -> float:
    return TOLERANCE.get(np.dtype(dtype).name, 1e-3)


def _norm(tree: Any) -> float:
    leaves = [np.asarray(x, dtype=np.complex128) for x in jax.tree_util.tree_leaves(tree)]
    return math.sqrt(sum(float(np.sum(np.abs(x) ** 2)) for x in leaves))


def _sub(a: Any, b: Any) -> Any:
    return jax.tree_util.tree_map(
        lambda x, y: np.asarray(x, np.complex128) - np.asarray(y, np.complex128), a, b
    )


def _to64(leaf: Any) -> Any:
    dtype = jnp.complex128 if jnp.iscomplexobj(leaf) else jnp.float64
    return jnp.asarray(np.asarray(leaf), dtype=dtype)


def check_derivative(
    *,
    names: Sequence[str],
    diff: Sequence[Sequence[Any]],
    fun: Callable[[list[list[Any]]], Any],
    apply: Callable[[list[list[Any]]], Any],
    dtype: Any,
    directions: int = 2,
    seed: int = 0,
    tolerance: float | None = None,
) -> GradCheck:
    """Compare ``apply(d)`` (the reported derivative applied to ``d``) with finite
    differences of ``fun`` along ``d``, for ``directions`` random unit directions per
    argument.

    ``diff`` holds, per argument, the list of its float leaves; ``fun`` maps such a
    list of lists to the output pytree. ``dtype`` is the derivative's dtype (it sets the
    tolerance). Directions come from NumPy (seeded), not ``jax.random``, so the check
    draws nothing from the user's PRNG keys.
    """
    rng = np.random.default_rng(seed)
    tol = tolerance if tolerance is not None else tolerance_for(dtype)
    # Per argument, `directions` random unit directions (zero in the other arguments).
    plan = [[_unit_direction(rng, diff, i) for _ in range(directions)] for i in range(len(diff))]
    # The reported derivative is applied in its own precision, before x64 is enabled.
    ad_values = [[apply(_cast_like(d, diff)) for d in per_arg] for per_arg in plan]
    with float64_enabled():
        x = [[_to64(leaf) for leaf in leaves] for leaves in diff]
        f0 = fun(x)
        # A function that casts to float32 itself computes in float32 even now: the
        # step that balances truncation and rounding error is then ~eps32^(1/3).
        x64 = all(
            np.dtype(leaf.dtype).itemsize * (1 if np.isrealobj(leaf) else 0.5) >= 8
            for leaf in jax.tree_util.tree_leaves(f0)
        )
        relative_step = 1e-5 if x64 else 3e-3
        steps = [
            relative_step * max(1.0, _norm(leaves) / math.sqrt(_size(leaves))) for leaves in diff
        ]
        fd_values = [
            [_central_difference(fun, x, d, h) for d in per_arg]
            for per_arg, h in zip(plan, steps, strict=True)
        ]
    floor = (1e-9 if x64 else 1e-5) * max(1.0, _norm(f0))
    results = [
        _arg_check(name, fds, ads, floor, h)
        for name, fds, ads, h in zip(names, fd_values, ad_values, steps, strict=True)
    ]
    return GradCheck(tuple(results), tol, directions, seed, x64=x64)


def _size(leaves: Sequence[Any]) -> int:
    return sum(int(np.size(leaf)) for leaf in leaves) or 1


def _unit_direction(
    rng: np.random.Generator, diff: Sequence[Sequence[Any]], i: int
) -> list[list[np.ndarray]]:
    d = [rng.standard_normal(np.shape(x)) for x in diff[i]]
    norm = math.sqrt(sum(float(np.sum(x**2)) for x in d)) or 1.0
    direction = [[np.zeros(np.shape(x)) for x in other] for other in diff]
    direction[i] = [x / norm for x in d]
    return direction


def _cast_like(direction: list[list[np.ndarray]], diff: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [
        [jnp.asarray(t, dtype=jnp.result_type(x)) for t, x in zip(ts, xs, strict=True)]
        for ts, xs in zip(direction, diff, strict=True)
    ]


def _central_difference(
    fun: Callable[[list[list[Any]]], Any], x: list[list[Any]], d: list[list[Any]], h: float
) -> Any:
    """``(F(x + h d) - F(x - h d)) / 2h``, leaf by leaf of the output."""

    def shifted(sign: float) -> Any:
        return fun(
            [
                [xl + sign * h * jnp.asarray(dl) for xl, dl in zip(xs, ds, strict=True)]
                for xs, ds in zip(x, d, strict=True)
            ]
        )

    return jax.tree_util.tree_map(
        lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * h), shifted(1.0), shifted(-1.0)
    )


def _arg_check(name: str, fds: list[Any], ads: list[Any], floor: float, step: float) -> ArgCheck:
    """Relative errors along each direction; 0 where both sides are below the noise floor."""
    fd_norms, ad_norms = [_norm(fd) for fd in fds], [_norm(ad) for ad in ads]
    errors = [
        0.0 if max(f, a) < floor else _norm(_sub(fd, ad)) / max(f, a)
        for fd, ad, f, a in zip(fds, ads, fd_norms, ad_norms, strict=True)
    ]
    return ArgCheck(
        name=name,
        rel_error=max(errors, default=0.0),
        directional_fd=tuple(fd_norms),
        directional_ad=tuple(ad_norms),
        step=step,
    )
