"""``GraphExplorer``: a jaxpr or gradient graph to open, search and read in the browser.

::

    from jaxlab.widgets import GraphExplorer
    GraphExplorer(jaxlab.jaxpr_graph(loss, params, x, grad=True, values=True))

Nested programs (an inner ``jit``, ``cond`` branches, ``scan``/``while`` bodies, custom
rules), runs of equations in long blocks and ``jax.named_scope`` groups start closed, one
box each; a click opens or closes one. Each view is built for what it shows only
(``Graph.rebuild``, graph/explore.py: a 10,000-equation program's first view is a few
dozen nodes) and laid out by Graphviz's ``dot`` in the kernel, so the cost follows the
view, not the program; only the visible nodes' records reach the browser. The browser
pans (a CSS transform: the compositor moves the drawing, nothing is repainted), zooms,
fits to the output's width, shows a node's details on hover or click (types, the raw
equation, source, value and adjoint) and highlights what a clicked node depends on and
what depends on it, along the visible edges (a closed box stands for all it holds).
Search runs in the kernel over the whole program (primitive, equation id, parameters,
source line, argument names): matches are counted, and stepping to one inside a closed
box opens what holds it. Saved and exported notebooks show the static SVG of the view.
"""

from __future__ import annotations

import dataclasses
import html
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import traitlets

from jaxlab.graph import model as m
from jaxlab.graph.explore import Explorer, Views

from ._base import JaxlabWidget

LAYOUT_TIMEOUT_S = 20.0
# As the static view: bounded network-simplex and mincross work, so a wide view lays out
# in about a second rather than minutes.
_LAYOUT_ARGS = ("-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.5", "-Gsearchsize=10")
_DPI = 72.0  # dot's plain output is in inches; the browser draws in points
HUB_EDGES = 6  # an input or output with more edges than this is a hub (see hubs)


def _closed_parent(
    cluster: str | None, opened: set[str], parent: dict[str, str | None]
) -> str | None:
    """The outermost closed cluster among ``cluster`` and its ancestors (None: all open)."""
    chain = []
    while cluster is not None:
        chain.append(cluster)
        cluster = parent.get(cluster)
    for c in reversed(chain):  # outermost first
        if c not in opened:
            return c
    return None


# Nodes that stand for what they hold, drawn as closed boxes ("cluster:<id>") that open.
_BOXES = (m.COLLAPSED, m.SEGMENT)


def visible(graph: m.Graph, opened: Iterable[str]) -> dict[str, Any]:
    """What is drawn with the clusters ``opened`` open: nodes, closed clusters as boxes
    (``"cluster:<id>"``; so are collapsed programs and runs), edges between them, the
    open clusters to frame, and ``rep``: each node's id -> what it is drawn as."""
    opened = set(opened)
    parent = {c.id: c.parent for c in graph.clusters}
    rep: dict[str, str] = {}
    nodes: list[str] = []
    boxes: list[str] = []
    for n in graph.nodes:
        closed = _closed_parent(n.cluster, opened, parent)
        if closed is None and n.kind in _BOXES:
            rep[n.id] = "cluster:" + n.id
            boxes.append(rep[n.id])
        elif closed is None:
            rep[n.id] = n.id
            nodes.append(n.id)
        else:
            rep[n.id] = "cluster:" + closed
            if rep[n.id] not in boxes:
                boxes.append(rep[n.id])
    frames = [
        c.id
        for c in graph.clusters
        if c.id in opened and _closed_parent(c.id, opened, parent) is None
    ]
    edges: dict[tuple[str, str], str] = {}
    for e in graph.edges:
        a, b = rep[e.src], rep[e.dst]
        if a != b:
            edges.setdefault((a, b), e.kind)
    return {
        "nodes": nodes,
        "boxes": boxes,
        "frames": frames,
        "edges": list(edges.items()),
        "rep": rep,
    }


def box_clusters(graph: m.Graph) -> dict[str, m.Cluster]:
    """Every cluster of ``graph`` and, as clusters, its collapsed programs and runs: what a
    ``"cluster:<id>"`` box of the view stands for."""
    found = {c.id: c for c in graph.clusters}
    for n in graph.nodes:
        if n.kind in _BOXES:
            found[n.id] = m.Cluster(
                n.id, n.primitive or n.kind, n.label, n.cluster, 0, n.n_equations
            )
    return found


def hubs(graph: m.Graph, view: dict[str, Any]) -> set[str]:
    """Visible inputs, constants and outputs with more than ``HUB_EDGES`` edges (the
    parameters of a deep model, its gradients gathered in one output node). dot routes
    their edges across every rank of the drawing, which costs most of its time (0.15 s
    against 0.03 s for a 45-node view of the 10,000-equation program), so they are placed
    first and last and their edges drawn straight (:func:`_hub_paths`)."""
    degree: dict[str, int] = {}
    for (a, b), _ in view["edges"]:
        degree[a] = degree.get(a, 0) + 1
        degree[b] = degree.get(b, 0) + 1
    kinds = {n.id: n.kind for n in graph.nodes}
    ends = (m.INPUT, m.CONST, m.OUTPUT)
    return {v for v, k in degree.items() if k > HUB_EDGES and kinds.get(v) in ends}


def _hub_paths(
    edges: list[tuple[tuple[str, str], str]], pos: dict[str, list[float]]
) -> list[dict[str, Any]]:
    """A hub's edges as curves from the bottom of one box to the top of the other."""
    paths = []
    for (a, b), kind in edges:
        (ax, ay, aw, ah), (bx, by, bw, _) = pos[a], pos[b]
        x0, y0, x1, y1 = ax + aw / 2, ay + ah, bx + bw / 2, by
        bend = max(20.0, abs(y1 - y0) / 3) * (1 if y1 >= y0 else -1)
        points = [[x0, y0], [x0, y0 + bend], [x1, y1 - bend], [x1, y1]]
        paths.append(
            {
                "src": a,
                "dst": b,
                "points": [[round(x, 1), round(y, 1)] for x, y in points],
                "kind": kind or "hub",
            }
        )
    return paths


def _dot_of(
    graph: m.Graph, view: dict[str, Any], hub: set[str] | None = None
) -> tuple[str, list[str]]:
    """DOT for the visible graph; node names are indices (no user text reaches dot).
    Edges of ``hub`` nodes are left out; hub inputs go first, hub outputs last."""
    hub = hub or set()
    ids = view["nodes"] + view["boxes"]
    index = {v: k for k, v in enumerate(ids)}
    by_id = {n.id: n for n in graph.nodes}
    clusters = box_clusters(graph)
    members: dict[str | None, list[str]] = {}
    for v in ids:
        if v.startswith("cluster:"):
            home = clusters[v[len("cluster:") :]].parent
        else:
            home = by_id[v].cluster
        members.setdefault(home, []).append(v)
    children: dict[str | None, list[str]] = {}
    for c in view["frames"]:
        children.setdefault(clusters[c].parent, []).append(c)
    lines = [
        "digraph g {",
        "graph [rankdir=TB nodesep=0.25 ranksep=0.4];",
        "node [shape=box fixedsize=true];",
    ]

    def size(v: str) -> str:
        # The browser draws 14 px titles and 12 px rows: about 8 px per title character.
        width: float
        if v.startswith("cluster:"):
            c = clusters[v[len("cluster:") :]]
            width, rows = len(c.label) + 10, 2
        else:
            n = by_id[v]
            rows = 1 + bool(n.types) + (n.value is not None) + (n.adjoint is not None)
            texts = [" ".join(n.types)]
            texts += [f"= {n.value.text()}"] if n.value is not None else []
            texts += [f"∂ {n.adjoint.text()}"] if n.adjoint is not None else []
            # Rows are 12 px against the title's 14: about 0.85 of a title character.
            width = max([len(n.label), *(len(t) * 0.85 for t in texts), 14])
        inches = min(max(width * 8 + 20, 60), 420) / _DPI
        return f"width={inches:.3f} height={(rows * 17 + 12) / _DPI:.3f}"

    def emit(home: str | None, depth: int) -> None:
        for v in members.get(home, []):
            lines.append(f"n{index[v]} [{size(v)}];")
        for c in children.get(home, []):
            lines.append(f'subgraph cluster_{len(lines)} {{ margin=14; label="";')
            emit(c, depth + 1)
            lines.append("}")

    emit(None, 0)
    kinds = {n.id: n.kind for n in graph.nodes}
    for end, rank in ((m.INPUT, "min"), (m.CONST, "min"), (m.OUTPUT, "max")):
        placed = " ".join(f"n{index[v]};" for v in sorted(hub) if kinds[v] == end)
        if placed:
            lines.append(f"{{rank={rank}; {placed}}}")
    for (a, b), kind in view["edges"]:
        if a in hub or b in hub:
            continue
        if kind == m.CARRY:  # a loop-back edge must not pull its body apart
            lines.append(f"n{index[a]} -> n{index[b]} [constraint=false];")
        else:
            lines.append(f"n{index[a]} -> n{index[b]};")
    lines.append("}")
    return "\n".join(lines) + "\n", ids


def layout(graph: m.Graph, opened: Iterable[str]) -> dict[str, Any]:
    """Positions (points, y down) of the visible nodes, boxes and edges, by ``dot``."""
    return lay_out(graph, visible(graph, opened))


def lay_out(graph: m.Graph, view: dict[str, Any]) -> dict[str, Any]:
    """``layout`` of a view already chosen by :func:`visible`."""
    hub = hubs(graph, view)
    text, ids = _dot_of(graph, view, hub)
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz's `dot` is not installed: `sudo apt-get install graphviz`")
    done = subprocess.run(
        [dot, "-Tplain", *_LAYOUT_ARGS],
        input=text.encode(),
        capture_output=True,
        timeout=LAYOUT_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dot could not lay out the graph: {done.stderr.decode()[:300]}")
    height = 0.0
    pos: dict[str, list[float]] = {}
    paths: list[dict[str, Any]] = []
    kinds = {(a, b): k for (a, b), k in view["edges"]}
    for line in done.stdout.decode().splitlines():
        parts = line.split()
        if parts[0] == "graph":
            height = float(parts[3])
        elif parts[0] == "node":
            x, y, w, h = (float(p) for p in parts[2:6])
            pos[ids[int(parts[1][1:])]] = [
                round((x - w / 2) * _DPI, 1),
                round((height - y - h / 2) * _DPI, 1),
                round(w * _DPI, 1),
                round(h * _DPI, 1),
            ]
        elif parts[0] == "edge":
            a, b, n = ids[int(parts[1][1:])], ids[int(parts[2][1:])], int(parts[3])
            pts = [
                [
                    round(float(parts[4 + 2 * i]) * _DPI, 1),
                    round((height - float(parts[5 + 2 * i])) * _DPI, 1),
                ]
                for i in range(n)
            ]
            paths.append({"src": a, "dst": b, "points": pts, "kind": kinds.get((a, b), "")})
    paths += _hub_paths([(e, k) for e, k in view["edges"] if e[0] in hub or e[1] in hub], pos)
    return {
        "width": 0.0 if not pos else max(x + w for x, _, w, _ in pos.values()),
        "height": round(height * _DPI, 1),
        "nodes": pos,
        "edges": paths,
        "frames": view["frames"],
    }


def with_scopes(graph: m.Graph) -> m.Graph:
    """``graph`` with its top-level equations grouped by ``jax.named_scope`` (as
    TensorBoard groups by name scope): a cluster per scope path, forward and backward
    apart (``scope:forward:layer1``), to open and close like a nested program."""
    clusters: dict[str, m.Cluster] = {}
    nodes = []
    for n in graph.nodes:
        if n.cluster is not None or not n.scope or n.kind not in (m.EQUATION, m.COLLAPSED):
            nodes.append(n)
            continue
        parent = None
        parts = n.scope.split("/")
        for k in range(len(parts)):
            cid = f"scope:{n.phase or ''}:{'/'.join(parts[: k + 1])}"
            if cid not in clusters:
                back = " · backward" if n.phase == m.BACKWARD else ""
                clusters[cid] = m.Cluster(cid, "scope", parts[k] + back, parent, k + 1, 0)
            clusters[cid] = dataclasses.replace(
                clusters[cid], n_equations=clusters[cid].n_equations + max(n.n_equations, 1)
            )
            parent = cid
        nodes.append(dataclasses.replace(n, cluster=parent))
    if not clusters:
        return graph
    return dataclasses.replace(
        graph, nodes=tuple(nodes), clusters=(*graph.clusters, *clusters.values())
    )


def _node_record(n: m.Node) -> dict[str, Any]:
    record = asdict(n)
    record["value"] = n.value.text() if n.value is not None else None
    record["adjoint"] = n.adjoint.text() if n.adjoint is not None else None
    return record


def view_model(graph: m.Graph, view: dict[str, Any]) -> dict[str, Any]:
    """What the browser needs of a laid-out view: the records of the nodes it draws (never
    the whole program's), the clusters it frames or shows closed, the notes."""
    by_id = {n.id: n for n in graph.nodes}
    clusters = box_clusters(graph)
    shown = [k for k in view["nodes"] if not k.startswith("cluster:")]
    boxes = {k[len("cluster:") :] for k in view["nodes"] if k.startswith("cluster:")}
    records = []
    for c in clusters.values():
        if c.id in boxes or c.id in view["frames"] or c.primitive == "scope":
            record = asdict(c)
            node = by_id.get(c.id)  # a collapsed program or a run: what it holds
            record["summary"] = node.summary if node is not None else ""
            records.append(record)
    return {
        "title": graph.title,
        "nodes": [_node_record(by_id[k]) for k in shown],
        "clusters": records,
        "notes": list(graph.notes),
        "n_equations": graph.n_equations,
        "grad": graph.grad,
    }


class GraphExplorer(JaxlabWidget, static="graph_explorer"):
    """An explorable view of a :class:`jaxlab.graph.Graph` (``%jaxpr``, ``%grad --graph``)."""

    model = traitlets.Dict().tag(sync=True)  # the visible nodes' records, clusters, notes
    opened = traitlets.List(traitlets.Unicode()).tag(sync=True)  # open cluster ids
    view = traitlets.Dict().tag(sync=True)  # the layout of what is visible
    found = traitlets.Dict().tag(sync=True)  # the last search: query, total, matches
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, graph: m.Graph, *, opened: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._graph = graph
        self._built: tuple[frozenset[str], m.Graph] | None = None
        self._drawn = with_scopes(graph)  # what the explorer draws now: scopes as clusters
        self._rep: dict[str, str] = {}
        self._query = ""
        self.observe(self._relayout, names=["opened"])
        self.on_msg(self._message)
        self.opened = list(opened)
        if not self.view:
            self._relayout()

    @property
    def graph(self) -> m.Graph:
        return self._graph

    @property
    def drawn(self) -> m.Graph:
        """The Graph of the current view (what is opened drawn, the rest closed)."""
        return self._drawn

    def _draw(self, opened: frozenset[str]) -> m.Graph:
        """The Graph for ``opened``: rebuilt for the view when the graph can, else itself."""
        views = self._graph.rebuild
        if views is None:
            return with_scopes(self._graph)
        key = frozenset(c for c in opened if not c.startswith("scope:"))
        if self._built is None or self._built[0] != key:
            self._built = (key, with_scopes(views(key)))
        return self._built[1]

    def toggle(self, cluster: str) -> None:
        """Open a closed cluster, run or nested program, or close an open one (and what
        was open inside it)."""
        if cluster in self.opened:
            parent = {c.id: c.parent for c in self._drawn.clusters}

            def inside(c: str) -> bool:
                if c.startswith(cluster + "/"):
                    return True
                at: str | None = c
                while at is not None:
                    at = parent.get(at)
                    if at == cluster:
                        return True
                return False

            self.opened = [c for c in self.opened if c != cluster and not inside(c)]
        elif cluster in box_clusters(self._drawn):
            self.opened = [*self.opened, cluster]

    def search(self, query: str) -> dict[str, Any]:
        """Find ``query`` in the whole program (kernel-side): the count and the first
        matches, each with the box that shows it in the current view."""
        self._query = query
        self.found = self._found()
        return self.found

    def reveal(self, node_id: str) -> None:
        """Open what holds ``node_id`` (runs, nested programs, branches, scopes) so that
        it is drawn."""
        explorer = _explorer_of(self._graph)
        want = list(self.opened)
        holders = explorer.holders(node_id) if explorer is not None else []
        want += [h for h in holders if h not in want]
        drawn = self._draw(frozenset(want))
        parent = {c.id: c.parent for c in drawn.clusters}
        home = next((n.cluster for n in drawn.nodes if n.id == node_id), None)
        chain = []
        while home is not None:
            chain.append(home)
            home = parent.get(home)
        want += [c for c in reversed(chain) if c not in want]
        if want != list(self.opened):
            self.opened = want

    def _found(self) -> dict[str, Any]:
        query = self._query
        if not query.strip():
            return {"query": query, "total": 0, "matches": []}
        explorer = _explorer_of(self._graph)
        if explorer is not None:
            ids = explorer.search(query)
        else:
            q = query.strip().lower()
            ids = [
                n.id
                for n in self._drawn.nodes
                if any(q in (t or "").lower() for t in (n.label, n.primitive, n.raw, n.source))
                or q in n.id.lower()
            ]
        opened = set(self.opened)
        matches = []
        for node_id in ids[:SEARCH_MOST]:
            box = self._rep.get(node_id)
            if box is None and explorer is not None:
                closed = [h for h in explorer.holders(node_id) if h not in opened]
                box = "cluster:" + closed[0] if closed else None
            matches.append({"id": node_id, "box": box})
        return {"query": query, "total": len(ids), "matches": matches}

    def _message(self, _: Any, content: dict[str, Any], buffers: Any = None) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "toggle":
            self.toggle(str(content.get("cluster", "")))
        elif kind == "search":
            self.search(str(content.get("query", "")))
        elif kind == "reveal":
            self.reveal(str(content.get("id", "")))

    def _relayout(self, change: Any = None) -> None:
        try:
            drawn = self._draw(frozenset(self.opened))
            chosen = visible(drawn, self.opened)
            laid = lay_out(drawn, chosen)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            self.error = str(e)
            return
        self._drawn, self._rep = drawn, chosen["rep"]
        # The records first: the browser redraws when the view changes.
        self.model = view_model(drawn, laid)
        self.view = laid
        self.error = ""
        if self._query:
            self.found = self._found()

    # ------------------------------------------------------------------ static twin
    def _synced_change(self, change: dict[str, Any]) -> None:
        # The twin draws the view: a new search or the records sent before it change
        # nothing there, so only a new view (or error) rewrites it.
        if change.get("name") in ("view", "error"):
            super()._synced_change(change)

    def _static_html(self) -> str:
        # The view as last laid out, drawn here from the same positions: no second dot
        # run, and the saved notebook shows what the user last saw (with its tooltips).
        if not self.view.get("nodes"):
            return f"<pre>{html.escape(self.error)}\n{html.escape(self._graph.describe())}</pre>"
        return static_svg(self._drawn, self.view)

    def _static_text(self) -> str:
        return self._graph.describe()


SEARCH_MOST = 200  # matches listed (each with its box); all are counted


def _explorer_of(graph: m.Graph) -> Explorer | None:
    views = graph.rebuild
    return views.explorer if isinstance(views, Views) else None


_STATIC_STYLE = (
    "font-family:system-ui,sans-serif;max-width:100%;height:auto;"
    "background:var(--jp-layout-color0,#fff);color:var(--jp-ui-font-color1,#222)"
)


def static_svg(graph: m.Graph, view: dict[str, Any]) -> str:
    """An inline SVG of a laid-out view (every user string escaped, no script): boxes,
    titles at 14 px and rows at 12 px, edges, a <title> tooltip per node."""
    esc = html.escape
    by_id = {n.id: n for n in graph.nodes}
    clusters = box_clusters(graph)
    pad = 16
    width, height = view["width"] + 2 * pad, view["height"] + 2 * pad
    out = [
        f'<svg class="jaxlab-ge-static" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" style="{_STATIC_STYLE}">',
        f'<g transform="translate({pad},{pad})" fill="none" stroke="currentColor">',
    ]
    for e in view["edges"]:
        p = e["points"]
        d = f"M{p[0][0]},{p[0][1]}" + "".join(
            f" C{p[i][0]},{p[i][1]} {p[i + 1][0]},{p[i + 1][1]} {p[i + 2][0]},{p[i + 2][1]}"
            for i in range(1, len(p) - 2, 3)
        )
        dash = ' stroke-dasharray="6 3"' if e.get("kind") == m.CARRY else ""
        out.append(f'<path d="{d}" stroke-opacity="0.55"{dash}/>')
    for node_id, (x, y, w, h) in view["nodes"].items():
        if node_id.startswith("cluster:"):
            c = clusters[node_id[len("cluster:") :]]
            title, rows, tip = f"▸ {c.label}", [f"{c.n_equations} equations"], c.label
            dash = ' stroke-dasharray="4 2"'
        else:
            n = by_id[node_id]
            title, tip = n.label, " · ".join(x for x in (n.label, n.raw, n.source or "") if x)
            rows = [" ".join(n.types)] if n.types else []
            rows += [f"= {n.value.text()}"] if n.value is not None else []
            rows += [f"∂ {n.adjoint.text()}"] if n.adjoint is not None else []
            faded = n.unused or n.role == m.FIXED
            dash = ' stroke-dasharray="2 2" opacity="0.5"' if faded else ""
        out.append(f'<g transform="translate({x},{y})"{dash}><title>{esc(tip)}</title>')
        out.append(f'<rect width="{w}" height="{h}" rx="4"/>')
        out.append(
            f'<text x="8" y="19" fill="currentColor" stroke="none" font-size="14" '
            f'font-weight="600">{esc(_clip(title, w, 8.5))}</text>'
        )
        for k, row in enumerate(rows):
            out.append(
                f'<text x="8" y="{36 + 17 * k}" fill="currentColor" stroke="none" '
                f'font-size="12">{esc(_clip(row, w, 7))}</text>'
            )
        out.append("</g>")
    out.append("</g></svg>")
    notes = "".join(f"<div>{esc(note)}</div>" for note in graph.notes)
    return f"<div><b>{esc(graph.title)}</b>{notes}{''.join(out)}</div>"


def _clip(text: str, width: float, px: float) -> str:
    """``text`` cut to fit a box ``width`` wide (the whole of it is in the tooltip)."""
    most = max(4, int((width - 14) // px))
    return text if len(text) <= most else text[: most - 1] + "…"
