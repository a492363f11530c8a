"""Teaching explanations for JAX's common errors (not written yet)."""

from __future__ import annotations


def explain(exc: BaseException) -> None:
    return None
