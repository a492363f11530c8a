"""jaxpr → Graph: trace a function, walk its jaxpr, decide what to collapse, emit the model.

Big programs stay drawable: above a node budget the deepest, then largest, nested
programs collapse into one node each; if a block is still too long (a flat 10,000
equation gradient), runs of consecutive equations become segment nodes. The Graph's
``notes`` say what was collapsed.

>>> g = jaxpr_graph(lambda x: jnp.sin(x) * 2.0, 1.0)   # doctest: +SKIP
>>> g.primitives()                                      # doctest: +SKIP
Counter({'sin': 1, 'mul': 1})
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from . import model as m
from .emit import _Emitter
from .marks import carry_edges, mark_unused, primal_and_seed
from .plan import DEFAULT_BUDGET, EDGE_BUDGET, MIN_BUDGET, _Plan
from .walk import Block, walk

# DEFAULT_BUDGET is the magics' default too: read from here, where drawing starts.
__all__ = [
    "DEFAULT_BUDGET",
    "argument_names",
    "assemble",
    "call_graph",
    "graph_from_jaxpr",
    "jaxpr_graph",
    "static_note",
]


def jaxpr_graph(
    fun: Callable[..., Any],
    *args: Any,
    grad: bool = False,
    depth: int | None = None,
    values: bool = False,
    budget: int = DEFAULT_BUDGET,
    explore: bool = False,
    **kwargs: Any,
) -> m.Graph:
    """Trace ``fun(*args, **kwargs)`` (without running it) and return its jaxpr as a Graph.

    ``grad=True`` draws the program of ``jax.grad(fun)`` with forward and backward
    equations told apart; ``depth`` collapses nested programs deeper than it; ``values``
    annotates nodes with the values (and, with ``grad``, adjoints) they compute.
    Arguments may hold non-array leaves (an equinox module's activation function): they
    are held static and their arrays traced, as ``eqx.filter_jit`` does; the Graph's
    notes name them. ``explore`` returns the GraphExplorer's first view rather than the
    budgeted drawing (see ``graph_from_jaxpr``); either way ``Graph.rebuild`` draws the
    explorer's views, with the same notes and annotations.
    """
    return call_graph(
        fun,
        args,
        kwargs,
        grad=grad,
        depth=depth,
        values=values,
        budget=budget,
        explore=explore,
    )


def call_graph(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    grad: bool = False,
    depth: int | None = None,
    values: bool = False,
    budget: int = DEFAULT_BUDGET,
    explore: bool = False,
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: Mapping[str, str | None] | None = None,
) -> m.Graph:
    """:func:`jaxpr_graph` of ``fun(*args, **kwargs)``, its inputs named as the call line
    names its arguments (``arg_names``, ``kwarg_names``: ``%jaxpr f(sharded)`` draws the
    input ``sharded``, not the parameter ``block`` of the function ``f`` wraps); an
    argument the line does not name (an expression) takes its parameter's name."""
    from ..program.static_leaves import split_static

    name = getattr(fun, "__name__", None) or type(fun).__name__
    if grad:
        from .gradient import gradient_graph

        # jax.grad's program with every node named: the other arguments as named inputs
        # (not constants), the seed cotangent and the outputs ∂f/∂x.
        return gradient_graph(
            fun,
            args,
            kwargs,
            wrt=(0,),
            values=values,
            depth=depth,
            budget=budget,
            name=name,
            explore=explore,
        )
    split = split_static(fun, args, kwargs)
    fun, args, kwargs = split.fun, split.args, split.kwargs
    target = jax.grad(fun) if grad else fun
    closed = jax.make_jaxpr(target)(*args, **kwargs)
    graph = graph_from_jaxpr(
        closed,
        title=f"grad({name})" if grad else name,
        grad=grad,
        depth=depth,
        budget=budget,
        input_names=argument_names(fun, args, kwargs, arg_names, kwarg_names),
        explore=explore,
    )
    # Each step also applies to the explorer's views (explore.then).
    from .explore import then

    notes: tuple[str, ...] = (static_note(split.static_paths),) if split.changed else ()
    if split.outputs.paths:  # an updated model's activation, returned as eqx.filter_jit does
        notes += (static_note(split.outputs.paths, held="returned as they are (not arrays)"),)
    if notes:
        graph = then(graph, lambda g: dataclasses.replace(g, notes=(*g.notes, *notes)))
    if values:
        from .annotate import annotate

        graph = then(graph, lambda g: annotate(g, args, kwargs, grad=grad, fun=fun))
    return graph


def static_note(
    paths: tuple[str, ...], most: int = 4, held: str = "held static (not arrays)"
) -> str:
    """``"held static (not arrays): model.activation, ..."``, the first few paths named."""
    shown = ", ".join(paths[:most]) + (
        f" and {len(paths) - most} more" if len(paths) > most else ""
    )
    return f"{held}: {shown}"


def argument_names(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: Mapping[str, str | None] | None = None,
) -> list[str]:
    """A readable name for every flattened input leaf: ``x``, ``params['w']``, ``layers[0].b``.

    Given the call line's names of the arguments (``arg_names``, one per positional
    argument, and ``kwarg_names``), each argument is named as the caller wrote it, since
    the parameter names ``inspect.signature`` finds may be those of a function nested
    inside ``fun`` (a ``shard_map``'s per-device ``block``, a ``jit``'s inner ``a``); an
    argument written as an expression takes its parameter's name.
    """
    if arg_names is not None and len(arg_names) == len(args):
        return _caller_names(fun, args, kwargs, arg_names, kwarg_names or {})
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        named = list(bound.arguments.items())
    except (TypeError, ValueError):
        named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    names: list[str] = []
    for arg_name, value in named:
        leaves = jax.tree_util.tree_flatten_with_path(value)[0]
        for path, _ in leaves:
            names.append(arg_name + jax.tree_util.keystr(path))
    return names


def _caller_names(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None],
    kwarg_names: Mapping[str, str | None],
) -> list[str]:
    # The leaves in the order JAX flattens ``(args, kwargs)``: positional arguments, then
    # keywords sorted (a dict's pytree order).
    positional = _positional_parameters(fun, len(args))
    named = [
        (given or positional[i], a)
        for i, (given, a) in enumerate(zip(arg_names, args, strict=True))
    ]
    named += [(kwarg_names.get(k) or k, kwargs[k]) for k in sorted(kwargs)]
    return [
        arg_name + jax.tree_util.keystr(path)
        for arg_name, value in named
        for path, _ in jax.tree_util.tree_flatten_with_path(value)[0]
    ]


def _positional_parameters(fun: Callable[..., Any], n: int) -> list[str]:
    """The parameter name each of ``n`` positional arguments binds to (``args[1]`` for the
    second of ``*args``; ``arg2`` where the signature says nothing)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    found: list[str] = []
    for p in params:
        if len(found) == n:
            break
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            found += [f"{p.name}[{j}]" for j in range(n - len(found))]
        elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            found.append(p.name)
    return found + [f"arg{i}" for i in range(len(found), n)]


def graph_from_jaxpr(
    closed_jaxpr: Any,
    *,
    title: str,
    grad: bool = False,
    depth: int | None = None,
    budget: int = DEFAULT_BUDGET,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    explore: bool = False,
) -> m.Graph:
    """Draw an already traced ``ClosedJaxpr`` as a Graph (see module docstring);
    ``input_names``/``output_names`` label its inputs and outputs (``x``, ``∂loss/∂x``).

    The Graph's ``rebuild`` draws the program for the GraphExplorer (graph/explore.py);
    ``explore=True`` returns that first view (nested programs closed, long blocks as runs)
    and skips the budgeted drawing, which the explorer would not show.
    """
    from .explore import Explorer, Views

    tree = walk(closed_jaxpr.jaxpr)
    names = input_names if input_names and len(input_names) == len(tree.jaxpr.invars) else None
    names = names or [f"in{k}" for k in range(len(tree.jaxpr.invars))]
    explorer = Explorer(
        closed_jaxpr, tree, title=title, grad=grad, input_names=names, output_names=output_names
    )
    if explore:
        return explorer.graph(frozenset())
    # Layout time grows with edges as much as with nodes (a gradient's long residual
    # edges above all): past EDGE_BUDGET edges, draw again with a tighter node budget.
    node_budget = budget
    for _ in range(4):
        plan = _Plan(tree, depth=depth, budget=node_budget, input_names=names)
        emitter = _Emitter(plan, grad=grad)
        if output_names and len(output_names) == len(tree.jaxpr.outvars):
            emitter.output_names = output_names
        emitter.title = title
        emitter.program(tree, names)
        edges = tuple(dict.fromkeys(emitter.edges))
        if len(edges) <= EDGE_BUDGET or node_budget <= MIN_BUDGET:
            break
        node_budget = max(MIN_BUDGET, int(node_budget * EDGE_BUDGET / len(edges)))
    notes = tuple(plan.notes)
    if node_budget < budget:
        notes += (
            f"drawn with at most {node_budget} nodes rather than {budget}, to keep the "
            f"layout quick ({EDGE_BUDGET} edges at most)",
        )
    graph = assemble(tree, emitter, edges, closed_jaxpr, title=title, grad=grad, notes=notes)
    return dataclasses.replace(graph, rebuild=Views(explorer))


def assemble(
    tree: Block,
    emitter: _Emitter,
    edges: tuple[m.Edge, ...],
    closed_jaxpr: Any,
    *,
    title: str,
    grad: bool,
    notes: tuple[str, ...],
    n_equations: int | None = None,
) -> m.Graph:
    """The Graph of what ``emitter`` emitted: unused equations marked, loop carries added
    (``n_equations``: the program's, when the caller has counted them already)."""
    live: tuple[str, ...] = ()
    seeds: tuple[m.Edge, ...] = ()
    if grad:  # the forward value the report prints is live, its seed drawn next to it
        primal, seed = primal_and_seed(tree, closed_jaxpr)
        value, seed_node = emitter.var_node.get(primal), emitter.var_node.get(seed)
        if value is not None:
            live = (value,)
            if seed_node is not None and seed_node != value:
                seeds = (m.Edge(value, seed_node, m.SEEDS),)
    nodes = mark_unused(tuple(emitter.nodes), edges, live)
    return m.Graph(
        title=title,
        nodes=nodes,
        edges=edges + seeds + carry_edges(tree, {n.id for n in nodes}, emitter.var_node),
        clusters=tuple(emitter.clusters),
        notes=notes,
        n_equations=tree.n_equations if n_equations is None else n_equations,
        grad=grad,
        jaxpr=closed_jaxpr,
        var_node=emitter.var_node,
    )
