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
from jaxlab.session.collector import collector_paused

from ._base import JaxlabWidget
from .graph_fit import fitting, left_closed_note
from .graph_layout import box_clusters, fits, lay_out, layout, visible
from .graph_twin import shown_title, static_svg

__all__ = [
    "GraphExplorer",
    "box_clusters",
    "layout",
    "legend_entries",
    "shown_title",
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


def view_model(graph: m.Graph, view: dict[str, Any], said: str = "") -> dict[str, Any]:
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
        "notes": [*graph.notes, *([said] if said else [])],
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

    def __init__(
        self, graph: m.Graph, *, opened: Iterable[str] = (), fit: bool = True, **kwargs: Any
    ) -> None:
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
        self._said = ""  # what the view says it left closed to fit (graph_fit.py)
        self.observe(self._relayout, names=["opened"])
        self.on_msg(self._message)
        # The first view opens what is asked only as far as it fits a projector's pane at
        # full size, breadth-first, and says what it left closed (issue 34).
        with collector_paused():  # a view built and sent, then collected (session/collector.py)
            self.opened = self._fitted(list(opened)) if fit else list(opened)
            if not self.view:
                self._relayout()

    def _fitted(self, wanted: list[str], width: float = 0, height: float = 0) -> list[str]:
        """``wanted``, less what would make the view too big for a ``width`` x ``height``
        pane at scale 1 (the default pane: graph_layout's PANE_W x PANE_H); sets the note."""
        size = (width, height) if width > 0 and height > 0 else ()
        try:
            kept, left = fitting(self._draw, wanted, self._layouts, *size)
        except (RuntimeError, subprocess.TimeoutExpired):
            return wanted  # laid out as asked: the relayout reports what failed
        self._said = left_closed_note(left) if left else ""
        return kept

    def fit(self, width: float, height: float) -> None:
        """Close what keeps the view from fitting a ``width`` x ``height`` px pane at full
        size (never shrinking its text below 12 px): the page's "fit" when the drawing is
        bigger than the pane. What was left closed is said in the view."""
        if not (200 <= width <= 20000 and 150 <= height <= 20000):
            return
        if self.view and fits(self.view, width, height):
            return
        kept = self._fitted(list(self.opened), width, height)
        if kept != list(self.opened):
            self.opened = kept

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
        self._said = ""  # the reader chose what is open now
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
        with collector_paused():  # the view built and sent, then collected (session/collector.py)
            self._answer(content)

    def _answer(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind == "toggle":
            self.toggle(str(content.get("cluster", "")))
        elif kind == "search":
            self.search(str(content.get("query", "")))
        elif kind == "reveal":
            self.reveal(str(content.get("id", "")))
        elif kind == "fit":
            w, h = content.get("width"), content.get("height")
            if isinstance(w, (int, float)) and isinstance(h, (int, float)):
                self.fit(float(w), float(h))

    def _relayout(self, change: Any = None) -> None:
        """Lay out the view of ``opened``. Any failure (Graphviz, a timeout, an interrupt,
        a bug) puts ``opened`` back to the last view laid out, so the drawing and what
        the next click toggles stay in step; an interrupt is then raised again."""
        if self._restoring:
            return
        with collector_paused():  # a view built and sent, then collected (session/collector.py)
            self._lay_out_view(change)

    def _lay_out_view(self, change: Any) -> None:
        try:
            drawn = self._draw(frozenset(self.opened))
            explorer = _explorer_of(self._graph)
            key = frozenset(c for c in self.opened if not c.startswith("scope:"))
            chosen = visible(drawn, self.opened, explorer.carried(key) if explorer else None)
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
        # One message to the page with everything the view changed (the browser redraws
        # when the view changes, the records set with it), then the twin's update.
        with self.twin_once(), self.hold_sync():
            self.model = view_model(drawn, laid, self._said)
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
        notes = [str(n) for n in self.model.get("notes", [])]
        return static_svg(self._drawn, self.view, self.legend, notes)

    def _static_text(self) -> str:
        return self._graph.describe()


SEARCH_MOST = 200  # matches listed (each with its box); all are counted


def _explorer_of(graph: m.Graph) -> Explorer | None:
    views = graph.rebuild
    return views.explorer if isinstance(views, Views) else None
