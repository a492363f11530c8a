"""The only place that touches private JAX or papers over version differences.

Each entry is guarded: it checks that what it reaches for exists and falls back to
something public (or to "unknown") when a JAX release moves it. tests/test_jax_compat.py
exercises every entry on the installed JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# --------------------------------------------------------------------------- compile log
# JAX logs its cache-miss explanations, the argument types of each lowering and (with
# the persistent cache on) its cache misses from private modules' loggers; their names
# move when JAX reorganises its source. The flag says whether their DEBUG records are
# needed (the argument types are logged at DEBUG).
_COMPILE_MESSAGE_LOGGERS = {
    "jax._src.interpreters.partial_eval": False,
    "jax._src.interpreters.pxla": True,
    "jax._src.compiler": False,
    "jax._src.compilation_cache": False,
}


def compile_message_loggers() -> dict[str, bool]:
    """Logger names that carry ``TRACING CACHE MISS``, ``Compiling ... with global
    shapes and types`` and the persistent cache's misses, each with whether its DEBUG
    records are wanted; falls back to the ``jax`` logger (explanations only) when the
    modules are gone."""
    import sys

    import jax  # noqa: F401  (imports the modules whose loggers we look for)

    found = {n: debug for n, debug in _COMPILE_MESSAGE_LOGGERS.items() if n in sys.modules}
    return found if len(found) == len(_COMPILE_MESSAGE_LOGGERS) else {"jax": False}


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
    import jax
    import numpy as np

    base = getattr(key, _KEY_BASE_ARRAY, None)
    if base is not None and not isinstance(base, jax.core.Tracer):
        return np.asarray(base)
    return np.asarray(jax.random.key_data(key))


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
