"""JAX's NaN checker (``jax_debug_nans``) switched on and off: the twin of ``%jax_nans``.

With the checker on, every JAX operation's result is checked for NaN and a jit-compiled
function that produced one is run again op by op, so the ``FloatingPointError`` names the
primitive and the line that made the first NaN (jaxlab explains it).

>>> state = debug_nans(True)
>>> state.enabled, debug_nans(False).enabled
(True, False)
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from typing import Any

import jax


@dataclass(frozen=True)
class NanCheck:
    """The NaN checker's state after a switch, and before it."""

    enabled: bool
    previous: bool

    def __str__(self) -> str:
        state = "on" if self.enabled else "off"
        was = "" if self.enabled == self.previous else f" (was {'on' if self.previous else 'off'})"
        if self.enabled:
            return (
                f"jax_debug_nans is {state}{was}: every result is checked for NaN and the first "
                "one stops with the primitive and line that made it (slower; `%jax_nans off`)."
            )
        return f"jax_debug_nans is {state}{was}: NaNs flow through silently (`%jax_nans on`)."

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": f"<div>{html.escape(str(self))}</div>"}


def debug_nans(enabled: bool | None = None) -> NanCheck:
    """Switch ``jax_debug_nans`` on (True) or off (False); None only reports the state."""
    previous = bool(jax.config.jax_debug_nans)
    if enabled is not None:
        jax.config.update("jax_debug_nans", bool(enabled))
    return NanCheck(enabled=bool(jax.config.jax_debug_nans), previous=previous)
