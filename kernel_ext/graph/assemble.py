"""The Graph of what an emitter emitted: unused equations marked, loop carries added.

Shared by the budgeted drawing (``from_jaxpr``) and the GraphExplorer's views
(``explore``), which emit differently and assemble alike.
"""

from __future__ import annotations

from typing import Any

from . import model as m
from .emit import _Emitter
from .marks import carry_edges, mark_unused, primal_and_seed
from .walk import Block

__all__ = ["assemble"]


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
