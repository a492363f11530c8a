"""Annotate a Graph with the values its nodes compute and, for gradient graphs, adjoints.

micrograd draws each node with ``data`` and ``grad``; this does the same for a real JAX
program. Values come from evaluating the drawn jaxpr equation by equation
(:mod:`jaxlab.graph.interpret`). For a gradient graph (the program of ``jax.grad(fun)``)
each forward node also gets its *adjoint*, d output / d node: the adjoints of the
original program's intermediates (one reverse pass with a zero perturbation on each),
carried to the gradient program's forward half by structural signatures (the same
primitive applied to the same inputs). Forward values that backward equations read,
the residuals JAX keeps for the backward pass, are marked, as torchviz marks saved
tensors.

>>> g = jaxpr_graph(lambda x: jnp.sin(x) * x, 1.0, grad=True, values=True)  # doctest: +SKIP
>>> [(n.primitive, n.value.scalar, n.adjoint) for n in g.equations][:1]     # doctest: +SKIP
[('sin', 0.841..., ValueSummary(... scalar=1.0))]
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..compile.capture import jaxlab_work
from . import interpret as jaxpr_eval
from . import model as m

__all__ = ["annotate", "summarise"]


def summarise(value: Any) -> m.ValueSummary | None:
    """A ValueSummary of a numeric value; None for tokens, keys and other non-numbers."""
    if value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        return None
    real = np.real(arr).astype(np.float64)
    shape = tuple(int(d) for d in arr.shape)
    if real.size == 0:
        return m.ValueSummary(shape, arr.dtype.name, float("nan"), float("nan"), float("nan"))
    with np.errstate(invalid="ignore", over="ignore"):
        mean, lo, hi = float(np.mean(real)), float(np.min(real)), float(np.max(real))
    scalar = float(real.reshape(-1)[0]) if real.size == 1 else None
    return m.ValueSummary(shape, arr.dtype.name, mean, lo, hi, scalar)


def _node_vars(graph: m.Graph) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = defaultdict(list)
    for var, node_id in graph.var_node.items():
        found[node_id].append(var)
    return found


def _slot_for_node(
    node: m.Node, ev: jaxpr_eval.Evaluation, node_vars: dict[str, list[Any]]
) -> int | None:
    """The slot a node shows: by its id (the model's scheme), else through its Var."""
    if node.kind == m.SEGMENT:
        return None  # a run of equations has no single value
    vars_ = node_vars.get(node.id, [])
    if node.kind == m.INPUT and len(vars_) > 1:
        return None  # several arguments drawn as one node
    slot = ev.node_slots.get(node.id)
    if slot is not None:
        return slot
    for var in vars_:
        best: tuple[int, int] | None = None
        for prefix, s in ev.slots_of(var):
            if node.id.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), s)
        if best is not None:
            return best[1]
    return None


def _flat_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    return jax.tree_util.tree_leaves((args, kwargs))


def _residuals(graph: m.Graph) -> set[str]:
    phase = {n.id: n.phase for n in graph.nodes}
    return {
        e.src
        for e in graph.edges
        if phase.get(e.src) == m.FORWARD and phase.get(e.dst) == m.BACKWARD
    }


def _adjoints_by_signature(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    interner: Any,
) -> dict[int, deque[Any]]:
    """Adjoints of the original program's slots, queued by signature in program order."""
    closed = jax.make_jaxpr(fun)(*args, **kwargs)
    adj = jaxpr_eval.adjoints(closed, _flat_args(args, kwargs), interner=interner)
    queues: dict[int, deque[Any]] = defaultdict(deque)
    for slot, a in enumerate(adj.adjoints):
        if a is not None:
            queues[adj.evaluation.signatures[slot]].append(a)
    return queues


@jaxlab_work()
def annotate(
    graph: m.Graph,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    grad: bool,
    fun: Callable[..., Any],
) -> m.Graph:
    """Fill in each node's ``value``, and with ``grad`` its ``adjoint`` and ``residual``.

    ``graph.jaxpr`` is the program drawn: ``fun``'s own, or (``grad=True``) that of
    ``jax.grad(fun)``; ``args``/``kwargs`` are what it was traced with.
    """
    interner = jaxpr_eval.new_interner()
    ev = jaxpr_eval.evaluate(graph.jaxpr, _flat_args(args, kwargs), interner=interner)
    node_vars = _node_vars(graph)
    slots = {n.id: _slot_for_node(n, ev, node_vars) for n in graph.nodes}

    adjoint_of: dict[str, Any] = {}
    residual: set[str] = set()
    if grad:
        queues = _adjoints_by_signature(fun, args, kwargs, interner)
        # Slots in creation order: the k-th forward copy of a computation takes the
        # k-th adjoint of that computation in the original program.
        by_slot: dict[int, Any] = {}
        backward_slots = {
            s for n in graph.nodes if n.phase == m.BACKWARD and (s := slots[n.id]) is not None
        }
        for slot, sig in enumerate(ev.signatures):
            if slot in backward_slots:
                continue
            queue = queues.get(sig)
            if queue:
                by_slot[slot] = queue.popleft()
        for n in graph.nodes:
            s = slots[n.id]
            if n.role in (m.FIXED, m.SEED):
                continue  # not differentiated: the graph shows no adjoint there
            if s is not None and n.kind != m.OUTPUT and n.phase != m.BACKWARD and s in by_slot:
                adjoint_of[n.id] = by_slot[s]
        residual = _residuals(graph)

    nodes = []
    for n in graph.nodes:
        s = slots[n.id]
        changes: dict[str, Any] = {}
        if s is not None:
            changes["value"] = summarise(ev.values[s])
        if n.id in adjoint_of:
            changes["adjoint"] = summarise(adjoint_of[n.id])
        if n.id in residual:
            changes["residual"] = True
        nodes.append(dataclasses.replace(n, **changes) if changes else n)
    return dataclasses.replace(graph, nodes=tuple(nodes))
