"""The only place that touches private JAX or papers over version differences.

Each entry is guarded: it checks that what it reaches for exists and falls back to
something public (or to "unknown") when a JAX release moves it. tests/test_jax_compat.py
exercises every entry on the installed JAX.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

# --------------------------------------------------------------------------- compile log
# Why a function compiled is read from the call JAX is tracing for ``jit``: the frame of
# ``jax._src.pjit._trace_for_jit`` (JAX 0.4.36 to 0.12) holds the function object, its
# arguments, the static argument numbers and names, the flat argument types and their
# names. It is found by name from inside JAX's trace-duration listener call and only read;
# a JAX that renames it or its locals yields None, and the log says it cannot tell.
_JIT_TRACE_FRAME = ("_trace_for_jit", "pjit.py")
_JIT_TRACE_LOCALS = ("fun", "ji", "dbg", "avals", "args", "kwargs")
_JIT_TRACE_DEPTH = 12  # frames between the listener and the tracing function (6 today)


class JitCall(NamedTuple):
    """The call ``jit`` is tracing: what the compile log compares between compilations."""

    fun: Any  # the Python function object being traced
    args: tuple[Any, ...]  # positional arguments, static ones included
    kwargs: dict[str, Any]
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    arg_names: tuple[str, ...]  # one per traced (flat) argument: "x", "params['w']"
    avals: tuple[Any, ...]  # the traced arguments' abstract values
    defined_at: str  # JAX's "f at /path/file.py:12", or ""


def _caller_locals(where: tuple[str, str], names: Sequence[str]) -> dict[str, Any] | None:
    """The locals of the nearest calling frame of function ``where[0]`` in a file ending
    ``where[1]`` (within ``_JIT_TRACE_DEPTH`` frames), if it has every one of ``names``."""
    import sys

    frame = sys._getframe(2)
    for _ in range(_JIT_TRACE_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == where[0] and code.co_filename.endswith(where[1]):
            found = frame.f_locals
            return dict(found) if all(name in found for name in names) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def jit_call_being_traced() -> JitCall | None:
    """The call ``jit`` is tracing right now (from a monitoring listener), or None."""
    found = _caller_locals(_JIT_TRACE_FRAME, _JIT_TRACE_LOCALS)
    if found is None:
        return None
    try:
        ji, dbg = found["ji"], found["dbg"]
        avals = tuple(found["avals"])
        names = tuple(getattr(dbg, "arg_names", None) or ())
        if len(names) != len(avals):
            names = tuple(f"arg {i}" for i in range(len(avals)))
        return JitCall(
            fun=found["fun"],
            args=tuple(found["args"]),
            kwargs=dict(found["kwargs"] or {}),
            static_argnums=tuple(ji.static_argnums),
            static_argnames=tuple(ji.static_argnames),
            arg_names=names,
            avals=avals,
            defined_at=str(getattr(dbg, "func_src_info", "") or ""),
        )
    except (AttributeError, TypeError):
        return None


def jaxpr_being_traced() -> Any | None:
    """The program ``jit`` has just traced (from the trace-duration listener, which JAX
    calls once ``_trace_for_jit`` holds it in its local ``jaxpr``) as a ``ClosedJaxpr``,
    or None: a JAX that renames the frame or the local, or holds something else there."""
    found = _caller_locals(_JIT_TRACE_FRAME, ("jaxpr",))
    if found is None:
        return None
    from jax.extend import core as jcore

    program = found["jaxpr"]
    if isinstance(program, jcore.ClosedJaxpr):  # JAX 0.12: one class for both
        return program
    if isinstance(program, jcore.Jaxpr) and not program.constvars:
        return jcore.ClosedJaxpr(program, [])
    return None


# A compilation whose trace JAX did not report (a jit reached under grad or vmap, an eager
# operation under a transformation) is read when it is lowered instead: the frame of
# ``jax._src.interpreters.pxla._cached_lowering_to_hlo`` holds the program's argument
# types and names and its debug info (no function object, no static values).
_LOWERING_FRAME = ("_cached_lowering_to_hlo", "pxla.py")
_LOWERING_LOCALS = ("closed_jaxpr", "in_avals", "arg_names", "num_const_args")


def jaxpr_being_lowered() -> JitCall | None:
    """The program JAX is lowering right now (from a monitoring listener), or None."""
    found = _caller_locals(_LOWERING_FRAME, _LOWERING_LOCALS)
    if found is None:
        return None
    try:
        skip = int(found["num_const_args"])
        avals = tuple(found["in_avals"])[skip:]
        names = tuple(found["arg_names"])[skip:]
        if len(names) != len(avals):
            names = tuple(f"arg {i}" for i in range(len(avals)))
        info = getattr(found["closed_jaxpr"].jaxpr, "debug_info", None)
        return JitCall(
            fun=None,
            args=(),
            kwargs={},
            static_argnums=(),
            static_argnames=(),
            arg_names=names,
            avals=avals,
            defined_at=str(getattr(info, "func_src_info", "") or ""),
        )
    except (AttributeError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- jit report
def cost_analysis(compiled: object) -> dict[str, float]:
    """XLA's cost analysis as one dict (older JAX returned a list with one dict per
    device program, or None when the backend has none)."""
    analysis = getattr(compiled, "cost_analysis", None)
    try:
        result = analysis() if callable(analysis) else None
    except Exception:  # the backend has no cost model (some plugins raise)
        return {}
    if isinstance(result, list | tuple):
        result = result[0] if result else None
    return {str(k): float(v) for k, v in result.items()} if isinstance(result, dict) else {}


def executable_fingerprint(compiled: object) -> bytes | None:
    """The XLA executable's fingerprint of a ``jax.stages.Compiled`` (the same program
    compiled again has the same one), or None where this JAX or backend does not give it
    (``Compiled`` keeps its executable privately)."""
    try:
        fingerprint = compiled._executable.xla_executable.fingerprint  # type: ignore[attr-defined]
    except Exception:
        return None
    return fingerprint if isinstance(fingerprint, bytes) and fingerprint else None


# --------------------------------------------------------------------------- autodiff
# (jaxpr_eval: evaluating one equation outside JAX's own interpreter)


def bind_equation(eqn: Any, invals: Sequence[Any]) -> list[Any]:
    """Apply one jaxpr equation to concrete (or traced) inputs; always a list of results.

    ``Primitive.get_bind_params`` is public, but its result changed shape: JAX < 0.4.36
    returned ``(subfuns, params)``, later releases one dict with ``subfuns`` inside.
    """
    prim = eqn.primitive
    bind_params = prim.get_bind_params(eqn.params)
    if isinstance(bind_params, tuple):  # older JAX: (subfuns, params)
        subfuns, params = bind_params
        out = prim.bind(*subfuns, *invals, **params)
    else:
        out = prim.bind(*invals, **bind_params)
    return list(out) if prim.multiple_results else [out]


# --------------------------------------------------------------------------- errors (explain)
# When an error surfaces only after a transformation (a NaN in a backward pass, a key
# reused under jit), JAX chains the user's stack from *before* the transformation as the
# exception's ``__cause__``: an instance of the private
# ``jax._src.source_info_util.JaxStackTraceBeforeTransformation``. It is recognised by
# name, never imported, so a JAX that renames or drops it just yields None.
_STACK_BEFORE_TRANSFORMATION = "JaxStackTraceBeforeTransformation"


def transformation_source_traceback(exc: BaseException) -> Any:
    """The traceback of the operation's source before JAX transformed it, or None."""
    cause = exc.__cause__
    if cause is not None and type(cause).__name__ == _STACK_BEFORE_TRANSFORMATION:
        return cause.__traceback__
    return None


# XLA's runtime error was ``jaxlib.xla_extension.XlaRuntimeError`` before it became the
# public ``jax.errors.JaxRuntimeError``; both are matched by name, neither imported.
_RUNTIME_ERROR_NAMES = frozenset({"JaxRuntimeError", "XlaRuntimeError"})


def is_xla_runtime_error(exc: BaseException) -> bool:
    """Whether ``exc`` is XLA's runtime error (any JAX release)."""
    return any(cls.__name__ in _RUNTIME_ERROR_NAMES for cls in type(exc).__mro__)


# --------------------------------------------------------------------------- timing (%%profile)
# Implicit device-to-host transfers (float(x), if x:, np.asarray(x)) are observed by
# wrapping the conversion methods of jax.Array's concrete class (jaxlib's ArrayImpl) for
# the duration of a profile; jax.transfer_guard("log") is silent on CPU, where the host
# already holds the data. A jaxlib whose array class refuses new attributes yields None.


def hook_array_conversions(
    names: Sequence[str], wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None] | None:
    """Replace each named method of the array class by ``wrap(name, method)``; returns the
    undo, or None when the class cannot be observed (nothing is changed then)."""
    import jax
    import numpy as np

    cls = type(jax.device_put(np.zeros((), np.float32)))
    if not (isinstance(cls, type) and issubclass(cls, jax.Array)):
        return None
    originals = {n: cls.__dict__[n] for n in names if callable(cls.__dict__.get(n))}
    done: list[str] = []
    try:
        for name, method in originals.items():
            setattr(cls, name, wrap(name, method))
            done.append(name)
    except (TypeError, AttributeError):  # an immutable (C) type
        for name in done:
            setattr(cls, name, originals[name])
        return None

    def undo() -> None:
        for name in done:
            setattr(cls, name, originals[name])

    return undo


# --------------------------------------------------------------------------- key lineage
# Reading a typed key's data eagerly through ``jax.random.key_data`` dispatches a
# primitive (~75 µs on a busy CPU); the concrete ``PRNGKeyArray`` already holds it as the
# private ``_base_array``, whose host copy jax caches. Checked by attribute, falling back
# to the public call.
_KEY_BASE_ARRAY = "_base_array"


def key_data_now(key: Any) -> Any:
    """The key data of a concrete typed key as a NumPy array (no dispatch when possible)."""
    import numpy as np

    return np.asarray(key_base_now(key))


def key_base_now(key: Any) -> Any:
    """The array of a concrete typed key's data: the key's own when it holds one, else
    ``jax.random.key_data``'s (a dispatch)."""
    import jax

    base = getattr(key, _KEY_BASE_ARRAY, None)
    if base is not None and not isinstance(base, jax.core.Tracer):
        return base
    return jax.random.key_data(key)


def key_bases_of(keys: Sequence[Any]) -> list[Any]:
    """Each concrete typed key array's own array of its data, or None (ask
    ``key_base_now``): for arrays known to be concrete (eager results), read in batches."""
    return [getattr(key, _KEY_BASE_ARRAY, None) for key in keys]


# Which implementation a typed key has is asked on every tracked draw: ``key.dtype`` makes
# a new key type and its name each time (about 1.5 µs in a busy loop). The concrete key
# array holds the implementation object itself as the private ``_impl``; None when it
# does not (the caller then asks ``jax.random.key_impl``).
_KEY_IMPL = "_impl"


def key_impl_now(key: Any) -> Any:
    """The object that stands for a concrete typed key's implementation, or None."""
    return getattr(key, _KEY_IMPL, None)


# Which keys a split made is known by object when the user unpacks its result
# (``key, sub = jax.random.split(key)``): the concrete typed key class (JAX's private
# ``PRNGKeyArray``, found by name among ``jax.Array``'s subclasses, nothing made) makes
# them in its ``__iter__``. A JAX without that class or method yields None, and the keys
# are then known by their data, read on each call (slower, as correct).
_KEY_ARRAY_CLASS = "PRNGKeyArray"


def watch_key_unpacking(
    watch: Callable[[Any, Any], Any], compiled: Callable[[Any], Any] | None = None
) -> Callable[[], None] | None:
    """While hooked, iterating a concrete typed key array returns ``watch(array, keys)``,
    ``keys`` being JAX's own iterator of its keys (``watch`` returns an iterator of the
    same keys); returns the undo, or None when this JAX cannot be watched. ``compiled``,
    where given, makes the class's ``__iter__`` from JAX's own instead (the same watch,
    compiled: ``jaxlab.keys.hot``)."""
    import jax

    cls = next((c for c in jax.Array.__subclasses__() if c.__name__ == _KEY_ARRAY_CLASS), None)
    original = cls.__dict__.get("__iter__") if cls is not None else None
    if not callable(original):
        return None

    def watched(self: Any) -> Any:
        __tracebackhide__ = True
        return watch(self, original(self))

    watched.__wrapped__ = original  # type: ignore[attr-defined]
    watched.__doc__ = original.__doc__
    __iter__ = watched if compiled is None else compiled(original)
    try:
        setattr(cls, "__iter__", __iter__)  # noqa: B010 (a method replaced, for a while)
    except (TypeError, AttributeError):  # an immutable (C) type
        return None

    def undo() -> None:
        if cls.__dict__.get("__iter__") is __iter__:
            setattr(cls, "__iter__", original)  # noqa: B010

    return undo


# A loop body (``scan``, ``while_loop``, ``fori_loop``, ``lax.map``) is traced once and
# runs many times: a callback there would run on every iteration. Whether JAX is tracing
# one now is read from the Python stack: a frame of JAX's control-flow loop module. A
# JAX that moves that module makes this answer False (keys are then recorded by callback
# inside loops too: slower, still correct).
_LOOP_MODULE = ("lax", "control_flow", "loops.py")
_LOOP_DEPTH = 200


def tracing_loop_body() -> bool:
    """Whether the caller runs while JAX traces the body of a loop primitive."""
    import os
    import sys

    tail = os.sep + os.sep.join(_LOOP_MODULE)
    frame = sys._getframe(1)
    for _ in range(_LOOP_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(tail):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def scan_counts(params: dict[str, Any]) -> tuple[int, int]:
    """``(consts, carry)`` of a ``scan`` equation: JAX <= 0.10 names them ``num_consts``
    and ``num_carry``; 0.12 groups its inputs in ``ft_in`` (consts, carry, xs)."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    groups = params.get("ft_in")  # a private flat tree (FTTuple) of three groups
    try:
        consts, carry, _ = groups.unpack()  # type: ignore[union-attr]
        return len(list(consts.vals)), len(list(carry.vals))
    except (AttributeError, TypeError, ValueError) as e:
        raise NotImplementedError("this JAX's scan equation is not understood") from e


# --------------------------------------------------------------------------- call frames
# The graph groups equations by the user's function calls: an equation's traceback (kept
# on its source_info by JAX, read through jaxlib's Traceback.frames) gives the calls that
# made it. Guarded: a release without tracebacks gives no frames, and no grouping by call.
class Frame(NamedTuple):
    file: str
    function: str
    line: int


def equation_frames(source_info: Any) -> tuple[Frame, ...]:
    """The frames of the Python stack that made an equation, outermost first ((): none)."""
    traceback = getattr(source_info, "traceback", None)
    if traceback is None:
        return ()
    try:
        frames = traceback.frames
        return tuple(Frame(f.file_name, f.function_name, f.line_num) for f in reversed(frames))
    except (AttributeError, TypeError):
        return ()


# --------------------------------------------------------------------------- gradient check
# A host callback that raises (equinox's error_if, a solver that does not converge) is
# logged by JAX's callback module with its traceback ("jax.pure_callback failed") before
# the error reaches the caller. %grad --check probes points near the user's and refuses a
# step where the function raises; those refusals are its own, so their log lines are held
# back while it probes. The logger is JAX's module logger by name; a JAX that logs elsewhere
# only makes the notes visible again.
CALLBACK_LOGGER = "jax._src.callback"
_CALLBACK_FAILED = "failed"


def _not_a_callback_failure(record: Any) -> bool:
    """A ``logging`` filter: False for JAX's "callback failed" records."""
    return _CALLBACK_FAILED not in str(getattr(record, "msg", ""))


@contextlib.contextmanager
def callbacks_failing_quietly() -> Iterator[None]:
    """JAX's "jax.pure_callback failed" log records dropped inside the block."""
    logger = logging.getLogger(CALLBACK_LOGGER)
    logger.addFilter(_not_a_callback_failure)
    try:
        yield
    finally:
        logger.removeFilter(_not_a_callback_failure)


# --------------------------------------------------------------------------- interrupts
# JAX 0.12's ``Primitive.bind`` (``jax._src.core``) empties its trace context (sets it to
# None) one line before its ``try``: an interrupt landing between the two leaves it None,
# and every later JAX call of the session fails with "'NoneType' object has no attribute
# 'process_primitive'" (about one interrupt in 150 of a tracked runaway loop on a busy
# machine). JAX 0.10 sets it to the top-level trace there instead: nothing to mend.
def mend_trace_state() -> bool:
    """Put JAX's trace context back at the top level if an interrupt left it empty;
    whether it did. Called between cells only, where nothing is being traced."""
    try:
        from jax._src import core

        if core.trace_ctx.trace is not None:
            return False
        core.reset_trace_state()  # JAX's own reset (its tests' way back to the top level)
    except Exception:  # a JAX that moved these: nothing mended, as without jaxlab
        return False
    return True
