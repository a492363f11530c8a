"""An array leaf drawn as static HTML: a value, a table, a line, or a heat map with its
colour bar; complex values as magnitude and phase; booleans and integers as such.

Only ``ArrayInfo`` and its ``Sample`` are read (the bounded host copy); nothing here
touches a device. Colours follow the JupyterLab theme through its CSS variables, with
fallbacks for renderers without them.
"""

from __future__ import annotations

import html
import math
import uuid
from typing import Any

import numpy as np

from .png import BOOLEAN, TWILIGHT, VIRIDIS, colours, png_uri
from .record import ArrayInfo, Sample
from .sample import held_array
from .words import shape_words

TABLE_MAX = 64  # arrays of at most this many elements (1-D or 2-D) are drawn as a table
LINE_W, LINE_H = 480, 110
MAP_SIDE = 240  # pixels of a heat map's longer side
_TEXT = "var(--jp-ui-font-color1, currentColor)"
_LINE = "var(--jp-brand-color1, #1976d2)"
MARK_SIDE = 8  # pixels: the least side of a NaN/Inf marker, visible on a projector
MARKS_DRAWN = 200  # NaN/Inf markers drawn on one picture; the legend counts them all
LEGEND_INDICES = 3  # indices the legend names per word ("NaN at [3, 7], [4, 1] and 2 more")
ValueRange = tuple[float, float]


def sample_values(sample: Sample) -> np.ndarray:
    """The sample as a NumPy array again (NaN/Inf restored, complex rebuilt)."""
    held = held_array(sample.values)  # the latest samples' arrays, kept as they were made
    if held is not None:
        return held
    # NumPy reads the words "NaN", "Inf" and "-Inf" back as numbers itself, in C: a
    # per-value walk in Python was most of a live view's twin (160 x 160 values)
    a = np.asarray(sample.values, dtype=np.float64)
    if sample.kind == "complex":
        return a[..., 0] + 1j * a[..., 1]
    return a


def draw_info(info: ArrayInfo, value_range: ValueRange | None = None) -> str:
    """The drawing of one array leaf, or ``''`` when it has no sample. ``value_range``
    fixes the colours' (and a line's) range; else the whole array's min and max."""
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
    marks = marked_cells(info, a)
    for title, values, kind in parts:
        lo_hi = None if kind == "phase" else drawn_range(info, value_range)
        if values.ndim == 1:
            body = line_svg(values, kind, lo_hi, marks)
        else:
            words = sample_range_words(values, lo_hi)
            body = heat_map_html(values, kind, lo_hi, words, marks)
        head = f"<div><b>{html.escape(title)}</b></div>" if title else ""
        out.append(f"<div>{head}{body}</div>")
    legend = not_finite_legend(info, a)
    legend_html = f'<div class="jaxlab-array-legend">{html.escape(legend)}</div>' if legend else ""
    return (
        f'<div class="jaxlab-array-draw">{"".join(out)}{legend_html}'
        f'<div style="opacity:0.75">{caption}</div></div>'
    )


def drawn_range(info: ArrayInfo, value_range: ValueRange | None = None) -> ValueRange | None:
    """The colours' range: ``value_range`` when given, else the whole array's min and max
    (its figures, reduced on its devices), so a subsampled map's bar says the array's
    extremes; None (the sample's own range) where the figures have none."""
    if value_range is not None:
        return _proper(*value_range)
    st = info.stats
    if info.kind in ("boolean",) or st is None or st.min is None or st.max is None:
        return None
    if not (math.isfinite(st.min) and math.isfinite(st.max)):
        return None
    return _proper(st.min, st.max)


def _proper(lo: float, hi: float) -> ValueRange:
    lo, hi = float(lo), float(hi)
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def sample_range_words(values: np.ndarray, lo_hi: ValueRange | None) -> str:
    """``'drawn values 0.01 to 0.4725'`` where the drawn sample's range differs from the
    bar's (a subsampled array, a fixed range); else ``''``."""
    f = np.asarray(values, dtype=np.float64)
    f = f[np.isfinite(f)]
    if lo_hi is None or f.size == 0:
        return ""
    lo, hi = float(f.min()), float(f.max())
    if _cell(lo) == _cell(lo_hi[0]) and _cell(hi) == _cell(lo_hi[1]):
        return ""
    return f"drawn values {_cell(lo)} to {_cell(hi)}"


def not_finite_at(
    info: ArrayInfo, values: np.ndarray | None = None
) -> dict[str, list[tuple[int, ...]]]:
    """The array indices of its first NaN and Inf values (``{"NaN": [(3, 7), ...]}``):
    those found on its device where its figures count one (``Sample.not_finite``), else
    the sample's, in the whole array's coordinates (strides and slice undone)."""
    s = info.sample
    if s is None or s.kind not in ("float", "complex"):
        return {}
    out: dict[str, list[tuple[int, ...]]] = {}
    if s.not_finite:
        for word, index in s.not_finite:
            out.setdefault(word, []).append(tuple(index))
        return out
    a = sample_values(s) if values is None else values
    if a.ndim == 0:
        return {}
    for word, hit in (("NaN", np.isnan(a)), ("Inf", np.isinf(a))):
        where = np.argwhere(hit)
        if len(where):
            steps = np.asarray(s.steps[-a.ndim :] or (1,) * a.ndim)
            out[word] = [
                tuple(s.slice_at) + tuple(int(i) for i in row * steps)
                for row in where[:MARKS_DRAWN]
            ]
    return out


def marked_cells(info: ArrayInfo, values: np.ndarray | None = None) -> list[tuple[int, ...]]:
    """The drawn cells (sample coordinates) to mark: every NaN/Inf value of the sample and
    the cell holding each NaN/Inf found on the device in the drawn slice, which a strided
    sample may have stepped over (a NaN at [7, 42] drawn every 4th value: cell [1, 10])."""
    s = info.sample
    if s is None or s.kind not in ("float", "complex"):
        return []
    a = sample_values(s) if values is None else values
    if a.ndim == 0:
        return []
    cells = {tuple(int(i) for i in r) for r in np.argwhere(~np.isfinite(a))[:MARKS_DRAWN]}
    lead = len(s.slice_at)
    for _, index in s.not_finite:
        if tuple(index[:lead]) == tuple(s.slice_at) and len(index) == lead + a.ndim:
            cell = tuple(i // k for i, k in zip(index[lead:], s.steps, strict=True))
            if all(c < n for c, n in zip(cell, a.shape, strict=True)):
                cells.add(cell)
    return sorted(cells)[:MARKS_DRAWN]


def not_finite_legend(info: ArrayInfo, values: np.ndarray | None = None) -> str:
    """``'NaN at [3, 7] and 4 more; Inf at [0, 2]'``: the first indices of each, counted
    over the whole array (its figures) where the sample holds only some."""
    at = not_finite_at(info, values)
    st = info.stats
    parts = []
    for word in ("NaN", "Inf"):
        total = (st.nan if word == "NaN" else st.inf) if st is not None else 0
        found = at.get(word, [])
        total = max(total, len(found))
        if not total:
            continue
        if not found:
            parts.append(f"{word} x{total}, none in the drawn values")
            continue
        shown = found[:LEGEND_INDICES]
        words = ", ".join("[" + ", ".join(str(i) for i in idx) + "]" for idx in shown)
        more = total - len(shown)
        parts.append(f"{word} at {words}" + (f" and {more} more" if more else ""))
    return "; ".join(parts)


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


def line_svg(
    a: np.ndarray,
    kind: str,
    lo_hi: ValueRange | None = None,
    marks: list[tuple[int, ...]] | None = None,
) -> str:
    """1-D values as a line (integers and booleans as steps); a marker where a value is
    NaN or Inf (a magenta square outlined in black, ``MARK_SIDE`` px), the line broken
    there."""
    a = a.astype(np.float64)
    lo, hi = lo_hi or _finite_range(a)
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
    at = marks if marks is not None else [(int(i),) for i in np.flatnonzero(~np.isfinite(a))]
    marked = "".join(_marker(xs[i], LINE_H - 9, MARK_SIDE) for (i,) in at[:MARKS_DRAWN])
    labels = (
        f'<text x="2" y="12" font-size="12" fill="{_TEXT}">{_cell(hi)}</text>'
        f'<text x="2" y="{LINE_H - 2}" font-size="12" fill="{_TEXT}">{_cell(lo)}</text>'
    )
    return (
        f'<svg class="jaxlab-array-line" width="{LINE_W}" height="{LINE_H}" '
        f'viewBox="0 0 {LINE_W} {LINE_H}" xmlns="http://www.w3.org/2000/svg">'
        f"{paths}{marked}{labels}</svg>"
    )


def _marker(cx: float, cy: float, side: float) -> str:
    """A NaN/Inf marker: a magenta square with a black and a white outline, seen on any
    colour of the map and in either theme."""
    x, y = cx - side / 2, cy - side / 2
    return (
        f'<rect class="jaxlab-not-finite" x="{x:.1f}" y="{y:.1f}" width="{side:.1f}" '
        f'height="{side:.1f}" fill="rgb(255,0,255)" stroke="#000" stroke-width="2"/>'
        f'<rect x="{x - 1.5:.1f}" y="{y - 1.5:.1f}" width="{side + 3:.1f}" '
        f'height="{side + 3:.1f}" fill="none" stroke="#fff" stroke-width="1"/>'
    )


def heat_map_html(
    a: np.ndarray,
    kind: str,
    lo_hi: ValueRange | None = None,
    sample_words: str = "",
    marks: list[tuple[int, ...]] | None = None,
) -> str:
    """A 2-D field as an image, pixels unsmoothed, with its colour bar beside it; each NaN
    or Inf cell under a marker of at least ``MARK_SIDE`` px (an SVG over the image)."""
    a = a.astype(np.float64)
    if kind == "boolean":
        rgb = BOOLEAN[(a > 0).astype(int)].astype(np.uint8)
        lo, hi, stops = 0.0, 1.0, BOOLEAN
    elif kind == "phase":
        lo, hi, stops = -math.pi, math.pi, TWILIGHT
        rgb = colours((a - lo) / (hi - lo), stops)
    else:
        lo, hi = lo_hi or _finite_range(a)
        stops = VIRIDIS
        rgb = colours((a - lo) / (hi - lo), stops)
    rows, cols = a.shape
    scale = MAP_SIDE / max(rows, cols)
    w, h = max(1, round(cols * scale)), max(1, round(rows * scale))
    img = (
        f'<img class="jaxlab-array-map" src="{png_uri(rgb)}" width="{w}" height="{h}" '
        f'style="image-rendering:pixelated;display:block" alt="heat map">'
    )
    bad = marks if marks is not None else [tuple(r) for r in np.argwhere(~np.isfinite(a))]
    bad = bad[:MARKS_DRAWN]
    if len(bad):
        side = max(float(MARK_SIDE), scale)
        drawn = "".join(_marker((c + 0.5) * scale, (r + 0.5) * scale, side) for r, c in bad)
        img = (
            f'<div style="position:relative;width:{w}px;height:{h}px">{img}'
            f'<svg width="{w}" height="{h}" style="position:absolute;left:0;top:0;'
            f'overflow:visible" xmlns="http://www.w3.org/2000/svg">{drawn}</svg></div>'
        )
    bar = colour_bar_svg(lo, hi, stops, h, kind, sample_words)
    return f'<div style="display:flex;gap:6px;align-items:stretch">{img}{bar}</div>'


def colour_bar_svg(
    lo: float, hi: float, stops: np.ndarray, height: int, kind: str, sample_words: str = ""
) -> str:
    """The bar: its gradient's id is new per drawing (``jaxlab-cbar-<hex>``): one id on a
    page is one gradient, and a hidden twin's would blank every bar after it."""
    n = len(stops)
    grad = "".join(
        f'<stop offset="{i / (n - 1):.3f}" stop-color="rgb({int(r)},{int(g)},{int(b)})"/>'
        for i, (r, g, b) in enumerate(stops[::-1])
    )
    top, bottom = ("True", "False") if kind == "boolean" else (_cell(hi), _cell(lo))
    height = max(height, 40)
    gid = f"jaxlab-cbar-{uuid.uuid4().hex[:12]}"
    note = (
        f'<text x="16" y="{height // 2 + 4}" font-size="12" fill="{_TEXT}" opacity="0.8">'
        f"{html.escape(sample_words)}</text>"
        if sample_words
        else ""
    )  # (12 px, as all text: the tutorials test measured 11 px where a twin showed it)
    width = 84 if not sample_words else 84 + 7 * len(sample_words)
    return (
        f'<svg class="jaxlab-colour-bar" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg"><defs>'
        f'<linearGradient id="{gid}" x1="0" y1="0" x2="0" y2="1">'
        f"{grad}</linearGradient></defs>"
        f'<rect x="0" y="0" width="12" height="{height}" fill="url(#{gid})"/>'
        f'<text x="16" y="12" font-size="12" fill="{_TEXT}">{html.escape(top)}</text>'
        f'<text x="16" y="{height - 2}" font-size="12" fill="{_TEXT}">{html.escape(bottom)}</text>'
        f"{note}</svg>"
    )
