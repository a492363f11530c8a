"""The GraphExplorer's views emitted: a block as its runs, closed runs one SEGMENT node
each, open ones a cluster; what is closed follows the opened set, not a node budget.

The explorer (``explore.Explorer``) knows the program (its runs, their names and
summaries) and draws a view with these; they ask it only what :class:`Explored` lists,
so this module sits below it and never imports it.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax.extend.core as jcore

from . import model as m
from .emit import _Emitter, _phase
from .plan import _Plan
from .walk import Block, Item

# How a repeated layer's summary starts (the page marks the box "repeat" by it).
REPEAT = "repeat: the same equations as the first call · "


class RunSummary(NamedTuple):
    """What a closed run reads from outside, writes, holds and says (Explorer.run_summary)."""

    reads: tuple[Any, ...]  # variables read from outside the run, first read first
    writes: tuple[Any, ...]  # variables it defines
    n: int  # equations, nested ones included
    top: str  # its most frequent primitive
    types: tuple[str, ...]  # its last equation's output types
    source: str | None  # its first equation's line
    text: str  # "120 eqns: dot_general×40, ..."


class Explored(Protocol):
    """What a view's plan and emitter ask of the explorer."""

    tree: Block
    nested: set[str]
    io_groups: list[tuple[str, list[int]]] | None

    def pieces(self, block: Block, lo: int, hi: int) -> list[tuple[int, int]] | None: ...

    def run_id(self, block: Block, lo: int, hi: int) -> str: ...

    def run_label(self, block: Block, lo: int, hi: int) -> str | None: ...

    def repeats(self, block: Block, lo: int, hi: int) -> bool: ...

    def run_summary(self, run: list[Item], run_id: str) -> RunSummary: ...


class ExplorePlan(_Plan):
    """The explorer's plan: what is closed follows the opened set, not a node budget."""

    keep_group_edges = True

    def __init__(self, explorer: Explored, opened: frozenset[str]) -> None:
        # Not _Plan.__init__: that one measures the whole program against a budget, which
        # is what the explorer must not pay for. The emitter reads these attributes.
        self.explorer = explorer
        self.opened = opened
        self.collapsed = explorer.nested - opened
        self.io_groups = explorer.io_groups
        self.segment_length = {}
        self.notes = []
        j = explorer.tree.jaxpr
        if self.io_groups is not None:
            self.notes.append(
                f"{len(j.invars)} inputs drawn as {len(self.io_groups)} argument nodes"
                + (f" and {len(j.outvars)} outputs as one" if len(j.outvars) > 1 else "")
            )
        self.io = 0


class ExploreEmitter(_Emitter):
    """Emits a block as its runs: closed runs one SEGMENT node, open ones a cluster.
    ``carried``: the arrays (jaxpr Vars) each edge carries, by (src, dst): an argument
    drawn as one node sends several arrays along one edge (issue 34's bundle labels)."""

    plan: ExplorePlan

    def __init__(self, plan: ExplorePlan, *, grad: bool) -> None:
        super().__init__(plan, grad=grad)
        self.carried: dict[tuple[str, str], set[Any]] = {}

    def _edge_from(self, var: Any, dst: str) -> None:
        super()._edge_from(var, dst)
        if not isinstance(var, jcore.Literal):
            src = self.var_node.get(var)
            if src is not None and src != dst:
                self.carried.setdefault((src, dst), set()).add(var)

    def block(self, block: Block, cluster: str | None, phase: str | None) -> None:
        self._range(block, 0, len(block.items) - 1, cluster, phase)

    def _range(
        self, block: Block, lo: int, hi: int, cluster: str | None, phase: str | None
    ) -> None:
        explorer = self.plan.explorer
        pieces = explorer.pieces(block, lo, hi)
        if pieces is None:
            for item in block.items[lo : hi + 1]:
                self.item(item, cluster, phase)
            return
        for a, b in pieces:
            if a == b:
                self.item(block.items[a], cluster, phase)
                continue
            run_id = explorer.run_id(block, a, b)
            run: list[Item] = block.items[a : b + 1]
            run_phase = _phase(run[0].eqn, phase, self.grad)
            named = explorer.run_label(block, a, b)
            if run_id in self.plan.opened:
                n = sum(item.n_equations for item in run)
                label = named or f"equations {a}–{b} ({n})"
                depth = run[0].depth
                self.clusters.append(m.Cluster(run_id, "run", label, cluster, depth, n))
                self._range(block, a, b, run_id, phase)
            else:
                repeat = explorer.repeats(block, a, b)
                self._run_node(run, run_id, cluster, run_phase, named, repeat)

    def _run_node(
        self,
        run: list[Item],
        run_id: str,
        cluster: str | None,
        phase: str | None,
        named: str | None = None,
        repeat: bool = False,
    ) -> None:
        """``run`` closed: one SEGMENT node, as ``_Emitter.segment`` draws it, from a
        summary kept across views (a toggle re-emits every closed run of the view)."""
        summary = self.plan.explorer.run_summary(run, run_id)
        text = REPEAT + summary.text if repeat else summary.text
        # As _edge_from for each read (a closed backward run reads thousands of residuals),
        # with one edge per source: the view keeps each edge's first only.
        drawn: set[str] = set()
        for v in summary.reads:
            src = self.var_node.get(v)
            if src is not None and src != run_id:
                self.carried.setdefault((src, run_id), set()).add(v)
                if src not in drawn:
                    drawn.add(src)
                    self.edges.append(m.Edge(src, run_id))
        self.nodes.append(
            m.Node(
                run_id,
                m.SEGMENT,
                named or f"{summary.n} equations",
                cluster=cluster,
                primitive=summary.top,
                types=summary.types,
                source=summary.source,
                phase=phase,
                summary=text,
                n_equations=summary.n,
            )
        )
        for v in summary.writes:
            self.var_node[v] = run_id
