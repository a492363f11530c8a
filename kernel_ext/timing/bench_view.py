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
DISAGREE = 2.0  # two timings of the call's return this far apart contradict each other

# A reopened notebook shows ipywidgets' "model not found" note where the progress bar of a
# long %bench was (its widget closed with the measurement); the output just before the
# result, holding only that note (a live view has child elements), is hidden, as
# widgets/_base.py hides it above a widget's static twin.
_HIDE_MISSING_MODEL = (
    "<style>.jp-OutputArea-child:has(+ .jp-OutputArea-child .jaxlab-bench) "
    ".jupyter-widgets:not(:has(*)){display:none}</style>"
)


def rate(value: float, unit: str) -> str:
    """``4.2e10, "FLOP/s" -> "42 GFLOP/s"``."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def times(ratio: float) -> str:
    """A ratio as people read it: ``"1.03×"``, ``"3.4×"``, ``"42×"``, ``"2,925×"``."""
    if ratio < 2:
        return f"{ratio:.2f}×"
    if ratio < 10:
        return f"{ratio:.1f}×"
    return f"{ratio:,.0f}×"


def _bytes(n: int) -> str:
    """``256 -> "256 B"``, ``314572800 -> "300 MiB"``."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} B"


def _share(r: BenchResult, kind: str) -> str:
    """The call's share of the session's peak, or why there is none: a call faster than
    memory streams runs from cache, and is not a share of memory bandwidth."""
    flops = kind == "flops"
    peak = r.peak_flops_s if flops else r.peak_bytes_s
    fraction = r.flops_fraction if flops else r.bytes_fraction
    if not peak:
        return ""
    unit = "FLOP/s" if flops else "B/s"
    spread = r.peak_flops_spread if flops else r.peak_bytes_spread
    measured = ", ".join(x for x in (f"rounds {spread}" if spread else "", r.peak_note) if x)
    measured = f" ({measured})" if measured else ""
    if kind in r.above_peak:
        if flops:
            return (
                f"faster than this machine's peak matmul, {rate(peak, unit)}{measured}: "
                "no share shown"
            )
        return (
            "faster than memory: it runs from cache, not a share of memory bandwidth; "
            f"memory streams {rate(peak, unit)}{measured}"
        )
    if not flops and r.in_cache:
        return (
            f"its arrays ({_bytes(r.data_bytes)}) fit in this machine's "
            f"{_bytes(r.cache_bytes or 0)} cache: it runs from cache, not a share of memory "
            f"bandwidth; memory streams {rate(peak, unit)}{measured}"
        )
    if fraction is None:
        return ""
    return f"{100 * fraction:.0f}% of this machine's {rate(peak, unit)}{measured}"


# The queued pipeline this much quicker than an awaited call: the rate it reaches is said
# too (an accelerator's wait for each call's result, ~0.4 ms on a TPU, is no device work).
QUEUED_QUICKER = 0.75


def _rate_note(r: BenchResult, kind: str) -> str:
    """The rate's note: its share of the peak, of the awaited call's time; and where queued
    calls ran much quicker, the rate and share they reach."""
    note = _share(r, kind)
    if not r.pipeline_s or r.pipeline_s >= QUEUED_QUICKER * r.ready_s:
        return note
    flops = kind == "flops"
    unit = "FLOP/s" if flops else "B/s"
    queued = ((r.flops if flops else r.bytes_accessed) or 0.0) / r.pipeline_s
    peak = r.peak_flops_s if flops else r.peak_bytes_s
    share = ""
    if peak and queued <= peak and kind not in r.above_peak and (flops or not r.in_cache):
        share = f", {100 * queued / peak:.0f}%"
    said = f"per awaited call; {r.pipeline_calls} queued at once reach {rate(queued, unit)}"
    return f"{note}; {said}{share}" if note else f"{said}{share}"


def _unblocked_note(r: BenchResult) -> str:
    if r.derived:
        return "read off the timed rounds (a call this slow is not called again for it)"
    if r.timeit_agrees:
        return (
            "agrees within noise (measured interleaved): queued calls waited on each other "
            "here; it does not hold with few loops or on a GPU"
        )
    return f"{times(r.ready_s / r.timeit_s)} too fast: the calls did not wait for their work"


def _returned_note(r: BenchResult) -> str:
    if r.dispatch_s * 2 >= r.ready_s:
        return "the call did most of its work before returning: little ran behind it"
    return "dispatch: the work is queued and runs after the call returned"


def _unsteady_note(r: BenchResult) -> str:
    return (
        f"the slowest round took {r.spread:.1f}× the fastest: the call's time moved while it "
        "was measured (other work on this machine, or the system moving a thread between "
        "cores, as it does a host callback's); the median is quoted. Run again, or give "
        "more rounds (-r 20)"
    )


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2g}%" if fraction < 0.1 else f"{100 * fraction:.0f}%"


def _known(r: BenchResult) -> str:
    """``", known within ±0.4% (95%)"``; with the goal missed, what to do about it."""
    if r.precision is None or r.precision != r.precision or r.precision == float("inf"):
        return ""
    known = f", known within ±{_percent(r.precision)} (95%)"
    if r.precision_goal is not None and r.precision > r.precision_goal:
        known += f", not the ±{_percent(r.precision_goal)} the rounds stop at (-r 20: more)"
    return known


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def _rows(r: BenchResult) -> list[tuple[str, str, str]]:
    """(figure, value, what it means) for each line of the view."""
    rows = []
    if r.compiled:  # a function compiled before this measurement has no first-call cost
        first = "first call (compile + run)" if r.jitted else "first call (compiles each op + run)"
        rows.append((first, seconds(r.compile_s), "measured once"))
    spread = f"{seconds(r.ready_min_s)} – {seconds(r.ready_max_s)}"
    rows.append(
        (
            "per call, each awaited",
            seconds(r.ready_s),
            "call, wait for every output, call again (a loop that reads `float(loss)`); "
            f"median of {_count(r.repeats, 'round')} of {_count(r.runs, 'call')}"
            f"{_known(r)}, rounds {spread}",
        )
    )
    if r.unsteady:
        rows.append(("unsteady", f"{r.spread:.1f}×", _unsteady_note(r)))
    if not r.jitted:
        count = f"{r.dispatches:,} operations" if r.dispatches is not None else "its operations"
        rows.append(
            (
                "not jitted",
                f"{r.dispatches:,} ops" if r.dispatches is not None else "op by op",
                f"timed as it is: it runs op by op, dispatching {count} one by one per call; "
                f"jax.jit({r.name.split('(')[0] or 'f'}) compiles it once into one program",
            )
        )
    if not r.asynchronous:
        rows.append(
            ("asynchronous", "no", f"returned {r.output}: no arrays, so nothing ran behind it")
        )
        return rows
    if r.pipeline_s is not None:
        rows.append(
            (
                f"per call, {r.pipeline_calls} queued at once",
                seconds(r.pipeline_s),
                "a pipeline of independent calls (none needs the one before), blocked once",
            )
        )
    else:
        rows.append(
            (
                "pipeline of independent calls",
                "—",
                "not measured: a call this slow keeps the device busy by itself",
            )
        )
    if r.naive_ratio >= 1.5:
        naive = f"what `%time` or `%timeit -n1` claims: {times(r.naive_ratio)} too fast"
    else:
        naive = "close to the real figure: the call's return is most of its cost"
    if _returns_disagree(r):
        # Both time the call until it returns; side by side they contradict each other. The
        # unblocked one is what %time shows; the other is said as the reason they differ.
        naive += (
            f" (with the device idle before it, the call returned after "
            f"{seconds(r.dispatch_s)}: it ran its work before returning; queued behind "
            "other calls it returns sooner)"
        )
    else:
        rows.append(("until the call returns", seconds(r.dispatch_s), _returned_note(r)))
    rows.append(("unblocked single call", seconds(r.naive_s), naive))
    loops = f"{r.timeit_loops:,} loops, " if not r.derived else ""
    rows.append((f"%timeit ({loops}unblocked)", seconds(r.timeit_s), _unblocked_note(r)))
    if r.flops_s is not None:
        rows.append(("compute", rate(r.flops_s, "FLOP/s"), _rate_note(r, "flops")))
    if r.bytes_s is not None:
        rows.append(("memory traffic", rate(r.bytes_s, "B/s"), _rate_note(r, "bytes")))
    if r.loops_note and (r.flops_s is not None or r.bytes_s is not None):
        rows.append(("loops", "", r.loops_note))
    return rows


def _returns_disagree(r: BenchResult) -> bool:
    """The call's return measured two ways (the device idle before it; back to back) differs
    more than noise: they cannot both be shown as the time until the call returns."""
    low, high = sorted((r.dispatch_s, r.naive_s))
    return low > 0 and high > DISAGREE * max(1.0, r.spread) * low


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
        f"{other.name}: {seconds(other.ready_s)} per call (each awaited), {times(factor)} {word} "
        f"than {r.name} (measured interleaved, {r.repeats} rounds each)"
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


_EXPLAIN_KEY = (  # (colours, words), one row per lane
    (("#4c78a8",), "host: each call, until it returned"),
    (("#f58518", "#e45756"), "device: each call's work (colours alternate by call)"),
)


def timeline_svg(spans: tuple[CallSpan, ...]) -> str:
    """Two lanes: the host (each call until it returned), the device (each call's work)."""
    end = max(s.ready_s for s in spans) or 1.0
    scale = (_WIDTH - 70) / end
    lane = {"host": 14, "device": 38}
    parts = [
        f'<svg width="{_WIDTH}" height="100" role="img" '
        'aria-label="dispatch timeline" style="font:12px var(--jp-ui-font-family,sans-serif)">',
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
        f"{html.escape(seconds(end))}</text>"
    )
    # The key: what each lane's colours mean (issue 18: "--explain's lanes have a key").
    for row, (colours, words) in enumerate(_EXPLAIN_KEY):
        y = 72 + 16 * row
        for i, colour in enumerate(colours):
            parts.append(f'<rect x="{12 * i}" y="{y}" width="10" height="10" fill="{colour}"/>')
        parts.append(
            f'<text x="{12 * len(colours) + 3}" y="{y + 10}" fill="currentColor">{words}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def bench_html(r: BenchResult) -> str:
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:right;white-space:nowrap'>{html.escape(v)}</td>"
        f"<td style='text-align:left'>{html.escape(n)}</td></tr>"
        for k, v, n in _rows(r)
    )
    parts = [
        _HIDE_MISSING_MODEL,
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
