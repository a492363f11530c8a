"""What a GraphExplorer view opens so that it fits its pane at full size (issue 34).

A view is read at scale 1 (14 px titles, 12 px text); a projector's pane is about
1100 x 700 px. :func:`fitting` takes the boxes a view is asked to open (``--open``'s,
or those open when "fit" is pressed), breadth-first by the program's own nesting, and
opens each only while the view still fits; the rest stay closed and the view says how
many. With nothing asked it opens a box that is all its level shows (a whole-program
``jit``), as far as that fits: a first view of one closed box says nothing.

>>> opened, left = fitting(draw, ["e0", "e0/e0", "e0/e0/run0-8"], cache)  # doctest: +SKIP
>>> opened, left
(['e0', 'e0/e0'], 1)
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from jaxlab.graph import model as m

from .graph_layout import PANE_H, PANE_W, fits, lay_out, visible

TRIES_MOST = 24  # layouts tried to fit one view (each opens one more box)


def left_closed_note(n: int) -> str:
    """What a view says about the boxes it did not open to stay readable."""
    return f"{n} box{'es' if n != 1 else ''} left closed to stay readable"


def fitting(
    draw: Callable[[frozenset[str]], m.Graph],
    wanted: list[str],
    cache: MutableMapping[Any, dict[str, Any]],
    width: float = PANE_W,
    height: float = PANE_H,
) -> tuple[list[str], int]:
    """The ids of ``wanted`` to open, breadth-first, so that the view fits ``width`` x
    ``height`` px at scale 1, and how many were left closed. ``draw`` builds the Graph of
    an opened set; ``cache`` keeps box layouts across the tries (each reuses the last)."""
    order = sorted(dict.fromkeys(wanted), key=lambda c: c.count("/"))  # stable: outer first
    kept: list[str] = []
    left = 0
    tries = 0

    def opens(trial: list[str], box: str) -> bool:
        nonlocal tries
        drawn = draw(frozenset(trial))
        chosen = visible(drawn, trial)
        if box not in chosen["frames"]:
            return False  # what holds it stayed closed
        tries += 1
        return tries <= TRIES_MOST and fits(lay_out(drawn, chosen, cache), width, height)

    for box in order:
        if opens([*kept, box], box):
            kept.append(box)
        else:
            left += 1
    if not wanted:
        kept = _sole_boxes(draw, cache, width, height)
    return kept, left


def _sole_boxes(
    draw: Callable[[frozenset[str]], m.Graph],
    cache: MutableMapping[Any, dict[str, Any]],
    width: float,
    height: float,
) -> list[str]:
    """Open the box that is all a level shows (a whole-program jit; the one box inside
    it), one level at a time, while the view fits."""
    kept: list[str] = []
    for _ in range(4):
        drawn = draw(frozenset(kept))
        chosen = visible(drawn, kept)
        inner = kept[-1] if kept else None
        closed = [
            b.removeprefix("cluster:")
            for b in chosen["boxes"]
            if _home(drawn, b.removeprefix("cluster:")) == inner
        ]
        others = [k for k in chosen["nodes"] if _node_home(drawn, k) == inner]
        if len(closed) != 1 or any(_is_equation(drawn, k) for k in others):
            return kept
        trial = [*kept, closed[0]]
        drawn = draw(frozenset(trial))
        if not fits(lay_out(drawn, visible(drawn, trial), cache), width, height):
            return kept
        kept = trial
    return kept


def _home(graph: m.Graph, box: str) -> str | None:
    for c in graph.clusters:
        if c.id == box:
            return c.parent
    return next((n.cluster for n in graph.nodes if n.id == box), None)


def _node_home(graph: m.Graph, node: str) -> str | None:
    return next((n.cluster for n in graph.nodes if n.id == node), None)


def _is_equation(graph: m.Graph, node: str) -> bool:
    return any(n.id == node and n.kind == m.EQUATION for n in graph.nodes)
