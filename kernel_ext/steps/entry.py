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
from ..graph.gradient import gradient_graph
from ..graph.interpret import evaluate
from ..graph.render import RenderError
from ..program.call import ProgramError
from ..program.static_leaves import split_static
from ..session.work import jaxlab_work
from .layout import Layout
from .record import GradSteps, Step
from .reverse import Walk

__all__ = ["StepsError", "grad_steps"]

MODES = ("reverse", "forward")
STEPPED = Policy(custom=True, cond=True, scan=True)


class StepsError(ProgramError):
    """The call cannot be stepped (bad mode, nothing to differentiate): the user's input."""


def passes_note(n_inputs: int, n_outputs: int) -> str:
    """The Jacobian's cost in passes, in the words a lecture uses."""
    s = "" if n_inputs == 1 else "es"
    t = "" if n_outputs == 1 else "es"
    return (
        f"{n_inputs} input{'s' if n_inputs != 1 else ''} → {n_inputs} forward pass{s}, "
        f"{n_outputs} output{'s' if n_outputs != 1 else ''} → {n_outputs} reverse pass{t}"
    )


def _choice(
    fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], argnums: Any
) -> tuple[list[int | str], dict[int | str, Sequence[bool]], int]:
    selection = select_arguments(fun, args, kwargs, argnums=0 if argnums is None else argnums)
    wrt = [c.where for c in selection.chosen]
    masks: dict[int | str, Sequence[bool]] = {c.where: c.mask for c in selection.chosen}
    return wrt, masks, sum(sum(c.mask) for c in selection.chosen)


def flat_leaves(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The program's inputs: the array leaves of the call, as graph/gradient traces them."""
    split = split_static(fun, tuple(args), dict(kwargs))
    return list(jax.tree_util.tree_leaves((split.args, split.kwargs)))


@jaxlab_work()
def grad_steps(
    fun: Callable[..., Any],
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    mode: str = "reverse",
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: dict[str, str | None] | None = None,
    **kwargs: Any,
) -> GradSteps:
    """The chain rule of ``fun(*args, **kwargs)`` one equation at a time.

    ``mode="reverse"``: the gradient program's forward equations then its transposed
    ones, each step's numbers from one run of that program; ``mode="forward"``: the
    tangents of ``jax.jvp``, the first chosen argument's leaves seeded with ones.
    ``argnums`` chooses the arguments (default the first), as ``%grad`` does.
    """
    if mode not in MODES:
        raise StepsError(f"mode must be 'reverse' or 'forward', not {mode!r}")
    if not callable(fun):
        raise StepsError(f"{fun!r} is not a function: call grad_steps(f, x, ...)")
    name = getattr(fun, "__name__", None) or type(fun).__name__
    try:
        wrt, masks, n_in = _choice(fun, args, kwargs, argnums)
    except GradError as e:
        raise StepsError(str(e)) from e
    if mode == "forward":
        from .forward import forward_steps

        return forward_steps(fun, args, kwargs, wrt=wrt, masks=masks, name=name, n_in=n_in)
    graph = gradient_graph(
        fun,
        args,
        kwargs,
        wrt=wrt,
        masks=masks,
        values=True,
        name=name,
        arg_names=arg_names,
        kwarg_names=kwarg_names,
    )
    return reverse_steps(graph, flat_leaves(fun, args, kwargs), name, n_in)


def reverse_steps(graph: m.Graph, flat: list[Any], name: str, n_in: int) -> GradSteps:
    """Step the gradient program ``graph`` draws (``graph.jaxpr``) on ``flat``."""
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
    fname = name.strip("<>") or "f"
    if output is not None:
        given[output] = fname
    walk = Walk(ev, seed, output, given)
    layout = Layout(graph, ev)
    steps: list[Step] = []
    for k, st in enumerate(ev.steps):
        record = walk.step(k, layout.label(st), layout.node(st.node_id), layout.box(st.node_id))
        record.source = layout.source(st.node_id)
        record.index = len(steps)
        steps.append(record)
    result = GradSteps(function=fname, mode="reverse", steps=steps, graph=graph)
    outs = [n for n in graph.nodes if n.kind == m.OUTPUT]
    producers = {s: i for i, st in enumerate(ev.steps) for s in st.outputs}
    for n in outs:
        out_slot = ev.node_slots.get(n.id)
        if out_slot is None:
            continue
        result.adjoints[n.label.split("/∂", 1)[-1]] = ev.values[out_slot]
        if out_slot in producers:
            result.targets[n.label] = producers[out_slot]
    result.passes_note = passes_note(n_in, 1)
    result.n_equations = graph.n_equations
    result.notes = list(graph.notes)
    result.svg = _svg(graph, result.notes)
    return result


def _svg(graph: m.Graph, notes: list[str]) -> str:
    try:
        return graph.to_svg()
    except RenderError as e:
        notes.append(f"no drawing: {e}")
        return ""
