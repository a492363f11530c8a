"""Where the GraphExplorer draws what: the visible part of a Graph, laid out per open box.

:func:`visible` picks what is drawn for a set of opened ids (closed clusters, collapsed
programs and runs as one box each). :func:`lay_out` places it as Model Explorer does, one
open box at a time: Graphviz's ``dot`` lays out each open cluster's direct members (its
open sub-clusters as one node the size of their own layout), innermost first, and the
pieces are put together. A layout is kept per cluster and reused while its members do not
change, so opening a box lays out that box and the boxes around it, never the whole view:
a view of 3,440 nodes takes dot 20 s drawn as one graph and about a second this way.
Edges between members of one box are dot's splines; edges that cross a box's border, and
those of hubs (an input feeding dozens of boxes), are drawn as curves from one box to the
other. No user text reaches dot: its nodes are numbered.

>>> view = visible(graph, opened=["e3"])                       # doctest: +SKIP
>>> lay_out(graph, view)["nodes"]["e3/e0"]                      # doctest: +SKIP
[112.0, 64.5, 96.0, 46.0]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jaxlab.graph import model as m
from jaxlab.graph.names import shorten

from .graph_dot import dot_text, run_dot
from .graph_wrap import bottom_to_top, wrapped

HUB_EDGES = 6  # an input or output with more edges than this is a hub (see hubs)
HUB_REACH, HUB_STUB = 600.0, 18.0  # a hub's edge spanning more is drawn as a stub this long
FRAME_SIDE, FRAME_HEAD = 8.0, 24.0  # an open box's margin and its title's height
CACHE_MOST = 512  # per-cluster layouts kept
# The pane a view is laid out to suit (px at scale 1, 12 px text): a projector's 1280x720
# less JupyterLab's margins. A box laid out taller or wider is laid out left to right too,
# and the shape that needs less shrinking to fit is kept (issue 34).
# JupyterLab's output pane at 1280x720, the file browser put away, measured by
# tests/browser/test_fit_screen_in_lab.py: 1100 px wide; the explorer's pane at most 700 px tall.
PANE_W, PANE_H = 1100.0, 700.0
VIEW_PAD = 16.0  # the page's margin around the drawing (graph_explorer.js's PAD)
# A node is at least this many title characters wide (a 73 px "cos"): boxes as wide as
# their text, so a scan body of short operations fits a projector's pane (issue 34).
NAME_LEAST = 6
BUNDLE_ABOVE = 3  # more edges than this from one box into one open box: one bundle

# Nodes that stand for what they hold, drawn as closed boxes ("cluster:<id>") that open.
_BOXES = (m.COLLAPSED, m.SEGMENT)


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


def visible(
    graph: m.Graph,
    opened: Iterable[str],
    carried: Mapping[tuple[str, str], frozenset[int]] | None = None,
) -> dict[str, Any]:
    """What is drawn with the clusters ``opened`` open: nodes, closed clusters as boxes
    (``"cluster:<id>"``; so are collapsed programs and runs), edges between them, the
    open clusters to frame, and ``rep``: each node's id -> what it is drawn as.
    ``carried``: the arrays each of the graph's edges carries (the explorer's
    ``Explorer.carried``); ``arrays`` then holds those of each drawn edge whose graph
    edges all say theirs (a bundle's label counts them)."""
    opened = set(opened)
    parent = {c.id: c.parent for c in graph.clusters}
    rep: dict[str, str] = {}
    nodes: list[str] = []
    boxes: list[str] = []
    merged = _pass_through(graph, opened, parent)
    for n in graph.nodes:
        closed = _closed_parent(n.cluster, opened, parent)
        if n.id in merged:
            continue
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
    rep.update(merged)
    frames = [
        c.id
        for c in graph.clusters
        if c.id in opened and _closed_parent(c.id, opened, parent) is None
    ]
    edges: dict[tuple[str, str], str] = {}
    counts: dict[tuple[str, str], int] = {}  # graph edges each drawn edge stands for
    arrays: dict[tuple[str, str], frozenset[int]] = {}
    unknown: set[tuple[str, str]] = set()  # a graph edge whose arrays were not counted
    for e in graph.edges:
        a, b = rep[e.src], rep[e.dst]
        if a != b:
            edges.setdefault((a, b), e.kind)
            counts[(a, b)] = counts.get((a, b), 0) + 1
            found = None if carried is None else carried.get((e.src, e.dst))
            if found is None:
                unknown.add((a, b))
            else:
                arrays[(a, b)] = arrays.get((a, b), frozenset()) | found
    return {
        "nodes": nodes,
        "boxes": boxes,
        "frames": frames,
        "edges": list(edges.items()),
        "counts": counts,
        "arrays": {pair: found for pair, found in arrays.items() if pair not in unknown},
        "rep": rep,
    }


def _pass_through(
    graph: m.Graph, opened: set[str], parent: dict[str, str | None]
) -> dict[str, str]:
    """The ports of an open whole-program ``jit`` (the one box of the top level, which
    holds nothing else but inputs and outputs) that only pass an input in or an output
    out under the same name, each -> that input or output: drawn once, outside the
    frame, they save the frame two rows of repeated names (issue 34). A loop's or a
    cond's ports say what each iteration or branch receives, and stay."""
    calls = {c.id for c in graph.clusters if c.primitive in ("jit", "pjit")}
    tops = {c for c in opened if c in calls and parent.get(c, "") is None}
    ends = (m.INPUT, m.OUTPUT, m.CONST)
    whole = [n for n in graph.nodes if n.cluster is None and n.kind not in ends]
    if len(tops) != 1 or whole or sum(p is None for p in parent.values()) != 1:
        return {}
    by_id = {n.id: n for n in graph.nodes}
    into: dict[str, list[str]] = {}
    out_of: dict[str, list[str]] = {}
    for e in graph.edges:
        into.setdefault(e.dst, []).append(e.src)
        out_of.setdefault(e.src, []).append(e.dst)
    merged: dict[str, str] = {}
    for n in graph.nodes:
        if n.kind != m.PORT or n.cluster not in tops:
            continue
        for links, back, kind in ((into, out_of, m.INPUT), (out_of, into, m.OUTPUT)):
            outer = links.get(n.id, [])
            if len(outer) != 1 or outer[0] not in by_id:
                continue
            o = by_id[outer[0]]
            if (
                o.kind == kind
                and o.label == n.label
                and o.types == n.types
                and back.get(o.id) == [n.id]
            ):
                merged[n.id] = o.id
    return merged


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
    first and last and their edges drawn as curves (:func:`bottom_to_top`)."""
    degree: dict[str, int] = {}
    for (a, b), _ in view["edges"]:
        degree[a] = degree.get(a, 0) + 1
        degree[b] = degree.get(b, 0) + 1
    kinds = {n.id: n.kind for n in graph.nodes}
    ends = (m.INPUT, m.CONST, m.OUTPUT)
    return {v for v, k in degree.items() if k > HUB_EDGES and kinds.get(v) in ends}


def _stub(a: list[float], b: list[float], *, into: bool) -> list[list[float]]:
    """A short edge into the top of ``b`` (``into``) or out of the bottom of ``a``: a hub's
    edge to a box far away, which drawn whole would cross the drawing (and cost every
    frame of a pan its length in dashes)."""
    if into:
        x, y = b[0] + b[2] / 2, b[1]
        return [[x, y - HUB_STUB], [x, y - HUB_STUB / 2], [x, y - HUB_STUB / 2], [x, y]]
    x, y = a[0] + a[2] / 2, a[1] + a[3]
    return [[x, y], [x, y + HUB_STUB / 2], [x, y + HUB_STUB / 2], [x, y + HUB_STUB]]


def _size(
    key: str, by_id: dict[str, m.Node], clusters: dict[str, m.Cluster]
) -> tuple[float, float]:
    """A drawn node's box in points: the browser draws 14 px titles (at most 8.5 px a
    character, graph_explorer.js's ``clip``) and 12 px rows (7 px). A name is drawn
    whole up to ``names.WHOLE`` characters (longer ones shortened, ``names.shorten``),
    so its box is as wide as it needs."""
    width: float
    if key.startswith("cluster:"):
        width, rows = len(shorten(clusters[key[len("cluster:") :]].label)) + 10, 2
    else:
        n = by_id[key]
        rows = 1 + bool(n.types) + (n.value is not None) + (n.adjoint is not None)
        texts = [" ".join(n.types)]
        texts += [f"= {n.value.text()}"] if n.value is not None else []
        texts += [f"∂ {n.adjoint.text()}"] if n.adjoint is not None else []
        width = max([len(shorten(n.label)), *(len(t) * 7 / 8.5 for t in texts), NAME_LEAST])
    return min(max(width * 8.5 + 22, 60), 440), rows * 17 + 12


def _bundle(
    a: str, b: str, points: list[list[float]], pairs: list[tuple[str, str]], view: dict[str, Any]
) -> dict[str, Any]:
    """One drawn edge for the arrays from ``a`` into an open box ``b`` (or out of one):
    labelled with how many distinct arrays it carries ("40 arrays": an argument drawn as
    one node sends several along one edge, an array read in two boxes counts once), never
    a band of 40 curves. Where the arrays of some edge are not known it says how many
    edges it stands for ("12 edges"). ``pairs``: the drawn ends it stands for (the
    dependency highlight follows them)."""
    arrays: Mapping[tuple[str, str], frozenset[int]] = view.get("arrays", {})
    if all(pair in arrays for pair in pairs):
        label = f"{len(frozenset().union(*(arrays[pair] for pair in pairs)))} arrays"
    else:
        counts = view.get("counts", {})
        label = f"{sum(counts.get(pair, 1) for pair in pairs)} edges"
    return {
        "src": a.removeprefix("frame:"),
        "dst": b.removeprefix("frame:"),
        "points": points,
        "kind": "bundle",
        "label": label,
        "pairs": [list(pair) for pair in pairs],
    }


def _run_units(
    units: list[tuple[list[str], dict[str, tuple[float, float]], list[Any], list[Any]]],
) -> list[dict[str, Any]]:
    """Each box's members laid out by dot, top to bottom; a box too wide or too tall for
    the pane that way is laid out left to right as well, and wrapped into rows
    (graph_wrap) where neither fits, and the shape needing least shrinking to fit the
    pane is kept (a long chain, side-by-side loop bodies)."""
    if not units:
        return []
    # Both ways at once, in two dot processes side by side: waiting for the first to say
    # which boxes overflow before starting the second doubled an expansion's layout time.
    with ThreadPoolExecutor(max_workers=1) as pool:
        left_right = pool.submit(run_dot, [dot_text(*u, rankdir="LR") for u in units])
        laid = run_dot([dot_text(*u) for u in units])
        failed = left_right.exception()
    again = [k for k, one in enumerate(laid) if _overflow(one) > 1.0]
    if again and failed is not None:
        raise failed  # asked for only where top to bottom overflows, as before
    across = left_right.result() if again else []
    for k in again:
        if _overflow(across[k]) < _overflow(laid[k]):
            laid[k] = across[k]
        rows = wrapped(across[k], PANE_W - 2 * VIEW_PAD) if _overflow(laid[k]) > 1.0 else None
        if rows is not None and _overflow(rows) < _overflow(laid[k]):
            laid[k] = rows  # a long chain: left to right, wrapped into rows as text is
    for (names, *_), one in zip(units, laid, strict=True):
        try:
            one["nodes"] = {names[int(k)]: v for k, v in one["nodes"].items()}
            one["edges"] = [(names[int(a)], names[int(b)], p) for a, b, p in one["edges"]]
        except (IndexError, ValueError) as e:
            raise RuntimeError(f"dot named a node it was not given ({e})") from e
    return laid


def _overflow(laid: dict[str, Any]) -> float:
    """How many times too big for the pane a layout is (at most 1: it fits)."""
    return max((laid["width"] + 2 * VIEW_PAD) / PANE_W, (laid["height"] + 2 * VIEW_PAD) / PANE_H)


def fits(laid: dict[str, Any], width: float = PANE_W, height: float = PANE_H) -> bool:
    """Whether a laid-out view fits a pane ``width`` x ``height`` px at scale 1."""
    return laid["width"] + 2 * VIEW_PAD <= width and laid["height"] + 2 * VIEW_PAD <= height


def layout(graph: m.Graph, opened: Iterable[str]) -> dict[str, Any]:
    """Positions (points, y down) of the visible nodes, boxes and edges."""
    return lay_out(graph, visible(graph, opened))


def lay_out(
    graph: m.Graph,
    view: dict[str, Any],
    cache: MutableMapping[Any, dict[str, Any]] | None = None,
    used: MutableMapping[Any, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Lay out a view chosen by :func:`visible`, one open box at a time (see the module
    docstring); ``cache`` keeps each box's layout for the next view, and ``used`` is given
    the layouts this view is made of (what a caller keeps to hold no more than it shows)."""
    cache = {} if cache is None else cache
    by_id = {n.id: n for n in graph.nodes}
    clusters = box_clusters(graph)
    keys = view["nodes"] + view["boxes"]

    def home(key: str) -> str | None:
        if key.startswith("cluster:"):
            return clusters[key[len("cluster:") :]].parent
        return by_id[key].cluster

    # The tree of open boxes: each one's direct members (drawn nodes and open sub-boxes).
    members: dict[str | None, list[str]] = {None: []}
    for c in view["frames"]:
        members.setdefault(c, [])
    for c in view["frames"]:
        members[clusters[c].parent].append("frame:" + c)
    for key in keys:
        members[home(key)].append(key)

    def chain(key: str) -> dict[str | None, str]:
        """Each open box around ``key``, innermost first -> its member that holds key."""
        found: dict[str | None, str] = {}
        at, unit = key, home(key)
        while True:
            found[unit] = at
            if unit is None:
                return found
            at, unit = "frame:" + unit, clusters[unit].parent

    # Each edge is laid out by the innermost box holding both its ends (between the two
    # members that hold them); a hub's edges by none.
    hub = hubs(graph, view)
    unit_edges: dict[str | None, list[tuple[str, str, str]]] = {u: [] for u in members}
    # Edges crossing into or out of an open box, by the pair of members of the box that
    # lays them out: more than BUNDLE_ABOVE of them are drawn as one labelled bundle.
    crossing: dict[tuple[str | None, str, str], list[tuple[str, str]]] = {}
    for (a, b), kind in view["edges"]:
        ca, cb = chain(a), chain(b)
        unit = next(u for u in ca if u in cb)
        if ca[unit].startswith("frame:") or cb[unit].startswith("frame:"):
            crossing.setdefault((unit, ca[unit], cb[unit]), []).append((a, b))
        if a in hub or b in hub:
            continue
        unit_edges[unit].append((ca[unit], cb[unit], kind))
    bundles = {k: v for k, v in crossing.items() if len(v) > BUNDLE_ABOVE}
    bundled = {pair for pairs in bundles.values() for pair in pairs}

    def depth_of(unit: str | None) -> int:
        return 0 if unit is None else 1 + depth_of(clusters[unit].parent)

    depth = {u: depth_of(u) for u in members}
    placed: dict[str | None, dict[str, Any]] = {}
    signatures: dict[str | None, Any] = {}
    for level in sorted(set(depth.values()), reverse=True):  # innermost first
        todo: list[tuple[str | None, Any, Any]] = []
        for unit in (u for u in depth if depth[u] == level):
            sizes = {}
            for key in members[unit]:
                if key.startswith("frame:"):
                    inner = placed[key[len("frame:") :]]
                    sizes[key] = (
                        inner["width"] + 2 * FRAME_SIDE,
                        inner["height"] + FRAME_HEAD + FRAME_SIDE,
                    )
                else:
                    sizes[key] = _size(key, by_id, clusters)
            edges = list(dict.fromkeys(unit_edges[unit]))
            ends = sorted((k, by_id[k].kind) for k in members[unit] if k in hub and k in by_id)
            signature = (unit, tuple(sorted(sizes.items())), tuple(edges), tuple(ends))
            signatures[unit] = signature
            if signature in cache:
                placed[unit] = cache[signature]
            else:
                todo.append((unit, signature, (members[unit], sizes, edges, ends)))
        for (unit, signature, _), laid in zip(
            todo, _run_units([t for _, _, t in todo]), strict=True
        ):
            cache[signature] = placed[unit] = laid
        for unit in (u for u in depth if depth[u] == level):
            if used is not None:
                used[signatures[unit]] = placed[unit]
        while len(cache) > CACHE_MOST:
            cache.pop(next(iter(cache)))

    # Put the pieces together, outermost first: each box's layout inside its frame.
    pos: dict[str, list[float]] = {}
    frame_boxes: dict[str, list[float]] = {}
    paths: list[dict[str, Any]] = []
    kinds = {(a, b): k for (a, b), k in view["edges"]}
    drawn_by_dot: set[tuple[str, str]] = set()

    def place(unit: str | None, dx: float, dy: float) -> None:
        laid = placed[unit]
        for key, (x, y, w, h) in laid["nodes"].items():
            box = [round(x + dx, 1), round(y + dy, 1), w, h]
            if key.startswith("frame:"):
                frame_boxes[key[len("frame:") :]] = box
                place(key[len("frame:") :], box[0] + FRAME_SIDE, box[1] + FRAME_HEAD)
            else:
                pos[key] = box
        for a, b, points in laid["edges"]:
            moved = [[round(x + dx, 1), round(y + dy, 1)] for x, y in points]
            pairs = bundles.get((unit, a, b))
            if pairs:  # one bundle, dot's own spline, for every array crossing the border
                paths.append(_bundle(a, b, moved, pairs, view))
            if a.startswith("frame:") or b.startswith("frame:"):
                continue  # drawn below from node to node, across the frame's border
            paths.append({"src": a, "dst": b, "points": moved, "kind": kinds.get((a, b), "")})
            drawn_by_dot.add((a, b))

    place(None, 0.0, 0.0)
    ends_of = {**pos, **{"frame:" + k: v for k, v in frame_boxes.items()}}
    for (_, a, b), pairs in bundles.items():
        drawn = (a.removeprefix("frame:"), b.removeprefix("frame:"))
        if a in ends_of and b in ends_of and all((p["src"], p["dst"]) != drawn for p in paths):
            # a hub's bundle: hubs are not laid out by dot
            points = bottom_to_top(ends_of[a], ends_of[b])
            paths.append(_bundle(a, b, points, pairs, view))
    for (a, b), kind in view["edges"]:
        if (a, b) in bundled:
            continue
        if (a, b) not in drawn_by_dot and a in pos and b in pos:
            style = kind or ("hub" if a in hub or b in hub else "cross")
            points = bottom_to_top(pos[a], pos[b])
            if style == "hub" and abs(points[-1][1] - points[0][1]) > HUB_REACH:
                points = _stub(pos[a], pos[b], into=b not in hub)
            paths.append({"src": a, "dst": b, "points": points, "kind": style})
    root = placed[None]
    return {
        "width": root["width"],
        "height": root["height"],
        "nodes": pos,
        "edges": paths,
        "frames": view["frames"],
        "frame_boxes": frame_boxes,
    }
