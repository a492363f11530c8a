"""A ``%grad --split`` program drawn at a readable size, and the cue that says when it
scrolls sideways (issue 34): each program is an inline SVG at most ``PROGRAM_H_PX`` tall,
never shrunk below its 12 px text; a wider one scrolls, and its cue shows while it does.
"""

from __future__ import annotations

import html
import re
from typing import Any

_SVG_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')

# The tallest a program is drawn (px) where its text can stay at 12 px or more: three
# programs each at most a 1280x720 screen's pane (issue 34).
PROGRAM_H_PX = 700


def drawing(graph: Any) -> str:
    """A program's SVG inline (following the theme), its boxes packed close (``compact``:
    a 2-layer MLP's programs each fit 700 px at 12 px text); the text view with the reason
    when Graphviz cannot draw it."""
    from ..graph.render import graph_mimebundle

    bundle = graph_mimebundle(graph, compact=True)
    if "text/html" in bundle:
        return f"<div>{bundle['text/html']}</div>"
    return f"<pre>{html.escape(bundle.get('text/plain', ''))}</pre>"


def fit(body: str) -> str:
    """The SVG scaled to the output's width and to at most ``PROGRAM_H_PX`` tall, but never
    below 3/4 of its size: Graphviz's points are 4/3 px, so its 14 and 12 pt text stays at
    14 and 12 px at least; a wider graph scrolls sideways instead (however wide: a cap let
    a 10,000 pt program shrink to 5 px text), and says so above it (``scroll_cue``)."""

    def style(s: re.Match[str]) -> str:
        w, h = float(s.group(1)), float(s.group(2))
        widest = [f"{w * 4 / 3:.0f}px"] + ([f"{PROGRAM_H_PX * w / h:.0f}px"] if h > 0 else [])
        return (
            f'{s.group(0)} style="width:min(100%,{",".join(widest)});max-width:none;'
            f'height:auto;min-width:{w:.0f}px"'
        )

    return _SVG_SIZE.sub(style, body, count=1)


# The narrowest an output is taken to be (JupyterLab's at 1280x720 is about 1080 px, and
# about 828 px with the file browser open beside the notebook).
NARROW_OUTPUT_PX = 1000
# A program at most this wide fits any output a notebook gives it: no cue at all.
ALWAYS_FITS_PX = 480

# The cue shows only while its program scrolls sideways, where the browser can tell: a
# scroll-driven animation (Chromium 115+) runs only while its scroll box has somewhere to
# scroll, and an animation outranks the cue's own style. Elsewhere (or where the style is
# stripped) a cue shows as its inline style says: for a program wider than
# NARROW_OUTPUT_PX, never for a narrower one.
CUE_STYLE = (
    "<style>@keyframes jaxlab-split-cue{from,to{max-height:3em}}"
    "@supports (animation-timeline: scroll()){.jaxlab-grad-split .jaxlab-split-scroll{"
    "max-height:0;overflow:hidden;animation:jaxlab-split-cue linear both;"
    "animation-timeline:scroll(nearest inline)}}</style>"
)


def scroll_cue(body: str) -> str:
    """A line above a program that may be too wide for its output at its smallest
    readable size, saying that it scrolls sideways (the scrollbar itself sits below the
    drawing, often a screen away), shown while it does (``CUE_STYLE``); "" for one
    that fits any output."""
    found = _SVG_SIZE.search(body)
    if found is None:
        return ""
    smallest = float(found.group(1))  # px at 3/4 scale: see _fit
    if smallest <= ALWAYS_FITS_PX:
        return ""
    hidden = "max-height:0;overflow:hidden;" if smallest <= NARROW_OUTPUT_PX else ""
    return (
        '<div class="jaxlab-split-scroll" style="font-size:12px;font-style:italic;'
        f'position:sticky;left:0;{hidden}">'
        f"↔ {smallest:,.0f} px wide at its smallest readable size: scroll sideways to see "
        "all of it</div>"
    )
