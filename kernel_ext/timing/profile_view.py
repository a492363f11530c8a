"""Text and HTML views of a ``ProfileResult``: a static timeline, the costliest modules and
ops, and the hidden syncs with their lines (what exported notebooks and ``--static`` show).
"""

from __future__ import annotations

import html

from ..compile.log_view import seconds
from .profile_result import Cost, ProfileResult
from .syncs import SyncSite

_WIDTH = 640
_LANES = (("host", "dispatch"), ("device", "module"), ("device", "op"))
_COLOURS = {"dispatch": "#4c78a8", "module": "#f58518", "op": "#54a24b"}
_MAX_DRAWN = 1500  # rects in the static SVG; the widget draws them all


def _title(r: ProfileResult) -> str:
    calls = sum(1 for s in r.spans if s.kind == "dispatch")
    return (
        f"%%profile: {seconds(r.duration_s)} on {r.platform}, {calls} jitted "
        f"call{'' if calls == 1 else 's'}, {sum(s.count for s in r.syncs)} implicit syncs"
    )


def _cost_lines(title: str, costs: tuple[Cost, ...]) -> list[str]:
    if not costs:
        return []
    lines = [title]
    for c in costs:
        where = f" ({c.module})" if c.module and c.module != c.name else ""
        lines.append(
            f"  {c.name}{where}: {seconds(c.total_s)} over {c.calls} run(s), "
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
    lines = [_title(r)]
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
        lines.append(f"({r.dropped_spans:,} more spans not kept for the timeline)")
    return "\n".join(lines)


def timeline_svg(r: ProfileResult) -> str:
    """Host dispatch, device modules and device ops on three lanes (the static view)."""
    end = r.duration_s or 1.0
    scale = (_WIDTH - 90) / end
    parts = [
        f'<svg width="{_WIDTH}" height="{24 * len(_LANES) + 18}" role="img" '
        'aria-label="profile timeline" style="font:11px var(--jp-ui-font-family,sans-serif)">'
    ]
    for i, (lane, kind) in enumerate(_LANES):
        y = 4 + 24 * i
        parts.append(f'<text x="0" y="{y + 12}" fill="currentColor">{lane} {kind}s</text>')
        drawn = [s for s in r.spans if s.lane == lane and s.kind == kind][:_MAX_DRAWN]
        for s in drawn:
            tip = html.escape(f"{s.name}: {seconds(s.duration_s)}")
            parts.append(
                f'<rect x="{90 + s.start_s * scale:.1f}" y="{y}" '
                f'width="{max(1.0, s.duration_s * scale):.1f}" height="16" '
                f'fill="{_COLOURS[kind]}"><title>{tip}</title></rect>'
            )
    y = 24 * len(_LANES) + 14
    parts.append(
        f'<text x="90" y="{y}" fill="currentColor">0</text><text x="{_WIDTH - 2}" y="{y}" '
        f'text-anchor="end" fill="currentColor">{html.escape(seconds(end))}</text></svg>'
    )
    return "".join(parts)


def _cost_table(title: str, costs: tuple[Cost, ...]) -> str:
    if not costs:
        return ""
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(c.name)}</td>"
        f"<td style='text-align:left'>{html.escape(c.module if c.module != c.name else '')}</td>"
        f"<td style='text-align:right'>{c.calls}</td>"
        f"<td style='text-align:right'>{html.escape(seconds(c.total_s))}</td>"
        f"<td style='text-align:right'>{100 * c.share:.0f}%</td></tr>"
        for c in costs
    )
    return (
        f"<table><caption style='text-align:left'>{html.escape(title)}</caption>"
        "<tr><th>name</th><th>module</th><th>runs</th><th>total</th><th>share</th></tr>"
        f"{rows}</table>"
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
        f"<td style='text-align:right'>{s.count}</td>"
        f"<td style='text-align:right'>{html.escape(seconds(s.seconds))}</td>"
        f"<td style='text-align:left'>{html.escape(sync_advice(s))}</td></tr>"
        for s in r.syncs
    )
    return (
        "<table><caption style='text-align:left'>implicit device-to-host transfers: each "
        "waits for the device</caption><tr><th>where</th><th>code</th><th>what</th>"
        f"<th>times</th><th>time</th><th></th></tr>{rows}</table>"
    )


def profile_html(r: ProfileResult) -> str:
    return (
        f"<div class='jaxlab-profile'><p><b>{html.escape(_title(r))}</b></p>"
        + timeline_svg(r)
        + _cost_table("XLA modules, costliest first", r.modules)
        + _cost_table("XLA ops, costliest first", r.ops)
        + syncs_html(r)
        + "</div>"
    )
