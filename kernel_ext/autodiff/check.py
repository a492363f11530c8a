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

from .._jax_compat import callbacks_failing_quietly
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
from .noise import evaluation_noise, first_line
from .verdict import CONCLUSIVE_NOISE as CONCLUSIVE_NOISE
from .verdict import ArgCheck as ArgCheck
from .verdict import Direction as Direction
from .verdict import GradCheck as GradCheck

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
# The step moves fourfold at a time, at most this many times each way.
GROWTH, MOVES = 4.0, 5


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
    draws nothing from the user's PRNG keys. A point where the function raises is a
    refused step, said in the verdict; JAX's log line for it is held back meanwhile.
    """
    with callbacks_failing_quietly():
        return _check(names, diff, fun, apply, dtype, directions, seed, tolerance)


def _check(
    names: Sequence[str],
    diff: Sequence[Sequence[Any]],
    fun: Callable[[Tree], Any],
    apply: Callable[[Tree], Any],
    dtype: Any,
    directions: int,
    seed: int,
    tolerance: float | None,
) -> GradCheck:
    rng = np.random.default_rng(seed)
    tol = tolerance if tolerance is not None else tolerance_for(dtype)
    fun, out0 = compiled(fun, [list(xs) for xs in diff])
    apply, _ = compiled(
        apply, cast_like([[np.zeros(np.shape(x)) for x in xs] for xs in diff], diff)
    )
    f0, eps = flat(out0), eps_of(out0)
    steepest = gradient_directions(apply, diff) if f0.size == 1 else None
    results = []
    for i, name in enumerate(names):
        h = step_for(diff[i], STEP)
        # A scalar has one direction (a second random one is the same line again).
        scalar = sum(int(np.size(x)) for x in diff[i]) == 1
        units = [unit_direction(rng, diff, i) for _ in range(1 if scalar else directions)]
        # The evaluation's own rounding near x (one estimate per argument: it is the
        # function's, hardly the direction's).
        noise = evaluation_noise(fun, diff, units[0], h * NOISE_SPACING, f0) if units else None
        point = _Point(fun, apply, diff, f0, eps, noise.sigma if noise else 0.0, tol)
        found = [_one_direction(point, d, h) for d in units]
        along = steepest[i] if steepest is not None and not scalar else None
        gradient = _one_direction(point, along, h) if along is not None else None
        results.append(ArgCheck.of(name, h, found, noise.source if noise else "", gradient))
    return GradCheck(tuple(results), tol, directions, seed, dtype=dtype_name(out0))


def gradient_directions(
    apply: Callable[[Tree], Any], diff: Sequence[Sequence[Any]]
) -> list[list[list[np.ndarray]] | None] | None:
    """Per argument, the unit direction along the reported gradient (None where it is 0).

    Along a random direction in n parameters a scalar changes by ``|g|/√n``: in a CNN's
    thousand weights float32's rounding then hides a 1% error. Along the gradient it
    changes by ``|g|``, the most any direction gives, so a rule off by a factor shows
    there first. ``apply`` is linear; its gradient is the reported one (None where it
    cannot be taken: a forward-mode fallback through a while_loop)."""
    import jax
    import jax.numpy as jnp

    zeros = cast_like([[np.zeros(np.shape(x)) for x in xs] for xs in diff], diff)
    try:
        grads = jax.jit(jax.grad(lambda t: jnp.real(jnp.sum(apply(t)))))(zeros)
    except Exception:  # no transpose for this apply: random directions only
        return None
    out: list[list[list[np.ndarray]] | None] = []
    for i, gs in enumerate(grads):
        leaves = [np.asarray(g, dtype=np.float64) for g in gs]
        length = float(np.sqrt(sum(np.sum(g**2) for g in leaves)))
        if not (length > 0 and math.isfinite(length)):
            out.append(None)
            continue
        direction = [[np.zeros(np.shape(x)) for x in other] for other in diff]
        direction[i] = [g / length for g in leaves]
        out.append(direction)
    return out


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
    nearly overlapping pair of particles), or where the function raises a step away (a
    solver that does not converge there), longer where rounding hides the change. A
    failure found there must be confirmed at shorter steps (:func:`_confirmed`)."""
    best = _search(point, direction, h)
    return _confirmed(point, direction, best) if best.failed or best.kink else best


def _search(point: _Point, direction: list[list[np.ndarray]], h: float) -> Direction:
    best = _at_step(point, direction, h)
    if _resolved(best, point.tol):
        return best
    shorter = best.truncation >= best.rounding
    for factor in (1 / GROWTH, GROWTH) if shorter else (GROWTH, 1 / GROWTH):
        moved = False
        for _ in range(MOVES):
            nxt = _at_step(point, direction, best.step * factor)
            if best.refused and nxt.refused and factor < 1:  # closer in, it may not raise
                best, moved = nxt, True
                continue
            if not nxt.unresolved < best.unresolved:
                break
            best, moved = nxt, True
            if _resolved(best, point.tol):
                return best
        if moved:
            break
    return best


def _confirmed(point: _Point, direction: list[list[np.ndarray]], first: Direction) -> Direction:
    """A failure is the rule's only if it stays as the step shrinks fourfold: the same
    error vector at two steps, and one-sided slopes that agree. A step across a relu's
    kink or a spline's knot gives an error that changes with the step (and vanishes once
    the step is shorter than the distance to the kink); a wrong rule gives the same error
    at every step. Where the error keeps changing down to the shortest step the
    function's rounding resolves, the verdict is inconclusive: a kink (or, if the error
    grows as the step shrinks, rounding larger than measured)."""
    prev, step = first, first.step
    for _ in range(MOVES + 1):
        step /= GROWTH
        nxt = _at_step(point, direction, step)
        if nxt.refused:
            return dataclasses.replace(prev, failed=False, refused=nxt.refused)
        if nxt.failed:
            if prev.failed and not (nxt.kink or prev.kink) and _same_error(prev, nxt):
                return nxt
        elif not nxt.kink and nxt.noise <= min(CONCLUSIVE_NOISE, first.error / 2):
            return nxt  # the first step was too long: here, sharp enough to see it, it holds
        elif nxt.rounding >= nxt.truncation:
            break  # the rounding is now as large as what is compared
        prev = nxt  # still longer than the function's own scale: shorter again
    noisy = prev.error > 2 * first.error and not prev.kink and not first.kink
    return dataclasses.replace(prev, failed=False, kink=not noisy, unsteady=noisy)


def _same_error(a: Direction, b: Direction) -> bool:
    """Two steps' errors (fd - ad, vectors) agree within half their size, and the
    differences themselves within a quarter of theirs (plus rounding): the function is
    smooth at these steps. Steps far longer than the function's scale (past a nearly
    overlapping pair) give differences near 0 at both, hence "the same" error -ad."""
    if a.misfit is None or b.misfit is None:
        return False
    slack = (a.rounding * max(a.fd, a.ad)) + (b.rounding * max(b.fd, b.ad))
    change = norm(a.misfit - b.misfit)
    return change <= min(0.5 * norm(b.misfit), 0.25 * max(a.fd, b.fd)) + slack


def _resolved(found: Direction, tol: float) -> bool:
    # A failure too is read at the sharpest step: its error then is the rule's own.
    return found.unresolved <= tol / 2


def _at_step(point: _Point, direction: list[list[np.ndarray]], h: float) -> Direction:
    """Central differences at h, h/2 and h/4, Richardson-combined in pairs: the pair at
    (h/2, h/4) is compared; how far it is from the pair at (h, h/2) is what truncation
    (a step too long) can explain, and ``sigma`` what rounding can. Where the function
    raises at one of the points (an error callback: a solver that does not converge
    there), the step is unusable: unresolved, with the message."""
    try:
        return _differences(point, direction, h)
    except Exception as e:  # the user's function refused a point h away
        message = first_line(e)
        return Direction(
            math.inf, math.inf, 0.0, 0.0, False, step=h, truncation=math.inf,
            rounding=math.inf, refused=message,
        )  # fmt: skip


def _differences(point: _Point, direction: list[list[np.ndarray]], h: float) -> Direction:
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
        misfit=fd - ad,
    )


def _finite(v: float) -> float:
    return v if math.isfinite(v) else math.inf
