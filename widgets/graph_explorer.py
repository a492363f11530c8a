"""``GraphExplorer``: a jaxpr or gradient graph to open, search and read in the browser.

::

    from jaxlab.widgets import GraphExplorer
    GraphExplorer(jaxlab.jaxpr_graph(loss, params, x, grad=True, values=True))

Nested programs (an inner ``jit``, ``cond`` branches, ``scan``/``while`` bodies, custom
rules) start closed, one box each; a click opens or closes one. The layout is Graphviz's
``dot`` in the kernel on what is visible only (open clusters' insides, closed ones as one
box), so its cost follows the view, not the program. The browser pans, zooms, fits to
the output's width, searches by primitive, variable, argument name or source line (matches
counted and stepped through), shows a node's details on hover or click (types, the raw
equation, source, value and adjoint) and highlights what a clicked node depends on and
what depends on it. Saved and exported notebooks show the static SVG of the graph.
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

from ._base import JaxlabWidget

LAYOUT_TIMEOUT_S = 20.0
# As the static view: bounded network-simplex and mincross work, so a wide view lays out
# in about a second rather than minutes.
_LAYOUT_ARGS = ("-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.5", "-Gsearchsize=10")
_DPI = 72.0  # dot's plain output is in inches; the browser draws in points


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


def visible(graph: m.Graph, opened: Iterable[str]) -> dict[str, Any]:
    """What is drawn with the clusters ``opened`` open: nodes, closed clusters as boxes
    (``"cluster:<id>"``), edges between them, and the open clusters to frame."""
    opened = set(opened)
    parent = {c.id: c.parent for c in graph.clusters}
    rep: dict[str, str] = {}
    nodes: list[str] = []
    boxes: list[str] = []
    for n in graph.nodes:
        closed = _closed_parent(n.cluster, opened, parent)
        if closed is None:
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
    return {"nodes": nodes, "boxes": boxes, "frames": frames, "edges": list(edges.items())}


def _dot_of(graph: m.Graph, view: dict[str, Any]) -> tuple[str, list[str]]:
    """DOT for the visible graph; node names are indices (no user text reaches dot)."""
    ids = view["nodes"] + view["boxes"]
    index = {v: k for k, v in enumerate(ids)}
    by_id = {n.id: n for n in graph.nodes}
    clusters = {c.id: c for c in graph.clusters}
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
    for (a, b), kind in view["edges"]:
        if kind == m.CARRY:  # a loop-back edge must not pull its body apart
            lines.append(f"n{index[a]} -> n{index[b]} [constraint=false];")
        else:
            lines.append(f"n{index[a]} -> n{index[b]};")
    lines.append("}")
    return "\n".join(lines) + "\n", ids


def layout(graph: m.Graph, opened: Iterable[str]) -> dict[str, Any]:
    """Positions (points, y down) of the visible nodes, boxes and edges, by ``dot``."""
    view = visible(graph, opened)
    text, ids = _dot_of(graph, view)
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


class GraphExplorer(JaxlabWidget, static="graph_explorer"):
    """An explorable view of a :class:`jaxlab.graph.Graph` (``%jaxpr``, ``%grad --graph``)."""

    model = traitlets.Dict().tag(sync=True)  # the Graph: nodes, edges, clusters, notes
    opened = traitlets.List(traitlets.Unicode()).tag(sync=True)  # open cluster ids
    view = traitlets.Dict().tag(sync=True)  # the layout of what is visible
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, graph: m.Graph, *, opened: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._graph = graph
        self._drawn = with_scopes(graph)  # what the explorer draws: scopes as clusters
        data = self._drawn.to_dict()
        data["nodes"] = [_node_record(n) for n in self._drawn.nodes]
        self.model = data
        self.observe(self._relayout, names=["opened"])
        self.on_msg(self._message)
        self.opened = list(opened)
        if not self.view:
            self._relayout()

    @property
    def graph(self) -> m.Graph:
        return self._graph

    def toggle(self, cluster: str) -> None:
        """Open a closed cluster, or close an open one (and everything inside it)."""
        if cluster in self.opened:
            self.opened = [
                c for c in self.opened if c != cluster and not c.startswith(cluster + "/")
            ]
        elif any(c.id == cluster for c in self._drawn.clusters):
            self.opened = [*self.opened, cluster]

    def _message(self, _: Any, content: dict[str, Any], buffers: Any = None) -> None:
        if isinstance(content, dict) and content.get("type") == "toggle":
            self.toggle(str(content.get("cluster", "")))

    def _relayout(self, change: Any = None) -> None:
        try:
            self.view = layout(self._drawn, self.opened)
            self.error = ""
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            self.error = str(e)

    # ------------------------------------------------------------------ static twin
    def _static_html(self) -> str:
        # The view as last laid out, drawn here from the same positions: no second dot
        # run, and the saved notebook shows what the user last saw (with its tooltips).
        if not self.view.get("nodes"):
            return f"<pre>{html.escape(self.error)}\n{html.escape(self._graph.describe())}</pre>"
        return static_svg(self._drawn, self.view)

    def _static_text(self) -> str:
        return self._graph.describe()


_STATIC_STYLE = (
    "font-family:system-ui,sans-serif;max-width:100%;height:auto;"
    "background:var(--jp-layout-color0,#fff);color:var(--jp-ui-font-color1,#222)"
)


def static_svg(graph: m.Graph, view: dict[str, Any]) -> str:
    """An inline SVG of a laid-out view (every user string escaped, no script): boxes,
    titles at 14 px and rows at 12 px, edges, a <title> tooltip per node."""
    esc = html.escape
    by_id = {n.id: n for n in graph.nodes}
    clusters = {c.id: c for c in graph.clusters}
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
