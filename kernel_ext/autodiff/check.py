"""Check a derivative against finite differences of the very function that was reported.

The check evaluates the function in the dtypes it was called with: no float64 switch.
Turning ``jax_enable_x64`` on would change the function (``jax.random`` draws other
numbers for the same key, a float32 weight held fixed meets float64 inputs) and is
process-wide. Precision is won back by three means instead:

* **exact steps**: the perturbation ``δ`` along a random direction is rounded so that
  ``x + δ`` and ``x - δ`` are both exactly representable in each leaf's dtype; the
  derivative is then applied to ``δ / h`` itself, so no step is lost to rounding;
* **Richardson extrapolation**: central differences at steps ``h`` and ``h/2``, combined
  as ``(4 D(h/2) - D(h)) / 3``, cancel the ``h²`` truncation error, which allows a step
  (1e-2 of the argument's scale in float32) where the rounding error of the function is
  small;
* **a noise floor**: the part of a difference that the function's own rounding can explain
  (``16 ε |f| / h``) is not counted as error. Where that floor is large (a random
  direction in a model with many parameters changes the value by little), the step grows
  fourfold at a time; if the floor stays too large to tell a 1.5× wrong derivative from a
  right one, the verdict is *inconclusive* (neither passed nor failed) and says how to
  get a conclusive one.

When a direction fails, the one-sided differences tell a kink (a ``relu`` at 0) from a
wrong rule: on a smooth function their gap halves with the step; at a kink it does not
(:attr:`GradCheck.kink`). Second derivatives are checked by second differences of the
value in :mod:`jaxlab.autodiff.second_order`, with the same machinery.

This module holds the records (:class:`GradCheck`, :class:`ArgCheck`, :class:`Direction`),
the policy (tolerances, noise floor, step growth, kinks) and the first-order check; the
arithmetic (exact steps, shifts, norms, directions) is :mod:`jaxlab.autodiff.differences`.

>>> check = check_derivative(  # doctest: +SKIP
...     names=("x",), diff=[[jnp.ones(3)]], fun=lambda xs: jnp.sum(xs[0][0] ** 2),
...     apply=lambda d: jnp.vdot(2 * jnp.ones(3), d[0][0]), dtype=jnp.float32)
>>> check.passed, check.dtype                                           # doctest: +SKIP
(True, 'float32')
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .differences import (
    Tree,
    cast_like,
    combine,
    dtype_name,
    eps_of,
    exact_step,
    flat,
    norm,
    scaled,
    shifted,
    step_for,
    unit_direction,
)

# Relative error a correct derivative stays under, by the dtype it was computed in.
TOLERANCE = {"float64": 1e-6, "float32": 1e-3, "float16": 5e-2, "bfloat16": 5e-2}
# Steps relative to the argument's scale: large enough that the function's rounding
# (ε/h) is small, small enough that Richardson's h⁴ truncation is smaller still.
STEP = {"float64": 1e-3, "float32": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}
# How many ε of |f| a function's evaluation may be off by (long sums lose a few bits).
NOISE_ULPS = 16.0
# A comparison whose noise floor exceeds this (relative) cannot tell a 1.5× wrong
# derivative from a right one: it is inconclusive, neither passed nor failed.
CONCLUSIVE_NOISE = 0.1
# Where rounding hides the comparison, the step grows fourfold up to this many times,
# while the differences at h and h/2 agree to 25% (Richardson cancels that h² term;
# a longer step can only confirm, never fail, a derivative: see _one_direction).
GROWTH, GROWTH_STEPS, TRUNCATION = 4.0, 5, 0.25


@dataclass(frozen=True)
class ArgCheck:
    """The finite-difference check of one argument."""

    name: str
    rel_error: float  # the worst over the directions tried
    directional_fd: tuple[float, ...]  # ‖finite difference‖ per direction
    directional_ad: tuple[float, ...]  # ‖reported derivative applied to it‖ per direction
    step: float  # the largest step used (it grows where rounding hides the comparison)
    passed: bool = True  # every direction within tolerance (plus its noise floor)
    noise: float = 0.0  # the largest relative noise floor allowed on a direction
    kink: bool = False  # a failed direction whose one-sided differences disagree
    failed: bool = False  # some direction is off by more than tolerance and noise

    @classmethod
    def of(cls, name: str, step: float, directions: Sequence[Direction]) -> ArgCheck:
        return cls(
            name=name,
            rel_error=max((d.error for d in directions), default=0.0),
            directional_fd=tuple(d.fd for d in directions),
            directional_ad=tuple(d.ad for d in directions),
            step=max([step, *(d.step for d in directions)]),
            passed=all(d.passed for d in directions),
            noise=max((d.noise for d in directions), default=0.0),
            kink=any(d.kink for d in directions),
            failed=any(d.failed for d in directions),
        )


@dataclass(frozen=True)
class Direction:
    """One direction's comparison: relative error, its noise floor, the two norms."""

    error: float
    noise: float  # relative: what the function's rounding can explain
    fd: float
    ad: float
    failed: bool  # off by more than the tolerance plus the noise
    kink: bool = False
    step: float = 0.0
    truncation: float = 0.0  # relative disagreement of the differences at h and h/2

    @property
    def passed(self) -> bool:
        """Within tolerance, with noise small enough to have caught a wrong derivative."""
        return not self.failed and self.noise <= CONCLUSIVE_NOISE

    @classmethod
    def compare(cls, fd: np.ndarray, ad: np.ndarray, noise: float, tol: float) -> Direction:
        """``‖fd - ad‖`` relative to the larger of the two; it fails beyond the
        tolerance plus the noise floor (``noise``, absolute, made relative here)."""
        size = max(norm(fd), norm(ad))
        error = norm(fd - ad) / size if size > 0 else 0.0
        rel_noise = noise / size if size > 0 else (0.0 if noise == 0 else math.inf)
        return cls(error, rel_noise, norm(fd), norm(ad), error > tol + rel_noise)


@dataclass(frozen=True)
class GradCheck:
    """Per-argument relative errors of a derivative against finite differences."""

    args: tuple[ArgCheck, ...]
    tolerance: float
    directions: int
    seed: int
    dtype: str  # the dtype the differences were computed in (the function's own)
    order: int = 1  # 1: first derivative; 2: Hessian or HVP against second differences

    @property
    def errors(self) -> dict[str, float]:
        return {a.name: a.rel_error for a in self.args}

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.args)

    @property
    def failed(self) -> bool:
        return any(a.failed for a in self.args)

    @property
    def inconclusive(self) -> bool:
        """Nothing failed, but rounding hid some comparison: neither confirmed nor refuted."""
        return not self.passed and not self.failed

    @property
    def kink(self) -> bool:
        """The check failed where the function has a kink, not (necessarily) a bad rule."""
        return any(a.kink and a.failed for a in self.args)

    @property
    def max_error(self) -> float:
        return max((a.rel_error for a in self.args), default=0.0)

    def text(self) -> str:
        verdict = "passed" if self.passed else "FAILED" if self.failed else "inconclusive"
        parts = ", ".join(f"{a.name}: {a.rel_error:.1e}" for a in self.args)
        what = (
            f"central differences in {self.dtype}"
            if self.order == 1
            else f"second differences of the value in {self.dtype}, independent of the "
            "derivative rules"
        )
        noisy = [a for a in self.args if not a.failed and a.rel_error > self.tolerance]
        if noisy:
            parts += "; within the rounding noise of the differences: " + ", ".join(
                f"{a.name} ±{a.noise:.1e}" for a in noisy
            )
        out = (
            f"{'' if self.order == 1 else 'second-order '}finite-difference check {verdict} "
            f"(relative error {parts}; tolerance {self.tolerance:.0e}; {self.directions} "
            f"random direction{'s' if self.directions != 1 else ''}, {what})"
        )
        if self.inconclusive:
            out += (
                f". Differences in {self.dtype} cannot resolve this derivative along random "
                "directions (the function's own rounding is as large as the change it "
                "measures, as in a model with many parameters): the check neither confirms "
                "nor refutes it. Check fewer parameters (--wrt), or run the notebook in "
                "float64 from its start (jax.config.update('jax_enable_x64', True))"
            )
        if self.kink:
            out += (
                ". The one-sided differences disagree: the point is at (or within a step "
                "of) a kink, where the function has no derivative and JAX reports one "
                "side's by convention (relu'(0) = 0). To check the derivative away from "
                f"the kink, move the point by more than the difference step "
                f"({max(a.step for a in self.args if a.kink):.0e})"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "errors": self.errors,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "inconclusive": self.inconclusive,
            "directions": self.directions,
            "dtype": self.dtype,
            "order": self.order,
            "kink": self.kink,
        }


def tolerance_for(dtype: Any, order: int = 1) -> float:
    base = TOLERANCE.get(np.dtype(dtype).name, 1e-3)
    return base if order == 1 else min(1e-1, base * 10)


# --------------------------------------------------------------------------- first order


def check_derivative(
    *,
    names: Sequence[str],
    diff: Sequence[Sequence[Any]],
    fun: Callable[[Tree], Any],
    apply: Callable[[Tree], Any],
    dtype: Any,
    directions: int = 2,
    seed: int = 0,
    tolerance: float | None = None,
) -> GradCheck:
    """Compare ``apply(d)`` (the reported derivative applied to ``d``) with Richardson-
    extrapolated central differences of ``fun`` along ``d``, for ``directions`` random
    directions per argument.

    ``diff`` holds, per argument, the list of its float leaves; ``fun`` maps such a list
    of lists to the output pytree. ``dtype`` is the derivative's dtype (it sets the
    tolerance). Directions come from NumPy (seeded), not ``jax.random``, so the check
    draws nothing from the user's PRNG keys.
    """
    rng = np.random.default_rng(seed)
    tol = tolerance if tolerance is not None else tolerance_for(dtype)
    out0 = fun([list(xs) for xs in diff])
    f0, eps = flat(out0), eps_of(out0)
    results = []
    for i, name in enumerate(names):
        h = step_for(diff[i], STEP)
        per_direction = [
            _one_direction(fun, apply, diff, unit_direction(rng, diff, i), h, f0, eps, tol)
            for _ in range(directions)
        ]
        results.append(ArgCheck.of(name, h, per_direction))
    return GradCheck(tuple(results), tol, directions, seed, dtype=dtype_name(out0))


def _one_direction(
    fun: Callable[[Tree], Any],
    apply: Callable[[Tree], Any],
    diff: Sequence[Sequence[Any]],
    direction: list[list[np.ndarray]],
    h: float,
    f0: np.ndarray,
    eps: float,
    tol: float,
) -> Direction:
    """The comparison along one direction, and whether a failure is a kink's. Where the
    function's rounding hides it (a random direction in a large model moves the value
    very little), the step grows fourfold while the differences at h and h/2 agree and
    the comparison holds."""
    found = _at_step(fun, apply, diff, direction, h, f0, eps, tol)
    for _ in range(GROWTH_STEPS):
        if found.noise <= tol / 2 or found.failed:
            break
        bigger = _at_step(fun, apply, diff, direction, GROWTH * found.step, f0, eps, tol)
        # A longer step may cross kinks (relu units) or curve away: it can confirm a
        # derivative, never condemn one the short step could not resolve.
        if bigger.truncation > TRUNCATION or bigger.failed:
            break
        found = bigger
    return found


def _at_step(
    fun: Callable[[Tree], Any],
    apply: Callable[[Tree], Any],
    diff: Sequence[Sequence[Any]],
    direction: list[list[np.ndarray]],
    h: float,
    f0: np.ndarray,
    eps: float,
    tol: float,
) -> Direction:
    central, gaps, units, sizes = [], [], [], [norm(f0)]
    for s in (h, h / 2):
        delta = [
            [exact_step(x, d, s) for x, d in zip(xs, ds, strict=True)]
            for xs, ds in zip(diff, direction, strict=True)
        ]
        fp, fm = flat(fun(shifted(diff, delta, 1.0))), flat(fun(shifted(diff, delta, -1.0)))
        central.append((fp - fm) / (2 * s))
        gaps.append(norm(fp - 2 * f0 + fm) / s)  # one-sided slopes' disagreement
        units.append(scaled(delta, s))
        sizes += [norm(fp), norm(fm)]
    fd = (4 * central[1] - central[0]) / 3
    unit = combine(units[1], units[0], 4 / 3, -1 / 3)
    ad = flat(apply(cast_like(unit, diff)))
    noise = 3 * NOISE_ULPS * eps * max(sizes) / h  # Richardson's weights on ε|f|/h
    found = Direction.compare(fd, ad, noise, tol)
    size = max(norm(fd), norm(ad))
    truncation = norm(central[0] - central[1]) / size if size > 0 else 0.0
    # Smooth: the gap is h·|f''| and halves with the step. At a kink it stays (the
    # slopes' jump); with a kink between h/2 and h it collapses.
    gap_noise = 8 * NOISE_ULPS * eps * max(sizes) / h
    ratio = gaps[1] / gaps[0] if gaps[0] > 0 else 0.5
    kink = found.failed and gaps[0] > gap_noise and not 0.3 <= ratio <= 0.7
    return dataclasses.replace(found, kink=kink, step=h, truncation=truncation)
