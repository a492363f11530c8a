"""The session's compile log: one :class:`CompileEvent` per XLA compilation, bounded.

While the extension is loaded (or inside ``with log.recording():``) every compilation
JAX performs is recorded: its trace, lower and compile times, where it was called, the
argument signature, whether the persistent cache answered, and why it (re)compiled::

    import jaxlab
    log = jaxlab.compile_log()
    with log.recording():
        jax.jit(f)(x)
    log.events[-1].fun_name, log.events[-1].compile_s, log.events[-1].explanation

The listeners that feed it live in :mod:`jaxlab.compile.capture`; the views (HTML table,
matplotlib chart) in :mod:`jaxlab.compile.log_view`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .messages import FIRST, UNKNOWN, ArgChange, CallSignature, explain

__all__ = ["ArgChange", "CompileEvent", "CompileLog", "FunctionStats", "compile_log"]

MAX_EVENTS = 10_000  # events kept; older ones are counted in `dropped`
MAX_FUNCTIONS = 2_000  # functions with their own totals; the rest share one row
RECENT_PER_FUNCTION = 20  # compilations kept per function for the live view
HISTORY_PER_FUNCTION = 8  # earlier signatures a new compilation is compared with
OTHER = "(other functions)"


@dataclass(frozen=True)
class CompileEvent:
    """One compilation: its phases, where it was asked for, and why it happened.

    >>> e = jaxlab.compile_log().events[-1]
    >>> e.fun_name, e.total_s, e.explanation
    ('f', 0.031, 'x: f32[3] → f32[4]')
    """

    index: int  # position in the session (0, 1, ...), stable when older events drop
    fun_name: str  # "f", "<lambda>", "broadcast_in_dim" (JAX's own eager ops too)
    where: str  # "In[3], line 2", "train.py:41", or "" when unknown
    filename: str
    lineno: int
    trace_s: float  # 0.0 when the trace came from JAX's tracing cache
    lower_s: float
    compile_s: float
    persistent_cache: str  # "hit", "miss" or "off"
    signature: tuple[str, ...]  # argument types, e.g. ("f32[3,3]", "i32[]")
    explanation: str  # why it compiled: "first compilation", "x: f32[3] → f32[4]", ...
    changes: tuple[ArgChange, ...] = ()
    recompile: bool = False  # the same function compiled before in this session
    timestamp: float = 0.0  # time.time() when the compilation finished
    user_code: bool = True  # the function is the user's, not JAX's or a library's
    defined_at: str = ""  # where the function was defined: "In[3], line 1", "a.py:4"

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_s": self.total_s}


@dataclass(frozen=True)
class FunctionStats:
    """The compilations of one function name, summed over the whole session."""

    name: str
    count: int
    total_s: float
    last_s: float
    recompiles: int
    recent: tuple[CompileEvent, ...]  # the last few, oldest first
    user_code: bool = True  # one of the user's functions ("my functions only")
    last_index: int = 0  # the index of its newest compilation


class _Totals:
    __slots__ = (
        "count",
        "history",
        "last_index",
        "last_s",
        "recent",
        "recompiles",
        "signature",
        "total_s",
        "user_code",
    )

    def __init__(self) -> None:
        self.count = 0
        self.total_s = 0.0
        self.last_s = 0.0
        self.last_index = 0
        self.recompiles = 0
        self.user_code = False
        self.signature: tuple[str, ...] | None = None
        self.recent: deque[CompileEvent] = deque(maxlen=RECENT_PER_FUNCTION)
        self.history: deque[CallSignature] = deque(maxlen=HISTORY_PER_FUNCTION)


class CompileLog:
    """Every compilation of the session: the last ``maxlen`` events, counts for all.

    Thread-safe: JAX may compile on any thread. Subscribers (the live widget) are
    called after each new event and after each cell, on the thread that caused it.
    """

    def __init__(self, maxlen: int = MAX_EVENTS) -> None:
        self._lock = threading.RLock()
        self._events: deque[CompileEvent] = deque(maxlen=maxlen)
        self._functions: dict[str, _Totals] = {}
        self._count = 0
        self._compile_s = 0.0
        self._cell_s = 0.0
        self._cell_compile_s = 0.0
        self._jaxlab_count = 0
        self._jaxlab_s = 0.0
        self._phase_s = [0.0, 0.0, 0.0]  # trace, lower, compile over the session
        self._subscribers: dict[int, Callable[[str], None]] = {}
        self._next_subscriber = 0
        self.capture_errors: list[str] = []  # bounded: what the listeners could not parse

    # ------------------------------------------------------------------ reading
    @property
    def events(self) -> tuple[CompileEvent, ...]:
        with self._lock:
            return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[CompileEvent]:
        return iter(self.events)

    @property
    def count(self) -> int:
        """Compilations recorded in the session, kept or dropped."""
        return self._count

    @property
    def dropped(self) -> int:
        """Compilations no longer kept (the store holds the last ``maxlen``)."""
        return self._count - len(self._events)

    @property
    def compile_s(self) -> float:
        """Seconds spent tracing, lowering and compiling in the session."""
        return self._compile_s

    @property
    def phase_s(self) -> tuple[float, float, float]:
        """Seconds spent tracing, lowering and compiling (each) in the session."""
        t, lo, c = self._phase_s
        return t, lo, c

    @property
    def jaxlab_count(self) -> int:
        """Compilations jaxlab made for its own views and checks: counted, not logged."""
        return self._jaxlab_count

    @property
    def jaxlab_s(self) -> float:
        """Seconds jaxlab's own compilations took (not in :attr:`compile_s`)."""
        return self._jaxlab_s

    @property
    def running_s(self) -> float:
        """Seconds of cell execution not spent compiling (cells timed by the extension)."""
        return max(0.0, self._cell_s - self._cell_compile_s)

    def for_function(self, name: str) -> tuple[CompileEvent, ...]:
        """The kept events of one function, oldest first."""
        return tuple(e for e in self.events if e.fun_name == name)

    def functions(self, mine_only: bool = False) -> tuple[FunctionStats, ...]:
        """One row per function name: the user's first, then the newest compiled first.

        ``mine_only`` keeps the user's own functions (not JAX's eager operations and
        libraries' internals).
        """
        with self._lock:
            rows = [
                FunctionStats(
                    n,
                    t.count,
                    t.total_s,
                    t.last_s,
                    t.recompiles,
                    tuple(t.recent),
                    t.user_code,
                    t.last_index,
                )
                for n, t in self._functions.items()
                if t.user_code or not mine_only
            ]
        return tuple(sorted(rows, key=lambda r: (not r.user_code, -r.last_index)))

    def to_dicts(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.events]

    def to_json(self) -> str:
        return json.dumps(
            {"count": self.count, "dropped": self.dropped, "events": self.to_dicts()},
            ensure_ascii=False,
        )

    # ------------------------------------------------------------------ writing
    def record(
        self,
        fun_name: str,
        *,
        trace_s: float = 0.0,
        lower_s: float = 0.0,
        compile_s: float = 0.0,
        where: str = "",
        filename: str = "",
        lineno: int = 0,
        persistent_cache: str = "off",
        signature: tuple[str, ...] = (),
        explanation: str | None = None,
        changes: tuple[ArgChange, ...] = (),
        call: CallSignature | None = None,
    ) -> CompileEvent:
        """Add one compilation; fill in ``recompile`` and, unless given, the reason.

        The reason compares ``call`` (what the compilation was asked for) with the same
        function name's last few signatures; without it, with the last argument types.
        ``explanation`` overrides it where the caller knows better (``%%jit``).
        """
        with self._lock:
            totals = self._functions.get(fun_name)
            if totals is None and len(self._functions) >= MAX_FUNCTIONS:
                totals = self._functions.setdefault(OTHER, _Totals())
            recompile = totals is not None and totals.count > 0
            if explanation is None:
                if call is not None or totals is None:
                    explanation, changes = explain(totals.history if totals else (), call)
                else:
                    explanation, changes = _explain_types(totals, signature)
            user_code = call.user_code if call is not None else True
            event = CompileEvent(
                index=self._count,
                fun_name=fun_name,
                where=where,
                filename=filename,
                lineno=lineno,
                trace_s=trace_s,
                lower_s=lower_s,
                compile_s=compile_s,
                persistent_cache=persistent_cache,
                signature=signature,
                explanation=explanation,
                changes=changes,
                recompile=recompile,
                timestamp=time.time(),
                user_code=user_code,
                defined_at=call.defined_at if call is not None else "",
            )
            if totals is None:
                totals = self._functions[fun_name] = _Totals()
            totals.count += 1
            totals.total_s += event.total_s
            totals.last_s = event.total_s
            totals.last_index = event.index
            totals.recompiles += recompile
            totals.user_code = totals.user_code or user_code
            totals.signature = signature or totals.signature
            if call is not None:
                totals.history.append(call)
            totals.recent.append(event)
            self._events.append(event)
            self._count += 1
            self._compile_s += event.total_s
            self._phase_s[0] += trace_s
            self._phase_s[1] += lower_s
            self._phase_s[2] += compile_s
        self._notify("event")
        return event

    def record_jaxlab_work(self, total_s: float) -> None:
        """Count one compilation jaxlab made on its own behalf (kept out of the log)."""
        with self._lock:
            self._jaxlab_count += 1
            self._jaxlab_s += total_s

    def add_cell_time(self, wall_s: float, compile_s: float) -> None:
        """Count one cell: ``wall_s`` seconds, of which ``compile_s`` were compiling."""
        with self._lock:
            self._cell_s += wall_s
            self._cell_compile_s += min(compile_s, wall_s)
        self._notify("cell")

    def note_capture_error(self, text: str) -> None:
        with self._lock:
            if len(self.capture_errors) < 100:
                self.capture_errors.append(text)

    def clear(self) -> None:
        """Forget every event and total (``%compile_log --clear``)."""
        with self._lock:
            self._events.clear()
            self._functions.clear()
            self._count = self._jaxlab_count = 0
            self._compile_s = self._cell_s = self._cell_compile_s = self._jaxlab_s = 0.0
            self._phase_s = [0.0, 0.0, 0.0]
        self._notify("clear")

    # ------------------------------------------------------------------ live views
    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(kind)`` after every change; returns the function that unsubscribes.

        ``kind`` is ``"event"`` after a compilation, ``"cell"`` after a cell finished and
        ``"clear"`` after :meth:`clear`.
        """
        with self._lock:
            key = self._next_subscriber
            self._next_subscriber += 1
            self._subscribers[key] = callback
        return lambda: self._subscribers.pop(key, None) and None

    def _notify(self, kind: str) -> None:
        for callback in list(self._subscribers.values()):
            callback(kind)

    @contextlib.contextmanager
    def recording(self) -> Iterator[CompileLog]:
        """Listen to JAX while the block runs (for scripts; the extension listens itself).

        >>> with jaxlab.compile_log().recording() as log:
        ...     jax.jit(f)(x)
        """
        from .capture import start

        stop = start(self)
        try:
            yield self
        finally:
            stop()

    # ------------------------------------------------------------------ static views
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        from .log_view import log_html, log_text

        return {"text/plain": log_text(self), "text/html": log_html(self)}

    def plot(self, last: int = 50, mine_only: bool = True) -> Any:
        """A matplotlib Figure: one stacked bar (trace, lower, compile) per compilation of
        the user's functions (``mine_only=False``: JAX's and libraries' too)."""
        from .log_view import log_figure

        return log_figure(self, last=last, mine_only=mine_only)


def _explain_types(
    totals: _Totals, signature: tuple[str, ...]
) -> tuple[str, tuple[ArgChange, ...]]:
    """Why a function compiled when the listener could not read the call: its argument
    types compared with the last ones."""
    if totals.count == 0:
        return FIRST, ()
    before = totals.signature
    if not signature or before is None:
        return UNKNOWN, ()
    if len(before) != len(signature):
        return f"argument count changed: {len(before)} → {len(signature)}", ()
    changes = tuple(
        ArgChange(f"arg {i}", old, new)
        for i, (old, new) in enumerate(zip(before, signature, strict=True))
        if old != new
    )
    return ("; ".join(map(str, changes)) if changes else UNKNOWN), changes


_LOG = CompileLog()


def compile_log() -> CompileLog:
    """The session's compile log (fed while the extension is loaded).

    >>> log = jaxlab.compile_log()
    >>> [(e.fun_name, e.explanation) for e in log.events[-2:]]
    """
    return _LOG
