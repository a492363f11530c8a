"""A diff drawn: one side's Graph marked (``Node.diff``, ``Cluster.diff``), and two
Graphs side by side in the clusters ``before`` and ``after`` (graph/diff.py's drawing).
"""

from __future__ import annotations

import dataclasses
import re

from . import model as m

# The marks (Node.diff, Cluster.diff).
ADDED, REMOVED, CHANGED, HOLDS = "added", "removed", "changed", "holds"
BEFORE, AFTER = "before", "after"  # the drawing's two top-level clusters

_SEGMENT = re.compile(
    r"^(?P<prefix>(?:.*/)?)(?:run(?P<lo>\d+)-(?P<hi>\d+)|e(?P<a>\d+)-e(?P<b>\d+))$"
)


def _positions(item_id: str) -> list[tuple[str, int]]:
    """(block prefix, index) of ``item_id`` and of every equation holding it:
    ``e3/0/e5`` -> ``[("", 3), ("e3/0/", 5)]``."""
    found: list[tuple[str, int]] = []
    prefix = ""
    parts = item_id.split("/")
    k = 0
    while k < len(parts):
        part = parts[k]
        if not (part.startswith("e") and part[1:].isdigit()):
            return found
        found.append((prefix, int(part[1:])))
        prefix += part + "/"
        if k + 1 < len(parts) and parts[k + 1].isdigit():  # a cond branch, a while's parts
            prefix += parts[k + 1] + "/"
            k += 1
        k += 1
    return found


def mark(graph: m.Graph, marks: dict[str, str]) -> m.Graph:
    """``graph`` with ``Node.diff`` and ``Cluster.diff`` set from one side's ``marks``: a
    drawn equation by its own mark, a run of equations or a box that holds a marked one
    as holding a difference."""
    dirty: dict[str, set[int]] = {}
    for key in marks:
        for prefix, index in _positions(key):
            dirty.setdefault(prefix, set()).add(index)
    prefixes = {p.rstrip("/") for p in dirty if p}

    def of(node_id: str) -> str:
        if node_id in marks:
            return marks[node_id]
        run = _SEGMENT.match(node_id)
        if run is not None:
            lo = int(run.group("lo") or run.group("a"))
            hi = int(run.group("hi") or run.group("b"))
            if any(lo <= k <= hi for k in dirty.get(run.group("prefix"), ())):
                return HOLDS
            return ""
        owner, _, branch = node_id.rpartition("/")
        if branch.isdigit() and marks.get(owner) in (ADDED, REMOVED):
            return marks[owner]  # a branch of an added or removed cond
        return HOLDS if node_id in prefixes else ""

    nodes = tuple(
        dataclasses.replace(n, diff=d) if (d := of(n.id)) and n.kind != m.PORT else n
        for n in graph.nodes
    )
    clusters = tuple(
        dataclasses.replace(c, diff=d) if (d := of(c.id)) else c for c in graph.clusters
    )
    return dataclasses.replace(graph, nodes=nodes, clusters=clusters)


def side_by_side(
    before: m.Graph,
    after: m.Graph,
    *,
    title: str,
    labels: tuple[str, str] | None = None,
    notes: tuple[str, ...] = (),
) -> m.Graph:
    """Two Graphs as one, each inside a top-level cluster (``before``, ``after``) whose id
    prefixes everything in it (``before/e3``), marks kept; ``labels`` name the clusters
    (by default the Graphs' titles)."""
    nodes: list[m.Node] = []
    edges: list[m.Edge] = []
    clusters: list[m.Cluster] = []
    names = labels or (before.title, after.title)
    for side, g, name in ((BEFORE, before, names[0]), (AFTER, after, names[1])):
        held = any(n.diff for n in g.nodes) or any(c.diff for c in g.clusters)
        clusters.append(
            m.Cluster(
                side, "program", f"{side}: {name}", None, 1, g.n_equations, HOLDS if held else ""
            )
        )
        for n in g.nodes:
            parent = f"{side}/{n.cluster}" if n.cluster else side
            nodes.append(dataclasses.replace(n, id=f"{side}/{n.id}", cluster=parent))
        for c in g.clusters:
            parent = f"{side}/{c.parent}" if c.parent else side
            clusters.append(
                dataclasses.replace(c, id=f"{side}/{c.id}", parent=parent, depth=c.depth + 1)
            )
        edges.extend(
            dataclasses.replace(e, src=f"{side}/{e.src}", dst=f"{side}/{e.dst}") for e in g.edges
        )
        notes += tuple(f"{side}: {note}" for note in g.notes)
    return m.Graph(
        title=title,
        nodes=tuple(nodes),
        edges=tuple(edges),
        clusters=tuple(clusters),
        notes=notes,
        n_equations=before.n_equations + after.n_equations,
        grad=before.grad or after.grad,
        jaxpr=after.jaxpr,
    )
