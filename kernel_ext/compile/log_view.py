"""Static views of a :class:`~jaxlab.compile.log.CompileLog`: text, an HTML table, a chart.

These render without a live kernel (exported HTML, GitHub, the docs) and are the
fallback of the live ``CompileMonitor`` widget. One colour language everywhere (widget,
table, chart): each phase has its colour (trace, lower, compile), running time is grey,
and a red stripe marks a recompilation; every view carries that legend::

    from jaxlab.compile.log_view import log_html
    html = log_html(jaxlab.compile_log())
"""

from __future__ import annotations

import html
import itertools
from typing import Any

from .log import CompileEvent, CompileLog, FunctionStats

PHASES = (("trace", "#4e79a7"), ("lower", "#f28e2b"), ("compile", "#59a14f"))
RUNNING = "#bab0ac"
RECOMPILED = "#e15759"  # only ever a stripe beside a recompilation, never a phase
MAX_ROWS = 50
_ids = itertools.count()  # anchors unique within a notebook page


def seconds(s: float) -> str:
    """``0.0123 -> "12.3 ms"``: three significant figures, a unit a reader expects."""
    if s <= 0:
        return "0 s"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def count(n: int, noun: str) -> str:
    """``count(1, "function") -> "1 function"``, ``count(2, ...) -> "2 functions"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def summary_text(log: CompileLog, functions: int) -> str:
    """``"3 compilations of 2 functions · compiling 1.2 s, running 4 s (23% compiling)"``."""
    total = log.compile_s + log.running_s
    share = f" ({100 * log.compile_s / total:.0f}% compiling)" if total > 0 else ""
    text = (
        f"{count(log.count, 'compilation')} of {count(functions, 'function')} · "
        f"compiling {seconds(log.compile_s)}, running {seconds(log.running_s)}{share}"
    )
    if log.dropped:
        text += f" · {log.dropped} oldest not kept"
    if log.jaxlab_count:
        text += f" · {count(log.jaxlab_count, 'compilation')} by jaxlab's own views not shown"
    return text


def event_text(e: CompileEvent) -> str:
    where = f" at {e.where}" if e.where else ""
    kind = "recompiled" if e.recompile else "compiled"
    return (
        f"#{e.index} {e.fun_name} {kind}{where} in {seconds(e.total_s)} "
        f"(trace {seconds(e.trace_s)}, lower {seconds(e.lower_s)}, compile {seconds(e.compile_s)}"
        f", persistent cache {e.persistent_cache}): {e.explanation}"
    )


def _last_reason(r: FunctionStats) -> CompileEvent | None:
    return next((e for e in reversed(r.recent) if e.recompile), None)


def log_text(log: CompileLog, last: int = 10) -> str:
    rows = log.functions()
    lines = [f"CompileLog: {summary_text(log, len(rows))}"]
    for r in rows[:MAX_ROWS]:
        why = _last_reason(r)
        lines.append(
            f"  {r.name}: {r.count}× total {seconds(r.total_s)}, last {seconds(r.last_s)}"
            + (f", {count(r.recompiles, 'recompilation')}" if r.recompiles else "")
            + (f"; last because {why.explanation}" if why is not None else "")
        )
    if len(rows) > MAX_ROWS:
        lines.append(f"  ... {len(rows) - MAX_ROWS} more functions")
    events = log.events[-last:]
    if events:
        lines.append("last compilations, newest first:")
        lines.extend("  " + event_text(e) for e in reversed(events))
    return "\n".join(lines)


# --------------------------------------------------------------------------- HTML
def _key(colour: str, name: str, stripe: bool = False) -> str:
    box = f"border-left:3px solid {colour};width:0" if stripe else f"background:{colour};width:10px"
    return (
        f'<span style="white-space:nowrap"><span style="display:inline-block;height:10px;'
        f'vertical-align:middle;{box}"></span> {name}</span>'
    )


def legend_html() -> str:
    """The one legend: the phases' colours, running, and the recompilation stripe."""
    keys = [_key(c, n) for n, c in PHASES]
    keys += [_key(RUNNING, "running"), _key(RECOMPILED, "recompiled", stripe=True)]
    return '<span class="jaxlab-cl-legend">' + " ".join(keys) + "</span>"


def _share_bar(log: CompileLog) -> str:
    """The session's time: its three compile phases, then running, in the same colours."""
    parts = [*log.phase_s, log.running_s]
    total = sum(parts)
    colours = [c for _, c in PHASES] + [RUNNING]
    names = [n for n, _ in PHASES] + ["running"]
    spans = "".join(
        f'<span title="{n} {html.escape(seconds(v))}" style="display:inline-block;height:10px;'
        f'width:{120 * v / total:.1f}px;background:{c}"></span>'
        for n, c, v in zip(names, colours, parts, strict=True)
        if total > 0
    )
    return f'<span style="display:inline-block;line-height:0;vertical-align:middle">{spans}</span>'


def _bar(e: CompileEvent, scale: float) -> str:
    parts = []
    for (name, colour), value in zip(PHASES, (e.trace_s, e.lower_s, e.compile_s), strict=True):
        width = 0.0 if scale <= 0 else 100.0 * value / scale
        parts.append(
            f'<span title="{name} {html.escape(seconds(value))}" style="display:inline-block;'
            f'height:10px;width:{width:.2f}%;background:{colour}"></span>'
        )
    title = html.escape(event_text(e))
    stripe = RECOMPILED if e.recompile else "transparent"
    return (
        f'<div title="{title}" style="width:160px;line-height:0;margin:1px 0;'
        f'border-left:3px solid {stripe}">' + "".join(parts) + "</div>"
    )


def _row(r: FunctionStats, scale: float, anchor: str) -> str:
    newest = tuple(reversed(r.recent))
    reasons = [
        f"<li>#{e.index}: {html.escape(e.explanation)}"
        + (f" <small>({html.escape(e.where)})</small>" if e.where else "")
        + "</li>"
        for e in newest
        if e.recompile
    ]
    recompiles = (
        f'<a href="#{anchor}">{count(r.recompiles, "recompilation")}</a>' if r.recompiles else ""
    )
    cells = [
        f"<td><code>{html.escape(r.name)}</code></td>",
        f'<td class="num">{r.count}</td>',
        f'<td class="num">{recompiles}</td>',
        f'<td class="num">{html.escape(seconds(r.total_s))}</td>',
        f'<td class="num">{html.escape(seconds(r.last_s))}</td>',
        "<td>" + "".join(_bar(e, scale) for e in newest) + "</td>",
        f'<td id="{anchor}"><ul class="reasons">{"".join(reasons)}</ul></td>',
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
    ".jaxlab-compile-log ul.reasons{margin:0;padding-left:1.2em}</style>"
)
_HEAD = ("function", "compiles", "recompiled", "total", "last", "phases, newest first", "why")
_NUMBERS = {"compiles", "recompiled", "total", "last"}


def _table(rows: tuple[FunctionStats, ...], prefix: str) -> str:
    scale = max((e.total_s for r in rows[:MAX_ROWS] for e in r.recent), default=0.0)
    head = "".join(f'<th class="num">{h}</th>' if h in _NUMBERS else f"<th>{h}</th>" for h in _HEAD)
    body = "".join(_row(r, scale, f"{prefix}-{i}") for i, r in enumerate(rows[:MAX_ROWS]))
    more = (
        f'<tr><td colspan="{len(_HEAD)}">… {len(rows) - MAX_ROWS} more functions</td></tr>'
        if len(rows) > MAX_ROWS
        else ""
    )
    return (
        f'<table class="jaxlab-cl"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}{more}</tbody></table>"
    )


def log_html(log: CompileLog) -> str:
    """The log as HTML: the user's functions in a table (newest first), a stacked bar per
    compilation; JAX's and libraries' functions folded away below."""
    rows = log.functions()
    mine = tuple(r for r in rows if r.user_code)
    theirs = tuple(r for r in rows if not r.user_code)
    prefix = f"jaxlab-cl-{next(_ids)}"
    summary = (
        f"<p>{html.escape(summary_text(log, len(rows)))} {_share_bar(log)}<br>{legend_html()}</p>"
    )
    body = _table(mine, f"{prefix}-m") if mine else "<p>None of your functions compiled yet.</p>"
    if theirs:
        n = sum(r.count for r in theirs)
        body += (
            f"<details><summary>{count(n, 'compilation')} of "
            f"{count(len(theirs), 'function')} from JAX and libraries (eager operations, "
            f"library internals)</summary>{_table(theirs, f'{prefix}-t')}</details>"
        )
    return '<div class="jaxlab-compile-log">' + _STYLE + summary + body + "</div>"


# --------------------------------------------------------------------------- chart
def _clip(text: str, width: int) -> str:
    """``text`` cut at a word boundary to about ``width`` characters, with an ellipsis."""
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;: ") + "…"


def _literal(text: str) -> str:
    # matplotlib reads `$...$` as mathtext (and raises on bad TeX): user text is literal
    return text.replace("$", r"\$")


def log_figure(log: CompileLog, last: int = 50, mine_only: bool = True) -> Any:
    """A matplotlib Figure: the last ``last`` compilations, newest at the top, as stacked
    bars (trace, lower, compile) with each recompilation's reason beside its bar.

    Sized to its content: the height to the bars, the width to the bars and the longest
    reason (save it with ``bbox_inches="tight"``, as IPython does). ``mine_only`` draws
    only the user's functions.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    kept = [e for e in log.events if e.user_code or not mine_only]
    events = kept[-last:][::-1]
    fig = Figure(figsize=(4.5, 1.3 + 0.24 * max(len(events), 1)))
    ax = fig.add_subplot()
    ys = list(range(len(events)))
    left = [0.0] * len(events)
    for (name, colour), key in zip(PHASES, ("trace_s", "lower_s", "compile_s"), strict=True):
        values = [getattr(e, key) * 1e3 for e in events]
        ax.barh(ys, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(ys, [_literal(f"#{e.index} {e.fun_name}") for e in events])
    right = max(left, default=0.0) or 1.0
    ax.set_xlim(0, right * 1.02)
    for i, e in enumerate(events):
        if e.recompile:
            ax.plot(
                [0],
                [i],
                marker="|",
                markersize=12,
                mew=4,
                color=RECOMPILED,
                clip_on=False,
                zorder=5,
            )
            ax.get_yticklabels()[i].set_color(RECOMPILED)
            ax.annotate(
                _clip(e.explanation, 110),
                (right * 1.02, i),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=7,
                color="#333333",
                annotation_clip=False,
                parse_math=False,
            )
    ax.set_ylim(len(events) - 0.5, -0.5)  # newest at the top
    ax.set_xlabel("milliseconds")
    hidden = len(log.events) - len(kept)
    drawn = f"the last {len(events)} drawn" if len(events) < len(kept) else "all drawn"
    title = f"{count(len(kept), 'compilation')}{' of yours' if mine_only else ''}, {drawn}"
    if mine_only and hidden:
        title += f" ({hidden} of JAX and libraries not drawn)"
    ax.set_title(_literal(title), fontsize=9, loc="left", pad=20)
    handles = [Patch(color=c, label=n) for n, c in PHASES]
    handles.append(Patch(color=RECOMPILED, label="recompiled"))
    ax.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncols=4,
        fontsize=7,
        frameon=False,
        borderaxespad=0.2,
    )
    # No tight_layout: it would squeeze the bars to make room for the reasons. Saved
    # with bbox_inches="tight" (IPython's inline display does), the figure grows to them.
    fig.subplots_adjust(
        left=0.25, right=0.98, top=1 - 0.7 / fig.get_figheight(), bottom=0.45 / fig.get_figheight()
    )
    return fig
