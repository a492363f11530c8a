"""Static views of a :class:`~jaxlab.compile.log.CompileLog`: text, an HTML table, a chart.

These render without a live kernel (exported HTML, GitHub, the docs) and are the
fallback of the live ``CompileMonitor`` widget. One colour language everywhere (widget,
table, chart): each phase has its colour (trace, lower, compile), the rest of the cells'
time is grey ("other cell time": the user's code running, Python, printing; never
called "running", which it is not only), and a red stripe marks a recompilation; every
view carries that legend. JAX's eager operations are grouped apart, never as
recompilations, and ``{weak}`` is explained in words wherever it is shown::

    from jaxlab.compile.log_view import log_html
    html = log_html(jaxlab.compile_log())
"""

from __future__ import annotations

import functools
import html
import itertools
import textwrap
from typing import Any

from .log import SHAPES_PER_OPERATION, CompileEvent, CompileLog, EagerOperations, FunctionStats
from .messages import EAGER_HINT, weak_note

PHASES = (("trace", "#4e79a7"), ("lower", "#f28e2b"), ("compile", "#59a14f"))
OTHER = "#bab0ac"
OTHER_NAME = "other cell time"
OTHER_MEANING = (
    "cell time not spent compiling or in jaxlab's views: your code running, Python, printing"
)
RECOMPILED = "#e15759"  # only ever a stripe beside a recompilation, never a phase
MAX_ROWS = 50
MAX_EAGER_NAMED = 6  # eager operations named in a summary line
CHART_TEXT_PT = 9  # 12 px at the 96 dpi the chart is saved at: readable on a projector
REASON_CHARS = 60  # a chart reason wraps at this width ...
REASON_LINES = 2  # ... onto at most this many lines
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
    """``"3 compilations of 2 functions · compiling 1.2 s, other cell time 4 s (23%
    compiling)"``: other cell time is the rest of the cells (see ``CompileLog.other_s``).
    ``functions`` counts functions, not eager operations; their compilations are apart."""
    total = log.compile_s + log.other_s
    share = f" ({100 * log.compile_s / total:.0f}% compiling)" if total > 0 else ""
    # no timed cells (a script's `recording()`): no other cell time to compare with
    rest = f", {OTHER_NAME} {seconds(log.other_s)}{share}" if log.cell_s > 0 else ""
    text = (
        f"{count(log.count - log.eager_count, 'compilation')} of "
        f"{count(functions, 'function')} · compiling {seconds(log.compile_s)}{rest}"
    )
    if log.eager_count:
        text += f" · {count(log.eager_count, 'compilation')} of JAX's eager operations"
    if log.dropped:
        text += f" · {log.dropped} oldest not kept"
    if log.jaxlab_count or log.jaxlab_work_s:
        text += f" · jaxlab's own work {seconds(log.jaxlab_work_s)} not counted"
        if log.jaxlab_count:
            text += f" ({count(log.jaxlab_count, 'compilation')} not shown)"
    return text


def eager_summary_text(ops: EagerOperations) -> str:
    """``"16 compilations of 6 eager operations: matmul ×4 (f32[2,4], f32[4,8]; …), …"``,
    then what they are and the hint that ``jax.jit`` compiles a function once."""
    named = ", ".join(
        f"{r.name} ×{r.count} ({'; '.join(r.shapes[:2])}{'; …' if len(r.shapes) > 2 else ''})"
        for r in ops.rows[:MAX_EAGER_NAMED]
    )
    more = f", {len(ops.rows) - MAX_EAGER_NAMED} more" if len(ops.rows) > MAX_EAGER_NAMED else ""
    return (
        f"{count(ops.count, 'compilation')} of "
        f"{count(len(ops.rows), 'eager operation')} in {seconds(ops.total_s)}: "
        f"{named}{more}. {EAGER_HINT}."
    )


def event_text(e: CompileEvent) -> str:
    where = f" at {e.where}" if e.where else ""
    kind = "recompiled" if e.recompile else "compiled (eager)" if e.eager else "compiled"
    return (
        f"#{e.index} {e.fun_name} {kind}{where} in {seconds(e.total_s)} "
        f"(trace {seconds(e.trace_s)}, lower {seconds(e.lower_s)}, compile {seconds(e.compile_s)}"
        f", persistent cache {e.persistent_cache}): {e.explanation}"
    )


def _last_reason(r: FunctionStats) -> CompileEvent | None:
    return next((e for e in reversed(r.recent) if e.recompile), None)


def log_text(log: CompileLog, last: int = 10) -> str:
    rows = log.functions()
    lines = [f"CompileLog: {summary_text(log, sum(not r.eager for r in rows))}"]
    eager = log.eager_operations()
    if eager.count:
        lines.append(f"  eager operations: {eager_summary_text(eager)}")
    for r in rows[:MAX_ROWS]:
        if r.eager:
            continue
        why = _last_reason(r)
        lines.append(
            f"  {r.name}: {r.count}× total {seconds(r.total_s)}, last {seconds(r.last_s)}"
            + (f", {count(r.recompiles, 'recompilation')}" if r.recompiles else "")
            + (f"; last because {why.explanation}" if why is not None else "")
            + (
                f" (what changed: {_diff_call(r.name)})"
                if why is not None and log.programs(r.name) is not None
                else ""
            )
        )
    if len(rows) > MAX_ROWS:
        lines.append(f"  ... {len(rows) - MAX_ROWS} more functions")
    events = log.events[-last:]
    if events:
        lines.append("last compilations, newest first:")
        lines.extend("  " + event_text(e) for e in reversed(events))
    note = weak_note(lines)
    if note:
        lines.append(note)
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
    keys += [
        f'<span title="{html.escape(OTHER_MEANING)}">{_key(OTHER, OTHER_NAME)}</span>',
        _key(RECOMPILED, "recompiled", stripe=True),
    ]
    return '<span class="jaxlab-cl-legend">' + " ".join(keys) + "</span>"


def _share_bar(log: CompileLog) -> str:
    """The session's time: its three compile phases, then the rest of the cells."""
    parts = [*log.phase_s, log.other_s]
    total = sum(parts)
    colours = [c for _, c in PHASES] + [OTHER]
    names = [n for n, _ in PHASES] + [OTHER_NAME]
    spans = "".join(
        f'<span title="{n} {html.escape(seconds(v))}" style="display:inline-block;height:10px;'
        f'width:{120 * v / total:.1f}px;background:{c}"></span>'
        for n, c, v in zip(names, colours, parts, strict=True)
        if total > 0
    )
    return f'<span style="display:inline-block;line-height:0;vertical-align:middle">{spans}</span>'


# A long session's table is redrawn after every cell (the CompileMonitor's twin), its
# events mostly the same ones: each event's bar is made once per scale (a 300-event log's
# twin took 5.4 ms, 70% of it these bars).
@functools.lru_cache(maxsize=4096)
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


def _diff_call(name: str) -> str:
    """The call that draws what changed between a function's last two programs."""
    return f"jaxlab.recompile_diff({name!r})"


def _row(r: FunctionStats, scale: float, anchor: str, diffable: bool = False) -> str:
    newest = tuple(reversed(r.recent))
    last = _last_reason(r)
    reasons = [
        f"<li>#{e.index}: {html.escape(e.explanation)}"
        + (f" <small>({html.escape(e.where)})</small>" if e.where else "")
        # The newest recompile links to its program's difference from the one before.
        + (
            f" <small>what changed: <code>{html.escape(_diff_call(r.name))}</code></small>"
            if diffable and e is last
            else ""
        )
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
    ".jaxlab-compile-log ul.reasons{margin:0;padding-left:1.2em}"
    # An aside is quieter, not smaller than 12 px (a browser's <small> is 0.83em).
    ".jaxlab-compile-log small{font-size:max(12px,0.9em);"
    "color:var(--jp-ui-font-color2,#666)}</style>"
)
_HEAD = ("function", "compiles", "recompiled", "total", "last", "phases, newest first", "why")
_NUMBERS = {"compiles", "recompiled", "total", "last"}


def _table(rows: tuple[FunctionStats, ...], prefix: str, log: CompileLog | None = None) -> str:
    scale = max((e.total_s for r in rows[:MAX_ROWS] for e in r.recent), default=0.0)
    head = "".join(f'<th class="num">{h}</th>' if h in _NUMBERS else f"<th>{h}</th>" for h in _HEAD)
    body = "".join(
        _row(r, scale, f"{prefix}-{i}", log is not None and log.programs(r.name) is not None)
        for i, r in enumerate(rows[:MAX_ROWS])
    )
    more = (
        f'<tr><td colspan="{len(_HEAD)}">… {len(rows) - MAX_ROWS} more functions</td></tr>'
        if len(rows) > MAX_ROWS
        else ""
    )
    return (
        f'<table class="jaxlab-cl"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}{more}</tbody></table>"
    )


def log_html(log: CompileLog, cache: dict[str, Any] | None = None) -> str:
    """The log as HTML: the user's functions in a table (newest first), a stacked bar per
    compilation; JAX's and libraries' functions folded away below. ``cache``, a dict the
    caller keeps (a live view, whose twin is drawn again after cells): the tables are made
    again only when the log changed (``log.version``), the summary every time."""
    rows = log.functions()
    eager = log.eager_operations()
    functions = sum(1 for r in rows if not r.eager)
    summary = (
        f"<p>{html.escape(summary_text(log, functions))} {_share_bar(log)}<br>{legend_html()}</p>"
    )
    if cache is not None and cache.get("version") == log.version:
        body = str(cache["body"])
    else:
        body = _tables_html(log, rows, eager)
        if cache is not None:
            cache.update(version=log.version, body=body)
    return '<div class="jaxlab-compile-log">' + _STYLE + summary + body + "</div>"


def _tables_html(log: CompileLog, rows: tuple[FunctionStats, ...], eager: EagerOperations) -> str:
    """The log's tables: the user's functions, JAX's eager operations, libraries'."""
    mine = tuple(r for r in rows if r.user_code)
    theirs = tuple(r for r in rows if not r.user_code)
    prefix = f"jaxlab-cl-{next(_ids)}"
    body = (
        _table(mine, f"{prefix}-m", log) if mine else "<p>None of your functions compiled yet.</p>"
    )
    if eager.count:
        body += _eager_html(eager)
    libraries = tuple(r for r in theirs if not r.eager)
    if libraries:
        n = sum(r.count for r in libraries)
        body += (
            f"<details><summary>{count(n, 'compilation')} of "
            f"{count(len(libraries), 'function')} from JAX and libraries (library "
            f"internals)</summary>{_table(libraries, f'{prefix}-t')}</details>"
        )
    shown = [e.explanation for r in mine + libraries for e in r.recent]
    shown += [t for r in mine + libraries for e in r.recent for t in e.signature]
    note = weak_note(shown + [s for r in eager.rows for s in r.shapes])
    if note:
        body += f"<p><small>{html.escape(note)}</small></p>"
    return body


def _eager_html(ops: EagerOperations) -> str:
    """JAX's eager operations, folded: one row per operation with its shapes, and the
    hint; no reasons and no red, since none of them is a recompilation."""
    rows = "".join(
        f"<tr><td><code>{html.escape(r.name)}</code></td>"
        f'<td class="num">{r.count}</td><td class="num">{html.escape(seconds(r.total_s))}</td>'
        f"<td>{'<br>'.join(html.escape(s or '(no arguments)') for s in r.shapes)}"
        f"{'<br>…' if len(r.shapes) >= SHAPES_PER_OPERATION else ''}</td></tr>"
        for r in ops.rows[:MAX_ROWS]
    )
    return (
        f'<details class="jaxlab-cl-eager"><summary>{count(ops.count, "compilation")} of '
        f"{count(len(ops.rows), 'eager operation')} of JAX (run outside jax.jit), "
        f"{html.escape(seconds(ops.total_s))}</summary><p>{html.escape(EAGER_HINT)}.</p>"
        '<table class="jaxlab-cl"><thead><tr><th>operation</th><th class="num">compiles</th>'
        '<th class="num">total</th><th>argument types</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></details>"
    )


# --------------------------------------------------------------------------- chart
def _clip(text: str, width: int) -> str:
    """``text`` cut at a word boundary to about ``width`` characters, with an ellipsis."""
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;: ") + "…"


def wrap_reason(text: str) -> str:
    """A chart reason on at most :data:`REASON_LINES` lines of :data:`REASON_CHARS`:
    narrow enough that the chart fits a 1280-px screen unscaled, so its 12 px stay 12."""
    lines = textwrap.wrap(text, REASON_CHARS, break_long_words=True) or [""]
    if len(lines) > REASON_LINES:
        rest = " ".join(lines[REASON_LINES - 1 :])
        lines = [*lines[: REASON_LINES - 1], _clip(rest, REASON_CHARS)]
    return "\n".join(lines)


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
    reasons = {i: wrap_reason(e.explanation) for i, e in enumerate(events) if e.recompile}
    two_lines = any("\n" in r for r in reasons.values())
    row_in = 0.36 if two_lines else 0.26  # a row holds its reason's lines at 12 px
    notes = weak_note([e.explanation for e in events if e.recompile])
    fig = Figure(figsize=(4.5, 1.4 + (0.25 if notes else 0) + row_in * max(len(events), 1)))
    ax = fig.add_subplot()
    ys = list(range(len(events)))
    left = [0.0] * len(events)
    for (name, colour), key in zip(PHASES, ("trace_s", "lower_s", "compile_s"), strict=True):
        values = [getattr(e, key) * 1e3 for e in events]
        ax.barh(ys, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(
        ys,
        [_literal(f"#{e.index} {e.fun_name}{' (eager)' if e.eager else ''}") for e in events],
        fontsize=CHART_TEXT_PT,
    )
    ax.tick_params(axis="x", labelsize=CHART_TEXT_PT)
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
                reasons[i],
                (right * 1.02, i),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=CHART_TEXT_PT,
                linespacing=1.0,
                color="#333333",
                annotation_clip=False,
                parse_math=False,
            )
        elif e.eager:
            ax.get_yticklabels()[i].set_color("#666666")
    ax.set_ylim(max(len(events), 1) - 0.5, -0.5)  # newest at the top (one empty row if none)
    ax.set_xlabel("milliseconds", fontsize=CHART_TEXT_PT)
    hidden = len(log.events) - len(kept)
    eager = sum(e.eager for e in log.events)
    drawn = f"the last {len(events)} drawn" if len(events) < len(kept) else "all drawn"
    title = f"{count(len(kept), 'compilation')}{' of yours' if mine_only else ''}, {drawn}"
    if mine_only and hidden:
        parts = [count(eager, "eager operation")] if eager else []
        if hidden > eager:
            parts.append(f"{hidden - eager} of JAX and libraries")
        title += f" ({' and '.join(parts)} not drawn)"
    ax.set_title(_literal(title), fontsize=CHART_TEXT_PT, loc="left", pad=24)
    if notes:
        fig.text(0.01, 0.01, notes, fontsize=CHART_TEXT_PT, color="#333333", parse_math=False)
    handles = [Patch(color=c, label=n) for n, c in PHASES]
    handles.append(Patch(color=RECOMPILED, label="recompiled"))
    ax.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncols=4,
        fontsize=CHART_TEXT_PT,
        frameon=False,
        borderaxespad=0.2,
    )
    # No tight_layout: it would squeeze the bars to make room for the reasons. Saved
    # with bbox_inches="tight" (IPython's inline display does), the figure grows to them.
    bottom = 0.5 + (0.25 if notes else 0)
    fig.subplots_adjust(
        left=0.25,
        right=0.98,
        top=1 - 0.75 / fig.get_figheight(),
        bottom=bottom / fig.get_figheight(),
    )
    return fig
