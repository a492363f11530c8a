"""Deciding what a drawing shows: which nested programs collapse and which runs of
equations become segments so a program fits the node budget (``_Plan``), and how the
inputs group into one node per argument. :mod:`jaxlab.graph.build` draws what it decides.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import jax.extend.core as jcore

from .walk import Block, Item

DEFAULT_BUDGET = 400  # drawn nodes
EDGE_BUDGET = 320  # drawn edges; see graph_from_jaxpr
MIN_BUDGET = 40
ROWS_PER_NODE_BUDGET = 0.4  # rows of equations allowed per node of budget (400 -> 160)


def _all_items(block: Block) -> list[Item]:
    found: list[Item] = []
    for item in block.items:
        found.append(item)
        for sub in item.blocks:
            found.extend(_all_items(sub))
    return found


class _Plan:
    """What to draw: which nested programs collapse, which runs of equations group."""

    # Edges from a grouped argument (one node for hundreds of parameter arrays) cross the
    # whole budgeted drawing hundreds of times and are left out; the explorer's plan,
    # which draws a few dozen nodes, keeps them (to visible consumers only).
    keep_group_edges = False

    def __init__(
        self, tree: Block, *, depth: int | None, budget: int, input_names: list[str]
    ) -> None:
        self.collapsed: set[str] = set()
        self.io_groups: list[tuple[str, list[int]]] | None = None  # see _group_inputs
        self.segment_length: dict[str, int] = {}  # block prefix -> equations per segment
        self.notes: list[str] = []
        nested = [item for item in _all_items(tree) if item.blocks]
        if depth is not None:
            self.collapsed = {item.id for item in nested if item.depth > depth}
            if self.collapsed:
                self.notes.append(
                    f"{len(self._outermost(nested))} nested programs deeper than "
                    f"depth {depth} drawn as one node each"
                )
        io = _io_nodes(tree)
        if io > budget // 4:  # hundreds of parameter arrays: one node per argument
            self.io_groups = _group_inputs(input_names)
            io = len(self.io_groups) + len(tree.jaxpr.constvars) + 1
            self.notes.append(
                f"{len(tree.jaxpr.invars)} inputs drawn as {len(self.io_groups)} argument "
                f"nodes and {len(tree.jaxpr.outvars)} outputs as one, without their edges"
            )
        self.io = io
        total = self.drawn(tree) + io
        if total > budget:
            total = self._collapse(nested, total, budget)
        rows = max(20, int(budget * ROWS_PER_NODE_BUDGET))
        self._segment(tree, budget if total > budget else None, rows)

    def _collapse(self, nested: list[Item], total: int, budget: int) -> int:
        """Collapse nested programs, deepest first, then largest, until under budget."""
        by_budget: list[Item] = []
        for item in sorted(nested, key=lambda it: (-it.depth, -self._drawn_item(it), it.id)):
            if total <= budget:
                break
            if item.id in self.collapsed or self._inside_collapsed(item.id):
                continue
            total -= self._drawn_item(item) - 1
            self.collapsed.add(item.id)
            by_budget.append(item)
        if by_budget:
            kept = [it for it in by_budget if not self._inside_collapsed(it.id)]
            kinds = Counter(it.primitive for it in kept)
            listed = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in kinds.most_common())
            self.notes.append(
                f"{len(kept)} nested programs ({listed}) collapsed to stay under "
                f"{budget} nodes; use --depth or a larger --budget to open them"
            )
        return total

    def _outermost(self, nested: list[Item]) -> list[Item]:
        return [
            it for it in nested if it.id in self.collapsed and not self._inside_collapsed(it.id)
        ]

    def _inside_collapsed(self, item_id: str) -> bool:
        parts = item_id.split("/")
        return any("/".join(parts[:k]) in self.collapsed for k in range(1, len(parts)))

    def _drawn_item(self, item: Item) -> int:
        if not item.blocks or item.id in self.collapsed:
            return 1
        ports = len(item.eqn.outvars) + (1 if item.primitive == "cond" else 0)
        return ports + sum(len(b.jaxpr.invars) + self.drawn(b) for b in item.blocks)

    def drawn(self, block: Block) -> int:
        return sum(self._drawn_item(item) for item in block.items)

    def _segment(self, tree: Block, budget: int | None, rows: int) -> None:
        """Group the top level's runs of equations when the drawing would exceed the node
        ``budget`` (None: it does not) or be too tall to read (``rows``)."""
        n = len(tree.items)
        by_nodes = 1
        if budget is not None:
            # Inputs and outputs are always drawn; when they alone crowd the budget, a
            # quarter of it (at least one node: --budget 1 to 3) still goes to the equations.
            by_nodes = math.ceil(n / max(budget - self.io - 2, budget // 4, 1))
        by_rows = math.ceil(_longest_chain(tree) / rows)
        length = max(by_nodes, by_rows)
        if length <= 1:
            return
        self.segment_length[tree.prefix] = length
        why = f"{budget} nodes" if by_nodes >= by_rows else f"about {rows} rows"
        self.notes.append(
            f"{n} top-level equations grouped into runs of up to {length} to stay under "
            f"{why}; use a larger --budget or --text for every equation"
        )


def _longest_chain(tree: Block) -> int:
    """The longest chain of dependent top-level equations: the drawing's height in rows."""
    rank: dict[Any, int] = {}
    longest = 0
    for item in tree.items:
        here = 1 + max((rank.get(v, 0) for v in item.eqn.invars if not _is_literal(v)), default=0)
        for v in item.eqn.outvars:
            rank[v] = here
        longest = max(longest, here)
    return longest


def _is_literal(v: Any) -> bool:
    return isinstance(v, jcore.Literal)


def _group_inputs(names: list[str]) -> list[tuple[str, list[int]]]:
    """Input positions grouped by the top-level argument they belong to."""
    groups: dict[str, list[int]] = {}
    for k, name in enumerate(names):
        root = re.split(r"[\[.]", name, maxsplit=1)[0]
        groups.setdefault(root, []).append(k)
    return list(groups.items())


def _io_nodes(tree: Block) -> int:
    j = tree.jaxpr
    return len(j.invars) + len(j.constvars) + len(j.outvars)
