"""``%keys``: PRNG key lineage, switched on and shown.

::

    %keys on              # track every key made, split, folded in and consumed
    %keys                 # the live KeyLineage widget (same as %keys show)
    %keys show --static   # a nested HTML list (no widget)
    %keys --cell In[4]    # only what cell In[4] did (static view)
    %keys clear           # forget what was recorded
    %keys off             # jax.random is JAX's again (and no callback of jaxlab's stays)
    lineage = %keys -o    # the KeyLineage record

Its plain-Python twins are ``jaxlab.track_keys()`` and ``jaxlab.key_lineage()``; the
static analysis is ``jaxlab.key_flow(f, key)``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import HTML, display

from ..keys.record import KeyLineage, key_lineage
from ..keys.track import is_tracking, placed_callbacks, track_keys, warn_pending
from ._options import parse_options

ACTIONS = ("on", "off", "show", "clear")
_CELL = re.compile(r"^In\[\d+\]$")


@magics_class
class KeysMagics(Magics):
    @magic_arguments()
    @argument("action", nargs="?", default="show", help="on, off, show (default) or clear.")
    @argument("--static", action="store_true", help="A nested HTML list, not the widget.")
    @argument("--cell", metavar="CELL", help="Only keys and draws of this cell, e.g. In[4].")
    @argument("--max", type=int, default=2000, metavar="N", help="Rows drawn at most.")
    @argument("-o", dest="output", action="store_true", help="Return the KeyLineage.")
    @line_magic
    def keys(self, line: str = "") -> Any:
        """Track PRNG keys and show their family tree, with reused keys in red.

        Example: ``%keys on``, run cells, then ``%keys``.
        """
        args = parse_options(self.keys, line)
        if args.action not in ACTIONS:
            raise UsageError(
                f"%keys: unknown action {args.action!r}; use one of {', '.join(ACTIONS)}"
                " (e.g. %keys on)"
            )
        if args.max < 1:
            raise UsageError(f"%keys: --max must be a positive number, not {args.max}")
        if args.cell is not None and not _CELL.match(args.cell):
            raise UsageError(
                f"%keys: --cell takes a cell as IPython numbers it, like In[4], not {args.cell!r}"
            )
        if args.action in ("on", "off", "clear") and (args.cell or args.static):
            option = "--cell" if args.cell else "--static"
            raise UsageError(
                f"%keys: {option} chooses what a view shows; %keys {args.action} shows nothing"
                f" (use %keys show {option} ...)"
            )
        lineage = key_lineage()
        if args.action in ("on", "off"):
            was_on, placed = is_tracking(), placed_callbacks()
            track_keys(args.action == "on")
            print(f"key tracking {'on' if is_tracking() else 'off'}")
            if args.action == "off" and was_on and placed:
                print(
                    "code traced while tracking was on held jaxlab's callbacks: JAX's caches"
                    " are cleared, so each function compiles again, without them, on its"
                    " next call"
                )
            if args.action == "on" and not was_on:
                retraced = _retrace_compiled(self.shell.user_ns if self.shell else {})
                if retraced:
                    print(
                        "compiled before tracking began, retraced on their next call so their"
                        f" keys are seen: {', '.join(retraced)}"
                    )
            return lineage if args.output else None
        if args.action == "clear":
            lineage.clear()
            return lineage if args.output else None
        if args.output:
            return lineage
        if not is_tracking() and not lineage.events:
            if args.cell:
                raise UsageError(
                    f"%keys: nothing was recorded in {args.cell}: key tracking is off"
                    " (%keys on starts it)"
                )
            print("key tracking is off: %keys on (or jaxlab.track_keys()) starts it")
            return None
        if args.cell:
            display(HTML(_cell_html(lineage, args.cell, args.max)))
        elif args.static:
            display(HTML(_html(lineage, args.max)))
        else:
            display(_widget(lineage, args.max))
        return None


def _retrace_compiled(namespace: dict[str, Any]) -> list[str]:
    """Names of the user's jitted functions whose compiled code is dropped (JAX's public
    ``clear_cache``), so that their next call traces them with tracking on; a function
    compiled before tracking would otherwise run unseen. Their next call compiles again."""
    from ..keys.jit import TrackedJit

    names = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or isinstance(value, TrackedJit):
            continue
        clear = getattr(type(value), "clear_cache", None)
        if clear is None or not hasattr(value, "lower") or not hasattr(value, "trace"):
            continue
        try:
            value.clear_cache()
        except Exception:  # not JAX's: leave it alone
            continue
        names.append(name)
    return sorted(names)


def _html(lineage: KeyLineage, max_items: int) -> str:
    from ..keys.view import lineage_html

    return lineage_html(lineage, max_items)


def _cell_html(lineage: KeyLineage, cell: str, max_items: int) -> str:
    from ..keys.tree import Forest, lineage_tree
    from ..keys.view import forest_html

    forest = lineage_tree(lineage, max_items)
    by_id = {item.id: item for item in forest.items}
    keep: set[str] = set()
    for item in forest.items:
        at = item if item.cell == cell else None
        while at is not None and at.id not in keep:
            keep.add(at.id)
            at = by_id.get(at.parent) if at.parent else None
    if not keep:
        cells = ", ".join(sorted({i.cell for i in forest.items if i.cell})) or "none"
        raise UsageError(f"%keys: no key was made or drawn in {cell}; cells with keys: {cells}")
    kept = Forest(tuple(i for i in forest.items if i.id in keep), forest.hidden, forest.by_site)
    return forest_html(kept)


_WIDGET: Any = None  # one live widget for the session's lineage, shared by every display


def _widget(lineage: KeyLineage, max_items: int) -> Any:
    from jaxlab.widgets import KeyLineage as KeyLineageWidget

    global _WIDGET
    if _WIDGET is None or _WIDGET.comm is None or _WIDGET.lineage is not lineage:
        _WIDGET = KeyLineageWidget(lineage, max_items=max_items)
    elif _WIDGET.max_items != max_items:
        _WIDGET.max_items = max_items
        _WIDGET.refresh()
    return _WIDGET


def install(ip: Any) -> Callable[[], None]:
    """Nothing is switched on at load; the undo switches tracking off and closes the view."""

    def cell_ended(*_: Any) -> None:
        # reuses inside compiled calls are found when the calls are replayed: at the
        # latest here, once per pair of lines (the widget rewrites its twin on its own)
        warn_pending()

    ip.events.register("post_run_cell", cell_ended)

    def undo() -> None:
        global _WIDGET
        with contextlib.suppress(ValueError):
            ip.events.unregister("post_run_cell", cell_ended)
        track_keys(False)
        if _WIDGET is not None:
            _WIDGET.close()
            _WIDGET = None

    return undo


MAGICS = (KeysMagics,)
