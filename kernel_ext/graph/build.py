"""jaxpr → Graph, the entry: trace a function, name its arguments as the call line names
them, draw it (``from_jaxpr``: what collapses, the emitted model; ``gradient`` for
``grad=True``), then apply the notes and annotations to the drawing and every view of it.

>>> g = jaxpr_graph(lambda x: jnp.sin(x) * 2.0, 1.0)   # doctest: +SKIP
>>> g.primitives()                                      # doctest: +SKIP
Counter({'sin': 1, 'mul': 1})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from . import model as m
from .arguments import argument_names, static_note
from .assemble import assemble
from .from_jaxpr import graph_from_jaxpr
from .plan import DEFAULT_BUDGET

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
        from .gradient import gradient_graph  # imported when drawn: import jaxlab stays light

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
            arg_names=arg_names,
            kwarg_names=dict(kwarg_names) if kwarg_names is not None else None,
        )
    split = split_static(fun, args, kwargs)
    own = argument_names(fun, split.args, split.kwargs)  # the function's own names
    fun, args, kwargs = split.fun, split.args, split.kwargs
    target = jax.grad(fun) if grad else fun
    closed = jax.make_jaxpr(target)(*args, **kwargs)
    names = argument_names(fun, args, kwargs, arg_names, kwarg_names)
    graph = graph_from_jaxpr(
        closed,
        title=f"grad({name})" if grad else name,
        grad=grad,
        depth=depth,
        budget=budget,
        input_names=names,
        explore=explore,
    )
    # Each step also applies to the explorer's views (explore.then).
    from .explore import then
    from .value_names import with_parameters

    graph = then(graph, lambda g: with_parameters(g, names, own, name))

    notes: tuple[str, ...] = (static_note(split.static_paths),) if split.changed else ()
    if split.outputs.paths:  # an updated model's activation, returned as eqx.filter_jit does
        notes += (static_note(split.outputs.paths, held="returned as they are (not arrays)"),)
    if notes:
        graph = then(graph, lambda g: dataclasses.replace(g, notes=(*g.notes, *notes)))
    if values:
        from .annotate import annotate

        graph = then(graph, lambda g: annotate(g, args, kwargs, grad=grad, fun=fun))
    return graph
