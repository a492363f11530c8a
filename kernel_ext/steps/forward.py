"""Forward mode, one equation at a time: the steps of ``jax.jvp``'s program, the first
chosen argument's tangent seeded with ones (``ẋ = 1``). A value's step is followed by its
tangent's (``ẏ = ẋ · cos(x)``), as JAX's JVP rules emit them; the values and tangents come
from the interpreter's run of that program (graph/interpret).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..graph.evaluation import Policy
from ..graph.from_jaxpr import graph_from_jaxpr
from ..graph.gradient import differentiated_leaves, leaf_names
from ..graph.interpret import evaluate
from ..graph.port_names import position
from ..program.static_leaves import split_static
from .boxes import stepped
from .layout import Layout
from .naming import Names, dot
from .record import FORWARD, TANGENT, GradSteps, Step, passes_note, short
from .reverse import downstream, value_at
from .rules import expression

__all__ = ["forward_steps"]

STEPPED = Policy(custom=True, cond=True, scan=True)


def _program(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    seeded: list[bool],
) -> tuple[Any, list[Any], list[Any], int]:
    """``jax.jvp``'s program over every array leaf, the tangents of the ``seeded`` leaves
    closed over as ones (constants of the program, drawn ``ẋ``); (closed jaxpr, flat
    leaves, the seeds, the number of primal outputs)."""
    split = split_static(fun, tuple(args), dict(kwargs))
    flat, treedef = jax.tree_util.tree_flatten((split.args, split.kwargs))
    positions = [k for k, s in enumerate(seeded) if s]
    seeds: list[Any] = []
    n_out: list[int] = []

    def program(*leaves: Any) -> Any:
        def of_seeded(chosen: list[Any]) -> Any:
            mixed = list(leaves)
            for k, v in zip(positions, chosen, strict=True):
                mixed[k] = v
            a, kw = jax.tree_util.tree_unflatten(treedef, mixed)
            return split.fun(*a, **kw)

        with jax.ensure_compile_time_eval():
            ones = [jnp.ones(jnp.shape(leaves[k]), jnp.result_type(leaves[k])) for k in positions]
        seeds[:] = ones
        out, tangent = jax.jvp(of_seeded, ([leaves[k] for k in positions],), (ones,))
        outs = jax.tree_util.tree_leaves(out)
        n_out[:] = [len(outs)]
        return (*outs, *jax.tree_util.tree_leaves(tangent))

    closed = jax.make_jaxpr(program)(*flat)
    return closed, flat, seeds, n_out[0]


def forward_steps(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    wrt: Sequence[int | str],
    masks: dict[int | str, Sequence[bool]],
    name: str,
    n_in: int,
    iteration: int | None = None,
) -> GradSteps:
    """Step ``jax.jvp`` of ``fun`` with the first chosen argument's leaves seeded
    (``iteration``: the one stepped of a scan past ``ITERATIONS``)."""
    first = wrt[:1]
    seeded = differentiated_leaves(args, kwargs, first, {k: masks[k] for k in first})
    names = leaf_names(fun, args, kwargs)
    if len(names) != len(seeded):  # non-array leaves held static: positions
        names = [f"in{k}" for k in range(len(seeded))]
    closed, flat, seeds, n_out = _program(fun, args, kwargs, seeded)
    fname = name.strip("<>") or "f"
    if len(seeded) != len(flat):
        seeded = [True] * len(flat)  # (static leaves dropped: seed as traced)
        names = [f"in{k}" for k in range(len(flat))]
    n_tangents = len(closed.jaxpr.outvars) - n_out
    out_names = [fname if n_out == 1 else f"{fname}[{k}]" for k in range(n_out)]
    out_names += [dot(n) for n in out_names[:n_tangents]]
    graph = graph_from_jaxpr(
        closed,
        title=f"jvp({name})",
        input_names=names[: len(closed.jaxpr.invars)],
        output_names=out_names,
    )
    ev = evaluate(closed, flat, policy=STEPPED)
    given = {s: n for s, n in zip(ev.inputs, names, strict=False)}
    for k, slot in enumerate(ev.outputs[:n_out]):
        given.setdefault(slot, out_names[k])
    seed_slots = []
    seeded_names = [n for n, s in zip(names, seeded, strict=False) if s]
    for k, c in enumerate(closed.consts):
        if any(c is s for s in seeds):
            slot = ev.node_slots[f"c{k}"]
            seed_slots.append(slot)
            j = next(i for i, s in enumerate(seeds) if c is s)
            given[slot] = dot(seeded_names[j]) if j < len(seeded_names) else "ṫ"
    tangent = downstream(ev, seed_slots)
    naming = Names(ev, given)
    layout = Layout(graph, ev)
    where = [position(st.eqn) for st in ev.steps]
    steps: list[Step] = []
    for k, st in enumerate(ev.steps):
        if any(s in tangent for s in st.outputs):
            _name_tangent(naming, ev, k, where, tangent)
        else:
            naming.name_forward(st)
    loops: list[dict[str, Any]] = []
    notes: list[str] = []
    recorded: dict[int, int] = {}  # evaluation step -> its last record
    for j, t in stepped(ev, layout, iteration, loops, notes):  # as in reverse mode
        st = ev.steps[j]
        is_t = any(s in tangent for s in st.outputs)
        recorded[j] = len(steps)
        steps.append(_record(naming, ev, st, is_t, layout, len(steps), t))
    result = GradSteps(function=fname, mode="forward", steps=steps, graph=graph, loops=loops)
    producers = {s: recorded[i] for i, st in enumerate(ev.steps) for s in st.outputs}
    for k, slot in enumerate(ev.outputs[n_out:]):
        result.tangents[out_names[n_out + k]] = ev.values[slot]
        if slot in producers:
            result.targets[out_names[n_out + k]] = producers[slot]
    seeded_arg = seeded_names[0].split("[")[0].split(".")[0] if seeded_names else "x"
    result.notes = [f"{dot(seeded_arg)} = 1 seeded: one forward pass per input direction", *notes]
    size = sum(int(np.size(ev.values[s])) for s in ev.outputs[:n_out])
    result.passes_note = passes_note(n_in, size)  # a Jacobian's columns and rows
    result.n_equations = graph.n_equations
    try:
        result.svg = graph.to_svg()
    except Exception as e:  # no dot: the steps without the drawing
        result.notes.append(f"no drawing: {e}")
    return result


def _name_tangent(naming: Names, ev: Any, k: int, where: list[Any], tangent: set[int]) -> None:
    """A tangent step's result: ``ẏ`` when it is the last tangent step written where the
    value ``y`` was (its JVP rule done), else a temporary of the rule."""
    st = ev.steps[k]
    here = where[k]
    last = (
        k + 1 >= len(ev.steps)
        or where[k + 1] != here
        or not any(s in tangent for s in ev.steps[k + 1].outputs)
    )
    primal = None
    j = k - 1
    while last and j >= 0 and where[j] == here and here is not None:
        if not any(s in tangent for s in ev.steps[j].outputs):
            primal = ev.steps[j].outputs[0] if ev.steps[j].outputs else primal
        j -= 1
    for s in st.outputs:
        if s in naming.name:
            continue
        naming.name[s] = dot(naming.of(primal)) if primal is not None else naming.temporary()


def _record(
    naming: Names, ev: Any, st: Any, is_t: bool, layout: Layout, index: int, t: int | None
) -> Step:
    eqn = st.eqn
    prim = eqn.primitive.name
    in_names = naming.operands(st)
    out_names = [naming.of(s) for s in st.outputs]
    values = [value_at(ev, s, a, t) for s, a in zip(st.inputs, eqn.invars, strict=True)]
    outs = [value_at(ev, s, None, t) for s in st.outputs]
    avals = [getattr(a, "aval", None) for a in eqn.invars]
    formula = expression(prim, dict(eqn.params), in_names, avals)
    numbers = expression(prim, dict(eqn.params), [short(v) for v in values], avals)
    lhs = ", ".join(out_names)
    shown = [lhs] if lhs == formula else [lhs, formula]
    rule = " = ".join(shown)
    if numbers != formula and all(np.size(v) == 1 for v in values):
        shown.append(numbers)
    return Step(
        index=index,
        kind=TANGENT if is_t else FORWARD,
        equation=layout.label(st),
        rule=rule,
        text=" = ".join([*shown, ", ".join(short(v) for v in outs)]),
        node=layout.node(st.node_id, st.eqn),
        box=layout.box(st.node_id),
        primitive=prim,
        values_in=values,
        values_out=outs,
        names_in=in_names,
        names_out=out_names,
        operands=values,
        source=layout.source(st.node_id),
        iteration=t,
    )
