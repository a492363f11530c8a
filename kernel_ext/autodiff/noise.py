"""How far a function's evaluation is off by rounding, measured from the evaluation itself.

A finite difference is only as good as the values it subtracts. Scaling their rounding to
the value (``ε |f|``) fails where the value is a heavily cancelled sum: the Ising energy
of a 32×32 lattice is ``-12``, a sum of 2,048 terms of size 1, and its rounding is that
of the terms, not of ``-12``. The noise is therefore measured: the function is evaluated
at a few equally spaced points ``x + k s d`` (``k = -4 … 4``, exact in the argument's
dtype) along the direction of the check, and the high-order differences of those values,
in which any smooth part has vanished, estimate the noise's standard deviation. This is
Moré and Wild's ECnoise ("Estimating computational noise", SIAM J. Sci. Comput. 33, 2011):
``σ_k² = γ_k · mean((Δᵏf)²)`` with ``γ_k = (k!)² / (2k)!``, taken at the first order ``k``
where three consecutive estimates agree within a factor 4 and the differences change sign.
Where all values are equal (the spacing is below the function's resolution) the spacing
grows; where the differences keep one sign (the smooth part still shows) it shrinks.

Where the function raises at one of those points (an error callback: equinox's runtime
errors, a solver that does not converge a little further away) nothing is re-run there:
the spacing shrinks back, and if no spacing works the estimate falls back to the
output's own rounding (``sigma = 0``; the caller adds ``ε |f|``), and says so
(:attr:`Noise.source`)::

    noise = evaluation_noise(fun, diff, direction, spacing=1e-4, f0=flat(fun(diff)))
    noise.sigma        # absolute, the norm over the output's components
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .differences import Tree, exact_ladder, flat, shifted

# Points on each side of x: nine in all, as Moré and Wild use.
SIDE = 4
# Spacing changes when the table says "too small" (values equal) or "too large" (smooth).
RESPACE, ATTEMPTS = 100.0, 3


@dataclass(frozen=True)
class Noise:
    """The estimated standard deviation of one evaluation's rounding (``sigma``, absolute;
    the norm over the output's components), and how it was found."""

    sigma: float
    spacing: float  # the spacing of the points it was read from
    found: bool  # ECnoise's test passed (else ``sigma`` is an upper bound, or 0 if unseen)
    evaluations: int
    refused: str = ""  # the function raised at a point of the table (its message)
    refused_at: float = 0.0  # the spacing of that table

    @property
    def source(self) -> str:
        """How the noise was found, in words (``"measured"`` when nothing got in the way)."""
        if not self.refused:
            return "measured"
        how = "measured at closer points" if self.found else "the value's own rounding (ε·|f|)"
        return (
            f"{how}: the function raised at points {self.spacing * SIDE:.0e} away ({self.refused})"
        )


def evaluation_noise(
    fun: Callable[[Tree], Any],
    diff: Sequence[Sequence[Any]],
    direction: Sequence[Sequence[np.ndarray]],
    spacing: float,
    f0: np.ndarray,
) -> Noise:
    """The rounding noise of ``fun`` near ``diff``, read from its values along ``direction``
    (see the module docstring). Never below what it saw: an unresolved table gives an
    upper bound (the smallest difference level), an all-equal one ``sigma = 0`` (the caller
    adds the output's own rounding)."""
    evaluations = 0
    bound = math.inf
    refused, refused_at, below = "", 0.0, False  # below: a closer table's were all equal
    for _ in range(ATTEMPTS):
        try:
            values, n = _values(fun, diff, direction, spacing, f0)
        except Exception as e:  # the user's function refused a point (see module doc)
            refused, refused_at = first_line(e), spacing
            if below:  # all equal closer in: the noise is below the output's resolution
                break
            spacing /= RESPACE
            continue
        evaluations += n
        verdict, sigma = ecnoise(values)
        if verdict == FOUND:
            return Noise(sigma, spacing, True, evaluations, refused, refused_at)
        if verdict == TOO_SMALL:
            below = True
            if refused:  # farther out was refused already
                break
            spacing *= RESPACE
        else:
            bound = min(bound, sigma)
            spacing /= RESPACE
    sigma = 0.0 if math.isinf(bound) else bound
    return Noise(sigma, spacing, False, evaluations, refused, refused_at)


def first_line(e: Exception) -> str:
    """An error as one short line: equinox's runtime errors say what went wrong on the
    last line that names an ``Error``, after the callback's traceback; its first sentence.

    >>> first_line(ValueError("INTERNAL: CpuCallback error\\nTraceback ...\\n"
    ...     "_EquinoxRuntimeError: The maximum number of steps was reached. The problem"))
    '_EquinoxRuntimeError: The maximum number of steps was reached'
    """
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    named = [ln for ln in lines if "Error:" in ln and "Traceback" not in ln]
    text = named[-1] if named else f"{type(e).__name__}: {lines[0] if lines else ''}"
    return text.split(". ")[0].rstrip(".")[:160]


def _values(
    fun: Callable[[Tree], Any],
    diff: Sequence[Sequence[Any]],
    direction: Sequence[Sequence[np.ndarray]],
    spacing: float,
    f0: np.ndarray,
) -> tuple[np.ndarray, int]:
    """``f(x + k δ)`` for ``k = -SIDE … SIDE``, as rows of real numbers."""
    delta = [
        [exact_ladder(x, d, spacing, SIDE) for x, d in zip(xs, ds, strict=True)]
        for xs, ds in zip(diff, direction, strict=True)
    ]
    rows = []
    for k in range(-SIDE, SIDE + 1):
        out = f0 if k == 0 else flat(fun(shifted(diff, delta, float(k))))
        rows.append(np.concatenate([out.real, out.imag]))
    return np.array(rows), 2 * SIDE


FOUND, TOO_SMALL, TOO_LARGE = "found", "too small", "too large"


def ecnoise(values: np.ndarray) -> tuple[str, float]:
    """Moré and Wild's noise estimate from values at equally spaced points (rows; columns
    are an output's components): ``(FOUND, σ)``, ``(TOO_SMALL, 0)`` when half the first
    differences are zero, or ``(TOO_LARGE, smallest level)`` when no order passes.

    >>> rng = np.random.default_rng(0)
    >>> t = np.linspace(-1e-3, 1e-3, 9)[:, None]
    >>> verdict, sigma = ecnoise(np.sin(t + 1.0) + 1e-9 * rng.standard_normal((9, 1)))
    >>> verdict, 0.3e-9 < sigma < 3e-9
    ('found', True)
    """
    if not np.all(np.isfinite(values)):
        return TOO_LARGE, math.inf
    n = len(values)
    table = np.asarray(values, dtype=np.float64)
    levels, signs = [], []
    gamma = 1.0
    for k in range(1, n):
        table = np.diff(table, axis=0)
        if k == 1 and np.sum(np.all(table == 0, axis=1)) >= n / 2:
            return TOO_SMALL, 0.0
        gamma *= 0.5 * k / (2 * k - 1)  # (k!)² / (2k)!
        levels.append(math.sqrt(gamma * float(np.mean(np.sum(table**2, axis=1)))))
        # The differences change sign (noise) in most of the components that move.
        moving = np.any(table != 0, axis=0)
        changes = (table.min(axis=0) < 0) & (table.max(axis=0) > 0)
        signs.append(bool(moving.any()) and changes[moving].mean() >= 0.5)
    for k in range(len(levels) - 2):
        window = levels[k : k + 3]
        if max(window) <= 4 * min(window) and signs[k]:
            return FOUND, levels[k]
    return TOO_LARGE, min(levels[1:], default=math.inf)
