"""Text and HTML views of a ``ProfileResult``: the title, JAX's compilations, the static
timeline (``profile_svg``), the costliest modules and ops, and the hidden syncs with their
lines (what exported notebooks and ``--static`` show).
"""

from __future__ import annotations

import html

from ..compile.log_view import seconds
from .profile_result import Cost, ProfileResult
from .profile_spans import Compilation
from .profile_svg import timeline_svg
from .syncs import SyncSite


def kept_text(r: ProfileResult) -> str:
    """What the drawing holds when the trace had more spans than it draws; "" otherwise."""
    if not r.dropped_spans:
        return ""
    total = len(r.spans) + r.dropped_spans
    return (
        f"drawn: {len(r.spans):,} of {total:,} spans (JAX's compile steps and the syncs, the "
        f"{r.longest_drawn:,} longest, and an even sample of the rest); every count and "
        "total is over all of them"
    )


def compiled_name(c: Compilation) -> str:
    """``step``, or ``convert_element_type (while tracing solve)``."""
    name = c.function or "a function (no call: .lower/.compile)"
    return f"{name} (while tracing {c.during})" if c.during else name


def compile_summary(r: ProfileResult) -> str:
    """``1 compile (35.2 ms: step)`` or ``""``; the time is the calls' own (a program
    compiled while another was traced is inside that one's tracing)."""
    if not r.compilations:
        return ""
    calls = [c for c in r.compilations if not c.during]
    total = sum(c.total_s for c in calls)
    names = list(dict.fromkeys(c.function or "a function" for c in calls))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    nested = len(r.compilations) - len(calls)
    inner = f"; {nested} more while tracing" if nested else ""
    n = len(calls)
    return f"{n} compile{'' if n == 1 else 's'} ({seconds(total)}: {shown}{inner})"


def title(r: ProfileResult) -> str:
    calls = r.calls
    parts = [
        f"%%profile: {seconds(r.duration_s)} on {r.platform}",
        f"{calls:,} jitted call{'' if calls == 1 else 's'}",
    ]
    if r.compilations:
        parts.append(compile_summary(r))
    n = sum(s.count for s in r.syncs)
    parts.append(f"{n:,} implicit sync{'' if n == 1 else 's'}")
    return ", ".join(parts)


def _compile_lines(r: ProfileResult) -> list[str]:
    if not r.compilations:
        return []
    lines = ["JAX compiled during the cell (a first call, or new argument types):"]
    for c in r.compilations:
        lines.append(
            f"  {compiled_name(c)}: {seconds(c.total_s)} "
            f"= tracing {seconds(c.trace_s)} + lowering {seconds(c.lower_s)} + XLA compile "
            f"{seconds(c.compile_s)}, at {seconds(c.start_s)}"
        )
    return lines


def _cost_lines(title: str, costs: tuple[Cost, ...]) -> list[str]:
    if not costs:
        return []
    lines = [title]
    for c in costs:
        where = f" ({c.module})" if c.module and c.module != c.name else ""
        lines.append(
            f"  {c.name}{where}: {seconds(c.total_s)} over {c.calls:,} run(s), "
            f"{100 * c.share:.0f}% of the cell"
        )
    return lines


def sync_advice(site: SyncSite) -> str:
    if site.count > 1:
        return (
            "runs each time through: keep the value on the device (jnp) and convert once "
            "after the loop, or log every N steps"
        )
    return "waits for every queued computation that makes the array"


def profile_text(r: ProfileResult) -> str:
    lines = [title(r)]
    lines += _compile_lines(r)
    lines += _cost_lines("XLA modules, costliest first:", r.modules)
    lines += _cost_lines("XLA ops, costliest first:", r.ops)
    if r.syncs:
        lines.append("implicit device-to-host transfers (each waits for the device):")
        for s in r.syncs:
            lines.append(
                f"  {s.where}: `{s.code}` — {s.kind}, {s.count}× ({s.waited} waited, "
                f"{seconds(s.seconds)}); {sync_advice(s)}"
            )
    elif not r.syncs_observed:
        lines.append("implicit transfers: not observable with this JAX")
    else:
        lines.append("no implicit device-to-host transfers")
    if r.dropped_spans:
        lines.append(f"({kept_text(r)})")
    return "\n".join(lines)


def cost_columns(costs: tuple[Cost, ...]) -> tuple[str, ...]:
    """The columns a cost table needs: ``module`` only when some row names another one."""
    head = ("name", "module", "runs", "total", "share of the cell")
    if not any(c.module and c.module != c.name for c in costs):
        return tuple(h for h in head if h != "module")
    return head


def _cost_table(caption: str, costs: tuple[Cost, ...]) -> str:
    if not costs:
        return ""
    head = cost_columns(costs)
    rows = "".join(
        "<tr>"
        + f"<td style='text-align:left'>{html.escape(c.name)}</td>"
        + (
            f"<td style='text-align:left'>{html.escape(c.module if c.module != c.name else '')}"
            "</td>"
            if "module" in head
            else ""
        )
        + f"<td style='text-align:right'>{c.calls:,}</td>"
        f"<td style='text-align:right'>{html.escape(seconds(c.total_s))}</td>"
        f"<td style='text-align:right'>{100 * c.share:.0f}%</td></tr>"
        for c in costs
    )
    header = "".join(f"<th>{h}</th>" for h in head)
    return (
        f"<table><caption style='text-align:left'>{html.escape(caption)}</caption>"
        f"<tr>{header}</tr>{rows}</table>"
    )


def _compile_table(r: ProfileResult) -> str:
    if not r.compilations:
        return ""
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(compiled_name(c))}</td>"
        + "".join(
            f"<td style='text-align:right'>{html.escape(seconds(t))}</td>"
            for t in (c.total_s, c.trace_s, c.lower_s, c.compile_s, c.start_s)
        )
        + "</tr>"
        for c in r.compilations
    )
    return (
        "<table><caption style='text-align:left'>JAX compiled during the cell (a first call, "
        "or new argument types)</caption><tr><th>function</th><th>total</th><th>tracing</th>"
        f"<th>lowering</th><th>XLA compile</th><th>at</th></tr>{rows}</table>"
    )


def syncs_html(r: ProfileResult) -> str:
    if not r.syncs:
        text = (
            "no implicit device-to-host transfers"
            if r.syncs_observed
            else "implicit transfers: not observable with this JAX"
        )
        return f"<p>{text}</p>"
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(s.where)}</td>"
        f"<td style='text-align:left'><code>{html.escape(s.code)}</code></td>"
        f"<td style='text-align:left'>{html.escape(s.kind)}</td>"
        f"<td style='text-align:right'>{s.count:,}</td>"
        f"<td style='text-align:right'>{html.escape(seconds(s.seconds))}</td>"
        f"<td style='text-align:left'>{html.escape(sync_advice(s))}</td></tr>"
        for s in r.syncs
    )
    return (
        "<table><caption style='text-align:left'>implicit device-to-host transfers: each "
        "waits for the device</caption><tr><th>where</th><th>code</th><th>what</th>"
        f"<th>times</th><th>time</th><th>what to do</th></tr>{rows}</table>"
    )


def profile_html(r: ProfileResult) -> str:
    kept = f"<p>{html.escape(kept_text(r))}</p>" if r.dropped_spans else ""
    return (
        f"<div class='jaxlab-profile' style='font-size:13px'><p><b>{html.escape(title(r))}</b></p>"
        + timeline_svg(r)
        + kept
        + _compile_table(r)
        + _cost_table("XLA modules, costliest first", r.modules)
        + _cost_table("XLA ops, costliest first", r.ops)
        + syncs_html(r)
        + "</div>"
    )
