"""``%show on``: jaxlab's static view as the notebook's HTML display of JAX arrays and of
pytrees that hold them; ``%show off`` puts back exactly what was there.

::

    %show on
    {"w": jnp.ones(3)}      # jaxlab's view
    {"name": "no arrays"}   # IPython's display, as before
    d = {}; d["self"] = d
    d                       # IPython's display: the view declines what it cannot walk

A printer here may never fail or slow a display (a session leaves it on). For a
container it first looks for a JAX array without flattening anything: an iterative scan,
at most ``ITEMS_LOOKED_AT`` items of each container (IPython's own printer shows 1,000)
and ``NODES_LOOKED_AT`` in all, each container once, its items' types read at C speed;
it stops at the first array. Only
then is the value walked (``tree.show_record``, which finds cycles and depth before it
flattens), and any error there is a decline, IPython's display. An object with its own
``_repr_html_`` or ``_repr_mimebundle_`` (a namedtuple or dict subclass of the user's), a
container without a JAX array, or JAX's leaf (an unregistered dict subclass) displays
exactly as IPython displays it without the view, a printer registered before included.
Equinox and flax nnx modules are registered only if the session already imported them:
turning the view on imports nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import islice
from typing import Any

ITEMS_LOOKED_AT = 1_000
NODES_LOOKED_AT = 10_000
_MISSING = object()
_saved: dict[int, dict[type, Any]] = {}  # id(shell) -> the printers replaced
_LEAF, _ARRAY, _SEQUENCE, _DICT, _NODE = range(5)


def _types() -> list[type]:
    import jax

    from ..session.work import jaxlab_work

    with jaxlab_work():  # JAX compiles the zeros: jaxlab's compilation, not the user's
        concrete = type(jax.numpy.zeros(()))
    types: list[type] = [jax.Array, concrete, dict, list, tuple]
    if "equinox" in sys.modules:
        types.append(sys.modules["equinox"].Module)
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None:
        types.append(nnx.Module)
    return types


def holds_jax_array(x: Any) -> bool:
    """Whether a JAX array is among the first items of ``x``'s containers, looked for
    without recursion or a full flatten (see the module's note for the bounds)."""
    import jax
    import numpy as np

    leaf_types = (int, float, complex, bool, str, bytes, type(None), np.ndarray, np.generic)
    kinds: dict[type, int] = {}  # what each type is, asked once per scan

    def kind(t: type) -> int:
        k = kinds.get(t)
        if k is None:
            k = kinds[t] = _kind(t, leaf_types, jax.Array)
        return k

    seen: set[int] = set()
    pending: list[Any] = [x]  # containers still to look into
    budget = NODES_LOOKED_AT
    while pending:
        node = pending.pop()
        k = kind(type(node))
        if k == _ARRAY:
            return True
        if k == _LEAF or id(node) in seen:  # a container met again: shared, or a cycle
            continue
        seen.add(id(node))
        if k == _SEQUENCE:
            items = list(islice(node, ITEMS_LOOKED_AT))
        elif k == _DICT:
            items = list(islice(node.values(), ITEMS_LOOKED_AT))
        else:
            children = _one_level(node)
            if children is None:  # JAX's leaf (its registry is by type), or a failed flatten
                continue
            if len(children) == 1 and children[0] is node:
                kinds[type(node)] = _LEAF
                continue
            items = children[:ITEMS_LOOKED_AT]
        budget -= len(items)
        if budget < 0:
            return False
        # the items' types at C speed: a list of a million ints is one type, asked once
        found = {kind(t) for t in set(map(type, items))}
        if _ARRAY in found:
            return True
        if found != {_LEAF}:
            pending.extend(i for i in reversed(items) if kinds[type(i)] != _LEAF)
    return False


def _kind(t: type, leaf_types: tuple[type, ...], array: type) -> int:
    if issubclass(t, leaf_types):
        return _LEAF
    if issubclass(t, array):
        return _ARRAY
    if t is list or t is tuple:
        return _SEQUENCE
    if t is dict:
        return _DICT
    return _NODE


def _one_level(node: Any) -> list[Any] | None:
    """A node's children as JAX flattens it one level (``[node]`` for JAX's leaf); None
    for a flatten that fails (the view declines such a node, so the scan passes it by)."""
    import jax

    asked: list[Any] = []

    def one_level(c: Any) -> bool:
        if c is node and not asked:
            asked.append(c)
            return False
        return True

    try:
        children = jax.tree_util.tree_leaves(node, is_leaf=one_level)
    except Exception:
        return None
    return children


def _has_own_display(x: Any) -> bool:
    """An object that says how it displays (``_repr_html_`` or ``_repr_mimebundle_``)."""
    from IPython.utils.dir2 import get_real_method

    return any(get_real_method(x, m) is not None for m in ("_repr_html_", "_repr_mimebundle_"))


def _ipython_display(x: Any, before: Any) -> Any:
    """What IPython's HTML formatter gives ``x`` without the view: the printer registered
    before, else the object's own bundle (None here, so it stands) or ``_repr_html_``."""
    from IPython.utils.dir2 import get_real_method

    if before is not _MISSING:
        return before(x)
    if get_real_method(x, "_repr_mimebundle_") is not None:
        return None
    method = get_real_method(x, "_repr_html_")
    return method() if method is not None else None


def _view(x: Any) -> str | None:
    """jaxlab's view of a JAX array or a pytree holding one; None for anything else or
    anything that fails."""
    try:
        import jax

        from .tree import show_record

        if not isinstance(x, jax.Array) and not holds_jax_array(x):
            return None
        return show_record(x).html()
    except Exception:  # a view that cannot be made is IPython's display, never an error
        return None


def _printer(saved: dict[type, Any]) -> Callable[[Any], Any]:
    def jaxlab_view(x: Any) -> Any:
        if not _has_own_display(x):
            html = _view(x)
            if html is not None:
                return html
        # the nearest registered type's printer from before %show on (or none)
        before = next((saved[t] for t in type(x).__mro__ if t in saved), _MISSING)
        return _ipython_display(x, before)  # the user's own code: its errors are its own

    return jaxlab_view


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
    view = _printer(saved)
    for t in saved:
        formatter.for_type(t, view)
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
