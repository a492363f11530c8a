"""``CompileMonitor``: the session's compilations, live (``%compile_log``).

::

    from jaxlab.widgets import CompileMonitor
    CompileMonitor()          # follows jaxlab.compile_log() while cells run

Functions are grouped, newest first, with their compile count, a recompile count that
leads to the reasons (``x: f32[3] → f32[4]``), total and last compile time and a stacked
bar per compilation (trace, lower, compile); above them the session's time compiling
versus running in the same colours, and the legend. "My functions only" (on by default)
hides JAX's eager operations and libraries' internals; the view scrolls inside a capped
height.
"""

from __future__ import annotations

from typing import Any

import traitlets

from jaxlab.compile.log import CompileEvent, CompileLog, compile_log
from jaxlab.compile.log_view import log_html, log_text

from ._base import JaxlabWidget, Throttle


def _event_state(e: CompileEvent) -> dict[str, Any]:
    return {
        "index": e.index,
        "trace_s": e.trace_s,
        "lower_s": e.lower_s,
        "compile_s": e.compile_s,
        "recompile": e.recompile,
        "explanation": e.explanation,
        "where": e.where,
        "signature": list(e.signature),
        "cache": e.persistent_cache,
        "defined_at": e.defined_at,
    }


class CompileMonitor(JaxlabWidget, static="compile_monitor"):
    """A live view of a :class:`~jaxlab.CompileLog` (the session's, by default)."""

    functions = traitlets.List(traitlets.Dict()).tag(sync=True)
    session = traitlets.Dict().tag(sync=True)
    max_functions = traitlets.Int(50).tag(sync=True)
    mine_only = traitlets.Bool(True).tag(sync=True, front_end=True)  # "my functions only"

    def __init__(self, log: CompileLog | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._log = log if log is not None else compile_log()
        # a loop that compiles often sends at most four updates a second
        self._throttle = Throttle(self.refresh)
        self.refresh()
        self._unsubscribe = self._log.subscribe(self._changed)

    @property
    def log(self) -> CompileLog:
        return self._log

    def state(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """What the view draws: one entry per function (the user's first, then newest
        first; compilations newest first), and the session totals."""
        rows = self._log.functions()
        functions = [
            {
                "name": r.name,
                "count": r.count,
                "total_s": r.total_s,
                "last_s": r.last_s,
                "recompiles": r.recompiles,
                "user_code": r.user_code,
                "last_index": r.last_index,
                "compiles": [_event_state(e) for e in reversed(r.recent)],
            }
            for r in rows[: self.max_functions]
        ]
        session = {
            "count": self._log.count,
            "dropped": self._log.dropped,
            "compile_s": self._log.compile_s,
            "running_s": self._log.running_s,
            "functions": len(rows),
            "mine": sum(r.user_code for r in rows),
            "phase_s": list(self._log.phase_s),
            "jaxlab_count": self._log.jaxlab_count,
        }
        return functions, session

    def refresh(self) -> None:
        """Send the log's current state to the browser now."""
        functions, session = self.state()
        with self.hold_sync():
            self.functions = functions
            self.session = session

    def _changed(self, kind: str) -> None:
        # Called by the log after each compilation (during a cell) and after each cell; the
        # end of a cell is shown at once.
        self._throttle.changed(now=kind != "event")

    def close(self) -> None:
        self._unsubscribe()
        self._throttle.cancel()
        super().close()

    def _static_html(self) -> str:
        return log_html(self._log)

    def _static_text(self) -> str:
        return log_text(self._log)
