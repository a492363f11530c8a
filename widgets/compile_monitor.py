"""``CompileMonitor``: the session's compilations, live (``%compile_log``).

::

    from jaxlab.widgets import CompileMonitor
    CompileMonitor()          # follows jaxlab.compile_log() while cells run

Functions are grouped, newest first, with their compile count, a recompile count that
leads to the reasons (``x: f32[3] → f32[4]``), total and last compile time and a stacked
bar per compilation (trace, lower, compile); above them the session's time compiling
versus the rest of the cells in the same colours, and the legend. JAX's eager operations
(``jnp`` run outside jit, compiled once per shape) are one line of their own, never
recompilations; "My functions only" (on by default) hides them and libraries' internals
from the table; the view scrolls inside a capped height.

A push that fails (on the throttle's timer thread, or with the kernel's channel gone) is
logged once and retried; ``%unload_ext`` detaches every view of the session log.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import traitlets

from jaxlab.compile.log import CompileEvent, CompileLog, compile_log
from jaxlab.compile.log_view import eager_summary_text, log_html, log_text
from jaxlab.compile.messages import EAGER_HINT, weak_note

from ._base import JaxlabWidget, Throttle

_logger = logging.getLogger(__name__)

RETRY_S = 0.5  # a failed push is tried again after this long ...
MAX_RETRIES = 3  # ... this many times in a row, then at the log's next change

_live: weakref.WeakSet[CompileMonitor] = weakref.WeakSet()  # every subscribed monitor


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
        "eager": e.eager,
    }


def detach_all(of: CompileLog) -> int:
    """Detach every live monitor of ``of`` (``%unload_ext``); returns how many."""
    found = [m for m in list(_live) if m.log is of]
    for monitor in found:
        monitor.detach()
    return len(found)


class CompileMonitor(JaxlabWidget, static="compile_monitor"):
    """A live view of a :class:`~jaxlab.CompileLog` (the session's, by default)."""

    functions = traitlets.List(traitlets.Dict()).tag(sync=True)
    session = traitlets.Dict().tag(sync=True)
    max_functions = traitlets.Int(50).tag(sync=True)
    mine_only = traitlets.Bool(True).tag(sync=True, front_end=True)  # "my functions only"

    def __init__(self, log: CompileLog | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._log = log if log is not None else compile_log()
        self._failures = 0  # pushes failed in a row
        self._logged = False  # the first failure is logged, the rest only counted
        self._retry: threading.Timer | None = None
        self._retry_lock = threading.Lock()
        # (log version, max_functions) -> the functions and counts made for them
        self._made: tuple[Any, list[dict[str, Any]], dict[str, Any]] | None = None
        self._html_cache: dict[str, Any] = {}  # the twin's tables, for the log's version
        # a loop that compiles often sends at most four updates a second
        self._throttle = Throttle(self._push)
        self.refresh()
        self._unsubscribe: Any = self._log.subscribe(self._changed)
        _live.add(self)

    @property
    def log(self) -> CompileLog:
        return self._log

    @property
    def subscribed(self) -> bool:
        """Whether the view still follows its log (``detach`` or ``close`` end it)."""
        return self._unsubscribe is not None

    @property
    def failed_pushes(self) -> int:
        """Pushes that failed in a row (0 once one succeeds)."""
        return self._failures

    def state(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """What the view draws: one entry per function (the user's first, then newest
        first; compilations newest first), and the session totals. The functions are
        made again only when the log recorded a compilation since (after most cells only
        the cell times change)."""
        key = (self._log.version, self.max_functions)
        if self._made is None or self._made[0] != key:
            self._made = (key, *self._functions_state())
        _, functions, counts = self._made
        session = {
            "count": self._log.count,
            "dropped": self._log.dropped,
            "compile_s": self._log.compile_s,
            "other_s": self._log.other_s,
            "cell_s": self._log.cell_s,
            "jaxlab_work_s": self._log.jaxlab_work_s,
            "phase_s": list(self._log.phase_s),
            "jaxlab_count": self._log.jaxlab_count,
            **counts,
        }
        return functions, session

    def _functions_state(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
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
                "eager": r.eager,
                "shapes": list(r.shapes),
                "compiles": [_event_state(e) for e in reversed(r.recent)],
            }
            for r in rows[: self.max_functions]
        ]
        eager = self._log.eager_operations()
        texts = [c["explanation"] for f in functions for c in f["compiles"]]
        texts += [t for f in functions for c in f["compiles"] for t in c["signature"]]
        counts = {
            "functions": sum(not r.eager for r in rows),
            "mine": sum(r.user_code for r in rows),
            "eager_count": eager.count,
            "eager_text": eager_summary_text(eager) if eager.count else "",
            "eager_hint": EAGER_HINT,
            "weak_note": weak_note(texts) or "",
        }
        return functions, counts

    def refresh(self) -> None:
        """Send the log's current state to the browser now."""
        functions, session = self.state()
        with self.twin_once(), self.hold_sync():
            self.functions = functions
            self.session = session

    def _push(self) -> None:
        # The throttle calls this on the cell's thread or on its timer thread, where an
        # exception would end the thread and leave the view stale for good: a failure is
        # logged once and the push retried.
        try:
            self.refresh()
        except Exception:
            self._failures += 1
            if not self._logged:
                self._logged = True
                _logger.warning("CompileMonitor: a view update failed; retrying", exc_info=True)
            if self._failures <= MAX_RETRIES:
                self._schedule_retry()
        else:
            self._failures = 0

    def _schedule_retry(self) -> None:
        with self._retry_lock:
            if self._retry is not None or not self.subscribed:
                return
            self._retry = threading.Timer(RETRY_S, self._retried)
            self._retry.daemon = True
            self._retry.start()

    def _retried(self) -> None:
        with self._retry_lock:
            self._retry = None
        if self.subscribed:
            self._push()

    def _cancel_retry(self) -> None:
        with self._retry_lock:
            if self._retry is not None:
                self._retry.cancel()
                self._retry = None

    def _changed(self, kind: str) -> None:
        # Called by the log after each compilation (during a cell) and after each cell. The
        # end of a cell that compiled is shown at once; one that only added its time goes
        # through the throttle (within 0.25 s), so a burst of quick cells is not a redraw
        # and a twin each.
        compiled = self._made is None or self._made[0][0] != self._log.version
        self._throttle.changed(now=kind == "clear" or (kind == "cell" and compiled))

    def detach(self) -> None:
        """Stop following the log; the view keeps the state it shows (``%unload_ext``)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._throttle.cancel()
        self._cancel_retry()
        _live.discard(self)

    def close(self) -> None:
        self.detach()
        super().close()

    def _static_html(self) -> str:
        return log_html(self._log, self._html_cache)

    def _static_text(self) -> str:
        return log_text(self._log)
