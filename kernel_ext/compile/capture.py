"""Listen to JAX and turn what it reports into :class:`~jaxlab.compile.log.CompileEvent`.

Two public channels feed one event per compilation, and nothing else is touched (no
config flag, no logger, no handler: the user's logging stays exactly theirs):

* ``jax.monitoring`` duration listeners: ``/jax/core/compile/jaxpr_trace_duration``
  (``fun_name="f"``), ``.../jaxpr_to_mlir_module_duration`` and
  ``.../backend_compile_duration`` (``fun_name="jit(f)"``), which closes the event. At
  the trace, :func:`jaxlab._jax_compat.jit_call_being_traced` reads the call being
  traced (function object, argument types, static values), which
  :mod:`jaxlab.compile.messages` compares with the same function's last few calls;
* ``jax.monitoring`` event listeners: ``/jax/compilation_cache/...`` hits and requests.

Compilations jaxlab makes for its own checks, drawings and reports run inside
:func:`~jaxlab.session.work.jaxlab_work` (the own-work marker, below every capability;
re-exported here) and are only counted, never logged as the user's::

    with jaxlab_work():
        finite_difference_check(f, x)   # compiles, but not the user's compilation

:func:`start` is reference-counted: the extension and ``CompileLog.recording()`` can
both listen and every listener is registered once.
"""

from __future__ import annotations

import contextlib
import inspect
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
from ..session.work import in_jaxlab_work, jaxlab_work, on_jaxlab_time
from .identity import anonymous, code_identity
from .log import CompileLog
from .messages import CONFIG_NAMES, ArgChange, CallSignature, base_name, short_type, short_value

__all__ = ["explaining", "is_listening", "jaxlab_work", "short_type", "start"]

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HIT = "/jax/compilation_cache/cache_hits"

MAX_PENDING = 64  # unfinished compilations remembered per thread (traces never lowered)


# --------------------------------------------------------------------------- where


class _Where:
    """Finds the user's frame that asked for a compilation, and names notebook cells."""

    def __init__(self) -> None:
        self.cell_namer: Callable[[str], str | None] | None = None
        self._skip: tuple[str, ...] | None = None
        self._jax: tuple[str, ...] | None = None

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

    def is_user_file(self, filename: str) -> bool:
        """Whether code in ``filename`` is the user's (not JAX, a library or jaxlab)."""
        if not filename or filename.startswith("<frozen"):
            return False
        if filename.startswith(os.sep):
            return not os.path.abspath(filename).startswith(self._skip_dirs())
        return True  # "<ipython-input-3-…>", "<jaxlab cell>", "<string>": typed by the user

    def is_jax_file(self, filename: str) -> bool:
        """Whether code in ``filename`` is JAX's own (``jax/``, ``jaxlib/``)."""
        if self._jax is None:
            dirs = (os.path.dirname(jax.__file__), os.path.dirname(jaxlib.__file__))
            self._jax = tuple(os.path.abspath(d) + os.sep for d in dirs)
        return filename.startswith(os.sep) and os.path.abspath(filename).startswith(self._jax)

    def defined_at(self, src_info: str) -> tuple[str, bool]:
        """JAX's ``"f at /path/a.py:12"`` → ``("a.py:12", user_code)``; cells as In[3]."""
        _, _, place = src_info.rpartition(" at ")
        filename, _, line = place.rpartition(":")
        if not filename or not line.isdigit():
            return "", False
        return self.name(filename, int(line)), self.is_user_file(filename)

    def name(self, filename: str, lineno: int) -> str:
        cell = self.cell_namer(filename) if self.cell_namer is not None else None
        if cell:
            return f"{cell}, line {lineno}"
        return f"{os.path.basename(filename)}:{lineno}"


WHERE = _Where()


# --------------------------------------------------------------------------- whose work
class _Told(threading.local):
    explanation: tuple[str, str, tuple[ArgChange, ...]] | None = None  # name, text, changes


_TOLD = _Told()  # per thread: what explaining() says while its block runs


@contextlib.contextmanager
def explaining(fun_name: str, text: str, changes: tuple[ArgChange, ...] = ()) -> Iterator[None]:
    """Give compilations of ``fun_name`` in this block a reason known better than the
    log's comparison (``%%jit`` knows which input of a cell changed)."""
    previous = _TOLD.explanation
    _TOLD.explanation = (fun_name, text, changes)
    try:
        yield
    finally:
        _TOLD.explanation = previous


def _unique(names: tuple[str, ...]) -> list[str]:
    # JAX leaves the names of a transformation's extra arguments (tangents) empty
    seen: set[str] = set()
    out = []
    for i, n in enumerate(names):
        out.append(n if n and n not in seen else f"arg {i}")
        seen.add(n)
    return out


MAX_STATIC_LEAVES = 64  # static leaves searched for the user's function behind a wrapper


def _wrapped_user_function(call: _jax_compat.JitCall) -> Any:
    """The user's function a library's jit wrapper carries as a static argument
    (``equinox.filter_jit`` jits its own wrapper, named after the user's function)."""
    name = getattr(call.fun, "__name__", None)
    statics = [call.args[i] for i in call.static_argnums if 0 <= i < len(call.args)]
    leaves = jax.tree_util.tree_leaves(statics)[:MAX_STATIC_LEAVES]
    for leaf in leaves:
        code = getattr(leaf, "__code__", None)
        if code is not None and leaf.__name__ == name and WHERE.is_user_file(code.co_filename):
            return leaf
    return None


def _is_eager(call: _jax_compat.JitCall) -> bool:
    """Whether the compilation is one of JAX's own operations run outside jit
    (``jnp.tanh``, a primitive bound eagerly), not a function the user jitted.

    JAX jits its ``jnp`` functions and binds a lone primitive through a jit of its own;
    a user's ``jax.jit(jnp.sin)`` traces the jitted ``jnp.sin`` itself (it has ``lower``).
    """
    filename = call.defined_at.rpartition(" at ")[2].rpartition(":")[0]
    return WHERE.is_jax_file(filename) and not hasattr(call.fun, "lower")


def call_signature(call: _jax_compat.JitCall) -> CallSignature:
    """What the compile log compares: the function, argument types, static values, config."""
    defined_at, user_code = WHERE.defined_at(call.defined_at)
    eager = not user_code and _is_eager(call)
    fun = call.fun
    if not user_code and call.fun is not None and call.static_argnums:
        inner = _wrapped_user_function(call)
        if inner is not None:  # the user's function, behind a library's jit
            fun, user_code = inner, True
            defined_at = WHERE.name(inner.__code__.co_filename, inner.__code__.co_firstlineno)
    statics: dict[str, str] = {}
    if call.static_argnums and call.fun is not None:
        try:
            params = list(inspect.signature(call.fun).parameters)
        except (TypeError, ValueError):  # a callable without a signature
            params = []
        for i in call.static_argnums:
            if 0 <= i < len(call.args):
                statics[params[i] if i < len(params) else f"arg {i}"] = short_value(call.args[i])
    for n in call.static_argnames:
        if n in call.kwargs:
            statics[n] = short_value(call.kwargs[n])
    config = tuple((n, str(getattr(jax.config, n, None))) for n in CONFIG_NAMES)
    return CallSignature.of(
        fun,
        defined_at=defined_at,
        user_code=user_code,
        args=tuple(zip(_unique(call.arg_names), map(short_type, call.avals), strict=True)),
        statics=tuple(statics.items()),
        config=config,
        eager=eager and not user_code,
        code=code_identity(fun, defined_at) if anonymous(getattr(fun, "__name__", "")) else "",
    )


# --------------------------------------------------------------------------- the listener


class _Pending:
    __slots__ = ("call", "lower_s", "program", "trace_s")

    def __init__(self) -> None:
        self.trace_s = 0.0
        self.lower_s = 0.0
        self.call: CallSignature | None = None
        self.program: Any = None  # the traced jaxpr of a user's function (CompileLog.programs)


class _ThreadState(threading.local):
    """What one thread has heard about the compilations in flight on it."""

    def __init__(self) -> None:  # runs once in each thread that touches it
        self.pending: dict[str, _Pending] = {}
        self.cache: str | None = None  # the persistent cache's answer, since the last compile


class _Listener:
    """Collects the pieces of each compilation per thread and records it when it ends."""

    def __init__(self) -> None:
        self.logs: tuple[CompileLog, ...] = ()
        self.local = _ThreadState()

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
            call = None if in_jaxlab_work() else _jax_compat.jit_call_being_traced()
            entry.call = call_signature(call) if call is not None else None
            mine = entry.call is not None and entry.call.user_code and not entry.call.eager
            entry.program = _jax_compat.jaxpr_being_traced() if mine else None
        elif event == LOWER:
            entry = self._pending(name)
            entry.lower_s = duration_secs
            if entry.call is None and not in_jaxlab_work():
                # traced under a transformation: JAX reported no trace, read the lowering
                call = _jax_compat.jaxpr_being_lowered()
                entry.call = call_signature(call) if call is not None else None
        elif event == COMPILE:
            self._finish(name, duration_secs)

    def on_jaxlab_time(self, seconds: float) -> None:
        for log in self.logs:
            log.record_jaxlab_time(seconds)

    def on_event(self, event: str, **kwargs: str | int) -> None:
        if event == CACHE_REQUEST:
            self.local.cache = "miss"
        elif event == CACHE_HIT:
            self.local.cache = "hit"

    def _finish(self, name: str, compile_s: float) -> None:
        state = self.local
        entry = state.pending.pop(name, None) or _Pending()
        cache, state.cache = state.cache, None
        if in_jaxlab_work():
            for log in self.logs:
                log.record_jaxlab_work(entry.trace_s + entry.lower_s + compile_s)
            return
        told = _TOLD.explanation
        text, changes = (told[1], told[2]) if told is not None and told[0] == name else (None, ())
        if cache is None or not jax.config.jax_compilation_cache_dir:
            cache = "off"
        where, filename, lineno = WHERE.find()
        call = entry.call
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
                signature=call.types if call is not None else (),
                explanation=text,
                changes=changes,
                call=call,
                program=entry.program,
            )


# --------------------------------------------------------------------------- start / stop


class _Session:
    """The listeners registered with ``jax.monitoring``, and how to take them off."""

    def __init__(self) -> None:
        self.listener = _Listener()
        monitoring.register_event_duration_secs_listener(self.listener.on_duration)
        monitoring.register_event_listener(self.listener.on_event)
        self._stop_timing = on_jaxlab_time(self.listener.on_jaxlab_time)

    def stop(self) -> None:
        monitoring.unregister_event_duration_listener(self.listener.on_duration)
        monitoring.unregister_event_listener(self.listener.on_event)
        self._stop_timing()


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
