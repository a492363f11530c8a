"""The static timeline of a ``ProfileResult`` as SVG: what ``--static``, saved notebooks and
exported HTML show. Lanes for host calls, JAX's compile steps, device modules and ops;
implicit syncs as red marks across the lanes; an axis in one unit; a key.

::

    timeline_svg(result)          # '<svg ...>'
    axis_ticks(0.0324)            # ("ms", 1e3, [0.0, 0.005, ..., 0.03])
"""

from __future__ import annotations

import html
import math

from ..compile.log_view import seconds
from .profile_result import ProfileResult
from .trace import Span

_WIDTH = 720
_LABEL_W = 180  # px for the lane names (12 px text)
_LANE_H = 24
_FONT = "font:12px var(--jp-ui-font-family,sans-serif)"  # 12 px: readable when projected
MAX_DRAWN = 1500  # rects in the static SVG, longest first (the widget draws the result's set)

# (lane name, the kinds it draws); the key names every colour.
LANES = (
    ("host: jitted calls", ("dispatch",)),
    ("JAX: trace, lower, compile", ("trace", "lower", "compile")),
    ("device: XLA modules", ("module",)),
    ("device: XLA ops", ("op",)),
)
COLOURS = {
    "dispatch": "#4c78a8",
    "trace": "#b279a2",
    "lower": "#9d755d",
    "compile": "#e45756",
    "module": "#f58518",
    "op": "#54a24b",
    "sync": "#d62728",
}
KEY = (
    ("dispatch", "jitted call (Python → JAX)"),
    ("trace", "tracing"),
    ("lower", "lowering"),
    ("compile", "XLA compile"),
    ("module", "XLA module run"),
    ("op", "XLA op"),
    ("sync", "implicit sync (host waits)"),
)
PHASE_WORDS = {"trace": "tracing", "lower": "lowering", "compile": "XLA compile"}


def axis_ticks(end_s: float, target: int = 6) -> tuple[str, float, list[float]]:
    """One unit for the whole axis (s, ms or µs, from its extent) and round ticks in it."""
    unit, factor = ("s", 1.0) if end_s >= 1 else ("ms", 1e3) if end_s >= 1e-3 else ("µs", 1e6)
    extent = max(end_s * factor, 1e-9)
    raw = extent / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = int(extent / step + 1e-9)
    return unit, factor, [k * step / factor for k in range(count + 1)]


def tick_label(value_s: float, unit: str, factor: float) -> str:
    return f"{value_s * factor:.4g} {unit}"


def span_words(s: Span) -> str:
    """What a span is, for its tooltip: ``step (XLA compile): 31.2 ms at 2.1 ms``."""
    if s.kind in PHASE_WORDS:
        what = f"{s.name or 'a function'} ({PHASE_WORDS[s.kind]})"
    elif s.kind == "sync":
        what = f"implicit sync at {s.name}"
    elif s.module and s.module != s.name:
        what = f"{s.name} ({s.module})"
    else:
        what = s.name
    return f"{what}: {seconds(s.duration_s)} at {seconds(s.start_s)}"


def _drawn(spans: list[Span]) -> list[Span]:
    if len(spans) <= MAX_DRAWN:
        return spans
    return sorted(spans, key=lambda s: -s.duration_s)[:MAX_DRAWN]


def _key_places(top: float) -> list[tuple[float, float, str, str]]:
    """(x, y, kind, words) for each entry of the key, wrapped to the drawing's width."""
    places: list[tuple[float, float, str, str]] = []
    x, y = 0.0, top
    for kind, words in KEY:
        width = 20 + 6.8 * len(words)  # ~6.8 px a character at 12 px
        if x > 0 and x + width > _WIDTH:
            x, y = 0.0, y + 18
        places.append((x, y, kind, words))
        x += width
    return places


def timeline_svg(r: ProfileResult) -> str:
    """Host calls, JAX's compile steps, device modules and ops on four lanes, the syncs
    across them, an axis in one unit and the colours' key."""
    end = r.duration_s or 1e-6
    scale = (_WIDTH - _LABEL_W - 10) / end
    lanes_h = _LANE_H * len(LANES)
    key = _key_places(lanes_h + 40)
    height = key[-1][1] + 8
    parts = [
        f'<svg width="{_WIDTH}" height="{height}" role="img" aria-label="profile timeline" '
        f'style="{_FONT}">'
    ]
    for i, (label, kinds) in enumerate(LANES):
        y = 4 + _LANE_H * i
        parts.append(f'<text x="0" y="{y + 13}" fill="currentColor">{html.escape(label)}</text>')
        for s in _drawn([s for s in r.spans if s.kind in kinds]):
            parts.append(
                f'<rect x="{_LABEL_W + s.start_s * scale:.1f}" y="{y}" '
                f'width="{max(1.0, s.duration_s * scale):.1f}" height="16" '
                f'fill="{COLOURS[s.kind]}"><title>{html.escape(span_words(s))}</title></rect>'
            )
    for s in [s for s in r.spans if s.kind == "sync"][:MAX_DRAWN]:
        x = _LABEL_W + s.start_s * scale
        parts.append(
            f'<rect x="{x:.1f}" y="2" width="{max(1.5, s.duration_s * scale):.1f}" '
            f'height="{lanes_h}" fill="{COLOURS["sync"]}" fill-opacity="0.6">'
            f"<title>{html.escape(span_words(s))}</title></rect>"
        )
    unit, factor, ticks = axis_ticks(end)
    axis_y = lanes_h + 6
    for t in ticks:
        tick_x = _LABEL_W + t * scale
        parts.append(
            f'<line x1="{tick_x:.1f}" x2="{tick_x:.1f}" y1="{axis_y}" y2="{axis_y + 4}" '
            f'stroke="currentColor"/><text x="{tick_x:.1f}" y="{axis_y + 16}" '
            f'text-anchor="middle" fill="currentColor">'
            f"{html.escape(tick_label(t, unit, factor))}</text>"
        )
    for key_x, key_y, kind, words in key:
        parts.append(
            f'<rect x="{key_x:.0f}" y="{key_y - 10:.0f}" width="10" height="10" '
            f'fill="{COLOURS[kind]}"/><text x="{key_x + 13:.0f}" y="{key_y:.0f}" '
            f'fill="currentColor">{html.escape(words)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
