"""The session's compile log: one :class:`CompileEvent` per XLA compilation, bounded.

While the extension is loaded (or inside ``with log.recording():``) every compilation
JAX performs is recorded: its trace, lower and compile times, where it was called, the
argument signature, whether the persistent cache answered, and why it (re)compiled::

    import jaxlab
    log = jaxlab.compile_log()
    with log.recording():
        jax.jit(f)(x)
    log.events[-1].fun_name, log.events[-1].compile_s, log.events[-1].explanation

The listeners that feed it live in :mod:`jaxlab.compile.capture`, its records in
:mod:`jaxlab.compile.records`, the views (HTML table, matplotlib chart) in
:mod:`jaxlab.compile.log_view`: both import this store, which takes them from
``compile/__init__`` (:func:`served_by`). JAX's eager operations (``jnp.tanh`` run
outside jit) are recorded apart from recompilations, grouped by :meth:`eager_operations`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..session.programs import keep_programs_in
from .identity import AnonymousNames
from .kept_programs import KeptPrograms
from .messages import FIRST, UNKNOWN, ArgChange, CallSignature, eager_reason, explain
from .records import CompileEvent, EagerOperations, FunctionStats

__all__ = [
    "ArgChange",
    "CompileEvent",
    "CompileLog",
    "EagerOperations",
    "FunctionStats",
    "compile_log",
]

MAX_EVENTS = 10_000  # events kept; older ones are counted in `dropped`
MAX_FUNCTIONS = 2_000  # functions with their own totals; the rest share one row
RECENT_PER_FUNCTION = 20  # compilations kept per function for the live view
HISTORY_PER_FUNCTION = 8  # earlier signatures a new compilation is compared with
SHAPES_PER_OPERATION = 12  # distinct argument types kept per eager operation
OTHER = "(other functions)"


class _Totals:
    __slots__ = (
        "count",
        "eager",
        "history",
        "last_index",
        "last_s",
        "recent",
        "recompiles",
        "shapes",
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
        self.eager = False  # every compilation of this name was an eager operation
        self.shapes: dict[str, None] = {}  # an eager operation's argument types, ordered
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
        # functions()'s rows, made again only after a compilation (a live view, its saved
        # twin and its text each read them after every cell that compiled)
        self._rows: tuple[int, tuple[FunctionStats, ...]] | None = None
        self._version = 0  # changed by every compilation recorded and by clear()
        self._anonymous = AnonymousNames()  # two lambdas are two functions
        self._count = 0
        self._compile_s = 0.0
        self._cell_s = 0.0
        self._cell_compile_s = 0.0
        self._cell_jaxlab_s = 0.0
        self._jaxlab_count = 0
        self._jaxlab_s = 0.0
        self._jaxlab_work_s = 0.0
        self._eager_count = 0
        self._eager_s = 0.0
        self._phase_s = [0.0, 0.0, 0.0]  # trace, lower, compile over the session
        self._programs = KeptPrograms()  # the user's functions' last two traced programs
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
    def version(self) -> int:
        """Changes whenever a compilation is recorded or the log cleared (what is drawn of
        the functions is the same while it does not)."""
        return self._version

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
    def jaxlab_work_s(self) -> float:
        """Seconds spent inside jaxlab's own work (``jaxlab_work`` blocks: a check, a
        drawing, ``%grad``'s evaluation, ``%bench``'s runs), its compilations included."""
        return self._jaxlab_work_s

    @property
    def cell_s(self) -> float:
        """Wall seconds of the cells timed by the extension."""
        return self._cell_s

    @property
    def other_s(self) -> float:
        """Seconds of the timed cells spent neither compiling the user's functions nor in
        jaxlab's own work: the user's code running (dispatch, device work, waiting on
        results), Python and printing. Not a device time: no view calls it "running"."""
        return max(0.0, self._cell_s - self._cell_compile_s - self._cell_jaxlab_s)

    @property
    def eager_count(self) -> int:
        """Compilations of JAX's eager operations (kept or dropped)."""
        return self._eager_count

    def for_function(self, name: str) -> tuple[CompileEvent, ...]:
        """The kept events of one function, oldest first."""
        return tuple(e for e in self.events if e.fun_name == name)

    def functions(self, mine_only: bool = False) -> tuple[FunctionStats, ...]:
        """One row per function name: the user's first, then the newest compiled first.

        ``mine_only`` keeps the user's own functions (not JAX's eager operations and
        libraries' internals).
        """
        with self._lock:
            if self._rows is None or self._rows[0] != self._version:
                self._rows = (self._version, self._function_rows())
            rows = self._rows[1]
        return rows if not mine_only else tuple(r for r in rows if r.user_code)

    def _function_rows(self) -> tuple[FunctionStats, ...]:
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
                t.eager,
                tuple(t.shapes),
            )
            for n, t in self._functions.items()
        ]
        return tuple(sorted(rows, key=lambda r: (not r.user_code, -r.last_index)))

    def eager_operations(self) -> EagerOperations:
        """JAX's operations that ran outside jit, grouped: how many compilations, which
        operations, which shapes (see :class:`EagerOperations`)."""
        rows = tuple(r for r in self.functions() if r.eager)
        with self._lock:
            return EagerOperations(self._eager_count, self._eager_s, rows)

    def programs(self, name: str) -> tuple[Any, Any] | None:
        """The programs (``ClosedJaxpr``) of the last two compilations of the user's
        function ``name``, older first, or None when fewer are kept (``kept_programs``
        bounds them); ``jaxlab.recompile_diff(name)`` compares them."""
        with self._lock:
            return self._programs.pair(name)

    def last_program(self, name: str) -> Any:
        """The program (``ClosedJaxpr``) of the last compilation of the user's function
        ``name`` kept, or None (``%%profile --graph`` joins its time to it)."""
        with self._lock:
            return self._programs.last(name)

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
        program: Any = None,
    ) -> CompileEvent:
        """Add one compilation; fill in ``recompile`` and, unless given, the reason.

        The reason compares ``call`` (what the compilation was asked for) with the same
        function name's last few signatures; without it, with the last argument types.
        ``explanation`` overrides it where the caller knows better (``%%jit``). An eager
        operation (``call.eager``) is never a recompilation: its reason says it ran
        outside jit, and it is grouped by :meth:`eager_operations`.
        """
        eager = call is not None and call.eager
        with self._lock:
            if call is not None:
                fun_name = self._anonymous.name(fun_name, call.code, call.defined_at)
            totals = self._functions.get(fun_name)
            if totals is None and len(self._functions) >= MAX_FUNCTIONS:
                totals = self._functions.setdefault(OTHER, _Totals())
            recompile = totals is not None and totals.count > 0 and not eager
            if eager:
                explanation, changes = eager_reason(fun_name, signature), ()
            elif explanation is None:
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
                eager=eager,
            )
            if totals is None:
                totals = self._functions[fun_name] = _Totals()
                totals.eager = eager
            totals.eager = totals.eager and eager
            if eager:
                self._eager_count += 1
                self._eager_s += event.total_s
                if len(totals.shapes) < SHAPES_PER_OPERATION:
                    totals.shapes[", ".join(signature)] = None
            totals.count += 1
            totals.total_s += event.total_s
            totals.last_s = event.total_s
            totals.last_index = event.index
            totals.recompiles += recompile
            totals.user_code = totals.user_code or user_code
            totals.signature = signature or totals.signature
            if call is not None:
                totals.history.append(call)
            if program is not None and user_code and not eager:
                self._programs.keep(fun_name, program)
            totals.recent.append(event)
            self._events.append(event)
            self._version += 1
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

    def record_jaxlab_time(self, seconds: float) -> None:
        """Count ``seconds`` of jaxlab's own work (an outermost ``jaxlab_work`` block)."""
        with self._lock:
            self._jaxlab_work_s += seconds

    def add_cell_time(self, wall_s: float, compile_s: float, jaxlab_s: float = 0.0) -> None:
        """Count one cell: ``wall_s`` seconds, of which ``compile_s`` were compiling the
        user's functions and ``jaxlab_s`` were jaxlab's own work."""
        with self._lock:
            self._cell_s += wall_s
            compile_s = min(compile_s, wall_s)
            self._cell_compile_s += compile_s
            self._cell_jaxlab_s += min(jaxlab_s, wall_s - compile_s)
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
            self._version += 1
            self._anonymous.clear()
            self._programs.clear()
            self._count = self._jaxlab_count = self._eager_count = 0
            self._compile_s = self._cell_s = self._cell_compile_s = self._jaxlab_s = 0.0
            self._cell_jaxlab_s = self._jaxlab_work_s = self._eager_s = 0.0
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

    @property
    def subscribers(self) -> int:
        """How many live views are subscribed (``%unload_ext`` leaves none)."""
        return len(self._subscribers)

    def _notify(self, kind: str) -> None:
        # Called from JAX's monitoring listener, inside the user's compilation: a view that
        # fails must not fail the user's code. The failure is kept in capture_errors.
        for callback in list(self._subscribers.values()):
            try:
                callback(kind)
            except Exception as e:
                self.note_capture_error(f"a subscriber failed after {kind!r}: {e!r}")

    @contextlib.contextmanager
    def recording(self) -> Iterator[CompileLog]:
        """Listen to JAX while the block runs (for scripts; the extension listens itself).

        >>> with jaxlab.compile_log().recording() as log:
        ...     jax.jit(f)(x)
        """
        stop = _above.listen(self)
        try:
            yield self
        finally:
            stop()

    # ------------------------------------------------------------------ static views
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": _above.text(self), "text/html": _above.html(self)}

    def plot(self, last: int = 50, mine_only: bool = True) -> Any:
        """A matplotlib Figure: one stacked bar (trace, lower, compile) per compilation of
        the user's functions (``mine_only=False``: JAX's and libraries' too)."""
        return _above.figure(self, last=last, mine_only=mine_only)


class Above(NamedTuple):
    """What a :class:`CompileLog` takes from the modules above it, which import it:
    ``capture``'s listening and ``log_view``'s drawings."""

    listen: Callable[[CompileLog], Callable[[], None]]  # capture.start: returns the undo
    text: Callable[[CompileLog], str]
    html: Callable[[CompileLog], str]
    figure: Callable[..., Any]  # log_view.log_figure(log, last=, mine_only=)


_above: Above  # set by served_by when compile/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``compile/__init__`` (which any import of the package runs
    first): the listening and drawings every CompileLog uses."""
    global _above
    _above = above


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
keep_programs_in(_LOG)  # the session's traced programs, for recompile_diff and %%profile


def compile_log() -> CompileLog:
    """The session's compile log (fed while the extension is loaded).

    >>> log = jaxlab.compile_log()
    >>> [(e.fun_name, e.explanation) for e in log.events[-2:]]
    """
    return _LOG
