"""``jax.jit`` while key tracking is on: compiled functions that note their keys per call.

::

    track_keys()
    step = jax.jit(step)      # a TrackedJit: calls, .lower, .trace, ... as jax.jit's
    step(key)                 # notes the key it was given and the keys it returned

The function is traced with its template on the tracing stack, so the ``jax.random``
wrappers write what it does with keys into the template instead of compiling a callback
into it; each call then costs one flatten of its arguments and result (no callback, no
copy to the host). See :mod:`jaxlab.keys.calls` for the replay.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax

from .calls import TRACING, Call, Template, is_key_like, key_leaves

_MEMO: weakref.WeakKeyDictionary[Any, dict[Any, TrackedJit]] = weakref.WeakKeyDictionary()


class _Expecting(threading.local):
    call: TrackedJit | None = None  # the function a direct call is about to trace


_EXPECTING = _Expecting()


class TrackedJit:
    """``jax.jit(fun, **options)`` that tells the key lineage about each call."""

    def __init__(
        self,
        fun: Callable[..., Any],
        options: dict[str, Any],
        original_jit: Callable[..., Any],
        record: Callable[[Call], None],
        is_on: Callable[[], bool],
        site: Callable[[], Any],
    ) -> None:
        self._fun = fun
        self._record, self._is_on, self._site = record, is_on, site
        self.template = Template(getattr(fun, "__name__", type(fun).__name__))
        self.traces = 0

        @functools.wraps(fun)  # JAX names the function (and its arguments) after `fun`
        def traced(*args: Any, **kwargs: Any) -> Any:
            return _trace(self, fun, *args, **kwargs)

        self._jitted = original_jit(traced, **options)
        functools.update_wrapper(self, fun)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if (
            not self._is_on()
            or TRACING.stack
            or any(isinstance(x, jax.core.Tracer) for x in leaves)
        ):
            return self._jitted(*args, **kwargs)  # inside another trace: that one records
        _EXPECTING.call = self
        traces = self.traces
        try:
            out = self._jitted(*args, **kwargs)
        finally:
            _EXPECTING.call = None
        template = self.template
        if self.traces != traces:  # traced now: what its jaxpr says about reuse
            template.reuses = _static_reuses(self._jitted, args, kwargs)
        if template.ops or template.outputs:
            given = tuple((i, x) for i, x in enumerate(leaves) if is_key_like(x, legacy=True))
            returned = key_leaves(out, legacy=template.derives)
            self._record(Call(template, self._site(), given, returned))
        return out

    def __getattr__(self, name: str) -> Any:  # lower, trace, eval_shape, clear_cache, ...
        return getattr(self._jitted, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a jitted method binds
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<TrackedJit of {self.template.name}>"


def _trace(owner: TrackedJit, fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The function JAX traces: ``fun``, with its template on the tracing stack."""
    if _EXPECTING.call is not owner:  # traced for a transformation (vmap of jit, ...)
        return fun(*args, **kwargs)
    _EXPECTING.call = None
    owner.traces += 1
    registry: dict[int, tuple[Any, tuple[str, int]]] = {}
    for i, x in enumerate(jax.tree_util.tree_leaves((args, kwargs))):
        if is_key_like(x, legacy=True):
            registry[id(x)] = (x, ("arg", i))
    TRACING.stack.append((owner.template, registry))
    try:
        out = fun(*args, **kwargs)
    finally:
        TRACING.stack.pop()
    for i, x in enumerate(jax.tree_util.tree_leaves(out)):
        seen = registry.get(id(x))
        if seen is not None and seen[0] is x:
            owner.template.outputs[i] = seen[1]
    return out


def make_jit(
    original_jit: Callable[..., Any],
    record: Callable[[Call], None],
    is_on: Callable[[], bool],
    site: Callable[[], Any],
) -> Callable[..., Any]:
    """The ``jax.jit`` installed while tracking is on."""

    @functools.wraps(original_jit)
    def jit(fun: Any = None, /, **options: Any) -> Any:
        if fun is None:  # @jax.jit(static_argnums=...)
            return lambda f: jit(f, **options)
        try:  # jax.jit(f, ...) again shares one trace cache, as JAX's own does
            per_fun = _MEMO.setdefault(fun, {})
            key = tuple(sorted(options.items()))
            found = per_fun.get(key)
            if found is None:
                found = per_fun[key] = TrackedJit(fun, options, original_jit, record, is_on, site)
            return found
        except TypeError:  # not weak-referenceable, or options that are not hashable
            return TrackedJit(fun, options, original_jit, record, is_on, site)

    return jit


def _static_reuses(jitted: Any, args: Any, kwargs: Any) -> list[Any]:
    """Reuses in the jaxpr JAX just traced (read from its cache: nothing is traced again)."""
    from ..compile.capture import jaxlab_work
    from .flow import flow_of_jaxpr
    from .track import paused

    try:
        with paused(), jaxlab_work():
            closed = jitted.trace(*args, **kwargs).jaxpr
    except Exception:  # an older JAX without .trace: the wrappers' view stands alone
        return []
    return list(flow_of_jaxpr(closed, "").reuses)
