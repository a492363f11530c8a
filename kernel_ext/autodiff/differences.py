"""Finite-difference arithmetic for the derivative checks, leaf by leaf in each leaf's dtype.

The pieces :mod:`jaxlab.autodiff.check` (first order) and
:mod:`jaxlab.autodiff.second_order` (second differences) build their comparisons from:
steps that are exact in the argument's dtype, arguments shifted by them, outputs
flattened to one vector, the step size for an argument and random unit directions. The
check's policy (tolerances, noise floor, when a step grows, the verdict) is not here::

    rng = np.random.default_rng(0)
    d = unit_direction(rng, [[x]], 0)                     # a random unit direction in x
    delta = [[exact_step(x, d[0][0], 1e-2)]]             # x ± δ exact in x's dtype
    (flat(f(shifted([[x]], delta, 1.0))) - flat(f(shifted([[x]], delta, -1.0))))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Tree = list[list[Any]]  # per chosen argument, its float leaves


def leaf_dtype(leaf: Any) -> np.dtype:
    """The dtype a leaf computes in (a Python float as JAX takes it: weak float32)."""
    return np.dtype(jnp.result_type(leaf))


def _wide(dtype: np.dtype) -> Any:
    return np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64


def exact_step(leaf: Any, direction: np.ndarray, h: float) -> np.ndarray:
    """``δ ≈ h · direction`` such that ``leaf ± δ`` are exactly representable in the
    leaf's dtype (in float64): the difference then sees the step it was given.

    Rounding ``x + hd`` to the dtype and back gives a ``δ`` on the coarser grid; two more
    round trips make it symmetric. A component still not exact (rare, where the step
    crosses zero into a coarser binade) is left out of the direction (``δ = 0``).
    """
    dtype = leaf_dtype(leaf)
    wide = _wide(dtype)

    def rounded(v: np.ndarray) -> np.ndarray:
        return v.astype(dtype).astype(wide)

    x = rounded(np.asarray(leaf, dtype=wide))  # a Python float 0.4 is float32(0.4) to JAX

    delta = rounded(x + h * direction) - x
    delta = x - rounded(x - delta)
    delta = rounded(x + delta) - x
    exact = (rounded(x + delta) == x + delta) & (rounded(x - delta) == x - delta)
    return np.where(exact & np.isfinite(delta), delta, 0.0)


def exact_ladder(leaf: Any, direction: np.ndarray, h: float, most: int) -> np.ndarray:
    """``δ ≈ h · direction`` such that ``leaf + k δ`` is exact in the leaf's dtype for every
    ``k`` in ``-most … most``: equally spaced points, as a noise estimate needs. A component
    whose ladder is not exact (it crosses into a coarser binade) is left out (``δ = 0``)."""
    dtype = leaf_dtype(leaf)
    wide = _wide(dtype)
    x = np.asarray(leaf, dtype=wide).astype(dtype).astype(wide)
    delta = exact_step(leaf, direction, h)
    exact = np.ones(np.shape(delta), dtype=bool)
    for k in range(2, most + 1):
        for point in (x + k * delta, x - k * delta):
            exact &= point.astype(dtype).astype(wide) == point
    return np.where(exact, delta, 0.0)


def shifted(
    diff: Sequence[Sequence[Any]], delta: Sequence[Sequence[np.ndarray]], sign: float
) -> Tree:
    """``diff + sign · delta``, leaf by leaf, in each leaf's own dtype."""
    out: Tree = []
    for xs, ds in zip(diff, delta, strict=True):
        row = []
        for x, d in zip(xs, ds, strict=True):
            dtype, wide = leaf_dtype(x), _wide(leaf_dtype(x))
            base = np.asarray(x, dtype=wide).astype(dtype).astype(wide)
            row.append(jnp.asarray((base + sign * d).astype(dtype)))
        out.append(row)
    return out


def flat(tree: Any) -> np.ndarray:
    """Every leaf of an output, as one complex128 vector (for norms and differences)."""
    leaves = [
        np.asarray(x, dtype=np.complex128).reshape(-1) for x in jax.tree_util.tree_leaves(tree)
    ]
    return np.concatenate(leaves) if leaves else np.zeros(0, np.complex128)


def eps_of(tree: Any) -> float:
    """The machine epsilon of the least precise float leaf of an output."""
    eps = [
        float(jnp.finfo(jnp.result_type(x)).eps)
        for x in jax.tree_util.tree_leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return max(eps, default=float(jnp.finfo(jnp.float32).eps))


def norm(v: np.ndarray) -> float:
    """The Euclidean norm of a flattened output (0 for an empty one)."""
    return float(np.linalg.norm(v)) if v.size else 0.0


def scale_of(leaves: Sequence[Any]) -> float:
    """The argument's typical magnitude (RMS, at least 1), which sets the step."""
    size = sum(int(np.size(x)) for x in leaves) or 1
    total = sum(float(np.sum(np.abs(np.asarray(x, dtype=np.complex128)) ** 2)) for x in leaves)
    return max(1.0, math.sqrt(total / size))


def step_for(leaves: Sequence[Any], table: dict[str, float]) -> float:
    """The step for an argument: from its least precise leaf's dtype, times its scale."""
    rel = max((table.get(leaf_dtype(x).name, table["float32"]) for x in leaves), default=1e-2)
    return rel * scale_of(leaves)


def unit_direction(
    rng: np.random.Generator, diff: Sequence[Sequence[Any]], i: int
) -> list[list[np.ndarray]]:
    """A random unit direction in argument ``i`` (zero in the others)."""
    d = [rng.standard_normal(np.shape(x)) for x in diff[i]]
    length = math.sqrt(sum(float(np.sum(x**2)) for x in d)) or 1.0
    direction = [[np.zeros(np.shape(x)) for x in other] for other in diff]
    direction[i] = [x / length for x in d]
    return direction


def scaled(direction: Sequence[Sequence[np.ndarray]], h: float) -> Tree:
    """Each leaf divided by the step ``h``: the exact step as a unit-length direction."""
    return [[d / h for d in ds] for ds in direction]


def combine(a: Tree, b: Tree, wa: float, wb: float) -> Tree:
    """``wa · a + wb · b`` leaf by leaf (Richardson's weights on two directions)."""
    return [
        [wa * x + wb * y for x, y in zip(xs, ys, strict=True)] for xs, ys in zip(a, b, strict=True)
    ]


def cast_like(direction: Sequence[Sequence[np.ndarray]], diff: Sequence[Sequence[Any]]) -> Tree:
    """A direction as JAX arrays in the dtypes of the argument leaves it moves."""
    return [
        [jnp.asarray(t, dtype=leaf_dtype(x)) for t, x in zip(ts, xs, strict=True)]
        for ts, xs in zip(direction, diff, strict=True)
    ]


def dtype_name(out: Any) -> str:
    """The dtypes of an output's leaves, e.g. ``"float32"`` or ``"float16/float32"``."""
    names = sorted({np.dtype(jnp.result_type(x)).name for x in jax.tree_util.tree_leaves(out)})
    return "/".join(names) or "float32"
