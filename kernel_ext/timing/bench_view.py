"""Text and HTML views of a ``BenchResult`` (no kernel needed: exported notebooks show them).

::

    print(bench_text(r))      # the figures, each with what it means
    bench_html(r)             # the same as a table, with the dispatch timeline (--explain)
"""

from __future__ import annotations

import html

from ..compile.log_view import seconds
from .result import BenchResult, CallSpan

_WIDTH = 420  # px of the timeline drawing


def rate(value: float, unit: str) -> str:
    """``4.2e10, "FLOP/s" -> "42 GFLOP/s"``."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _rows(r: BenchResult) -> list[tuple[str, str, str]]:
    """(figure, value, what it means) for each line of the view."""
    rows = [("first call (compile + run)", seconds(r.compile_s), "measured once")]
    spread = f"{seconds(r.ready_min_s)} – {seconds(r.ready_max_s)}"
    rows.append(
        (
            "per call, until ready",
            seconds(r.ready_s),
            f"median of {r.repeats} rounds of {r.runs:,} calls, outputs blocked; rounds {spread}",
        )
    )
    if not r.asynchronous:
        rows.append(
            ("asynchronous", "no", f"returned {r.output}: no arrays, so nothing ran behind it")
        )
        return rows
    rows.append(
        (
            "per call, until it returns",
            seconds(r.dispatch_s),
            "dispatch: the work is queued and runs after the call returned",
        )
    )
    if r.naive_ratio >= 1.5:
        naive = f"what `%time` or `%timeit -n1` claims: {r.naive_ratio:,.0f}× too fast"
    else:
        naive = "close to the real figure: dispatching is most of this call's cost"
    rows.append(("unblocked single call", seconds(r.naive_s), naive))
    if r.timeit_agrees:
        note = (
            "agrees here only because queued calls wait on each other; it does not hold "
            "with few loops or on a GPU"
        )
    elif r.timeit_s > 0 and r.ready_s >= r.timeit_s:
        note = f"{r.ready_s / r.timeit_s:,.1f}× too fast: the calls did not wait for their work"
    else:
        note = f"{r.timeit_s / r.ready_s:,.1f}× too slow" if r.ready_s > 0 else ""
    rows.append((f"%timeit ({r.timeit_loops:,} loops, unblocked)", seconds(r.timeit_s), note))
    if r.flops_s is not None:
        share = ""
        if r.flops_fraction is not None and r.peak_flops_s:
            share = (
                f"{100 * r.flops_fraction:.0f}% of this machine's {rate(r.peak_flops_s, 'FLOP/s')}"
            )
        rows.append(("compute", rate(r.flops_s, "FLOP/s"), share))
    if r.bytes_s is not None:
        share = ""
        if r.bytes_fraction is not None and r.peak_bytes_s:
            share = f"{100 * r.bytes_fraction:.0f}% of this machine's {rate(r.peak_bytes_s, 'B/s')}"
        rows.append(("memory traffic", rate(r.bytes_s, "B/s"), share))
    return rows


def _title(r: BenchResult) -> str:
    out = f" → {r.output}" if r.asynchronous and r.output else ""
    return f"%bench {r.name}{out} on {r.platform}"


def _compare_line(r: BenchResult) -> str:
    if r.compare is None or r.ratio is None:
        return ""
    other = r.compare
    word = "slower" if r.ratio >= 1 else "faster"
    factor = r.ratio if r.ratio >= 1 else 1 / r.ratio
    return (
        f"{other.name}: {seconds(other.ready_s)} per call, {factor:.2f}× {word} than "
        f"{r.name} (measured interleaved, {r.repeats} rounds each)"
    )


def timeline_text(spans: tuple[CallSpan, ...]) -> list[str]:
    lines = ["dispatch timeline (call returned | outputs ready):"]
    for s in spans:
        lines.append(
            f"  call {s.call + 1}: made at {seconds(s.start_s)}, returned after "
            f"{seconds(s.return_s - s.start_s)}, ready at {seconds(s.ready_s)}"
        )
    lines.append("  each call returns at once; the work queues behind it and finishes in order")
    return lines


def bench_text(r: BenchResult) -> str:
    lines = [_title(r)]
    width = max(len(k) for k, _, _ in _rows(r))
    for key, value, note in _rows(r):
        lines.append(f"  {key:<{width}}  {value:>9}  {note}".rstrip())
    if r.compare is not None:
        lines.append(_compare_line(r))
    if r.timeline:
        lines += timeline_text(r.timeline)
    return "\n".join(lines)


def timeline_svg(spans: tuple[CallSpan, ...]) -> str:
    """Two lanes: the host (each call until it returned), the device (each call's work)."""
    end = max(s.ready_s for s in spans) or 1.0
    scale = (_WIDTH - 70) / end
    lane = {"host": 14, "device": 38}
    parts = [
        f'<svg width="{_WIDTH}" height="64" role="img" '
        'aria-label="dispatch timeline" style="font:11px var(--jp-ui-font-family,sans-serif)">',
        f'<text x="0" y="{lane["host"] + 10}" fill="currentColor">host</text>',
        f'<text x="0" y="{lane["device"] + 10}" fill="currentColor">device</text>',
    ]
    previous_ready = 0.0
    for s in spans:
        x = 60 + s.start_s * scale
        w = max(1.5, (s.return_s - s.start_s) * scale)
        took = html.escape(seconds(s.return_s - s.start_s))
        parts.append(
            f'<rect x="{x:.1f}" y="{lane["host"]}" width="{w:.1f}" height="12" fill="#4c78a8">'
            f"<title>call {s.call + 1} returned after {took}</title></rect>"
        )
        begin = max(previous_ready, s.return_s if s.call == 0 else previous_ready)
        dx = 60 + begin * scale
        dw = max(1.5, (s.ready_s - begin) * scale)
        parts.append(
            f'<rect x="{dx:.1f}" y="{lane["device"]}" width="{dw:.1f}" height="12" '
            f'fill="{"#f58518" if s.call % 2 == 0 else "#e45756"}">'
            f"<title>call {s.call + 1} ready at {html.escape(seconds(s.ready_s))}</title></rect>"
        )
        previous_ready = s.ready_s
    parts.append(
        f'<text x="60" y="62" fill="currentColor">0</text>'
        f'<text x="{_WIDTH - 4}" y="62" text-anchor="end" fill="currentColor">'
        f"{html.escape(seconds(end))}</text></svg>"
    )
    return "".join(parts)


def bench_html(r: BenchResult) -> str:
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:right;white-space:nowrap'>{html.escape(v)}</td>"
        f"<td style='text-align:left'>{html.escape(n)}</td></tr>"
        for k, v, n in _rows(r)
    )
    parts = [
        f"<div class='jaxlab-bench'><p style='margin:2px 0'><b>{html.escape(_title(r))}</b></p>",
        f"<table>{rows}</table>",
    ]
    if r.compare is not None:
        parts.append(f"<p style='margin:4px 0'>{html.escape(_compare_line(r))}</p>")
    if r.timeline:
        parts.append(
            "<p style='margin:4px 0'>Each call returns at once (host lane); its work queues "
            "behind it and finishes in order (device lane).</p>" + timeline_svg(r.timeline)
        )
    parts.append("</div>")
    return "".join(parts)
