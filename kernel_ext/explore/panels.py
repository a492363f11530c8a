"""The answer drawn by its kind: one panel per output leaf, titled by its path.

A scalar is its value (with a sparkline of recent values and its tangent), a 1-D array a
line (against ``x=`` when given), an ``(N, 2)`` array a path in the plane, a 2-D array a
heat map with its sensitivity map beside it (``arrays/``' colours and PNG), an integer or
boolean output text saying why it has no derivative. Plain JSON only: the page and the
saved notebook's twin both draw from it::

    panels(leaves, paths, tangents, histories={"": [1.9, 2.0]})
    # [{"path": "", "kind": "scalar", "value": 2.0, "tangent": -0.1, ...}]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arrays.draw import heat_map_html
from ..arrays.png import colours, png_uri

POINTS = 2000  # a line or path drawn with at most this many points
MAP_CELLS = 160  # a heat map at most 160 x 160 cells (strided)


def number(v: Any) -> float | None:
    """A JSON number: None for NaN or Inf (the page says so)."""
    f = float(v)
    return f if math.isfinite(f) else None


def numbers(a: np.ndarray) -> list[Any]:
    return [number(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def _stride(n: int, limit: int) -> int:
    return max(1, math.ceil(n / limit))


def _kind_of_dtype(a: np.ndarray) -> str:
    if a.dtype == bool:
        return "boolean"
    if np.issubdtype(a.dtype, np.integer):
        return "integer"
    if np.issubdtype(a.dtype, np.complexfloating):
        return "complex"
    return "float"


def no_derivative_note(a: np.ndarray) -> str | None:
    kind = _kind_of_dtype(a)
    if kind == "float":
        return None
    why = {
        "integer": "an integer output is a step function: its derivative is 0 or undefined",
        "boolean": "a boolean output has no derivative",
        "complex": "a complex output: drawn as magnitude, no derivative drawn",
    }[kind]
    return f"no derivative: {why}"


def format_value(v: float) -> str:
    """Units-free formatting: 4 significant figures, scientific outside 1e-3 .. 1e5."""
    if not math.isfinite(v):
        return str(v)
    if v != 0 and not 1e-3 <= abs(v) < 1e5:
        return f"{v:.3e}"
    return f"{v:.4g}"


@functools.cache
def colour_bar_png() -> str:
    """The heat maps' colour bar, top (hi) to bottom (lo), as a PNG of 64 x 1 cells."""
    return png_uri(colours(np.linspace(1.0, 0.0, 64)[:, None]))


def _heat(a: np.ndarray, lo: float, hi: float) -> str:
    unit = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
    return png_uri(colours(unit))


def _finite_span(a: np.ndarray) -> tuple[float, float]:
    f = a[np.isfinite(a)]
    if f.size == 0:
        return 0.0, 1.0
    lo, hi = float(f.min()), float(f.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def panel(
    path: str,
    value: np.ndarray,
    tangent: np.ndarray | None,
    *,
    x: np.ndarray | None = None,
    delta: float | None = None,
    history: Sequence[float] = (),
    sweep: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One output leaf's panel (see the module's docstring)."""
    a = np.asarray(value)
    note = no_derivative_note(a)
    if note is not None:
        tangent = None
    if _kind_of_dtype(a) == "complex":
        a = np.abs(a)
    if a.ndim == 0 and note is not None:
        return {"path": path, "kind": "text", "text": str(a.item()), "note": note}
    if a.ndim == 0:
        return {
            "path": path,
            "kind": "scalar",
            "value": number(a),
            "text": format_value(float(a)),
            "history": [number(h) for h in history],
            "tangent": None if tangent is None else number(tangent),
            "sweep": sweep,
            "note": note,
        }
    if a.ndim == 1:
        step = _stride(a.shape[0], POINTS)
        xs = None
        if x is not None and np.shape(x) == a.shape:
            xs = numbers(np.asarray(x)[::step])
        return {
            "path": path,
            "kind": "line",
            "x": xs,
            "y": numbers(a[::step]),
            "tangent": None if tangent is None else numbers(np.asarray(tangent)[::step]),
            "delta": delta,
            "note": note,
        }
    if a.ndim == 2 and a.shape[1] == 2 and note is None:
        step = _stride(a.shape[0], POINTS)
        return {
            "path": path,
            "kind": "path",
            "xy": [numbers(row) for row in a[::step]],
            "tangent": None
            if tangent is None
            else [numbers(row) for row in np.asarray(tangent)[::step]],
            "delta": delta,
            "note": note,
        }
    shown = a if a.ndim == 2 else a.reshape(-1, a.shape[-1])
    if a.ndim > 2:
        lead = "x".join(str(d) for d in a.shape[:-1])
        note = (note + "; " if note else "") + f"{a.ndim}-D: drawn as {lead} rows"
    rs, cs = _stride(shown.shape[0], MAP_CELLS), _stride(shown.shape[1], MAP_CELLS)
    shown = shown[::rs, ::cs].astype(np.float64)
    lo, hi = _finite_span(shown)
    sens_png = None
    sens_lo = sens_hi = None
    if tangent is not None:
        t = np.asarray(tangent, dtype=np.float64)
        t = (t if t.ndim == 2 else t.reshape(-1, t.shape[-1]))[::rs, ::cs]
        bound = float(np.nanmax(np.abs(np.where(np.isfinite(t), t, 0.0)))) or 1.0
        sens_png, sens_lo, sens_hi = _heat(t, -bound, bound), -bound, bound
    if rs > 1 or cs > 1:
        note = (note + "; " if note else "") + f"drawn every {rs} x {cs} cells"
    return {
        "path": path,
        "kind": "heatmap",
        "shape": list(a.shape),
        "png": _heat(shown, lo, hi),
        "bar_png": colour_bar_png(),
        "html": heat_map_html(shown, "float", (lo, hi)),
        "lo": lo,
        "hi": hi,
        "sens_png": sens_png,
        "sens_lo": sens_lo,
        "sens_hi": sens_hi,
        "note": note,
    }


def derivative_words(output: str, param: str, slope: float | None) -> str | None:
    """``"d period / d g = -0.032 per unit"``."""
    if slope is None:
        return None
    return f"d {output} / d {param} = {format_value(slope)} per unit"
