"""The GraphExplorer's static twin: a laid-out view as an inline SVG with no script, for
saved and exported notebooks and the docs site (the same positions the live view drew).

>>> static_svg(explorer.drawn, explorer.view, explorer.legend)   # doctest: +SKIP
'<div><b>grad(loss)</b>...<svg class="jaxlab-ge-static" ...'
"""

from __future__ import annotations

import html
from typing import Any

from jaxlab.graph import model as m
from jaxlab.graph import overlay
from jaxlab.graph.explore import REPEAT
from jaxlab.graph.names import shorten

from .graph_layout import PANE_H, PANE_W, box_clusters

_STATIC_STYLE = (
    # Never scaled down (12 px text stays 12 px, issue 34): a bigger drawing scrolls in
    # its box, and a line above it says so.
    "font-family:system-ui,sans-serif;max-width:none;"
    "background:var(--jp-layout-color0,#fff);color:var(--jp-ui-font-color1,#222)"
)


def static_svg(
    graph: m.Graph,
    view: dict[str, Any],
    legend: list[dict[str, str]] | None = None,
    notes: list[str] | None = None,
) -> str:
    """An inline SVG of a laid-out view (every user string escaped, no script): boxes,
    open boxes' frames, titles at 14 px and rows at 12 px, edges, a <title> tooltip per
    node. ``notes``: what the view says (the graph's notes when not given; the live view
    adds what it left closed to stay readable)."""
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
    # Open boxes: a dashed frame around their members, titled as the live view titles it.
    frame_boxes = view.get("frame_boxes") or {}
    for cid in view.get("frames") or ():
        c, box = clusters.get(cid), frame_boxes.get(cid)
        if c is None or box is None:
            continue
        x, y, w, h = (_num(v) for v in box)
        out.append(
            f'<g transform="translate({x:.1f},{y:.1f})"><title>{esc(c.label)}: '
            f"{c.n_equations} equations</title>"
            f'<rect width="{w:.1f}" height="{h:.1f}" rx="6" stroke-opacity="0.6" '
            'stroke-dasharray="5 3"/>'
            f'<text x="6" y="16" fill="currentColor" stroke="none" font-size="14" '
            f'font-weight="600">{esc(_clip(f"▾ {shorten(c.label)}", w, 8.5))}</text></g>'
        )
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
        bundle = e.get("kind") == "bundle"
        thick = ' stroke-width="2.4"' if bundle else ""
        out.append(
            f'<path d="{d}" stroke-opacity="0.55"{dash}{colour}{thick} '
            'marker-end="url(#jaxlab-ge-arrow)"/>'
        )
        if bundle and e.get("label"):  # many arrays as one edge, and how many
            mx, my = p[len(p) // 2]
            out.append(
                f'<text x="{mx + 6:.1f}" y="{my - 4:.1f}" font-size="12" stroke="none" '
                f'fill="currentColor">{esc(str(e["label"]))}</text>'
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
    said = "".join(f"<div>{esc(note)}</div>" for note in (graph.notes if notes is None else notes))
    key = " · ".join(esc(entry.get("text", "")) for entry in legend or [])
    key = f'<div class="jaxlab-ge-legend">{key}</div>' if key else ""
    wide = width > PANE_W or height > PANE_H
    cue = (
        '<div class="jaxlab-ge-cue" style="font-size:12px;font-style:italic">'
        f"{'↔ wider' if width > PANE_W else '↕ taller'} than this pane: scroll to see all of "
        "it</div>"
        if wide
        else ""
    )
    drawing = f'<div style="overflow:auto;max-height:{PANE_H + 40:.0f}px">{"".join(out)}</div>'
    return f"<div><b>{esc(graph.title)}</b>{said}{key}{cue}{drawing}</div>"


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
