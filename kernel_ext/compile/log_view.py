"""Static views of a :class:`~jaxlab.compile.log.CompileLog`: text, an HTML table, a chart.

These render without a live kernel (exported HTML, GitHub, the docs) and are the
fallback of the live ``CompileMonitor`` widget::

    from jaxlab.compile.log_view import log_html
    html = log_html(jaxlab.compile_log())
"""

from __future__ import annotations

import html
from typing import Any

from .log import CompileEvent, CompileLog, FunctionStats

PHASES = (("trace", "#4e79a7"), ("lower", "#f28e2b"), ("compile", "#59a14f"))
MAX_ROWS = 50


def seconds(s: float) -> str:
    """``0.0123 -> "12.3 ms"``: three significant figures, a unit a reader expects."""
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def event_text(e: CompileEvent) -> str:
    where = f" at {e.where}" if e.where else ""
    kind = "recompiled" if e.recompile else "compiled"
    return (
        f"#{e.index} {e.fun_name} {kind}{where} in {seconds(e.total_s)} "
        f"(trace {seconds(e.trace_s)}, lower {seconds(e.lower_s)}, compile {seconds(e.compile_s)}"
        f", persistent cache {e.persistent_cache}): {e.explanation}"
    )


def log_text(log: CompileLog, last: int = 10) -> str:
    rows = log.functions()
    head = (
        f"CompileLog: {log.count} compilations of {len(rows)} functions, "
        f"{seconds(log.compile_s)} compiling, {seconds(log.running_s)} running"
    )
    if log.dropped:
        head += f" ({log.dropped} oldest not kept)"
    lines = [head]
    for r in rows[:MAX_ROWS]:
        why = next((e for e in reversed(r.recent) if e.recompile), None)
        lines.append(
            f"  {r.name}: {r.count}× total {seconds(r.total_s)}, last {seconds(r.last_s)}"
            + (f", {_count(r.recompiles, 'recompilation')}" if r.recompiles else "")
            + (f"; last because {why.explanation}" if why is not None else "")
        )
    if len(rows) > MAX_ROWS:
        lines.append(f"  ... {len(rows) - MAX_ROWS} more functions")
    events = log.events[-last:]
    if events:
        lines.append("last compilations:")
        lines.extend("  " + event_text(e) for e in events)
    return "\n".join(lines)


def _bar(e: CompileEvent, scale: float) -> str:
    parts = []
    for (name, colour), value in zip(PHASES, (e.trace_s, e.lower_s, e.compile_s), strict=True):
        width = 0.0 if scale <= 0 else 100.0 * value / scale
        parts.append(
            f'<span title="{name} {html.escape(seconds(value))}" style="display:inline-block;'
            f'height:10px;width:{width:.2f}%;background:{colour}"></span>'
        )
    title = html.escape(event_text(e))
    stripe = "#e15759" if e.recompile else "transparent"
    return (
        f'<div title="{title}" style="width:160px;line-height:0;margin:1px 0;'
        f'border-left:3px solid {stripe}">' + "".join(parts) + "</div>"
    )


def _row(r: FunctionStats, scale: float) -> str:
    reasons = [
        f"<li>#{e.index}: {html.escape(e.explanation)}"
        + (f" <small>({html.escape(e.where)})</small>" if e.where else "")
        + "</li>"
        for e in r.recent
        if e.recompile
    ]
    cells = [
        f"<td><code>{html.escape(r.name)}</code></td>",
        f'<td class="num">{r.count}</td>',
        f'<td class="num">{html.escape(seconds(r.total_s))}</td>',
        f'<td class="num">{html.escape(seconds(r.last_s))}</td>',
        "<td>" + "".join(_bar(e, scale) for e in r.recent) + "</td>",
        f'<td><ul class="reasons">{"".join(reasons)}</ul></td>',
    ]
    return "<tr>" + "".join(cells) + "</tr>"


# JupyterLab right-aligns every table cell (`:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon
# td`): text goes back to the left with a more specific selector, numbers stay right.
# Its colours where they exist (light and dark themes), fixed ones elsewhere.
_T = ".jaxlab-compile-log table.jaxlab-cl"
_STYLE = (
    f"<style>{_T} td,{_T} th{{text-align:left;vertical-align:top;padding:2px 8px}}"
    f"{_T} td.num,{_T} th.num{{text-align:right;white-space:nowrap;"
    "font-variant-numeric:tabular-nums}"
    ".jaxlab-compile-log ul.reasons{margin:0;padding-left:1.2em;"
    "color:var(--jp-error-color1,#b03030)}</style>"
)


def log_html(log: CompileLog) -> str:
    """The log as an HTML table: one row per function, a stacked bar per compilation."""
    rows = log.functions()
    scale = max((e.total_s for r in rows[:MAX_ROWS] for e in r.recent), default=0.0)
    legend = " ".join(
        f'<span style="display:inline-block;width:10px;height:10px;background:{c}"></span> {n}'
        for n, c in PHASES
    )
    legend += (
        ' <span style="display:inline-block;width:0;height:10px;'
        'border-left:3px solid #e15759"></span> recompiled'
    )
    total = log.compile_s + log.running_s
    share = 0.0 if total <= 0 else 100.0 * log.compile_s / total
    summary = (
        f"<p><b>{_count(log.count, 'compilation')}</b> of "
        f"<b>{_count(len(rows), 'function')}</b> · "
        f"compiling <b>{html.escape(seconds(log.compile_s))}</b> versus running "
        f"<b>{html.escape(seconds(log.running_s))}</b> ({share:.0f}% compiling)"
        + (f" · {log.dropped} oldest events not kept" if log.dropped else "")
        + f" · {legend}</p>"
    )
    numbers = ("compiles", "total", "last")
    head = "".join(
        f'<th class="num">{h}</th>' if h in numbers else f"<th>{h}</th>"
        for h in ("function", *numbers, "phases", "recompiled because")
    )
    body = "".join(_row(r, scale) for r in rows[:MAX_ROWS])
    more = (
        f'<tr><td colspan="6">… {len(rows) - MAX_ROWS} more functions</td></tr>'
        if len(rows) > MAX_ROWS
        else ""
    )
    return (
        '<div class="jaxlab-compile-log">'
        + _STYLE
        + summary
        + f'<table class="jaxlab-cl"><thead><tr>{head}</tr></thead>'
        + f"<tbody>{body}{more}</tbody></table></div>"
    )


def _clip(text: str, width: int) -> str:
    """``text`` cut at a word boundary to about ``width`` characters, with an ellipsis."""
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;: ") + "…"


def log_figure(log: CompileLog, last: int = 50) -> Any:
    """A matplotlib Figure: the last ``last`` compilations as stacked horizontal bars."""
    from matplotlib.figure import Figure

    events = log.events[-last:]
    fig = Figure(figsize=(7, 1.2 + 0.22 * max(len(events), 1)))
    ax = fig.add_subplot()
    labels = [f"#{e.index} {e.fun_name}" for e in events]
    left = [0.0] * len(events)
    for (name, colour), key in zip(PHASES, ("trace_s", "lower_s", "compile_s"), strict=True):
        values = [getattr(e, key) * 1e3 for e in events]
        ax.barh(labels, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for i, e in enumerate(events):
        if e.recompile:
            ax.annotate(
                _clip(e.explanation, 60),
                (left[i], i),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=7,
                color="#b03030",
            )
    if any(e.recompile for e in events) and max(left, default=0.0) > 0:
        ax.set_xlim(0, max(left) / 0.45)  # room on the right for the reasons
    ax.invert_yaxis()
    ax.margins(y=0.01)
    ax.set_xlabel("milliseconds")
    shown = f", the last {len(events)} drawn" if len(events) < log.count else ""
    ax.set_title(
        f"{_count(log.count, 'compilation')}{shown}: {seconds(log.compile_s)} compiling, "
        f"{seconds(log.running_s)} running",
        fontsize=10,
        pad=18,
    )
    # above the bars, where it hides none of them
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0, 1, 0.1), ncols=3, fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
