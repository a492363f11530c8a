"""An already traced ``ClosedJaxpr`` → Graph: the budgeted drawing, and the explorer's
views as its ``rebuild``.

Big programs stay drawable: above a node budget the deepest, then largest, nested
programs collapse into one node each; if a block is still too long (a flat 10,000
equation gradient), runs of consecutive equations become segment nodes. The Graph's
``notes`` say what was collapsed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..session.collector import collector_paused
from . import model as m
from .assemble import assemble
from .emit import _Emitter
from .plan import DEFAULT_BUDGET, EDGE_BUDGET, MIN_BUDGET, _Plan
from .walk import walk

__all__ = ["graph_from_jaxpr"]


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
    with collector_paused():  # the trace's garbage collected after the drawing
        return _drawn(closed_jaxpr, title, grad, depth, budget, input_names, output_names, explore)


def _drawn(
    closed_jaxpr: Any,
    title: str,
    grad: bool,
    depth: int | None,
    budget: int,
    input_names: list[str] | None,
    output_names: list[str] | None,
    explore: bool,
) -> m.Graph:
    from .explore import Explorer, Views  # imported when drawn: import jaxlab stays light

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
