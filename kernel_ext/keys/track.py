"""Runtime key tracking: instrumented ``jax.random`` functions, switched on and off.

::

    with jaxlab.track_keys():            # or track_keys() alone, or %keys on
        k1, k2 = jax.random.split(jax.random.key(0))
        jax.random.normal(k1, (3,))

While tracking is on, ``jax.random.key``/``PRNGKey``/``wrap_key_data`` (create),
``split``/``fold_in``/``clone`` (derive) and every sampler (consume) are wrappers that
call JAX's own function with the same arguments, so results are bit-identical, and then
record what happened in :func:`~jaxlab.keys.record.key_lineage`:

* eagerly, from the key data itself (a reuse warns at once, naming both lines);
* under ``jit``/``vmap`` (the key is a tracer), by one ``jax.debug.callback`` that carries
  the key data, placed while tracing, so every call of the compiled function records;
* inside a loop body (``scan``, ``while_loop``, ``fori_loop``), once, while tracing: a
  callback there would run on every iteration (the benchmark measured 33x), so the body's
  keys are one node per call site, and a reuse inside one body is seen by tracer identity.

Switching off restores JAX's functions, and code traced with a callback in it is traced
again, without (JAX's public ``jax.clear_caches``: every function compiles again on its
next call, as after a restart; only when a callback was placed). Code that bound a
function before tracking began
(``from jax.random import split``) is not seen; functions compiled before tracking began
keep their compiled program until they retrace, and the keys they return appear as roots
of unknown origin.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from .._jax_compat import key_data_now, key_impl_now, tracing_loop_body, watch_key_unpacking
from .._warning import JaxlabWarning
from ..session.work import WORK_ANYWHERE as _ANYWHERE
from ..session.work import WORK_DEPTH as _WORK
from . import hot
from .calls import TRACING, TemplateOp, dtype_name, is_typed, rows_of
from .identity import SAME_AS_BEFORE, forget_uses, used_before
from .jit import make_jit
from .record import KeyLineage, KeyReuse, key_lineage
from .site import SPOTS, Site, user_site
from .store import _AVAL
from .switch import CREATORS as CREATORS
from .switch import DERIVERS as DERIVERS
from .switch import SAMPLERS as SAMPLERS
from .switch import SWITCH as _SWITCH
from .switch import paused as paused

_TRACER = jax.core.Tracer
_ARRAYS = (jax.Array, np.ndarray)  # what can be a key (a list, a module, ... cannot)
_JIT = "<jax.jit>"  # jax.jit's entry in _ORIGINALS/_WRAPPERS
_TRACER_MEMORY = 4096  # tracers remembered while tracing loop bodies (then forgotten)


_ORIGINALS: dict[str, Callable[..., Any]] = {}
_WRAPPERS: dict[str, Callable[..., Any]] = {}
# Loop bodies: tracer id -> (tracer, node, consuming event) while the trace lasts.
_TRACED: dict[int, tuple[Any, int, int | None]] = {}
_UNPACKING: list[Callable[[], None] | None] = []  # the undo of the key unpacking watch
# Set when a callback is compiled into a program while tracking is on: switching off then
# drops JAX's compiled code and traces (nothing keeps jaxlab's callback after tracking)
_PLACED: set[bool] = set()
_LINEAGE = key_lineage()


def is_tracking() -> bool:
    """Whether key tracking is on."""
    return bool(_WRAPPERS)


def placed_callbacks() -> bool:
    """Whether code traced since tracking began holds jaxlab's callbacks (switching off
    clears JAX's caches so that it is traced again without them)."""
    return bool(_PLACED)


class _Tracking:
    """What :func:`track_keys` returns: already switched; a ``with`` block restores."""

    def __init__(self, on: bool) -> None:
        self.was_on = is_tracking()
        _set(on)

    def __enter__(self) -> KeyLineage:
        return key_lineage()

    def __exit__(self, *exc: object) -> None:
        warn_pending()
        _set(self.was_on)

    def __repr__(self) -> str:
        return f"<key tracking {'on' if is_tracking() else 'off'}>"


def track_keys(on: bool = True) -> _Tracking:
    """Switch key tracking on (or off); as a context manager, only for the block.

    Example::

        jaxlab.track_keys()                 # on for the session
        with jaxlab.track_keys():           # on for this block only
            jax.random.normal(jax.random.key(0))
        jaxlab.track_keys(False)            # off: jax.random is JAX's again
    """
    return _Tracking(on)


def _set(on: bool) -> None:
    if on and not _WRAPPERS:
        _configure()
        for name in (*CREATORS, *DERIVERS, *SAMPLERS):
            original = getattr(jax.random, name, None)
            if original is None:  # an older JAX without this sampler
                continue
            _ORIGINALS[name] = original
            _WRAPPERS[name] = _wrap(name, original)
            setattr(jax.random, name, _WRAPPERS[name])
        _ORIGINALS[_JIT] = jax.jit
        _UNPACKING[:] = [watch_key_unpacking(_LINEAGE.unpacked, hot.watch(_LINEAGE))]
        _WRAPPERS[_JIT] = make_jit(
            jax.jit, key_lineage().called, _recording, _writing, user_site, warn_reuses
        )
        jax.jit = _WRAPPERS[_JIT]
    elif not on and _WRAPPERS:
        for name, wrapper in _WRAPPERS.items():
            module = jax if name == _JIT else jax.random
            attr = "jit" if name == _JIT else name
            if getattr(module, attr, None) is wrapper:  # someone else's patch stays
                setattr(module, attr, _ORIGINALS[name])
        _WRAPPERS.clear()
        _ORIGINALS.clear()
        undo = _UNPACKING.pop() if _UNPACKING else None
        if undo is not None:
            undo()
        _TRACED.clear()
        forget_uses()
        if _PLACED:  # retrace what was traced with a callback: JAX's caches, all of them
            _PLACED.clear()  # (which functions hold one is not known: jit of jit, cond, ...)
            jax.clear_caches()


def _recording() -> bool:
    """Whether a call now is the user's to record: tracking on, not paused, not inside
    jaxlab's own work (``session.work.jaxlab_work``) nor a call whose results the user
    never sees (``results_unseen``)."""
    return bool(_WRAPPERS) and not _SWITCH.paused and not _WORK.draws


def _writing() -> bool:
    """Whether a jitted function's trace writes its template: tracking on, not paused."""
    return bool(_WRAPPERS) and not _SWITCH.paused


def _kind(name: str) -> str:
    return "create" if name in CREATORS else "derive" if name in DERIVERS else "consume"


def _wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    kind = _kind(name)
    noted = kind == "consume" or name == "split"  # of one key known by object: no read
    split = name == "split"
    kids, note = _LINEAGE.kids, _LINEAGE.note_kid

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        work = _WORK.draws  # (0 outside jaxlab's work and results_unseen: one read)
        if not _WRAPPERS or _SWITCH.paused or (work and _WORK.depth and not TRACING.stack):
            # paused, or jaxlab's own work (a check, a timing loop): not the user's draw.
            # A jitted function's trace writes its template all the same: the template is
            # the function's, kept in JAX's cache for the user's own calls. The user's
            # call whose results are unseen (%bench's first) records no data either, but
            # traces as the user's (callbacks placed: JAX caches that trace for them).
            return original(*args, **kwargs)
        if noted and args and not work:
            key = args[0]
            known = kids.pop(id(key), None)  # used: forgotten (a second use is read)
            if known is not None and known[0]() is key:
                # A key unpacked from a noted split (an eager loop's every call): its site,
                # JAX's call and the note, in line (each call between JAX's own costs it
                # twice over). JAX's function calls nothing of jax.random's: no pause.
                frame = sys._getframe(1)
                spot = SPOTS.get((id(frame.f_code), frame.f_lasti))
                site = spot[1] if spot is not None and spot[0] is frame.f_code else user_site(frame)
                try:
                    out = original(*args, **kwargs) if kwargs else original(*args)
                except Exception:
                    _quietly(_failed, name, kind, key, site)
                    raise
                count = (args[1] if len(args) > 1 else kwargs.get("num", 2)) if split else None
                if note(name, known, site, out, count):
                    return out
                return _quietly(_recorded, name, kind, key, out, site, args, kwargs)  # read
        _SWITCH.paused += 1  # what the wrapper itself calls is not the user's
        try:
            return _call(name, kind, original, args, kwargs)
        finally:
            _SWITCH.paused -= 1

    wrapper.__jaxlab_original__ = original  # type: ignore[attr-defined]
    return hot.hook(name, original, wrapper, note, split) if noted else wrapper


def _configure() -> None:
    """The compiled path's view of the session (each time tracking starts)."""
    hot.configure(
        _LINEAGE, wrappers=_WRAPPERS, switch=_SWITCH, work=_WORK, spots=SPOTS,
        user_site=user_site, aval=_AVAL,
        record=lambda name, key, out, site, args, kwargs: _quietly(
            _recorded, name, _kind(name), key, out, site, args, kwargs
        ),
        fail=lambda name, key, site: _quietly(_failed, name, _kind(name), key, site),
    )  # fmt: skip


def _quietly(record: Callable[..., Any], *args: Any) -> Any:
    """``record(*args)``, paused: what jaxlab calls to record is not the user's."""
    __tracebackhide__ = True
    _SWITCH.paused += 1
    try:
        return record(*args)
    finally:
        _SWITCH.paused -= 1


def _call(name: str, kind: str, original: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    __tracebackhide__ = True
    key = None if kind == "create" else (args[0] if args else kwargs.get("key"))
    if kind != "create" and not isinstance(key, _ARRAYS):
        return original(*args, **kwargs)  # not a key: JAX says what is wrong, in its words
    site = user_site(sys._getframe(2))  # from the wrapper's caller
    try:  # JAX's call first: by the time it returns, the key's data is likely computed
        out = original(*args, **kwargs)
    except Exception:
        if not _WORK.draws:
            _failed(name, kind, key, site)
        raise
    if _WORK.draws and _of_data(kind, key, out):
        return out  # jaxlab's work tracing a jitted function drew from a concrete key
    return _recorded(name, kind, key, out, site, args, kwargs)


def _of_data(kind: str, key: Any, out: Any) -> bool:
    """Whether a call is recorded from data (not into a template): a sampler given a
    concrete key, a key made or derived where neither side is traced."""
    if kind == "consume":
        return not isinstance(key, _TRACER)
    return not isinstance(key, _TRACER) and not isinstance(out, _TRACER)


def _failed(name: str, kind: str, key: Any, site: Site) -> None:
    """A sampler that raised consumed its key all the same: a KeyReuseError from
    ``jax_debug_key_reuse`` is a reuse."""
    if kind == "consume" and not isinstance(key, _TRACER):
        rows, impl = _given(key)
        key_lineage().consumed(name, rows, impl, (), "?", site, False, key)


def _recorded(name: str, kind: str, key: Any, out: Any, site: Site, args: Any, kwargs: Any) -> Any:
    """Record a call JAX has made (``out``, its result), by the keys' data; returns ``out``."""
    if kind == "consume" and not isinstance(key, _TRACER):
        shape, dtype = tuple(getattr(out, "shape", ())), dtype_name(getattr(out, "dtype", "?"))
        rows, impl = _given(key)
        found = _LINEAGE.consumed(name, rows, impl, shape, dtype, site, False, key)
        if found:
            _warn(found)
        return out
    if kind == "create":
        if isinstance(out, _TRACER):
            _record_traced(name, kind, None, out, site)
        else:
            rows, impl = _rows(out)
            key_lineage().created(name, rows, impl, site, False, out)
        return out
    if isinstance(key, _TRACER) or isinstance(out, _TRACER):
        _record_traced(name, kind, key, out, site)
        return out
    if name == "split":  # its keys are read when needed: reading now would wait for JAX
        shape = _split_shape(args, kwargs, out)
        parents, impl = _given(key)
        found = _LINEAGE.derived(name, parents, None, impl, site, False, key, out, shape)
    else:
        parents, impl = _given(key)
        children, _ = _rows(out)
        found = key_lineage().derived(name, parents, children, impl, site, False, key, out)
    if found:
        _warn(found)
    return out


def _split_num(args: Any, kwargs: Any) -> Any:
    """A split's ``num``, as it was given (2 when not)."""
    return args[1] if len(args) > 1 else kwargs.get("num", 2)


def _split_shape(args: Any, kwargs: Any, out: Any) -> tuple[int, ...]:
    """The shape of the keys a split made: from its ``num`` when a plain int (a typed
    key array's shape is a Python property)."""
    num = _split_num(args, kwargs)
    if type(num) is int:
        return (num,)
    return tuple(out.shape) if _is_typed(out) else tuple(out.shape[:-1])


_IMPLS: dict[str, str] = {}  # a typed key's dtype name (key<fry>) -> its implementation


_is_typed = is_typed


# id(a typed key's implementation object) -> (that object, its name); the object is held,
# so its id is never another's
_IMPL_NAMES: dict[int, tuple[Any, str]] = {}


def _impl(key: Any, typed: bool | None = None) -> str:
    if not (_is_typed(key) if typed is None else typed):
        return str(jax.config.jax_default_prng_impl)  # a legacy key's: the default (may change)
    spec = key_impl_now(key)
    if spec is not None:
        hit = _IMPL_NAMES.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1]
        name = str(jax.random.key_impl(key))
        if len(_IMPL_NAMES) < 64:
            _IMPL_NAMES[id(spec)] = (spec, name)
        return name
    name = key.dtype.name  # a string: a cheap cache key, unlike the dtype itself
    impl = _IMPLS.get(name)
    if impl is None:
        impl = _IMPLS[name] = str(jax.random.key_impl(key))
    return impl


def _rows(key: Any) -> tuple[np.ndarray, str]:
    """Key data as rows of words (one row per key) and the key's implementation."""
    return rows_of(key), _impl(key)


def _given(key: Any) -> tuple[np.ndarray | bytes, str]:
    """What the lineage needs of a key given to a sampler or a split: one key's data as
    bytes (the common case, a loop's ``key, sub = split(key)``), several keys' as rows."""
    typed = _is_typed(key)
    data = key_data_now(key) if typed else np.asarray(key)
    return (data.tobytes() if data.ndim == 1 else _as_rows(data)), _impl(key, typed)


def _data(key: Any) -> Any:
    return jax.random.key_data(key) if _is_typed(key) else key


def warn_reuses(reuses: Iterable[KeyReuse]) -> None:
    """One warning per pair of lines (a loop reusing a key warns once, not per iteration),
    placed at the cell and line (``In[5]:3``), not the kernel's temporary file."""
    lineage = key_lineage()
    for reuse in reuses:
        if not lineage.first_warning(reuse):
            continue
        site = reuse.second
        warnings.warn_explicit(
            reuse.message(), JaxlabWarning, site.cell or site.filename or "<unknown>",
            site.lineno or 0,
        )  # fmt: skip


_warn = warn_reuses


def warn_pending() -> None:
    """Warn about reuses found in compiled calls (replayed now); run when a cell ends."""
    if _WRAPPERS:
        warn_reuses(key_lineage().take_unwarned())


# --------------------------------------------------------------------------- traced
def _record_traced(name: str, kind: str, key: Any, out: Any, site: Site) -> None:
    if TRACING.stack:  # a function jitted while tracking is on: its template, no callback
        _record_template(name, kind, key, out, site)
        return
    if tracing_loop_body():
        _record_loop(name, kind, key, out, site)
        return
    impl = _impl(out if kind != "consume" else key)
    _PLACED.add(True)
    # the callback sees data only: the same key object twice is known now, by its tracer
    again = (kind == "consume" or name == "split") and used_before(key)
    if kind == "create":
        callback = functools.partial(_on_create, name, impl, site)
        jax.debug.callback(callback, _data(out))
    elif kind == "derive":
        callback = functools.partial(_on_derive, name, impl, site, again)
        jax.debug.callback(callback, _data(key), _data(out))
    else:
        shape, dtype = tuple(out.shape), dtype_name(out.dtype)
        callback = functools.partial(_on_consume, name, impl, shape, dtype, site, again)
        jax.debug.callback(callback, _data(key))


def _as_rows(data: Any) -> np.ndarray:
    array = np.asarray(data)
    return array.reshape(-1, array.shape[-1]) if array.ndim else array.reshape(1, 1)


# Callbacks compiled into the user's functions: they outlive tracking, so they check it,
# and jaxlab's own work. A callback runs on the calling thread on CPU, and on a thread of
# its runtime's on an accelerator (a TPU's: "Dummy-2"), which sees no thread's marker:
# they ask whether any thread is in jaxlab's work. (A user's call dispatched before a
# measuring magic whose callback runs only once the magic has begun is then not recorded.)
def _on_create(name: str, impl: str, site: Site, data: Any) -> None:
    if _WRAPPERS and not _ANYWHERE.draws:
        key_lineage().created(name, _as_rows(data), impl, site, True)


def _on_derive(name: str, impl: str, site: Site, again: bool, parent: Any, child: Any) -> None:
    if _WRAPPERS and not _ANYWHERE.draws:
        lineage, same = key_lineage(), SAME_AS_BEFORE if again else None
        rows, children = _as_rows(parent), _as_rows(child)
        lineage.unwarned(lineage.derived(name, rows, children, impl, site, True, same))


def _on_consume(
    name: str, impl: str, shape: tuple[int, ...], dtype: str, site: Site, again: bool, data: Any
) -> None:
    if _WRAPPERS and not _ANYWHERE.draws:
        lineage, same = key_lineage(), SAME_AS_BEFORE if again else None
        rows = _as_rows(data)
        lineage.unwarned(lineage.consumed(name, rows, impl, shape, dtype, site, True, same))


def _record_loop(name: str, kind: str, key: Any, out: Any, site: Site) -> None:
    lineage = key_lineage()
    if len(_TRACED) > _TRACER_MEMORY:
        _TRACED.clear()
    inputs: tuple[int, ...] = ()
    reused: list[tuple[int, int]] = []
    seen: tuple[Any, int, int | None] = (None, -1, None)
    if key is not None:
        found = _TRACED.get(id(key))
        if found is None or found[0] is not key:
            found = (key, lineage.traced_node("traced", None, site, None), None)
        seen = found
        inputs = (seen[1],)
    shape = tuple(out.shape) if kind == "consume" else tuple(getattr(out, "shape", ()))
    dtype = dtype_name(out.dtype) if kind == "consume" else "key"
    consumes = kind == "consume" or name == "split"
    if key is not None and consumes and seen[2] is not None:
        reused.append((seen[1], seen[2]))
    event = lineage.traced_event(name, kind, inputs, shape, dtype, site, reused)
    if key is not None:
        _TRACED[id(key)] = (key, seen[1], seen[2] if seen[2] is not None or not consumes else event)
    if kind != "consume":
        parent = inputs[0] if inputs else None
        _TRACED[id(out)] = (out, lineage.traced_node(name, parent, site, event), None)


def _record_template(name: str, kind: str, key: Any, out: Any, site: Site) -> None:
    template, registry = TRACING.stack[-1]
    source = None
    if key is not None:
        seen = registry.get(id(key))
        if seen is not None and seen[0] is key:
            source = seen[1]
        else:  # a loop carry, a closure or a slice: one identity per tracer
            source = ("loose", len(template.ops))
            registry[id(key)] = (key, source)
    consume = kind == "consume"
    shape = tuple(getattr(out, "shape", ()))
    op = TemplateOp(name, kind, source, site, shape, dtype_name(out.dtype) if consume else "key",
                    tracing_loop_body())  # fmt: skip
    template.ops.append(op)
    if not consume:
        registry[id(out)] = (out, ("op", len(template.ops) - 1))
        template.derives = True
