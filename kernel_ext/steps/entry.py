"""``grad_steps``: the chain rule played one equation at a time on a call.

Reverse mode steps through the gradient program ``%jaxpr --grad`` draws (traced by
graph/gradient over every argument leaf, the seed ``∂f/∂f = 1`` made visible), with the
values and cotangents of the interpreter's run of that very program; forward mode steps
through ``jax.jvp``'s program (steps/forward). Arguments are chosen as ``%grad`` chooses
them (autodiff/args).

>>> s = grad_steps(lambda x, w: jnp.sin(x * w), 0.5, 1.2, argnums=(0, 1))  # doctest: +SKIP
>>> s.adjoints                                                              # doctest: +SKIP
{'x': Array(0.99..), 'w': Array(0.41..)}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from ..autodiff.args import GradError, select_arguments
from ..graph import model as m
from ..graph.evaluation import Policy
from ..graph.gradient import NotAScalar, gradient_graph
from ..graph.interpret import evaluate
from ..graph.port_names import position
from ..graph.render import RenderError
from ..program.call import ProgramError
from ..program.static_leaves import split_static
from ..session.work import jaxlab_work
from .boxes import (
    BIG,
    by_top_level,
    custom_rules,
    gather_custom,
    jvp_rules,
    rule_positions,
    stepped,
)
from .layout import Layout
from .record import GradSteps, Step, passes_note
from .reverse import Walk

__all__ = ["StepsError", "grad_steps"]

MODES = ("reverse", "forward")
STEPPED = Policy(custom=True, cond=True, scan=True)


class StepsError(ProgramError):
    """The call cannot be stepped (bad mode, nothing to differentiate): the user's input."""


def _choice(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    argnums: Any,
    wrt: str | Sequence[str] | None = None,
) -> tuple[list[int | str], dict[int | str, Sequence[bool]], int]:
    selection = select_arguments(
        fun, args, kwargs, argnums=0 if argnums is None else argnums, wrt=wrt
    )
    places: list[int | str] = [c.where for c in selection.chosen]
    masks: dict[int | str, Sequence[bool]] = {c.where: c.mask for c in selection.chosen}
    return places, masks, selection.size  # numbers differentiated: a Jacobian's columns


def flat_leaves(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The program's inputs: the array leaves of the call, as graph/gradient traces them."""
    split = split_static(fun, tuple(args), dict(kwargs))
    return list(jax.tree_util.tree_leaves((split.args, split.kwargs)))


def grad_steps(
    fun: Callable[..., Any],
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    mode: str = "reverse",
    iteration: int | None = None,
    **kwargs: Any,
) -> GradSteps:
    """The chain rule of ``fun(*args, **kwargs)`` one equation at a time.

    ``mode="reverse"``: the gradient program's forward equations then its transposed
    ones, each step's numbers from one run of that program; ``mode="forward"``: the
    tangents of ``jax.jvp``, the first chosen argument's leaves seeded with ones.
    ``argnums`` chooses the arguments (default the first), as ``%grad`` does.
    A scan of more than five iterations steps its first five; ``iteration=k`` steps its
    body at iteration ``k`` instead (the player's iteration control does this).
    """
    return steps_for_call(fun, args, kwargs, argnums=argnums, mode=mode, iteration=iteration)


@jaxlab_work()
def steps_for_call(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    argnums: int | str | Sequence[int] | None = None,
    wrt: str | Sequence[str] | None = None,
    mode: str = "reverse",
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: dict[str, str | None] | None = None,
    iteration: int | None = None,
) -> GradSteps:
    """``grad_steps`` for a parsed call (``%grad --steps``): arguments chosen by
    position (``argnums``) or name (``wrt``), named as the call line names them. The
    walk keeps how to step it again at another iteration of its long scans (``again``)."""
    result = _steps_for_call(
        fun, args, kwargs, argnums, wrt, mode, arg_names, kwarg_names, iteration
    )

    def again(k: int | None) -> GradSteps:
        return steps_for_call(
            fun,
            args,
            kwargs,
            argnums=argnums,
            wrt=wrt,
            mode=mode,
            arg_names=arg_names,
            kwarg_names=kwarg_names,
            iteration=k,
        )

    result.again = again if result.loops else None
    return result


def _steps_for_call(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    argnums: int | str | Sequence[int] | None,
    wrt: str | Sequence[str] | None,
    mode: str,
    arg_names: Sequence[str | None] | None,
    kwarg_names: dict[str, str | None] | None,
    iteration: int | None,
) -> GradSteps:
    if mode not in MODES:
        raise StepsError(f"mode must be 'reverse' or 'forward', not {mode!r}")
    if not callable(fun):
        raise StepsError(f"{fun!r} is not a function: call grad_steps(f, x, ...)")
    name = getattr(fun, "__name__", None) or type(fun).__name__
    try:
        places, masks, n_in = _choice(fun, args, kwargs, argnums, wrt)
    except GradError as e:
        raise StepsError(str(e)) from e
    if mode == "forward":
        from .forward import forward_steps

        return forward_steps(
            fun, args, kwargs, wrt=places, masks=masks, name=name, n_in=n_in, iteration=iteration
        )
    try:
        graph = gradient_graph(
            fun,
            args,
            kwargs,
            wrt=places,
            masks=masks,
            values=True,
            name=name,
            arg_names=arg_names,
            kwarg_names=kwarg_names,
        )
    except NotAScalar as e:  # reverse mode plays one number's gradient
        raise StepsError(
            f"{e}; or play forward mode, which takes any output: mode='forward' "
            "(%grad --steps --jvp)"
        ) from e
    rules = custom_rules(fun, args, kwargs)
    return reverse_steps(graph, flat_leaves(fun, args, kwargs), name, n_in, rules, iteration)


def reverse_steps(
    graph: m.Graph,
    flat: list[Any],
    name: str,
    n_in: int,
    rules: dict[tuple[str, int, int], str] | None = None,
    iteration: int | None = None,
) -> GradSteps:
    """Step the gradient program ``graph`` draws (``graph.jaxpr``) on ``flat``;
    ``rules``: the custom_vjp calls' places and their backward rules' names;
    ``iteration``: the one stepped of a scan past ``ITERATIONS``."""
    ev = evaluate(graph.jaxpr, flat, policy=STEPPED)
    given: dict[int, str] = {}
    seed: int | None = None
    output: int | None = None
    for n in graph.nodes:
        if n.kind in (m.INPUT, m.CONST) and n.id in ev.node_slots:
            slot = ev.node_slots[n.id]
            given[slot] = n.label.split(" = ")[0] if n.role == m.SEED else n.label
            if n.role == m.SEED:
                seed = slot
    for e in graph.edges:
        if e.kind == m.SEEDS and e.src in ev.node_slots:
            output = ev.node_slots[e.src]
    if output is None:  # drawn inside a run of equations: the scalar nothing reads
        output = _primal_output(ev, seed)
    fname = name.strip("<>") or "f"
    if output is not None:
        given[output] = fname
    made = {s for st in ev.steps for s in st.outputs}
    for n in graph.nodes:  # a loop body's parameters by the drawing's names ("carry")
        port = ev.node_slots.get(n.id)
        fresh = port is not None and port not in made and port not in given
        named = n.label[:1] not in ("·", "∂", "") and not n.label.startswith("result")
        if port is not None and n.kind == m.PORT and n.phase != m.BACKWARD and fresh and named:
            given[port] = n.label
    rules = dict(rules or {})
    first = next(
        (i for i, st in enumerate(ev.steps) if seed is not None and seed in st.inputs),
        len(ev.steps),
    )
    rules.update(rule_positions(ev, jvp_rules(graph.jaxpr), first))
    walk = Walk(ev, seed, output, given, custom=set(rules))
    layout = Layout(graph, ev)
    records: list[Step] = []
    where: list[Any] = []
    notes: list[str] = []
    loops: list[dict[str, Any]] = []
    for j, t in stepped(ev, layout, iteration, loops, notes):
        if j in walk.hidden:
            continue
        st = ev.steps[j]
        node, box = layout.node(st.node_id, st.eqn), layout.box(st.node_id)
        record = walk.step(j, layout.label(st), node, box, iteration=t)
        record.source = layout.source(st.node_id)
        head = st.node_id.split("/")[0]
        record.top = int(head[1:]) if head[1:].isdigit() else -1
        records.append(record)
        where.append(position(st.eqn))
    steps = gather_custom(records, where, rules or {})
    if graph.n_equations > BIG:
        steps, said = by_top_level(steps, graph.jaxpr.jaxpr)
        notes.append(said)
    for i, record in enumerate(steps):
        record.index = i
    result = GradSteps(function=fname, mode="reverse", steps=steps, graph=graph, loops=loops)
    outs = [n for n in graph.nodes if n.kind == m.OUTPUT]
    producers: dict[str, int] = {}
    for record in steps:
        for slot_name in record.names_out:
            producers[slot_name] = record.index
    out_names = {slot: walk.names.name.get(slot) for slot in ev.outputs}
    for n in outs:
        out_slot = ev.node_slots.get(n.id)
        if out_slot is None:
            continue
        result.adjoints[n.label.split("/∂", 1)[-1]] = ev.values[out_slot]
        last = out_names.get(out_slot)
        if last is not None and last in producers:
            result.targets[n.label] = producers[last]
    result.passes_note = passes_note(n_in, 1)
    result.n_equations = graph.n_equations
    result.notes = list(graph.notes) + notes
    result.svg = _svg(graph, result.notes)
    return result


def _primal_output(ev: Any, seed: int | None) -> int | None:
    """The function's value in its gradient program: the last scalar a forward step
    makes that no later step reads (JAX keeps it, unused, for the seed's sake)."""
    read = {s for st in ev.steps for s in st.inputs if s is not None}
    read.update(ev.outputs)
    for st in reversed(ev.steps):
        if seed is not None and seed in st.inputs:
            continue
        for s in st.outputs:
            if s not in read and getattr(ev.avals[s], "shape", None) == ():
                return int(s)
    return None


def _svg(graph: m.Graph, notes: list[str]) -> str:
    try:
        return graph.to_svg()
    except RenderError as e:
        notes.append(f"no drawing: {e}")
        return ""
