"""Annotate a Graph with the values its nodes compute and, for gradient graphs, adjoints.

micrograd draws each node with ``data`` and ``grad``; this does the same for a real JAX
program. Values come from evaluating the drawn jaxpr equation by equation
(:mod:`jaxlab.graph.interpret`). For a gradient graph (the program of ``jax.grad(fun)``)
each forward node also gets its *adjoint*, d output / d node: the adjoints of the
original program's intermediates (one reverse pass with a zero perturbation on each),
carried to the gradient program's forward half by structural signatures (the same
primitive applied to the same inputs). Inside a ``scan`` body a node's value and
adjoint are per iteration, stacked (shape ``(length, *shape)``): the adjoint of v at
iteration t is d output / d v_t. Inside the branch a ``cond`` took they are shown as
anywhere else (the other branches never ran). Forward values that backward equations read,
the residuals JAX keeps for the backward pass, are marked, as torchviz marks saved
tensors.

>>> g = jaxpr_graph(lambda x: jnp.sin(x) * x, 1.0, grad=True, values=True)  # doctest: +SKIP
>>> [(n.primitive, n.value.scalar, n.adjoint) for n in g.equations][:1]     # doctest: +SKIP
[('sin', 0.841..., ValueSummary(... scalar=1.0))]
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.extend import core as jcore

from ..session.work import jaxlab_work
from . import interpret as jaxpr_eval
from . import model as m
from . import scan_body

__all__ = ["annotate", "summarise"]


def summarise(value: Any, iterations: int | None = None) -> m.ValueSummary | None:
    """A ValueSummary of a numeric value; None for tokens, keys and other non-numbers.
    ``iterations``: the value is stacked over that many scan iterations."""
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
        nan = float("nan")
        return m.ValueSummary(shape, arr.dtype.name, nan, nan, nan, iterations=iterations)
    with np.errstate(invalid="ignore", over="ignore"):
        mean, lo, hi = float(np.mean(real)), float(np.min(real)), float(np.max(real))
    scalar = float(real.reshape(-1)[0]) if real.size == 1 else None
    return m.ValueSummary(shape, arr.dtype.name, mean, lo, hi, scalar, iterations)


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


def _has_primitive(jaxpr: Any, names: frozenset[str]) -> bool:
    return any(
        eqn.primitive.name in names
        or any(_has_primitive(sub, names) for sub in jcore.jaxprs_in_params(eqn.params))
        for eqn in jaxpr.eqns
    )


# Values (taken cond branches, custom calls' insides) and scan bodies per iteration.
_VALUES = jaxpr_eval.Policy(custom=True, cond=True, scan=True)
# Adjoints: custom calls bound whole (JAX's own rules), the cond branch taken and scan
# bodies run.
_DERIVATIVES = jaxpr_eval.Policy(custom=False, cond=True, scan=True)
_SCAN = frozenset({"scan"})


def _key(ev: jaxpr_eval.Evaluation, slot: int) -> tuple[int, int | None]:
    """What matches a slot across programs: its signature, and whether it holds one
    value or one per iteration (a loop-invariant value JAX hoists out of a scan body
    has the signature of its in-loop copy)."""
    return ev.signatures[slot], ev.iterations.get(slot)


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _one_pass(
    closed: Any, flat: list[Any], interner: Any, policy: Any, only_from: list[int] | None
) -> tuple[Any, str | None]:
    """One adjoint pass, and why scan bodies were left out of it (None when they were not).

    If JAX refuses tangents somewhere (equinox's filter_custom_vjp on a setting), again
    with perturbations only downstream of the differentiated inputs; if that fails too
    and scan bodies were run, once more with them bound whole (the rest keeps its adjoints).
    """
    attempts: list[tuple[Any, list[int] | None]] = [(policy, None)]
    if only_from is not None:
        attempts.append((policy, only_from))
    if policy.scan and _has_primitive(closed.jaxpr, _SCAN):
        attempts.append((dataclasses.replace(policy, scan=False), only_from))
    failed: str | None = None
    for k, (pol, frm) in enumerate(attempts):
        try:
            adj = jaxpr_eval.adjoints(closed, flat, interner=interner, policy=pol, only_from=frm)
        except Exception as e:
            if k == len(attempts) - 1:
                raise
            failed = _first_line(e)
            continue
        return adj, (failed if policy.scan and not pol.scan else None)
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _adjoints_by_signature(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    interner: Any,
    only_from: list[int] | None,
) -> tuple[dict[Any, deque[Any]], str | None, str | None]:
    """Adjoints of the original program's slots, queued by signature in program order;
    when JAX cannot take them, why (the graph then shows values only); and when it
    could not take them inside scan bodies, why."""
    closed = jax.make_jaxpr(fun)(*args, **kwargs)
    flat = _flat_args(args, kwargs)
    try:
        adj, loops_failed = _one_pass(closed, flat, interner, _DERIVATIVES, only_from)
    except Exception as e:  # said in the graph's notes, never hidden
        why = f"adjoints left out: JAX could not differentiate the intermediates ({_first_line(e)})"
        return {}, why, None
    queues: dict[Any, deque[Any]] = defaultdict(deque)
    for slot, a in enumerate(adj.adjoints):
        if a is not None:
            queues[_key(adj.evaluation, slot)].append(a)
    if _has_primitive(closed.jaxpr, jaxpr_eval.CUSTOM_PRIMITIVES):
        # Inside a custom_jvp/custom_vjp call: d output / d an inner value goes through the
        # rest of the insides (as jax.grad of the program rewritten from that value would),
        # so a second pass looks inside; it adds only what the first could not see.
        inside = dataclasses.replace(_DERIVATIVES, custom=True, scan=loops_failed is None)
        try:
            more, _ = _one_pass(closed, flat, interner, inside, only_from)
        except Exception:  # insides reverse mode cannot go through (a while_loop)
            return queues, None, loops_failed
        extra: dict[Any, deque[Any]] = defaultdict(deque)
        for slot, a in enumerate(more.adjoints):
            key = _key(more.evaluation, slot)
            if a is not None and key not in queues:
                extra[key].append(a)
        queues.update(extra)
    return queues, None, loops_failed


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
    ev = jaxpr_eval.evaluate(
        graph.jaxpr, _flat_args(args, kwargs), interner=interner, policy=_VALUES
    )
    node_vars = _node_vars(graph)
    slots = {n.id: _slot_for_node(n, ev, node_vars) for n in graph.nodes}

    adjoint_of: dict[str, Any] = {}
    residual: set[str] = set()
    notes: tuple[str, ...] = ()
    loops_failed: str | None = None
    if grad:
        held = {n.id for n in graph.nodes if n.role in (m.FIXED, m.SEED)}
        n_in = len(graph.jaxpr.jaxpr.invars)
        only_from = [k for k in range(n_in) if f"in{k}" not in held] if held else None
        queues, refused, loops_failed = _adjoints_by_signature(
            fun, args, kwargs, interner, only_from
        )
        if refused:
            notes = (refused,)
        # Slots in creation order: the k-th forward copy of a computation takes the
        # k-th adjoint of that computation in the original program.
        by_slot: dict[int, Any] = {}
        # Slots the backward pass creates. Not its ports: a backward cluster's parameter
        # is the forward value passed in (sin inside a jit, read again by its transpose).
        backward_slots = {
            s
            for n in graph.nodes
            if n.phase == m.BACKWARD and n.kind != m.PORT and (s := slots[n.id]) is not None
        }
        for slot in range(len(ev.signatures)):
            if slot in backward_slots:
                continue
            queue = queues.get(_key(ev, slot))
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
        stacked = ev.iterations.get(s) if s is not None else None
        if s is not None:
            changes["value"] = summarise(ev.values[s], stacked)
        if n.id in adjoint_of:  # (matched on the same stacking: see _key)
            changes["adjoint"] = summarise(adjoint_of[n.id], stacked)
        if n.id in residual:
            changes["residual"] = True
        nodes.append(dataclasses.replace(n, **changes) if changes else n)
    notes = _per_iteration_note(graph, slots, ev, grad) + notes
    if not grad:  # (a gradient graph's legend counts these nodes among those without adjoint)
        notes += _loops_without_values(graph, ev.loops_skipped)
    if grad and not any(n.startswith("adjoints left out") for n in notes):
        notes += missing_adjoints(graph, nodes, ev.loops_skipped, loops_failed)
    return dataclasses.replace(graph, nodes=tuple(nodes), notes=graph.notes + notes)


def _per_iteration_note(
    graph: m.Graph, slots: dict[str, int | None], ev: jaxpr_eval.Evaluation, grad: bool
) -> tuple[str, ...]:
    """The legend's line saying that values inside scan bodies are stacked."""
    lengths = sorted({ev.iterations[s] for n in graph.nodes if (s := slots[n.id]) in ev.iterations})
    if not lengths:
        return ()
    what = "value and adjoint are" if grad else "value is"
    counts = ", ".join(f"×{k}" for k in lengths)
    where = "a scan body" if len(lengths) == 1 else "scan bodies"
    return (
        f"inside {where} ({counts} iterations) a node's {what} per iteration, stacked: "
        "shape (iterations, …); μ [min, max] over every iteration",
    )


def _loops_without_values(graph: m.Graph, skipped: dict[str, str]) -> tuple[str, ...]:
    """The legend's line for drawn scan bodies shown without values, and why."""
    drawn = {c.id for c in graph.clusters if c.primitive == "scan"}
    reasons = Counter(skipped[c] for c in sorted(drawn) if c in skipped)
    if not reasons:
        return ()
    parts = ", ".join(f"{k} {_skipped_scan(why)}" for why, k in reasons.items())
    total = sum(reasons.values())
    return (f"no values inside {total} scan bod{'ies' if total != 1 else 'y'}: {parts}",)


def missing_adjoints(
    graph: m.Graph,
    nodes: list[m.Node],
    skipped: dict[str, str] | None = None,
    loops_failed: str | None = None,
) -> tuple[str, ...]:
    """The legend's line for forward nodes drawn without an adjoint: how many, and why.

    ``skipped``: scans (node id = cluster id) whose bodies were not run per iteration,
    and why (``Evaluation.loops_skipped``); ``loops_failed``: why JAX could not take
    per-iteration adjoints at all, when it could not.
    """
    skipped = skipped or {}
    kind = {c.id: c.primitive for c in graph.clusters}
    parent = {c.id: c.parent for c in graph.clusters}

    def loop_reason(cluster: str | None) -> tuple[str, str] | None:
        scans: list[str] = []
        while cluster is not None:
            if kind.get(cluster) == "while":
                return _WHILE
            if kind.get(cluster) == "scan":
                scans.append(cluster)
            cluster = parent.get(cluster)
        if not scans:
            return None
        if loops_failed is not None:
            return (
                f"inside a scan body JAX could not differentiate per iteration ({loops_failed})",
                f"inside scan bodies JAX could not differentiate per iteration ({loops_failed})",
            )
        for scan in scans:
            if scan in skipped:
                return _skipped(skipped[scan])
        return None

    def in_cond(cluster: str | None) -> tuple[str, str] | None:
        """Why a node without a value inside a cond branch has none (None: not in one)."""
        found = None
        while cluster is not None:
            if kind.get(cluster) == "cond" and found is None:
                found = _COND_NOT_TAKEN
            if kind.get(cluster) in ("scan", "while") and found is not None:
                return _COND_IN_LOOP  # (the interpreter follows no branch in a loop body)
            cluster = parent.get(cluster)
        return found

    reasons: Counter[tuple[str, str]] = Counter()
    for n in nodes:
        if n.kind != m.EQUATION or n.phase != m.FORWARD or n.adjoint is not None:
            continue
        in_loop = loop_reason(n.cluster)
        cond = in_cond(n.cluster)
        if n.value is not None and not _is_float(n.value):
            reasons[_DISCRETE] += 1
        elif in_loop is not None:
            reasons[in_loop] += 1
        elif cond is not None and n.value is None:
            reasons[cond] += 1
        elif cond is not None and _placeholder(n):
            reasons[_PLACEHOLDER] += 1
        elif n.value is not None:
            reasons[_FACTOR] += 1
        else:
            reasons[_NOT_EVALUATED] += 1
    if not reasons:
        return ()
    total = sum(reasons.values())
    parts = ", ".join(f"{k} {why[k != 1]}" for why, k in reasons.most_common())
    return (f"no adjoint on {total} forward node{'s' if total != 1 else ''}: {parts}",)


# Why a forward node shows no adjoint: (singular, plural).
_WHILE = (
    "inside a while_loop body (JAX cannot reverse-differentiate a while_loop: its number "
    "of iterations is known only at run time, so no per-iteration values are kept)",
    "inside while_loop bodies (JAX cannot reverse-differentiate a while_loop: its number "
    "of iterations is known only at run time, so no per-iteration values are kept)",
)


def _skipped(kind: str) -> tuple[str, str]:
    """Why nodes inside a scan not run per iteration have no adjoint (singular, plural)."""
    if kind == scan_body.LOOP_TOO_LARGE:
        return (
            f"inside a scan body too large to keep every iteration ({_budget()})",
            f"inside scan bodies too large to keep every iteration ({_budget()})",
        )
    if kind == scan_body.LOOP_NOT_ARRAYS:
        return (
            "inside a scan body holding values that cannot be stacked (tokens)",
            "inside scan bodies holding values that cannot be stacked (tokens)",
        )
    return (
        "inside a loop nested in a scan body (per-iteration values are kept one loop deep)",
        "inside loops nested in scan bodies (per-iteration values are kept one loop deep)",
    )


def _skipped_scan(kind: str) -> str:
    """Why a drawn scan body shows no values (after a count of such scans)."""
    if kind == scan_body.LOOP_TOO_LARGE:
        return f"too large to keep every iteration ({_budget()})"
    if kind == scan_body.LOOP_NOT_ARRAYS:
        return "holding values that cannot be stacked (tokens)"
    return "nested in another scan's body (per-iteration values are kept one loop deep)"


def _budget() -> str:
    return f"past {scan_body.LOOP_BYTES / 2**20:g} MiB for all scans together"


_DISCRETE = ("integer or boolean (no derivative)", "integers or booleans (no derivative)")
_FACTOR = (
    "derivative factor computed for the backward pass (the output does not depend on it)",
    "derivative factors computed for the backward pass (the output does not depend on them)",
)
_NOT_EVALUATED = ("not evaluated", "not evaluated")
# The branch a cond took shows adjoints like any other code; the others never ran. Inside
# a loop body a cond is taken whole (the branch taken may change from one iteration to
# the next), so its branches show neither values nor adjoints.
_COND_NOT_TAKEN = ("in a cond branch not taken", "in cond branches not taken")
_COND_IN_LOOP = (
    "inside a cond in a loop body (the branch taken may change from one iteration to the next)",
    "inside conds in loop bodies (the branch taken may change from one iteration to the next)",
)
# The forward cond of a gradient program returns every branch's residuals; a branch fills
# the others' with empty arrays, which nothing reads.
_PLACEHOLDER = (
    "placeholder for another branch's residual (the output does not depend on it)",
    "placeholders for other branches' residuals (the output does not depend on them)",
)


def _placeholder(n: m.Node) -> bool:
    """An empty or zero array a gradient program's cond branch returns for another
    branch's residual (``empty``, or zeros broadcast from a literal)."""
    if (n.primitive or "").startswith("empty"):
        return True
    v = n.value
    return n.primitive == "broadcast_in_dim" and v is not None and v.min == v.max == 0


def _is_float(v: m.ValueSummary) -> bool:
    return v.dtype.startswith(("float", "bfloat", "complex"))
