"""Forward mode, one equation at a time: the steps of ``jax.jvp``'s program (placeholder
until the walk lands)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .record import GradSteps

__all__ = ["forward_steps"]


def forward_steps(
    fun: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    wrt: Sequence[int | str],
    masks: dict[int | str, Sequence[bool]],
    name: str,
    n_in: int,
) -> GradSteps:
    raise NotImplementedError("forward mode steps")
