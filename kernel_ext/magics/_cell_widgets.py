"""The widgets each cell showed, released when that cell runs again.

Every ``%jaxpr`` and ``%grad --graph`` in a live notebook shows a GraphExplorer that holds
its program, and ``%compile_log`` a monitor subscribed to the session's log; nothing else
closes them, so a notebook whose cells are re-run for days would keep every one it ever
showed. A front end names the cell it runs (``info.cell_id`` in IPython's
``pre_run_cell``; JupyterLab and nbclient send one); when that cell runs again its outputs
are gone from the page, and the widgets it showed are released (closed, their saved
twins left visible as plain HTML). A widget the user keeps in a variable is the user's
and is never closed here. Where cells have no id (a terminal, an old front end), the
most recent ``MAX_UNNAMED`` are kept live and older ones released::

    hold(widget)   # in JaxlabWidget._ipython_display_: it belongs to the running cell
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_UNNAMED = 64  # live widgets shown by cells without an id

_session: CellWidgets | None = None


class CellWidgets:
    """Which cell showed which widgets, for one shell."""

    def __init__(self, ip: Any) -> None:
        self._ip = ip
        self._cell: str | None = None
        self._shown: dict[str, list[Any]] = {}  # cell id -> widgets it showed
        self._unnamed: OrderedDict[int, Any] = OrderedDict()

    def pre_run_cell(self, info: Any) -> None:
        self._cell = getattr(info, "cell_id", None) or None
        if self._cell is not None:
            self._release(self._shown.pop(self._cell, []))

    def hold(self, widget: Any) -> None:
        if self._cell is not None:
            shown = self._shown.setdefault(self._cell, [])
            if not any(w is widget for w in shown):
                shown.append(widget)
            return
        self._unnamed[id(widget)] = widget
        self._unnamed.move_to_end(id(widget))
        while len(self._unnamed) > MAX_UNNAMED:
            _, oldest = self._unnamed.popitem(last=False)
            self._release([oldest])

    def live(self) -> int:
        """How many widgets are held (not yet released)."""
        return sum(map(len, self._shown.values())) + len(self._unnamed)

    def release_all(self) -> None:
        """Forget every widget without closing one (the extension is unloading: what the
        page shows stays live)."""
        self._shown.clear()
        self._unnamed.clear()

    def _release(self, widgets: list[Any]) -> None:
        kept = self._kept_by_user()
        for widget in widgets:
            if id(widget) in kept or getattr(widget, "comm", None) is None:
                continue  # the user's (in a variable or Out), or already closed
            widget.release()

    def _kept_by_user(self) -> set[int]:
        """The objects the user's namespace holds by name or in ``Out``."""
        ns = getattr(self._ip, "user_ns", {}) or {}
        held = {id(v) for v in ns.values()}
        out = ns.get("Out")
        if isinstance(out, dict):
            held |= {id(v) for v in out.values()}
        return held


def hold(widget: Any) -> None:
    """Note that ``widget`` was just shown by the running cell (nothing while jaxlab's
    extension is not loaded: a widget shown then is the user's alone)."""
    if _session is not None:
        _session.hold(widget)


def install(ip: Any) -> Callable[[], None]:
    """Follow the cells of ``ip``; returns the undo."""
    global _session
    session = CellWidgets(ip)
    previous, _session = _session, session
    ip.events.register("pre_run_cell", session.pre_run_cell)

    def undo() -> None:
        global _session
        ip.events.unregister("pre_run_cell", session.pre_run_cell)
        session.release_all()
        if _session is session:
            _session = previous

    return undo


MAGICS: tuple[Any, ...] = ()
