"""``Explorer``: sliders on a compiled function, its answer and derivatives drawn live
(``%explore``, ``jaxlab.explore``; issue 35).

::

    from jaxlab.widgets import Explorer
    view = jaxlab.explore(sim, theta0=0.3, g=(1.0, 20.0))
    Explorer(view)            # the page: sliders, the answer by its kind, d(answer)/d(slider)

The widget wraps the core :class:`jaxlab.explore` object (``kernel_ext/explore/``): it
syncs the core's ``frame()`` (plain JSON, drawn by ``static/explorer.js``) and turns the
page's messages into core calls: ``{"type": "move", "name", "value", "seq"}`` →
``move`` (the core coalesces moves: the latest wins), ``sweep``, ``fit``, ``stop``. The
page writes no trait: a message names a control, and one the frame does not hold is
logged and dropped. The static twin is the latest frame as HTML (SVG drawn here, numbers
only), saying that the sliders need a running kernel.
"""

from __future__ import annotations

import base64
import html
import logging
import math
import re
import threading
from collections.abc import Sequence
from typing import Any

import traitlets

from ._base import JaxlabWidget, Throttle

_log = logging.getLogger(__name__)

TWIN_INTERVAL = 0.5  # seconds between rewrites of the twin while the sliders move
NO_KERNEL = "Saved view: the sliders need a running kernel."
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
MOST_POINTS = 4000  # points of one curve drawn in the twin (a longer one is strided)


class Explorer(JaxlabWidget, static="explorer"):
    """The live view of an exploration: see the module's docstring."""

    # the core's frame() as it is (see docs/design.md, explore/); the kernel's alone
    frame = traitlets.Dict().tag(sync=True)
    # whether the exploration has a target to fit (the page then offers "fit")
    fittable = traitlets.Bool(False).tag(sync=True)

    def __init__(self, exploration: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._core = exploration
        self._twins = Throttle(self.update_static, interval=TWIN_INTERVAL)
        self._lock = threading.Lock()  # one frame set at a time (fit steps run elsewhere)
        self._fitting: threading.Thread | None = None
        self.fittable = getattr(exploration, "target", None) is not None
        self.frame = exploration.frame()
        self._subscribed = True
        self._unsubscribe = exploration.subscribe(self._publish)
        self.on_msg(self._message)

    @property
    def exploration(self) -> Any:
        """The core object this view draws (``values``, ``sensitivity``, ``set`` ...)."""
        return self._core

    def _publish(self, frame: dict[str, Any]) -> None:
        """The core changed (a move, sweep or fit step, on whatever thread): draw it."""
        with self._lock:
            if self._subscribed:
                self.frame = frame

    def _synced_change(self, change: dict[str, Any]) -> None:
        # a frame per move: the twin follows at most every TWIN_INTERVAL seconds
        if change.get("name") == "frame":
            if self._twin_ids:
                self._twins.changed()
            return
        super()._synced_change(change)

    def _message(self, _: Any, content: Any, buffers: Any = None) -> None:
        """A message from the page → the core. Anything malformed is logged and dropped,
        never raised (ipywidgets would print the traceback into the output)."""
        try:
            call = page_call(content, self.frame)
        except ValueError as err:
            _log.warning("Explorer dropped a message from the page: %s", err)
            return
        name, args = call
        if name == "fit":
            self._start_fit()
            return
        try:
            getattr(self._core, name)(*args)
        except Exception:
            _log.warning("Explorer: %s%r failed", name, args, exc_info=True)

    def _start_fit(self) -> None:
        """Run the core's fit on a thread of its own: the kernel's thread stays free for
        the page's "stop" (and moves) while the sliders follow the fit."""
        if self._fitting is not None and self._fitting.is_alive():
            return
        self._fitting = threading.Thread(target=self._fit, name="jaxlab-explore-fit", daemon=True)
        self._fitting.start()

    def _fit(self) -> None:
        try:
            self._core.fit()
        except Exception:
            _log.warning("Explorer: fit failed", exc_info=True)

    def close(self) -> None:
        if self._fitting is not None and self._fitting.is_alive():
            self._core.stop()
        self._twins.cancel()
        subscribed, self._subscribed = self._subscribed, False
        if subscribed and callable(self._unsubscribe):
            self._unsubscribe()
        elif subscribed and hasattr(self._core, "unsubscribe"):
            self._core.unsubscribe(self._publish)
        super().close()

    def _static_html(self) -> str:
        return frame_html(self.frame)

    def _static_text(self) -> str:
        return frame_text(self.frame)


# ----------------------------------------------------------------- the page's messages


def page_call(content: Any, frame: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The core call a page message asks for, checked against the frame's controls:
    ``("move", (name, value, seq))``, ``("sweep", (name,))``, ``("fit", ())``,
    ``("stop", ())``; else ``ValueError`` saying what was wrong."""
    if not isinstance(content, dict):
        raise ValueError(f"not a message: {content!r:.80}")
    kind = content.get("type")
    if kind in ("fit", "stop"):
        return str(kind), ()
    controls = {c.get("name"): c for c in frame.get("controls") or [] if isinstance(c, dict)}
    name = content.get("name")
    control = controls.get(name) if isinstance(name, str) else None
    if control is None:
        raise ValueError(f"{kind!r:.20} names no control of this view: {name!r:.80}")
    if kind == "sweep":
        if control.get("kind") != "float":
            raise ValueError(f"only a float slider is swept, not {name!r}")
        return "sweep", (name,)
    if kind != "move":
        raise ValueError(f"unknown message type {kind!r:.40}")
    seq = content.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ValueError(f"a move's seq is a whole number, not {seq!r:.40}")
    return "move", (name, control_value(control, content.get("value")), seq)


def control_value(control: dict[str, Any], value: Any) -> Any:
    """The value a page sent for ``control``, of its kind: a finite float for a slider,
    a bool for a checkbox, an int or a string for a static argument; a fixed one takes none."""
    kind, name = control.get("kind"), control.get("name")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"slider {name!r} takes a number, not {value!r:.40}")
        if not math.isfinite(value):
            raise ValueError(f"slider {name!r} takes a finite number, not {value!r}")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"checkbox {name!r} takes true or false, not {value!r:.40}")
        return value
    if kind == "static":
        current = control.get("value")
        if isinstance(current, int) and not isinstance(current, bool):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name!r} takes a whole number, not {value!r:.40}")
            if not float(value).is_integer():
                raise ValueError(f"{name!r} takes a whole number, not {value!r}")
            return int(value)
        if isinstance(value, str) and len(value) <= 1000:
            return value
        raise ValueError(f"{name!r} takes a string, not {value!r:.40}")
    raise ValueError(f"{name!r} is held fixed; the page cannot change it")


# -------------------------------------------------------------------- the static twin


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def fmt(v: Any) -> str:
    """A number as a reader takes it in: 4 significant figures, NaN/Inf said."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int | float):
        x = float(v)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Inf" if x > 0 else "-Inf"
        return f"{x:.4g}" if isinstance(v, float) else str(v)
    return str(v)


def _floats(v: Any) -> list[float | None]:
    if not isinstance(v, list):
        return []
    step = max(1, len(v) // MOST_POINTS)
    return [_num(x) for x in v[::step]]


def polyline_svg(
    series: Sequence[tuple[Sequence[float | None], Sequence[float | None], str]],
    width: int = 360,
    height: int = 140,
    marks: Sequence[tuple[float, float]] = (),
) -> str:
    """``series`` of ``(xs, ys, colour)`` drawn on one pair of axes as an SVG: numbers
    only (a non-finite point breaks its line); ``marks``: dots at ``(x, y)``."""
    pts = [
        (x, y)
        for xs, ys, _ in series
        for x, y in zip(xs, ys, strict=False)
        if x is not None and y is not None
    ]
    pts += list(marks)
    if not pts:
        return ""
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    pad = 6

    def sx(x: float) -> float:
        return pad + (x - x0) / dx * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad - (y - y0) / dy * (height - 2 * pad)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="border:1px solid #bbb">'
    ]
    for xs, ys, colour in series:
        runs: list[list[str]] = [[]]
        for x, y in zip(xs, ys, strict=False):
            if x is None or y is None:
                runs.append([])
            else:
                runs[-1].append(f"{sx(x):.1f},{sy(y):.1f}")
        for run in runs:
            if len(run) > 1:
                parts.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                    f'points="{" ".join(run)}"/>'
                )
    for x, y in marks:
        parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="#d32f2f"/>')
    parts.append("</svg>")
    return "".join(parts)


def _image(data: Any, mime: str, alt: str) -> str:
    """An ``<img>`` of the core's PNG (base64) or SVG (text, as a data URL: an image
    runs no script); anything else draws nothing."""
    if not isinstance(data, str) or not data:
        return ""
    if mime == "png":
        raw = data.split(",", 1)[1] if data.startswith("data:image/png;base64,") else data
        if not _BASE64.match(raw):
            return ""
        src = "data:image/png;base64," + raw
    else:
        src = "data:image/svg+xml;base64," + base64.b64encode(data.encode()).decode()
    return f'<img src="{src}" alt="{html.escape(alt)}" style="max-width:360px">'


def _panel_html(panel: dict[str, Any], frame: dict[str, Any]) -> str:
    kind = panel.get("kind")
    title = html.escape(str(panel.get("path") or "output"))
    body = ""
    if kind == "scalar":
        value = html.escape(fmt(panel.get("value")))
        body = f'<div style="font-size:28px;font-weight:bold">{value}</div>'
        history = _floats(panel.get("history"))
        body += polyline_svg([(list(range(len(history))), history, "#1976d2")], 200, 40)
        sweep = panel.get("sweep")
        if isinstance(sweep, dict):
            xs, ys = _floats(sweep.get("xs")), _floats(sweep.get("ys"))
            cur = _num(sweep.get("current"))
            marks = []
            if cur is not None and xs:
                near = min(range(len(xs)), key=lambda i: abs((xs[i] or 0.0) - cur))
                if ys[near] is not None:
                    marks.append((cur, ys[near] or 0.0))
            body += f"<div>sweep over {html.escape(str(sweep.get('param')))}</div>" + polyline_svg(
                [(xs, ys, "#1976d2")], marks=marks
            )
    elif kind == "line":
        ys = _floats(panel.get("y"))
        xs = _floats(panel.get("x")) or [float(i) for i in range(len(ys))]
        body = polyline_svg([(xs, ys, "#1976d2")])
        tangent = _floats(panel.get("tangent"))
        if tangent and frame.get("moved"):
            body += f"<div>d/d {html.escape(str(frame.get('moved')))}</div>"
            body += polyline_svg([(xs, tangent, "#e65100")], height=90)
    elif kind == "path":
        xy = panel.get("xy")
        xy = xy if isinstance(xy, list) else []
        pairs = [p for p in xy if isinstance(p, list) and len(p) == 2]
        body = polyline_svg([([_num(p[0]) for p in pairs], [_num(p[1]) for p in pairs], "#1976d2")])
    elif kind == "heatmap":
        img = _image(panel.get("png"), "png", title) or _image(panel.get("svg"), "svg", title)
        sens = _image(panel.get("sens_png"), "png", "sensitivity")
        body = f'<div style="display:flex;gap:8px">{img}{sens}</div>'
    elif kind == "text":
        body = f"<pre>{html.escape(str(panel.get('text', '')))}</pre>"
    note = panel.get("note")
    if note:
        body += f'<div style="opacity:0.75">{html.escape(str(note))}</div>'
    return f'<div style="margin:4px 12px 4px 0"><b>{title}</b>{body}</div>'


def _control_row(c: dict[str, Any]) -> str:
    kind = str(c.get("kind", ""))
    lo, hi = _num(c.get("lo")), _num(c.get("hi"))
    span = f"{fmt(lo)} .. {fmt(hi)} ({c.get('scale', 'linear')})" if lo is not None else kind
    flag = c.get("flag")
    cells = [
        f"<b>{html.escape(str(c.get('name', '')))}</b>",
        html.escape(fmt(c.get("value"))),
        html.escape(str(span)),
        html.escape(str(c.get("range_note") or "")),
    ]
    if flag:
        cells.append(f'<span style="color:#d32f2f">{html.escape(str(flag))}</span>')
    return "<tr>" + "".join(f'<td style="padding:1px 8px 1px 0">{x}</td>' for x in cells) + "</tr>"


def _bar_html(bar: list[Any]) -> str:
    rows = [b for b in bar if isinstance(b, dict)]
    biggest = max((abs(_num(b.get("scaled")) or 0.0) for b in rows), default=0.0) or 1.0
    out = ["<div><b>which knob matters most</b> (d output / d slider × its range)</div>"]
    for b in rows:
        s = (_num(b.get("scaled")) or 0.0) / biggest
        colour = "#1976d2" if s >= 0 else "#d32f2f"
        left = 50 if s >= 0 else 50 + 50 * s
        out.append(
            '<div style="display:flex;align-items:center;gap:6px">'
            f'<span style="width:8em">{html.escape(str(b.get("name", "")))}</span>'
            '<span style="position:relative;width:200px;height:10px;background:#eee">'
            f'<span style="position:absolute;left:{left:.1f}%;width:{50 * abs(s):.1f}%;'
            f'height:10px;background:{colour}"></span></span>'
            f"<span>{html.escape(fmt(b.get('value')))}</span></div>"
        )
    return "".join(out)


def frame_html(frame: dict[str, Any]) -> str:
    """The frame as plain HTML (no script, no network; every text escaped)."""
    if not frame:
        return f"<div>{html.escape(NO_KERNEL)}</div>"
    name = html.escape(str(frame.get("function", "")))
    parts = [
        '<div class="jaxlab-ex-saved" style="font-family:var(--jp-ui-font-family,sans-serif);'
        'font-size:13px;color:var(--jp-ui-font-color1,#222)">',
        f"<div><b>explore {name}</b> · <i>{html.escape(NO_KERNEL)}</i></div>",
    ]
    controls = [c for c in frame.get("controls") or [] if isinstance(c, dict)]
    if controls:
        parts.append("<table>" + "".join(_control_row(c) for c in controls) + "</table>")
    error = frame.get("error")
    if isinstance(error, dict):
        where = f" ({error.get('where')})" if error.get("where") else ""
        text = f"{error.get('message', '')}{where}"
        parts.append(f'<div style="color:#d32f2f">{html.escape(text)}</div>')
    if frame.get("derivative_words"):
        parts.append(f"<div>{html.escape(str(frame['derivative_words']))}</div>")
    panels = [p for p in frame.get("panels") or [] if isinstance(p, dict)]
    parts.append('<div style="display:flex;flex-wrap:wrap">')
    parts += [_panel_html(p, frame) for p in panels]
    parts.append("</div>")
    if isinstance(frame.get("bar"), list) and frame["bar"]:
        parts.append(_bar_html(frame["bar"]))
    fit = frame.get("fit")
    if isinstance(fit, dict) and fit.get("loss"):
        loss = _floats(fit.get("loss"))
        parts.append(f"<div>fit: step {html.escape(fmt(fit.get('step')))}, loss</div>")
        parts.append(polyline_svg([(list(range(len(loss))), loss, "#2e7d32")], 240, 80))
    for note in frame.get("notes") or []:
        parts.append(f'<div style="opacity:0.75">{html.escape(str(note))}</div>')
    parts.append("</div>")
    return "".join(parts)


def frame_text(frame: dict[str, Any]) -> str:
    """One line per control and per scalar panel (the plain-text twin)."""
    lines = [f"explore {frame.get('function', '')} ({NO_KERNEL})"]
    for c in frame.get("controls") or []:
        if isinstance(c, dict):
            lines.append(f"  {c.get('name')} = {fmt(c.get('value'))}")
    for p in frame.get("panels") or []:
        if isinstance(p, dict) and p.get("kind") == "scalar":
            lines.append(f"  {p.get('path') or 'output'}: {fmt(p.get('value'))}")
    if frame.get("derivative_words"):
        lines.append(f"  {frame['derivative_words']}")
    return "\n".join(lines)
