"""An array leaf drawn as static HTML: a value, a table, a line, or a heat map with its
colour bar; complex values as magnitude and phase; booleans and integers as such.

Only ``ArrayInfo`` and its ``Sample`` are read (the bounded host copy); nothing here
touches a device. Colours follow the JupyterLab theme through its CSS variables, with
fallbacks for renderers without them.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

from .png import BOOLEAN, TWILIGHT, VIRIDIS, colours, png_uri
from .record import ArrayInfo, Sample
from .words import shape_words

TABLE_MAX = 64  # arrays of at most this many elements (1-D or 2-D) are drawn as a table
LINE_W, LINE_H = 480, 110
MAP_SIDE = 240  # pixels of a heat map's longer side
_TEXT = "var(--jp-ui-font-color1, currentColor)"
_LINE = "var(--jp-brand-color1, #1976d2)"
_MARK = "var(--jp-error-color1, #d32f2f)"


def sample_values(sample: Sample) -> np.ndarray:
    """The sample as a NumPy array again (NaN/Inf restored, complex rebuilt)."""
    # NumPy reads the words "NaN", "Inf" and "-Inf" back as numbers itself, in C: a
    # per-value walk in Python was most of a live view's twin (160 x 160 values)
    a = np.asarray(sample.values, dtype=np.float64)
    if sample.kind == "complex":
        return a[..., 0] + 1j * a[..., 1]
    return a


def draw_info(info: ArrayInfo) -> str:
    """The drawing of one array leaf, or ``''`` when it has no sample."""
    sample = info.sample
    if sample is None:
        return ""
    a = sample_values(sample)
    if a.ndim == 0:
        return f'<div class="jaxlab-array-value"><code>{html.escape(_cell(a.item()))}</code></div>'
    if info.size <= TABLE_MAX and len(info.shape) <= 2:
        return table_html(a)
    caption = html.escape(sample_caption(info))
    if sample.kind == "complex":
        parts = [("magnitude", np.abs(a), "float"), ("phase (rad)", np.angle(a), "phase")]
    else:
        parts = [("", a, sample.kind)]
    out = []
    for title, values, kind in parts:
        body = line_svg(values, kind) if values.ndim == 1 else heat_map_html(values, kind)
        head = f"<div><b>{html.escape(title)}</b></div>" if title else ""
        out.append(f"<div>{head}{body}</div>")
    return (
        f'<div class="jaxlab-array-draw">{"".join(out)}'
        f'<div style="opacity:0.75">{caption}</div></div>'
    )


def sample_caption(info: ArrayInfo) -> str:
    s = info.sample
    assert s is not None
    parts = []
    if s.slice_at:
        index = ", ".join([str(i) for i in s.slice_at] + [":", ":"])
        parts.append(f"slice [{index}] of {shape_words(info.shape)}")
    if any(step > 1 for step in s.steps):
        parts.append("every " + " x ".join(str(k) for k in s.steps) + "-th value drawn")
    if s.bytes:
        parts.append(f"{s.bytes:,} bytes copied to draw")
    return "; ".join(parts)


def _cell(v: Any) -> str:
    if isinstance(v, complex):
        return f"{v.real:.4g}{v.imag:+.4g}j"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def table_html(a: np.ndarray) -> str:
    rows = a.reshape(1, -1) if a.ndim == 1 else a
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v.item()))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f'<table class="jaxlab-array-table">{body}</table>'


def _finite_range(a: np.ndarray) -> tuple[float, float]:
    f = a[np.isfinite(a)]
    if f.size == 0:
        return 0.0, 1.0
    lo, hi = float(f.min()), float(f.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def line_svg(a: np.ndarray, kind: str) -> str:
    """1-D values as a line (integers and booleans as steps); a red tick where a value is
    NaN or Inf, the line broken there."""
    a = a.astype(np.float64)
    lo, hi = _finite_range(a)
    n = len(a)
    xs = np.linspace(4, LINE_W - 4, n) if n > 1 else np.array([LINE_W / 2])
    ys = LINE_H - 14 - (a - lo) / (hi - lo) * (LINE_H - 28)
    step = kind in ("integer", "boolean")
    lines: list[list[str]] = []
    run: list[str] = []
    for i in range(n):
        if not math.isfinite(ys[i]):
            if run:
                lines.append(run)
            run = []
            continue
        if step and run:
            run.append(f"{xs[i]:.1f},{float(run[-1].split(',')[1]):.1f}")
        run.append(f"{xs[i]:.1f},{ys[i]:.1f}")
    if run:
        lines.append(run)
    paths = "".join(
        f'<polyline points="{" ".join(r)}" fill="none" stroke="{_LINE}" stroke-width="1.2"/>'
        for r in lines
    )
    marks = "".join(
        f'<line x1="{xs[i]:.1f}" x2="{xs[i]:.1f}" y1="{LINE_H - 12}" y2="{LINE_H - 4}" '
        f'stroke="{_MARK}"/>'
        for i in np.flatnonzero(~np.isfinite(a))[:200]
    )
    labels = (
        f'<text x="2" y="12" font-size="12" fill="{_TEXT}">{_cell(hi)}</text>'
        f'<text x="2" y="{LINE_H - 2}" font-size="12" fill="{_TEXT}">{_cell(lo)}</text>'
    )
    return (
        f'<svg class="jaxlab-array-line" width="{LINE_W}" height="{LINE_H}" '
        f'viewBox="0 0 {LINE_W} {LINE_H}" xmlns="http://www.w3.org/2000/svg">'
        f"{paths}{marks}{labels}</svg>"
    )


def heat_map_html(a: np.ndarray, kind: str) -> str:
    """A 2-D field as an image, pixels unsmoothed, with its colour bar beside it."""
    a = a.astype(np.float64)
    if kind == "boolean":
        rgb = BOOLEAN[(a > 0).astype(int)].astype(np.uint8)
        lo, hi, stops = 0.0, 1.0, BOOLEAN
    elif kind == "phase":
        lo, hi, stops = -math.pi, math.pi, TWILIGHT
        rgb = colours((a - lo) / (hi - lo), stops)
    else:
        lo, hi = _finite_range(a)
        stops = VIRIDIS
        rgb = colours((a - lo) / (hi - lo), stops)
    rows, cols = a.shape
    scale = MAP_SIDE / max(rows, cols)
    w, h = max(1, round(cols * scale)), max(1, round(rows * scale))
    img = (
        f'<img class="jaxlab-array-map" src="{png_uri(rgb)}" width="{w}" height="{h}" '
        f'style="image-rendering:pixelated" alt="heat map">'
    )
    bar = colour_bar_svg(lo, hi, stops, h, kind)
    return f'<div style="display:flex;gap:6px;align-items:stretch">{img}{bar}</div>'


def colour_bar_svg(lo: float, hi: float, stops: np.ndarray, height: int, kind: str) -> str:
    n = len(stops)
    grad = "".join(
        f'<stop offset="{i / (n - 1):.3f}" stop-color="rgb({int(r)},{int(g)},{int(b)})"/>'
        for i, (r, g, b) in enumerate(stops[::-1])
    )
    top, bottom = ("True", "False") if kind == "boolean" else (_cell(hi), _cell(lo))
    height = max(height, 40)
    return (
        f'<svg class="jaxlab-colour-bar" width="84" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg"><defs>'
        f'<linearGradient id="jaxlab-cbar-{kind}" x1="0" y1="0" x2="0" y2="1">'
        f"{grad}</linearGradient></defs>"
        f'<rect x="0" y="0" width="12" height="{height}" fill="url(#jaxlab-cbar-{kind})"/>'
        f'<text x="16" y="12" font-size="12" fill="{_TEXT}">{html.escape(top)}</text>'
        f'<text x="16" y="{height - 2}" font-size="12" fill="{_TEXT}">{html.escape(bottom)}</text>'
        f"</svg>"
    )
