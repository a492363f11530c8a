"""The finite-difference check's records and their words: per direction, per argument
and for the whole check, with the verdict (passed, FAILED, or inconclusive and why: a
kink, an error a step away, rounding) as :mod:`jaxlab.autodiff.check` found it.

>>> check.text()  # doctest: +SKIP
'finite-difference check inconclusive: the function has a kink here (relative error ...'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .differences import norm

# A comparison whose allowance (rounding plus truncation) exceeds this (relative) cannot
# tell a 1.5× wrong derivative from a right one: it is inconclusive, neither passed nor
# failed.
CONCLUSIVE_NOISE = 0.1


@dataclass(frozen=True)
class ArgCheck:
    """The finite-difference check of one argument."""

    name: str
    rel_error: float  # the worst over the directions tried
    directional_fd: tuple[float, ...]  # ‖finite difference‖ per direction
    directional_ad: tuple[float, ...]  # ‖reported derivative applied to it‖ per direction
    step: float  # the largest step a verdict was read at (the search moves it fourfold)
    passed: bool = True  # every direction within tolerance (plus its noise floor)
    noise: float = 0.0  # the largest relative noise floor allowed on a direction
    kink: bool = False  # a direction left undecided: the function has a kink there
    failed: bool = False  # some direction is off by the same error at two steps
    refused: str = ""  # the function raised at points a step away (its message)
    unsteady: bool = False  # a direction's error changed with every step (rounding)
    noise_source: str = "measured"  # how the evaluation's rounding was found (noise.py)
    along_gradient: bool = False  # also checked along the reported gradient's direction
    kink_step: float = 0.0  # the shortest step a kinked direction was tried at

    @classmethod
    def of(
        cls,
        name: str,
        step: float,
        random: Sequence[Direction],
        noise_source: str = "",
        gradient: Direction | None = None,
    ) -> ArgCheck:
        """The argument's check from its random directions and, where taken, the one
        along the reported gradient (counted in the verdict, not in the norms listed)."""
        directions = [*random, *([gradient] if gradient is not None else [])]
        refused = [d.refused for d in directions if d.refused]
        return cls(
            name=name,
            rel_error=max((d.error for d in directions if not d.refused), default=0.0),
            directional_fd=tuple(d.fd for d in random),
            directional_ad=tuple(d.ad for d in random),
            step=max((d.step for d in directions if not d.refused), default=step),
            passed=all(d.passed for d in directions),
            noise=max((d.noise for d in directions), default=0.0),
            kink=any(d.kink for d in directions),
            failed=any(d.failed for d in directions),
            refused=refused[0] if refused else "",
            unsteady=any(d.unsteady for d in directions),
            noise_source=noise_source or "measured",
            along_gradient=gradient is not None,
            kink_step=min((d.step for d in directions if d.kink), default=0.0),
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
    refused: str = ""  # the function raised at a point a step away (this message)
    unsteady: bool = False  # the error changed with every shorter step: not confirmed
    misfit: Any = field(default=None, repr=False, compare=False)  # fd - ad, the vector

    @property
    def passed(self) -> bool:
        """Within tolerance, with noise small enough to have caught a wrong derivative."""
        return (
            not self.failed and not self.kink and not self.refused and not self.unsteady
        ) and self.noise <= CONCLUSIVE_NOISE

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
        """Undecided because the function has a kink within the step float32 resolves
        (a relu at 0, a spline's knot): the error changed with the step. Never a failure."""
        return not self.failed and any(a.kink for a in self.args)

    @property
    def max_error(self) -> float:
        return max((a.rel_error for a in self.args), default=0.0)

    def _along(self) -> str:
        """The directions tried, as a person would say it (a scalar has only one)."""
        scalars = [len(a.directional_fd) == 1 for a in self.args]
        several = f"{self.directions} random direction{'s' if self.directions != 1 else ''}"
        if all(scalars):
            return "along each scalar's one direction"
        if self.directions == 1 and not any(a.along_gradient for a in self.args):
            return several
        out = several + (" per array, a scalar's one direction" if any(scalars) else "")
        return out + (" and the gradient's" if any(a.along_gradient for a in self.args) else "")

    @property
    def refused(self) -> str:
        """The function's error at points a step away, where that left the check undecided."""
        return next((a.refused for a in self.args if a.refused and not a.failed), "")

    def _verdict(self) -> str:
        if self.passed:
            return "passed"
        if self.failed:
            return "FAILED"
        if self.kink:
            return "inconclusive: the function has a kink here"
        if self.refused:
            return "inconclusive: the function raises an error a step away"
        return "inconclusive"

    def text(self) -> str:
        parts = ", ".join(f"{a.name}: {a.rel_error:.1e}" for a in self.args)
        what = (
            f"central differences in {self.dtype}"
            if self.order == 1
            else f"second differences of the value in {self.dtype}, independent of the "
            "derivative rules"
        )
        noisy = [a for a in self.args if not (a.failed or a.kink) and self.tolerance < a.rel_error]
        if noisy:
            parts += "; within what rounding and the step explain: " + ", ".join(
                f"{a.name} ±{a.noise:.1e}" for a in noisy
            )
        out = (
            f"{'' if self.order == 1 else 'second-order '}finite-difference check "
            f"{self._verdict()} (relative error {parts}; tolerance {self.tolerance:.0e}; "
            f"{self._along()}, {what})"
        )
        return out + "".join(self._reasons())

    def _reasons(self) -> list[str]:
        out = []
        if self.kink:
            out.append(
                ". The differences change with the step down to the shortest step "
                f"{self.dtype} resolves ({min(a.kink_step for a in self.args if a.kink):.0e}): "
                "the point is at (or within a step of) a kink (a relu at 0, a max, a "
                "spline's knot), where the function has no derivative and JAX reports one "
                "side's by convention (relu'(0) = 0). The derivative is neither confirmed "
                "nor refuted: to check it away from the kink, move the point by more than "
                "the difference step, or run the notebook in float64"
            )
        elif self.refused:
            out.append(
                f". The function raised at points a step away ({self.refused}), at every "
                "step tried: a solver that does not converge there, or a check of its "
                "inputs. The derivative is neither confirmed nor refuted"
            )
        elif any(a.unsteady and not a.failed for a in self.args):
            out.append(
                ". The difference from the derivative grew as the step shrank, as rounding "
                "larger than measured makes it, so it is not the rule's: the check neither "
                "confirms nor refutes it. Run the notebook in float64 to decide"
            )
        elif self.inconclusive:
            out.append(
                f". Differences in {self.dtype} cannot resolve this derivative along random "
                "directions (the function's own rounding is as large as the change it "
                "measures, as in a model with many parameters): the check neither confirms "
                "nor refutes it. Check fewer parameters (--wrt), or run the notebook in "
                "float64 from its start (jax.config.update('jax_enable_x64', True))"
            )
        sources = sorted({a.noise_source for a in self.args if a.noise_source != "measured"})
        if sources:
            out.append(". The rounding allowed for is " + "; ".join(sources))
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
            "refused": self.refused,
        }
