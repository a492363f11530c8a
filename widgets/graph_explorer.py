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
pans (one transform on the drawing; a big view keeps in the page only what is near the
pane), zooms, fits to the output's width, shows a node's details on hover or click
(types, the raw equation, source, value and adjoint) and highlights what a clicked node
depends on and what depends on it, along the visible edges (a closed box stands for all
it holds).
Search runs in the kernel over the whole program (primitive, equation id, parameters,
source line, argument names): matches are counted, and stepping to one inside a closed
box opens what holds it. Saved and exported notebooks show the static SVG of the view.
"""

from __future__ import annotations

import dataclasses
import html
import math
import subprocess
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import traitlets

from jaxlab.graph import model as m
from jaxlab.graph import overlay
from jaxlab.graph.explore import REPEAT, Explorer, Views
from jaxlab.graph.names import shorten

from ._base import JaxlabWidget
from .graph_layout import box_clusters, lay_out, layout, visible

__all__ = [
    "GraphExplorer",
    "box_clusters",
    "layout",
    "legend_entries",
    "static_svg",
    "visible",
    "with_scopes",
]


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


def _node_record(n: m.Node, graph: m.Graph | None = None) -> dict[str, Any]:
    record = asdict(n)
    record["value"] = n.value.text() if n.value is not None else None
    record["adjoint"] = n.adjoint.text() if n.adjoint is not None else None
    record.update(_overlay_record(graph, n))
    return record


def _overlay_record(graph: m.Graph | None, n: m.Node | None) -> dict[str, Any]:
    """An overlay's value as the page draws it (graph/overlay.py): fill colour and the
    hover text (value and share); NaN never reaches JSON."""
    value = n.overlay if n is not None else None
    if graph is None or value is None:
        return {"overlay": None, "overlay_text": "", "overlay_colour": None}
    return {
        "overlay": value if math.isfinite(value) else None,
        "overlay_text": overlay.node_text(graph, value),
        "overlay_colour": overlay.colour(graph, value),
    }


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
            record["diff"] = (node.diff if node is not None else "") or c.diff
            record.update(_overlay_record(graph, node))
            records.append(record)
    return {
        "title": graph.title,
        "nodes": [_node_record(by_id[k], graph) for k in shown],
        "clusters": records,
        "notes": list(graph.notes),
        "n_equations": graph.n_equations,
        "grad": graph.grad,
    }


# Every mark the explorer can draw, in the legend's order: (mark, what it says). The page
# draws each with the same CSS class as the thing it explains (jaxlab-ge-legend-<mark>).
LEGEND = (
    ("forward", "forward pass"),
    ("backward", "backward pass"),
    ("input", "input: an argument"),
    ("output", "output: a result"),
    ("const", "constant"),
    ("seed", "seed ∂f/∂f = 1: starts the backward pass"),
    ("port", "a nested program's parameter or result"),
    ("residual", "residual: kept for the backward pass"),
    ("unused", "dotted: reaches no output"),
    ("fixed", "faded: argument held fixed (not differentiated)"),
    ("closed", "dashed box: a closed program or run"),  # the live page adds "click to open"
    ("repeat", "repeat: a call made of the same equations as the site's first"),
    ("carry", "dashed arrow: a loop's carry, fed back to the next iteration"),
    ("seeds", "dotted arrow: the value the seed differentiates"),
    # The live page adds how to choose the node (a click); the docs site has no kernel
    # and promises none.
    ("upstream", "highlighted: what the chosen node depends on"),
    ("downstream", "highlighted: what depends on the chosen node"),
    # Two programs compared (jaxlab.diff, graph/diff.py).
    ("added", "added: only the second program has it"),
    ("removed", "removed: only the first program has it"),
    ("changed", "changed: other shapes, dtypes or parameters"),
    ("holds", "holds a difference: open it to see where"),
    # An overlay (graph.overlay, graph/overlay.py): the entry's text is the view's scale.
    ("overlay", "fill: the overlay's value, light low, dark high"),
    ("overlay-diverging", "fill: the overlay's value, blue below 0, red above"),
)


def legend_entries(graph: m.Graph, view: dict[str, Any]) -> list[dict[str, str]]:
    """The legend of a laid-out view: one entry ``{mark, text}`` per colour or mark it
    draws, no more (a forward-only program has no "backward pass" entry)."""
    by_id = {n.id: n for n in graph.nodes}
    # A closed box ("cluster:run0-2") wears its node's phase and kind too.
    ids = (k.removeprefix("cluster:") for k in view["nodes"])
    shown = [by_id[k] for k in ids if k in by_id]
    marks: set[str] = set()
    for n in shown:
        marks.update(x for x in (n.phase, n.kind) if x)
        marks.update(
            mark
            for mark, on in (
                ("residual", n.residual),
                ("unused", n.unused),
                ("fixed", n.role == m.FIXED),
                ("seed", n.role == m.SEED),
            )
            if on
        )
    if m.SEED in marks:
        marks.discard("const")  # the seed is the only constant of a gradient, named
        if any(n.kind == m.CONST and n.role != m.SEED for n in shown):
            marks.add("const")
    if any(k.startswith("cluster:") for k in view["nodes"]):
        marks.add("closed")
    if any(n.kind == m.SEGMENT and n.summary.startswith(REPEAT) for n in shown):
        marks.add("repeat")
    marks.update(n.diff for n in shown if n.diff)
    boxed = {k.removeprefix("cluster:") for k in view["nodes"]} | set(view.get("frames", ()))
    marks.update(c.diff for c in graph.clusters if c.diff and c.id in boxed)
    kinds = {e.get("kind") for e in view["edges"]}
    marks.update(k for k in (m.CARRY, m.SEEDS) if k in kinds)
    if view["edges"]:
        marks.update(("upstream", "downstream"))
    if graph.overlay_name and any(n.overlay is not None for n in shown):
        marks.add("overlay-diverging" if overlay.diverging(graph) else "overlay")
    scale = overlay.legend_text(graph) if graph.overlay_name else ""
    return [
        {"mark": mark, "text": scale if mark.startswith("overlay") else text}
        for mark, text in LEGEND
        if mark in marks
    ]


class GraphExplorer(JaxlabWidget, static="graph_explorer"):
    """An explorable view of a :class:`jaxlab.graph.Graph` (``%jaxpr``, ``%grad --graph``)."""

    model = traitlets.Dict().tag(sync=True)  # the visible nodes' records, clusters, notes
    opened = traitlets.List(traitlets.Unicode()).tag(sync=True)  # open cluster ids
    view = traitlets.Dict().tag(sync=True)  # the layout of what is visible
    found = traitlets.Dict().tag(sync=True)  # the last search: query, total, matches
    error = traitlets.Unicode("").tag(sync=True)
    # The view's legend, computed here from what it draws (see ``legend``); the page
    # only renders it.
    legend = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, graph: m.Graph, *, opened: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._graph = graph
        self._built: tuple[frozenset[str], m.Graph] | None = None
        if graph.view_of is not None and graph.rebuild is not None:  # built for a view
            self._built = (graph.view_of, with_scopes(graph))
        self._drawn = with_scopes(graph)  # what the explorer draws now: scopes as clusters
        self._rep: dict[str, str] = {}
        # Each open box's layout, reused: those of the view shown and of the one before it
        # (closing what was just opened lays out nothing), so what an explorer holds
        # follows what it shows, not every view it ever showed.
        self._layouts: dict[Any, dict[str, Any]] = {}
        self._shown_layouts: dict[Any, dict[str, Any]] = {}
        self._restoring = False
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
        """Lay out the view of ``opened``. Any failure (Graphviz, a timeout, an interrupt,
        a bug) puts ``opened`` back to the last view laid out, so the drawing and what
        the next click toggles stay in step; an interrupt is then raised again."""
        if self._restoring:
            return
        try:
            drawn = self._draw(frozenset(self.opened))
            chosen = visible(drawn, self.opened)
            used: dict[Any, dict[str, Any]] = {}
            laid = lay_out(drawn, chosen, self._layouts, used)
        except BaseException as e:
            self._restore(change)
            if not isinstance(e, Exception):
                raise  # KeyboardInterrupt, SystemExit: the user's, after the restore
            if isinstance(e, (RuntimeError, subprocess.TimeoutExpired)):
                self.error = str(e)
            else:
                self.error = f"jaxlab could not lay out this view ({type(e).__name__}: {e})"
            return
        self._layouts = {**self._shown_layouts, **used}
        self._shown_layouts = used
        self._drawn, self._rep = drawn, chosen["rep"]
        # The records first: the browser redraws when the view changes.
        self.model = view_model(drawn, laid)
        self.legend = legend_entries(drawn, laid)
        self.view = laid
        self.error = ""
        if self._query:
            self.found = self._found()

    def _restore(self, change: Any) -> None:
        """``opened`` as it was for the view shown (a change's old value)."""
        if not isinstance(change, dict) or "old" not in change:
            return
        self._restoring = True
        try:
            self.opened = list(change["old"])
        finally:
            self._restoring = False

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
        return static_svg(self._drawn, self.view, self.legend)

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


def static_svg(
    graph: m.Graph, view: dict[str, Any], legend: list[dict[str, str]] | None = None
) -> str:
    """An inline SVG of a laid-out view (every user string escaped, no script): boxes,
    titles at 14 px and rows at 12 px, edges, a <title> tooltip per node."""
    esc = html.escape
    by_id = {n.id: n for n in graph.nodes}
    clusters = box_clusters(graph)
    pad = 16
    width, height = _num(view["width"]) + 2 * pad, _num(view["height"]) + 2 * pad
    out = [
        f'<svg class="jaxlab-ge-static" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" style="{_STATIC_STYLE}">',
        # The arrowhead the live view draws (each edge ends at its box's edge).
        '<defs><marker id="jaxlab-ge-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="currentColor" stroke="none" opacity="0.55"/>'
        "</marker></defs>",
        f'<g transform="translate({pad},{pad})" fill="none" stroke="currentColor">',
    ]
    for e in view["edges"]:
        p = [(_num(px), _num(py)) for px, py in e["points"]]
        if not p:
            continue
        d = f"M{p[0][0]:.1f},{p[0][1]:.1f}" + "".join(
            f" C{p[i][0]:.1f},{p[i][1]:.1f} {p[i + 1][0]:.1f},{p[i + 1][1]:.1f} "
            f"{p[i + 2][0]:.1f},{p[i + 2][1]:.1f}"
            for i in range(1, len(p) - 2, 3)
        )
        dash = {m.CARRY: ' stroke-dasharray="6 3"', m.SEEDS: ' stroke-dasharray="1 3"'}.get(
            e.get("kind", ""), ""
        )
        colour = f' stroke="{_CARRY}"' if e.get("kind") == m.CARRY else ""
        out.append(
            f'<path d="{d}" stroke-opacity="0.55"{dash}{colour} '
            'marker-end="url(#jaxlab-ge-arrow)"/>'
        )
    for node_id, box in view["nodes"].items():
        x, y, w, h = (_num(v) for v in box)
        if node_id.startswith("cluster:"):
            c = clusters.get(node_id[len("cluster:") :])
            if c is None:
                continue
            node = by_id.get(c.id)
            repeat = " · repeat" if node is not None and node.summary.startswith(REPEAT) else ""
            title, rows = f"▸ {shorten(c.label)}", [f"{c.n_equations} equations{repeat}"]
            tip = c.label
            dash = ' stroke-dasharray="4 2"'
            stroke = _stroke(node) if node is not None else ""
            shade = node
        else:
            n = by_id.get(node_id)
            if n is None:
                continue
            title = shorten(n.label)
            leaves = n.params if n.kind in (m.INPUT, m.OUTPUT) else ""
            tip = " · ".join(x for x in (n.label, n.raw, n.source or "", leaves) if x)
            rows = [" ".join(n.types)] if n.types else []
            rows += [f"= {n.value.text()}"] if n.value is not None else []
            rows += [f"∂ {n.adjoint.text()}"] if n.adjoint is not None else []
            faded = n.unused or n.role == m.FIXED
            dash = ' stroke-dasharray="2 2" opacity="0.5"' if faded else ""
            stroke = _stroke(n)
            shade = n
        fill, text_colour = "", "currentColor"
        if graph.overlay_name and shade is not None and shade.overlay is not None:
            tip += " · " + overlay.node_text(graph, shade.overlay)
            found = overlay.colour(graph, shade.overlay)
            if found is not None:  # a colour of the scale's own (never the user's text)
                fill, text_colour = f' fill="{found}"', "#222"
        out.append(f'<g transform="translate({x:.1f},{y:.1f})"{dash}><title>{esc(tip)}</title>')
        out.append(f'<rect width="{w:.1f}" height="{h:.1f}" rx="4"{stroke}{fill}/>')
        out.append(
            f'<text x="8" y="19" fill="{text_colour}" stroke="none" font-size="14" '
            f'font-weight="600">{esc(_clip(title, w, 8.5))}</text>'
        )
        for k, row in enumerate(rows):
            out.append(
                f'<text x="8" y="{36 + 17 * k}" fill="{text_colour}" stroke="none" '
                f'font-size="12">{esc(_clip(row, w, 7))}</text>'
            )
        out.append("</g>")
    out.append("</g></svg>")
    notes = "".join(f"<div>{esc(note)}</div>" for note in graph.notes)
    key = " · ".join(esc(entry.get("text", "")) for entry in legend or [])
    key = f'<div class="jaxlab-ge-legend">{key}</div>' if key else ""
    return f"<div><b>{esc(graph.title)}</b>{notes}{key}{''.join(out)}</div>"


# The live view's colours (static/graph_explorer.css), for the saved twin, which has no
# stylesheet: inputs green, outputs amber, residuals orange, forward blue, backward red.
_CARRY = "#7b4fb0"
_KIND_STROKE = {m.INPUT: "#3a9a3a", m.OUTPUT: "#c89400"}
_PHASE_STROKE = {m.FORWARD: "#3b6fb6", m.BACKWARD: "#c04646"}
_DIFF_STROKE = {"added": "#1a7f37", "removed": "#cf222e", "changed": "#b07800", "holds": "#b07800"}


def _stroke(n: m.Node) -> str:
    """The border a node's box wears in the live view, as SVG attributes."""
    if n.diff in _DIFF_STROKE:
        dash = ' stroke-dasharray="5 3"' if n.diff == "removed" else ""
        return f' stroke="{_DIFF_STROKE[n.diff]}" stroke-width="3"{dash}'
    if n.kind in _KIND_STROKE:
        return f' stroke="{_KIND_STROKE[n.kind]}" stroke-width="2"'
    if n.residual:
        return ' stroke="#c26a00" stroke-width="2"'
    colour = _PHASE_STROKE.get(n.phase or "")
    return f' stroke="{colour}"' if colour else ""


def _num(value: Any) -> float:
    """A coordinate as a finite number: whatever the view holds, only a number is
    written into the SVG."""
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"not a finite coordinate: {value!r}")
    return number


def shown_title(text: str, width: float) -> str:
    """A node's name as the explorer draws it in a box ``width`` wide (graph_explorer.js
    does the same): whole up to ``names.WHOLE`` characters, else shortened keeping its
    end, and never past the box."""
    return _clip(shorten(text), width, 8.5)


def _clip(text: str, width: float, px: float) -> str:
    """``text`` cut to fit a box ``width`` wide (the whole of it is in the tooltip)."""
    most = max(4, int((width - 14) // px))
    return text if len(text) <= most else text[: most - 1] + "…"
