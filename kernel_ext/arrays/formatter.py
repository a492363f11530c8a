"""``%show on``: jaxlab's static view as the notebook's HTML display of JAX arrays and of
pytrees that hold them; ``%show off`` puts back exactly what was there.

Containers (dict, list, tuple) are registered with a printer that answers only when the
container holds a JAX array (IPython falls back to its own display when a printer returns
None), so a dict of strings displays as before. Equinox and flax nnx modules are
registered only if the user's session already imported them: turning the view on
imports nothing.
"""

from __future__ import annotations

import sys
from typing import Any

_MISSING = object()
_saved: dict[int, dict[type, Any]] = {}  # id(shell) -> the printers replaced


def _types() -> list[type]:
    import jax

    types: list[type] = [jax.Array, type(jax.numpy.zeros(())), dict, list, tuple]
    if "equinox" in sys.modules:
        types.append(sys.modules["equinox"].Module)
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None:
        types.append(nnx.Module)
    return types


def _holds_array(x: Any) -> bool:
    import jax

    return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(x))


def _html(x: Any) -> str | None:
    import jax

    from .tree import show_record

    if not isinstance(x, jax.Array) and not _holds_array(x):
        return None
    return show_record(x).html()


def is_on(ip: Any) -> bool:
    return id(ip) in _saved


def turn_on(ip: Any) -> None:
    """Register the view (idempotent)."""
    if is_on(ip):
        return
    formatter = ip.display_formatter.formatters["text/html"]
    saved: dict[type, Any] = {}
    for t in _types():
        saved[t] = formatter.type_printers.get(t, _MISSING)
        formatter.for_type(t, _html)
    _saved[id(ip)] = saved


def turn_off(ip: Any) -> None:
    """Put back each printer that was there, remove the ones that were not."""
    saved = _saved.pop(id(ip), None)
    if saved is None:
        return
    formatter = ip.display_formatter.formatters["text/html"]
    for t, before in saved.items():
        if before is _MISSING:
            formatter.type_printers.pop(t, None)
        else:
            formatter.type_printers[t] = before
