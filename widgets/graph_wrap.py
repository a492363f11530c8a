"""A left-to-right layout too wide for the pane, wrapped into rows (issue 34).

Graphviz lays a long chain out in one line: top to bottom it is too tall, left to right
too wide (a gradient's forward pass then its backward pass, 1,417 x 220 px for a
pendulum's energy). :func:`wrapped` cuts such a layout where no box spans the cut, into
as few rows as fit the pane's width, the cuts chosen so that the widest row is as narrow
as it can be, and stacks the rows, each below the last: reading order stays left to
right, then down, as text wraps. Edges within a row keep dot's route; an edge between
rows is drawn from the bottom of its source to the top of its target.

A layout is dot's, as ``graph_layout`` reads it: ``{"width", "height", "nodes": {key: [x,
y, w, h]}, "edges": [(a, b, points)]}``, points in px, y down.
"""

from __future__ import annotations

import itertools
from typing import Any

ROW_GAP = 36.0  # px between two rows: room for the edges that go down to the next row
ROWS_MOST = 4  # more rows than this reads worse than scrolling


def _gaps(nodes: dict[str, list[float]]) -> list[float]:
    """The x positions where a cut passes between boxes: after each run of boxes that
    overlap in x, at the start of the next."""
    spans = sorted((x, x + w) for x, _, w, _ in nodes.values())
    cuts, reach = [], spans[0][1]
    for start, end in spans[1:]:
        if start >= reach:
            cuts.append(start)
        reach = max(reach, end)
    return cuts


def _rows(nodes: dict[str, list[float]], cuts: list[float]) -> list[list[str]]:
    bounds = [-float("inf"), *cuts, float("inf")]
    return [
        [k for k, (x, *_) in nodes.items() if lo <= x < hi] for lo, hi in itertools.pairwise(bounds)
    ]


def _extent(nodes: dict[str, list[float]], keys: list[str], axis: int) -> tuple[float, float]:
    return (
        min(nodes[k][axis] for k in keys),
        max(nodes[k][axis] + nodes[k][axis + 2] for k in keys),
    )


def _nearest(gaps: list[float], x: float) -> int:
    return min(range(len(gaps)), key=lambda g: abs(gaps[g] - x))


def _best_cuts(nodes: dict[str, list[float]], width: float) -> list[float] | None:
    """The fewest cuts (at most ROWS_MOST rows) giving rows no wider than ``width``, the
    widest row as narrow as possible; None when no choice fits."""
    gaps = _gaps(nodes)
    left, right = _extent(nodes, list(nodes), 0)

    def widest(cuts: list[float]) -> float:
        edges = [left, *cuts]
        ends = [max(nodes[k][0] + nodes[k][2] for k in row) for row in _rows(nodes, cuts)]
        return max(end - start for start, end in zip(edges, ends, strict=True))

    for n_cuts in range(1, ROWS_MOST):
        if len(gaps) < n_cuts:
            return None
        # each cut near where an even share would put it, then the neighbouring gaps
        best: tuple[float, list[float]] | None = None
        for shift in range(-2, 3):
            cuts: list[float] = []
            for i in range(1, n_cuts + 1):
                even = left + (right - left) * i / (n_cuts + 1)
                k = _nearest(gaps, even) + shift
                if 0 <= k < len(gaps) and (not cuts or gaps[k] > cuts[-1]):
                    cuts.append(gaps[k])
            if len(cuts) == n_cuts:
                w = widest(cuts)
                if best is None or w < best[0]:
                    best = (w, cuts)
        if best is not None and best[0] <= width:
            return best[1]
    return None


def bottom_to_top(a: list[float], b: list[float]) -> list[list[float]]:
    """Bezier points from the bottom of box ``a`` to the top of box ``b`` (``[x, y, w,
    h]``): an edge drawn across rows, or where dot did not lay it out."""
    (ax, ay, aw, ah), (bx, by, bw, _) = a, b
    x0, y0, x1, y1 = ax + aw / 2, ay + ah, bx + bw / 2, by
    bend = max(20.0, abs(y1 - y0) / 3) * (1 if y1 >= y0 else -1)
    points = [[x0, y0], [x0, y0 + bend], [x1, y1 - bend], [x1, y1]]
    return [[round(x, 1), round(y, 1)] for x, y in points]


def wrapped(laid: dict[str, Any], width: float) -> dict[str, Any] | None:
    """``laid`` cut into rows no wider than ``width`` px and stacked; None when it
    cannot be (one box as wide as the pane, or more rows than ROWS_MOST)."""
    nodes = laid["nodes"]
    if len(nodes) < 2 or laid["width"] <= width:
        return None
    cuts = _best_cuts(nodes, width)
    if cuts is None:
        return None
    moved: dict[str, list[float]] = {}
    row_of: dict[str, int] = {}
    shifts: list[tuple[float, float]] = []
    top = 0.0
    for r, row in enumerate(_rows(nodes, cuts)):
        x0, _ = _extent(nodes, row, 0)
        y0, y1 = _extent(nodes, row, 1)
        dx, dy = -x0, top - y0
        shifts.append((dx, dy))
        for k in row:
            x, y, w, h = nodes[k]
            moved[k] = [round(x + dx, 1), round(y + dy, 1), w, h]
            row_of[k] = r
        top += (y1 - y0) + ROW_GAP
    edges = []
    for a, b, points in laid["edges"]:
        if row_of[a] == row_of[b]:
            dx, dy = shifts[row_of[a]]
            edges.append((a, b, [[round(x + dx, 1), round(y + dy, 1)] for x, y in points]))
        else:
            edges.append((a, b, bottom_to_top(moved[a], moved[b])))
    return {
        **laid,
        "width": max(x + w for x, _, w, _ in moved.values()),
        "height": top - ROW_GAP,
        "nodes": moved,
        "edges": edges,
    }
