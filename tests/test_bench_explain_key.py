"""%bench --explain's dispatch timeline: every colour it draws is named in its key, at 12 px."""

from __future__ import annotations

import re

from jaxlab.timing.bench_view import timeline_svg
from jaxlab.timing.result import CallSpan


def test_every_colour_on_the_explain_lanes_is_in_the_key():
    spans = tuple(CallSpan(i, i * 1e-3, i * 1e-3 + 2e-4, (i + 1) * 1e-2) for i in range(4))
    svg = timeline_svg(spans)
    fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', svg)
    drawn, keyed = set(), set()
    for match in re.finditer(r'<rect x="[\d.]+" y="([\d.]+)"[^>]*fill="(#[0-9a-f]{6})"', svg):
        (keyed if float(match.group(1)) >= 70 else drawn).add(match.group(2))
    assert fills and drawn == {"#4c78a8", "#f58518", "#e45756"}
    assert drawn <= keyed
    assert "host: each call, until it returned" in svg and "device: each call" in svg
    assert "font:12px" in svg and "11px" not in svg
