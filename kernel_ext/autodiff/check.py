"""Check a derivative against finite differences of the very function that was reported.

The check evaluates the function in the dtypes it was called with: no float64 switch.
Turning ``jax_enable_x64`` on would change the function (``jax.random`` draws other
numbers for the same key, a float32 weight held fixed meets float64 inputs) and is
process-wide. Precision is won back by these means instead:

* **exact steps**: the perturbation ``δ`` along a random direction is rounded so that
  ``x + δ`` and ``x - δ`` are both exactly representable in each leaf's dtype; the
  derivative is then applied to ``δ / h`` itself, so no step is lost to rounding;
* **Richardson extrapolation**: central differences at steps ``h`` and ``h/2``, combined
  as ``(4 D(h/2) - D(h)) / 3``, cancel the ``h²`` truncation error;
* **a measured noise floor**: the part of a difference that the function's own rounding
  can explain is not counted as error. That rounding is measured from the evaluation
  itself (:mod:`jaxlab.autodiff.noise`: ECnoise's high-order differences of values at
  nine nearby points), not scaled to the value: the Ising energy ``-12`` of a 32×32
  lattice is a cancelled sum of 2,048 terms of size 1, rounded as they are;
* **a step from the function's own scale**: differences at h, h/2 and h/4 give two
  Richardson estimates; how far they disagree is what the step's truncation can explain.
  The step moves fourfold at a time, shorter where truncation dominates (a step longer
  than the distance of two nearly overlapping particles), longer where rounding does, to
  the step where the comparison is sharpest. If the comparison stays too blurred to tell
  a 1.5× wrong derivative from a right one, the verdict is *inconclusive* (neither passed
  nor failed) and says how to get a conclusive one.

A failure is called a kink (a ``relu`` at 0) only when the one-sided differences at the
point disagree by an amount that does not shrink with the step (on a smooth function
their gap halves with it) (:attr:`GradCheck.kink`). Second derivatives are checked by
second differences of the value in :mod:`jaxlab.autodiff.second_order`, with the same
machinery.

This module holds the records (:class:`GradCheck`, :class:`ArgCheck`, :class:`Direction`),
the policy (tolerances, noise allowance, the step search, kinks) and the first-order check; the
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
from .noise import evaluation_noise

# Relative error a correct derivative stays under, by the dtype it was computed in.
TOLERANCE = {"float64": 1e-6, "float32": 1e-3, "float16": 5e-2, "bfloat16": 5e-2}
# Steps relative to the argument's scale: large enough that the function's rounding
# (ε/h) is small, small enough that Richardson's h⁴ truncation is smaller still.
STEP = {"float64": 1e-3, "float32": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}
# Kept for the second-order check: how many ε of |f| its evaluation may be off by.
NOISE_ULPS = 16.0
# The first-order check measures the evaluation's noise (jaxlab.autodiff.noise) at
# points this fraction of the step apart, and never takes it below this many ε of |f|
# (the output's own rounding).
NOISE_SPACING, FLOOR_ULPS = 1e-2, 2.0
# A difference counts as off only beyond this many standard deviations of its noise;
# Richardson's pair at (h/2, h/4) has a noise of 3.8 σ/h (σ: one evaluation's).
NOISE_SIGMAS, RICHARDSON_NOISE = 4.0, 3.8
# A comparison whose allowance (rounding plus truncation) exceeds this (relative) cannot
# tell a 1.5× wrong derivative from a right one: it is inconclusive, neither passed nor
# failed.
CONCLUSIVE_NOISE = 0.1
# The step moves fourfold at a time, at most this many times each way.
GROWTH, MOVES = 4.0, 5


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
    """One direction's comparison: relative error, what rounding and truncation can
    explain of it, the two norms."""

    error: float
    noise: float  # relative allowance: what the function's rounding and the step explain
    fd: float
    ad: float
    failed: bool  # off by more than the tolerance plus the allowance
    kink: bool = False
    step: float = 0.0
    truncation: float = 0.0  # relative: how much the error changes from (h, h/2) to (h/2, h/4)
    rounding: float = 0.0  # relative: the differences' noise from the evaluation's

    @property
    def passed(self) -> bool:
        """Within tolerance, with noise small enough to have caught a wrong derivative."""
        return not self.failed and self.noise <= CONCLUSIVE_NOISE

    @property
    def unresolved(self) -> float:
        """What the comparison cannot resolve (relative): the step search minimises it."""
        return self.rounding + self.truncation

    @classmethod
    def compare(cls, fd: np.ndarray, ad: np.ndarray, noise: float, tol: float) -> Direction:
        """``‖fd - ad‖`` relative to the larger of the two; it fails beyond the
        tolerance plus the allowance (``noise``, absolute, made relative here)."""
        size = max(norm(fd), norm(ad))
        error = norm(fd - ad) / size if size > 0 else 0.0
        rel_noise = noise / size if size > 0 else (0.0 if noise == 0 else math.inf)
        if not (math.isfinite(error) and math.isfinite(rel_noise)):  # an overflow
            return cls(math.inf, math.inf, norm(fd), norm(ad), False)
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

    def _along(self) -> str:
        """The directions tried, as a person would say it (a scalar has only one)."""
        scalars = [len(a.directional_fd) == 1 for a in self.args]
        several = f"{self.directions} random direction{'s' if self.directions != 1 else ''}"
        if all(scalars) or self.directions == 1:
            return "along each scalar's one direction" if all(scalars) else several
        return several + (" per array, a scalar's one direction" if any(scalars) else "")

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
            parts += "; within what rounding and the step explain: " + ", ".join(
                f"{a.name} ±{a.noise:.1e}" for a in noisy
            )
        out = (
            f"{'' if self.order == 1 else 'second-order '}finite-difference check {verdict} "
            f"(relative error {parts}; tolerance {self.tolerance:.0e}; {self._along()}, "
            f"{what})"
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
    fun, out0 = compiled(fun, [list(xs) for xs in diff])
    f0, eps = flat(out0), eps_of(out0)
    results = []
    for i, name in enumerate(names):
        h = step_for(diff[i], STEP)
        # A scalar has one direction (a second random one is the same line again).
        scalar = sum(int(np.size(x)) for x in diff[i]) == 1
        units = [unit_direction(rng, diff, i) for _ in range(1 if scalar else directions)]
        # The evaluation's own rounding near x (one estimate per argument: it is the
        # function's, hardly the direction's).
        sigma = evaluation_noise(fun, diff, units[0], h * NOISE_SPACING, f0).sigma if units else 0.0
        point = _Point(fun, apply, diff, f0, eps, sigma, tol)
        results.append(ArgCheck.of(name, h, [_one_direction(point, d, h) for d in units]))
    return GradCheck(tuple(results), tol, directions, seed, dtype=dtype_name(out0))


def compiled(fun: Callable[[Tree], Any], diff: Tree) -> tuple[Callable[[Tree], Any], Any]:
    """``fun`` compiled once for the check's dozens of evaluations at the same shapes (an
    eager diffrax solve takes seconds each), with its value at ``diff``; ``fun`` itself
    where JAX cannot compile it. (The check runs as jaxlab's work: the compilation is not
    logged as the user's.)"""
    import jax

    jitted = jax.jit(fun)
    try:
        return jitted, jitted(diff)
    except Exception:  # what grad traced, jit may not (a callback, a value-dependent shape)
        return fun, fun(diff)


@dataclass(frozen=True)
class _Point:
    """What every comparison at one point shares: the function, the derivative applied,
    the point, its value, and the noise of one evaluation (measured, absolute)."""

    fun: Callable[[Tree], Any]
    apply: Callable[[Tree], Any]
    diff: Sequence[Sequence[Any]]
    f0: np.ndarray
    eps: float
    sigma: float
    tol: float


def _one_direction(point: _Point, direction: list[list[np.ndarray]], h: float) -> Direction:
    """The comparison along one direction at the step that suits the function there.

    The step starts from the argument's scale and moves fourfold at a time, downhill in
    what the comparison cannot resolve: shorter where the differences at h, h/2 and h/4
    disagree (the step is longer than the function's own scale along the direction: a
    nearly overlapping pair of particles), longer where rounding hides the change. The
    verdict is read at the best step found."""
    best = _at_step(point, direction, h)
    if _resolved(best, point.tol):
        return best
    shorter = best.truncation >= best.rounding
    for factor in (1 / GROWTH, GROWTH) if shorter else (GROWTH, 1 / GROWTH):
        moved = False
        for _ in range(MOVES):
            nxt = _at_step(point, direction, best.step * factor)
            if not nxt.unresolved < best.unresolved:
                break
            best, moved = nxt, True
            if _resolved(best, point.tol):
                return best
        if moved:
            break
    return best


def _resolved(found: Direction, tol: float) -> bool:
    # A failure too is read at the sharpest step: its error then is the rule's own.
    return found.unresolved <= tol / 2


def _at_step(point: _Point, direction: list[list[np.ndarray]], h: float) -> Direction:
    """Central differences at h, h/2 and h/4, Richardson-combined in pairs: the pair at
    (h/2, h/4) is compared; how far it is from the pair at (h, h/2) is what truncation
    (a step too long) can explain, and ``sigma`` what rounding can."""
    diff, f0 = point.diff, point.f0
    central, gaps, units, sizes = [], [], [], [norm(f0)]
    for s in (h, h / 2, h / 4):
        delta = [
            [exact_step(x, d, s) for x, d in zip(xs, ds, strict=True)]
            for xs, ds in zip(diff, direction, strict=True)
        ]
        fp = flat(point.fun(shifted(diff, delta, 1.0)))
        fm = flat(point.fun(shifted(diff, delta, -1.0)))
        central.append((fp - fm) / (2 * s))
        gaps.append(norm(fp - 2 * f0 + fm) / s)  # one-sided slopes' disagreement
        units.append(scaled(delta, s))
        sizes += [norm(fp), norm(fm)]
    fds, ads = [], []
    for k in (0, 1):  # Richardson on (h, h/2) and on (h/2, h/4)
        fds.append((4 * central[k + 1] - central[k]) / 3)
        unit = combine(units[k + 1], units[k], 4 / 3, -1 / 3)
        ads.append(flat(point.apply(cast_like(unit, diff))))
    fd, ad = fds[1], ads[1]
    # One evaluation's noise: measured, and never below the output's own rounding.
    sigma = max(point.sigma, FLOOR_ULPS * point.eps * max(sizes))
    rounding = NOISE_SIGMAS * RICHARDSON_NOISE * sigma / h
    truncation = norm((fds[0] - ads[0]) - (fd - ad))  # the error's change with the step
    found = Direction.compare(fd, ad, rounding + truncation, point.tol)
    size = max(norm(fd), norm(ad))
    rel = (lambda v: v / size) if size > 0 else (lambda v: 0.0 if v == 0 else math.inf)
    # Smooth: the gap is s·|f''| and halves with the step. At a kink it stays (the
    # slopes' jump) however short the step.
    gap_noise = NOISE_SIGMAS * 4 * sigma / (h / 4)
    ratio = gaps[2] / gaps[1] if gaps[1] > 0 else 0.5
    kink = found.failed and gaps[2] > gap_noise and 0.7 <= ratio <= 1.4
    return dataclasses.replace(
        found,
        kink=kink,
        step=h,
        rounding=_finite(rel(rounding)),
        truncation=_finite(rel(truncation)),
    )


def _finite(v: float) -> float:
    return v if math.isfinite(v) else math.inf
