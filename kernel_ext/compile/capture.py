"""Listen to JAX and turn what it reports into :class:`~jaxlab.compile.log.CompileEvent`.

Three public channels feed one event per compilation:

* ``jax.monitoring`` duration listeners: ``/jax/core/compile/jaxpr_trace_duration``
  (``fun_name="f"``), ``.../jaxpr_to_mlir_module_duration`` and
  ``.../backend_compile_duration`` (``fun_name="jit(f)"``), which closes the event;
* ``jax.monitoring`` event listeners: ``/jax/compilation_cache/...`` hits and requests;
* a logging handler on JAX's compile loggers: the ``TRACING CACHE MISS`` explanation
  (``jax_explain_cache_misses`` is on while we listen) and the argument types of the
  lowering ("Compiling jit(f) with global shapes and types ..."), read by
  :mod:`jaxlab.compile.messages`.

:func:`start` is reference-counted: the extension and ``CompileLog.recording()`` can
both listen and every listener is registered once. The last :func:`start`'s undo
restores JAX's config and the loggers exactly as they were.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.monitoring as monitoring
import jaxlib

from .. import _jax_compat
from .log import ArgChange, CompileLog
from .messages import Explanation, base_name, parse_explanation, short_type

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HIT = "/jax/compilation_cache/cache_hits"

_PERSISTENT_MESSAGES = (
    "PERSISTENT COMPILATION CACHE MISS",
    "Writing %s to persistent compilation cache",
    "Not writing persistent cache entry",
)
MAX_PENDING = 64  # unfinished compilations remembered per thread (traces never lowered)


# --------------------------------------------------------------------------- where


class _Where:
    """Finds the user's frame that asked for a compilation, and names notebook cells."""

    def __init__(self) -> None:
        self.cell_namer: Callable[[str], str | None] | None = None
        self._skip: tuple[str, ...] | None = None

    def _skip_dirs(self) -> tuple[str, ...]:
        if self._skip is None:
            # the jaxlab package (kernel_ext/ in an editable install, widgets/ beside it)
            here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            paths = sysconfig.get_paths()
            dirs = {
                os.path.dirname(jax.__file__),
                os.path.dirname(jaxlib.__file__),
                here,
                os.path.join(os.path.dirname(here), "widgets"),
                paths["stdlib"],
                paths["purelib"],
                paths["platlib"],
            }
            self._skip = tuple(os.path.abspath(d) + os.sep for d in dirs)
        return self._skip

    def find(self) -> tuple[str, str, int]:
        """``(where, filename, lineno)`` of the innermost frame of user code."""
        skip = self._skip_dirs()
        frame = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            # jaxlab evaluates a magic's arguments as "<jaxlab call>": not the user's line.
            if not filename.startswith(("<frozen", "<jaxlab call>")) and not (
                filename.startswith(os.sep) and os.path.abspath(filename).startswith(skip)
            ):
                return self.name(filename, frame.f_lineno), filename, frame.f_lineno
            frame = frame.f_back  # type: ignore[assignment]
        return "", "", 0

    def name(self, filename: str, lineno: int) -> str:
        cell = self.cell_namer(filename) if self.cell_namer is not None else None
        if cell:
            return f"{cell}, line {lineno}"
        return f"{os.path.basename(filename)}:{lineno}"


WHERE = _Where()


# --------------------------------------------------------------------------- why, when told
class _Told(threading.local):
    explanation: Explanation | None = None


_TOLD = _Told()  # per thread: the reason explaining() was given, while its block runs


@contextlib.contextmanager
def explaining(fun_name: str, text: str, changes: tuple[ArgChange, ...] = ()) -> Iterator[None]:
    """Give compilations of ``fun_name`` in this block a reason known better than JAX's
    (``%%jit`` knows which input of a cell changed, static values included)."""
    previous = _TOLD.explanation
    _TOLD.explanation = Explanation(fun_name, text, changes, False)
    try:
        yield
    finally:
        _TOLD.explanation = previous


# --------------------------------------------------------------------------- the listener


class _Pending:
    __slots__ = ("explanation", "lower_s", "signature", "trace_s")

    def __init__(self) -> None:
        self.trace_s = 0.0
        self.lower_s = 0.0
        self.signature: tuple[str, ...] = ()
        self.explanation: Explanation | None = None


class _ThreadState(threading.local):
    """What one thread has heard about the compilations in flight on it."""

    def __init__(self) -> None:  # runs once in each thread that touches it
        self.pending: dict[str, _Pending] = {}
        self.cache: str | None = None  # the persistent cache's answer, since the last compile
        self.explanation: Explanation | None = None  # the last one, whatever it named


class _Listener:
    """Collects the pieces of each compilation per thread and records it when it ends."""

    def __init__(self) -> None:
        self.logs: tuple[CompileLog, ...] = ()
        self.local = _ThreadState()

    def note_error(self, text: str) -> None:
        for log in self.logs:
            log.note_capture_error(text)

    def _pending(self, name: str) -> _Pending:
        pending = self.local.pending
        entry = pending.get(name)
        if entry is None:
            if len(pending) >= MAX_PENDING:
                del pending[next(iter(pending))]
            entry = pending[name] = _Pending()
        return entry

    def on_duration(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if not event.startswith("/jax/core/compile/"):
            return
        name = base_name(str(kwargs.get("fun_name", "")))
        if event == TRACE:
            entry = self._pending(name)
            entry.trace_s, entry.lower_s = duration_secs, 0.0
        elif event == LOWER:
            self._pending(name).lower_s = duration_secs
        elif event == COMPILE:
            self._finish(name, duration_secs)

    def on_event(self, event: str, **kwargs: str | int) -> None:
        if event == CACHE_REQUEST:
            self.local.cache = "miss"
        elif event == CACHE_HIT:
            self.local.cache = "hit"

    def on_record(self, record: logging.LogRecord) -> bool:
        """Read one log record; True when it is a warning only because we switched
        ``jax_explain_cache_misses`` on (the user does not see those)."""
        msg = record.msg if isinstance(record.msg, str) else ""
        if (
            msg.startswith("Compiling %s with global shapes and types")
            and len(record.args or ()) >= 2
        ):
            args: Any = record.args
            module_name, avals = args[0], args[1]
            self._pending(base_name(str(module_name))).signature = tuple(
                short_type(a) for a in avals
            )
            return False  # the user sees it if they asked for DEBUG (or jax_log_compiles)
        if msg.startswith(_PERSISTENT_MESSAGES):
            return True  # at WARNING only because jax_explain_cache_misses is on
        if msg.startswith("TRACING CACHE MISS"):
            text = record.getMessage()
            parsed = parse_explanation(text)
            if parsed is None:
                self.note_error(text[:500])
            else:
                self._pending(parsed.fun_name).explanation = parsed
                self.local.explanation = parsed
            return True
        return False

    def _finish(self, name: str, compile_s: float) -> None:
        state = self.local
        entry = state.pending.pop(name, None) or _Pending()
        forced = _TOLD.explanation
        explanation = (
            forced
            if forced is not None and forced.fun_name == name
            else entry.explanation or _matching(state.explanation, name)
        )
        state.explanation = None
        cache, state.cache = state.cache, None
        if cache is None or not jax.config.jax_compilation_cache_dir:
            cache = "off"
        where, filename, lineno = WHERE.find()
        for log in self.logs:
            log.record(
                name,
                trace_s=entry.trace_s,
                lower_s=entry.lower_s,
                compile_s=compile_s,
                where=where,
                filename=filename,
                lineno=lineno,
                persistent_cache=cache,
                signature=entry.signature,
                explanation=explanation.text if explanation else None,
                changes=explanation.changes if explanation else (),
                new_function=bool(explanation and explanation.new_function),
            )


def _matching(explanation: Explanation | None, name: str) -> Explanation | None:
    # JAX's explanation names the function by its qualified name ("Model.__call__").
    if explanation is not None and explanation.fun_name.rsplit(".", 1)[-1] == name:
        return explanation
    return None


class _Handler(logging.Handler):
    """Reads JAX's compile messages and passes on those the user would have seen anyway."""

    def __init__(self, listener: _Listener, thresholds: dict[str, int], explain_was_on: bool):
        super().__init__(logging.DEBUG)
        self.listener = listener
        self.thresholds = thresholds  # logger name -> the level it had before we lowered it
        self.explain_was_on = explain_was_on

    def emit(self, record: logging.LogRecord) -> None:
        try:
            ours = self.listener.on_record(record)
        except Exception as e:  # a message format we do not know: keep it visible
            self.listener.note_error(f"{type(e).__name__}: {e}")
            ours = False
        if ours and not self.explain_was_on:
            return
        owner = self._owner(record.name)
        if owner is not None and record.levelno >= self.thresholds[owner]:
            parent = logging.getLogger(owner).parent
            if parent is not None:
                parent.handle(record)  # as if propagation had never been switched off

    def _owner(self, name: str) -> str | None:
        for owner in self.thresholds:
            if name == owner or name.startswith(owner + "."):
                return owner
        return None


# --------------------------------------------------------------------------- start / stop


class _Session:
    """What listening changes in JAX and in logging, and how to put it back."""

    def __init__(self) -> None:
        self.listener = _Listener()
        self.explain_before = bool(jax.config.jax_explain_cache_misses)
        names = _jax_compat.compile_message_loggers()
        self.saved = {
            n: (logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names
        }
        thresholds = {n: logging.getLogger(n).getEffectiveLevel() for n in names}
        self.handler = _Handler(self.listener, thresholds, self.explain_before)
        for n, debug in names.items():
            logger = logging.getLogger(n)
            logger.addHandler(self.handler)
            if debug:
                logger.setLevel(logging.DEBUG)  # the argument types are logged at DEBUG
            logger.propagate = False  # the handler forwards what the user would have seen
        jax.config.update("jax_explain_cache_misses", True)
        monitoring.register_event_duration_secs_listener(self.listener.on_duration)
        monitoring.register_event_listener(self.listener.on_event)

    def stop(self) -> None:
        monitoring.unregister_event_duration_listener(self.listener.on_duration)
        monitoring.unregister_event_listener(self.listener.on_event)
        jax.config.update("jax_explain_cache_misses", self.explain_before)
        for n, (level, propagate) in self.saved.items():
            logger = logging.getLogger(n)
            logger.removeHandler(self.handler)
            logger.setLevel(level)
            logger.propagate = propagate


_lock = threading.Lock()
_session: _Session | None = None
_starts: dict[CompileLog, int] = {}  # each log listened for, and how many started it


def start(log: CompileLog) -> Callable[[], None]:
    """Listen to JAX for ``log``; returns the undo (idempotent).

    Reference-counted: loading the extension and ``log.recording()`` together still
    register every listener once and record each compilation once per log.
    """
    global _session
    with _lock:
        if _session is None:
            _session = _Session()
        _starts[log] = _starts.get(log, 0) + 1
        _session.listener.logs = tuple(_starts)
    done = False

    def stop() -> None:
        global _session
        nonlocal done
        if done:
            return
        done = True
        with _lock:
            _starts[log] -= 1
            if not _starts[log]:
                del _starts[log]
            if _session is not None:
                _session.listener.logs = tuple(_starts)
                if not _starts:
                    _session.stop()
                    _session = None

    return stop


def is_listening(log: CompileLog | None = None) -> bool:
    """Whether JAX is being listened to (for ``log``, when given)."""
    return _session is not None and (log is None or log in _starts)
