"""What ``%bench`` knows of a call without running it: XLA's cost, loops counted whole, and
whether it runs as one compiled program or op by op.

::

    c = call_cost(f, (x,), {})
    c.flops, c.bytes_accessed     # XLA's cost analysis, loop bodies times their trip counts
    c.jitted, c.dispatches        # False, 14: an un-jitted f dispatches 14 operations a call

Work already done is reused: a jitted function's trace, lowering and executable are JAX's
own, cached by its first call; the cost (with its loops counted whole, which compiles each
loop body) is kept per function and argument types, so a call measured again, or
re-run in a notebook, is not costed again. A function called with unhashable static
arguments, or one that cannot be weakly referenced, is costed each time.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import jax

from .._jax_compat import cost_analysis
from ..compile.loop_costs import loops_counted_whole
from ..program.static_leaves import split_static
from ..session.work import jaxlab_work

_JIT_PRIMITIVES = frozenset({"pjit", "jit"})  # the name of a jitted call in a jaxpr


@dataclass(frozen=True)
class CallCost:
    """XLA's cost of a call (None: not known) and how it is dispatched."""

    flops: float | None = None
    bytes_accessed: float | None = None
    jitted: bool = True  # one compiled program per call (jax.jit, eqx.filter_jit, ...)
    dispatches: int | None = None  # not jitted: operations dispatched one by one per call
    loops_note: str = ""


def _positive(value: float | None) -> float | None:
    return value if value and value > 0 else None


_KEPT: weakref.WeakKeyDictionary[Any, dict[Hashable, CallCost]] = weakref.WeakKeyDictionary()


def signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable | None:
    """What the cost of a call depends on besides the function: the arguments' structure,
    each array's shape, dtype, weak type and sharding, any other leaf's value (None: a leaf
    that cannot be hashed, so the cost is not kept)."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    parts: list[Hashable] = [tree]
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            weak = getattr(leaf, "weak_type", False)  # (a typed key array has none)
            parts.append((leaf.shape, leaf.dtype, weak, leaf.sharding))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):  # a NumPy array: its type
            parts.append(("host", tuple(leaf.shape), str(leaf.dtype)))
        else:
            parts.append((type(leaf), leaf))
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def call_cost(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallCost:
    """``fun(*args, **kwargs)``'s cost: kept from an earlier call of the same function on
    the same argument types, else traced and compiled as jaxlab's own work."""
    key = signature(args, kwargs)
    try:
        kept = _KEPT.get(fun, {}) if key is not None else {}
    except TypeError:  # not weakly referable, or unhashable
        kept, key = {}, None
    if key in kept:
        return kept[key]
    cost = _cost(fun, args, kwargs)
    if key is not None:
        with contextlib.suppress(TypeError):  # not weakly referable
            _KEPT.setdefault(fun, {})[key] = cost
    return cost


def forget_costs() -> None:
    """Drop the kept costs (the next call of each function is costed again)."""
    _KEPT.clear()


def _apart(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` under a function of jaxlab's own: JAX keeps a trace and a compilation per
    function object, and one made of the user's own function would answer the user's
    later ``jax.jit(fun)`` call from its cache (no compilation in the user's compile log,
    no kept program for ``%%profile --graph``)."""

    @functools.wraps(fun)  # named and signed as the user's function
    def apart(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    return apart


def _cost(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallCost:
    """Trace and compile ``fun(*args, **kwargs)`` as jaxlab's own work, for its costs."""
    lower = getattr(fun, "lower", None)
    compiled_whole = callable(lower)
    jaxpr = None
    try:
        with jaxlab_work():
            trace = getattr(fun, "trace", None)
            if callable(trace):
                traced = trace(*args, **kwargs)
                jaxpr, compiled = traced.jaxpr, traced.lower().compile()
            elif lower is not None:  # equinox's filter_jit: Lowered without a jaxpr
                compiled = lower(*args, **kwargs).compile()
            else:  # leaves JAX cannot trace (an equinox model's activation) held static
                split = split_static(fun, args, kwargs)
                traced = jax.jit(_apart(split.fun)).trace(*split.args, **split.kwargs)
                jaxpr, compiled = traced.jaxpr, traced.lower().compile()
            costs = cost_analysis(compiled)
            if not costs:  # equinox's filter_jit wraps JAX's Compiled as `.compiled`
                costs = cost_analysis(getattr(compiled, "compiled", None))
    except Exception:  # a function jax.jit cannot trace as a whole (Python control flow)
        return CallCost(jitted=compiled_whole)
    dispatches = None
    if not compiled_whole and jaxpr is not None:
        eqns = jaxpr.jaxpr.eqns
        # a function that only calls one jitted function is dispatched as one program
        if len(eqns) > 1 or (eqns and eqns[0].primitive.name not in _JIT_PRIMITIVES):
            dispatches = len(eqns)
        else:
            compiled_whole = True
    note = ""
    if jaxpr is not None:
        whole = loops_counted_whole(jaxpr, costs)
        costs, note = whole.costs, whole.note
    return CallCost(
        flops=_positive(costs.get("flops")),
        bytes_accessed=_positive(costs.get("bytes accessed")),
        jitted=compiled_whole,
        dispatches=dispatches,
        loops_note=note,
    )
