"""``jax.jit`` while key tracking is on: compiled functions that note their keys per call.

::

    track_keys()
    step = jax.jit(step)      # a TrackedJit: calls, .lower, .trace, ... as jax.jit's
    step(key)                 # notes the key it was given and the keys it returned

The function is traced with its template on the tracing stack, so the ``jax.random``
wrappers write what it does with keys into the template instead of compiling a callback
into it; each call then costs one flatten of its arguments and result (no callback, no
copy to the host). See :mod:`jaxlab.keys.calls` for the replay. A trace made by
``.trace``/``.lower``, or by a call inside jaxlab's own work (``session.work``: such a call
is not recorded), writes the template too: JAX's cache keeps that trace for the user's
later calls, which are recorded from it.

Lifetime. ``jax.jit(f)`` twice shares one trace cache, as JAX's own does: the compiled
function (a :class:`_Shared`) is memoised per ``f``, weakly. The memo's value must not
hold ``f`` (a weak-keyed dict whose values hold their keys keeps every function and its
compiled code alive for the session), so what JAX traces holds ``f`` by a weak reference
and what can trace it keeps ``f`` alive: the :class:`TrackedJit` and every method of JAX's
compiled function it hands out (``jax.jit(lambda x: x).lower(x)`` drops the jitted
function before JAX traces; its ``.lower`` holds it). What those methods return
(``Traced``, ``Lowered``, ``Compiled``) never traces ``f`` again.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax

from .calls import TRACING, Call, Template, is_key_like, key_leaves
from .flow import flow_of_jaxpr
from .switch import paused

# f -> {options: its compiled function}; nothing in a value refers to f strongly
_MEMO: weakref.WeakKeyDictionary[Any, dict[Any, _Shared]] = weakref.WeakKeyDictionary()
_ASSIGNED = ("__module__", "__name__", "__qualname__", "__doc__")
_TRACING_METHODS = ("trace", "lower")  # methods of JAX's compiled function that trace f


class _Expecting(threading.local):
    call: _Shared | None = None  # the function a direct call is about to trace


_EXPECTING = _Expecting()


class _Shared:
    """What every ``jax.jit(f, **options)`` of one ``f`` shares: JAX's compiled function
    and the template its traces wrote. Holds ``f`` weakly (see the module docstring)."""

    def __init__(self, fun: Callable[..., Any], options: dict[str, Any], original_jit: Any):
        self.template = Template(getattr(fun, "__name__", type(fun).__name__))
        self.traces = 0
        try:
            ref: Callable[[], Any] = weakref.ref(fun)
            wrapped: Any = weakref.proxy(fun)
        except TypeError:  # not weak-referenceable (then not memoised either): held
            ref, wrapped = functools.partial(_same, fun), fun
        shared = weakref.ref(self)

        def traced(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return _trace(shared(), ref(), args, kwargs)

        for name in _ASSIGNED:  # JAX names the function (and its arguments) after `fun`
            with contextlib.suppress(AttributeError, TypeError):
                setattr(traced, name, getattr(fun, name))
        # JAX reads the user's source line (its errors name it) through __wrapped__
        traced.__wrapped__ = wrapped  # type: ignore[attr-defined]
        # argument names for static_argnames, without a reference to `fun`
        with contextlib.suppress(TypeError, ValueError):
            traced.__signature__ = inspect.signature(fun)  # type: ignore[attr-defined]
        self.jitted = original_jit(traced, **options)


def _same(fun: Any) -> Any:
    return fun


class TrackedJit:
    """``jax.jit(fun, **options)`` that tells the key lineage about each call."""

    def __init__(
        self,
        fun: Callable[..., Any],
        shared: _Shared,
        record: Callable[[Call], None],
        is_on: Callable[[], bool],
        writes: Callable[[], bool],
        site: Callable[[], Any],
        warn: Callable[[list[Any]], None],
    ) -> None:
        self._fun = fun  # alive as long as the user holds this
        self._shared = shared
        self._jitted = shared.jitted
        self._record, self._is_on, self._writes = record, is_on, writes
        self._site, self._warn = site, warn
        functools.update_wrapper(self, fun)

    @property
    def template(self) -> Template:
        return self._shared.template

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if not self._writes() or TRACING.stack:
            return self._jitted(*args, **kwargs)  # inside another trace: that one records
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self._jitted(*args, **kwargs)
        out = self.traced_by(self._jitted, args, kwargs)
        if not self._is_on():  # jaxlab's own call (a timing loop): its template, no record
            return out
        template = self._shared.template
        if template.ops or template.outputs:
            given = tuple((i, x) for i, x in enumerate(leaves) if is_key_like(x, legacy=True))
            returned = key_leaves(out, legacy=template.derives)
            self._record(Call(template, self._site(), given, returned))
        return out

    def traced_by(self, method: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` (the call, ``.trace``, ``.lower``): a trace it makes
        writes the template, which JAX's cache then shares with every later call."""
        __tracebackhide__ = True
        shared = self._shared
        _EXPECTING.call = shared
        traces = shared.traces
        try:
            out = method(*args, **kwargs)
        finally:
            _EXPECTING.call = None
        if shared.traces != traces:  # traced now: what its jaxpr says about reuse
            shared.template.reuses = _static_reuses(self._jitted, args, kwargs, self._site())
            # said after the call, once per pair of lines; a trace in jaxlab's own work (a
            # program of jaxlab's may call the user's function more than once) says
            # nothing: the user's first call of this function records them (replay)
            if shared.template.reuses and self._is_on():
                self._warn(shared.template.reuses)
        return out

    def __getattr__(self, name: str) -> Any:  # lower, trace, eval_shape, clear_cache, ...
        found = getattr(self._jitted, name)
        return _Held(found, self, name in _TRACING_METHODS) if callable(found) else found

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a jitted method binds
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<TrackedJit of {self.template.name}>"


class _Held:
    """A method of JAX's compiled function (``lower``, ``trace``, ...) that holds the
    :class:`TrackedJit` it came from, and so the user's function, while it lives."""

    __slots__ = ("_method", "_owner", "_traces")

    def __init__(self, method: Callable[..., Any], owner: TrackedJit, traces: bool) -> None:
        self._method, self._owner, self._traces = method, owner, traces

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        owner = self._owner
        if not self._traces or not owner._writes() or TRACING.stack:
            return self._method(*args, **kwargs)
        return owner.traced_by(self._method, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._method, name)

    def __repr__(self) -> str:
        return repr(self._method)


def _trace(shared: _Shared | None, fun: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What JAX traces: ``fun``, with its template on the tracing stack. Positional
    parameters only, so no keyword the user's function takes can collide."""
    __tracebackhide__ = True
    if fun is None:  # (what can trace it holds it: a TrackedJit, the methods it hands out)
        raise ReferenceError("jaxlab: the function given to jax.jit was freed before JAX traced it")
    if shared is None or _EXPECTING.call is not shared:  # traced for vmap of jit, ...
        return fun(*args, **kwargs)
    _EXPECTING.call = None
    shared.traces += 1
    registry: dict[int, tuple[Any, tuple[str, int]]] = {}
    for i, x in enumerate(jax.tree_util.tree_leaves((args, kwargs))):
        if is_key_like(x, legacy=True):
            registry[id(x)] = (x, ("arg", i))
    TRACING.stack.append((shared.template, registry))
    try:
        out = fun(*args, **kwargs)
    finally:
        TRACING.stack.pop()
    for i, x in enumerate(jax.tree_util.tree_leaves(out)):
        seen = registry.get(id(x))
        if seen is not None and seen[0] is x:
            shared.template.outputs[i] = seen[1]
    return out


def make_jit(
    original_jit: Callable[..., Any],
    record: Callable[[Call], None],
    is_on: Callable[[], bool],
    writes: Callable[[], bool],
    site: Callable[[], Any],
    warn: Callable[[list[Any]], None],
) -> Callable[..., Any]:
    """The ``jax.jit`` installed while tracking is on: its calls go to ``record``, while
    ``is_on()``, from ``site()``; while ``writes()``, a trace writes the function's
    template (in jaxlab's own work too: JAX's cache keeps that trace for the user's calls);
    the reuses a new trace's jaxpr shows go to ``warn``."""

    @functools.wraps(original_jit)
    def jit(fun: Any = None, /, **options: Any) -> Any:
        __tracebackhide__ = True
        if fun is None:  # @jax.jit(static_argnums=...)
            return lambda f: jit(f, **options)
        if not callable(fun):  # JAX's own error, word for word
            return original_jit(fun, **options)
        try:  # jax.jit(f, ...) again shares one trace cache, as JAX's own does
            per_fun = _MEMO.setdefault(fun, {})
            key = tuple(sorted(options.items()))
            shared = per_fun.get(key)
            if shared is None:
                shared = per_fun[key] = _Shared(fun, options, original_jit)
        except TypeError:  # not weak-referenceable, or options that are not hashable
            shared = _Shared(fun, options, original_jit)
        return TrackedJit(fun, shared, record, is_on, writes, site, warn)

    return jit


def _static_reuses(jitted: Any, args: Any, kwargs: Any, site: Any) -> list[Any]:
    """Reuses in the jaxpr JAX just traced (read from its cache: nothing is traced again)."""
    from ..session.work import jaxlab_work

    try:
        with paused(), jaxlab_work():
            closed = jitted.trace(*args, **kwargs).jaxpr
    except Exception:  # an older JAX without .trace: the wrappers' view stands alone
        return []
    return list(flow_of_jaxpr(closed, "", site).reuses)
