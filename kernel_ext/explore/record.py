"""The records an exploration hands back: a sweep and a fit's progress.

::

    s = view.sweep("g", n=64)
    s.values, s.outputs, s.slopes     # 64 parameter values, the outputs, d output / d g
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Sweep:
    """The output at ``n`` values of one slider, from one ``jax.vmap``-ed compiled call:
    ``values`` (n,), ``outputs`` (the output's pytree, each leaf stacked on a leading
    axis of n) and ``slopes`` (d output / d param there, float leaves; None elsewhere)."""

    param: str
    values: np.ndarray
    outputs: Any
    slopes: Any
    current: float

    def __repr__(self) -> str:
        return (
            f"Sweep({self.param}: {len(self.values)} values "
            f"{self.values[0]:g} .. {self.values[-1]:g}, at {self.current:g})"
        )


@dataclass
class FitState:
    """A fit's progress: the loss after each step, the step reached, and how it ended
    ("converged", "steps done", "stopped", "interrupted", or None while it runs)."""

    running: bool = False
    losses: list[float] = field(default_factory=list)
    step: int = 0
    ended: str | None = None
    params: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "loss": [float(v) if np.isfinite(v) else None for v in self.losses],
            "step": self.step,
            "ended": self.ended,
            "params": list(self.params),
        }
