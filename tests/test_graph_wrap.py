"""A left-to-right layout too wide for the pane is wrapped into rows (issue 34): tutorial
06's first gradient, the pendulum's energy, was laid out 1,417 px wide in an 1,100 px
pane (its forward pass, then its backward pass, in one line)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

import jaxlab
from jaxlab.widgets import GraphExplorer
from jaxlab.widgets.graph_layout import PANE_H, PANE_W, VIEW_PAD
from jaxlab.widgets.graph_wrap import ROW_GAP, wrapped


def chain(n, width=100.0, gap=20.0, height=60.0):
    """dot's left-to-right layout of a chain of n boxes, each edge a straight line."""
    nodes = {str(i): [i * (width + gap), 10.0 * (i % 3), width, height] for i in range(n)}
    edges = [
        (str(i), str(i + 1), [[i * (width + gap) + width, 30.0], [(i + 1) * (width + gap), 30.0]])
        for i in range(n - 1)
    ]
    return {"width": n * (width + gap) - gap, "height": 80.0, "nodes": nodes, "edges": edges}


def overlapping(nodes):
    return [
        (a, b)
        for (a, (ax, ay, aw, ah)), (b, (bx, by, bw, bh)) in itertools.combinations(nodes.items(), 2)
        if ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah
    ]


def test_a_long_chain_is_cut_into_the_fewest_rows_that_fit_and_keeps_its_reading_order():
    laid = chain(20)  # 2,380 px: three rows of at most 1,000 px
    rows = wrapped(laid, 1000.0)
    assert rows is not None
    assert rows["width"] <= 1000.0
    band = 80.0 + ROW_GAP  # each row is 80 px tall (boxes 60 px, staggered by 20)
    row = {k: int(y // band) for k, (_, y, _, _) in rows["nodes"].items()}
    assert sorted(set(row.values())) == [0, 1, 2]
    assert overlapping(rows["nodes"]) == []
    # reading order: left to right in a row, and each row below the one before
    order = sorted(rows["nodes"], key=lambda k: (row[k], rows["nodes"][k][0]))
    assert order == [str(i) for i in range(20)]
    # an edge within a row keeps dot's straight route, moved with its row; one between
    # rows runs from the bottom of its source to the top of its target
    by_pair = {(a, b): p for a, b, p in rows["edges"]}
    x, _, w, _ = rows["nodes"]["0"]
    assert by_pair[("0", "1")] == [[x + w, 30.0], [rows["nodes"]["1"][0], 30.0]]
    crossing = [(a, b) for a, b, _ in rows["edges"] if row[a] != row[b]]
    assert len(crossing) == 2
    for a, b in crossing:
        ax, ay, aw, ah = rows["nodes"][a]
        bx, by, bw, _ = rows["nodes"][b]
        points = by_pair[(a, b)]
        assert points[0] == [ax + aw / 2, ay + ah] and points[-1] == [bx + bw / 2, by]


def test_the_rows_are_as_even_as_the_gaps_allow():
    rows = wrapped(chain(10), 1100.0)  # 1,180 px: two rows, 5 boxes each (580 px)
    assert rows is not None and rows["width"] == 580.0


def test_what_cannot_be_wrapped_is_left_to_the_caller():
    assert wrapped(chain(5), 1100.0) is None  # it fits already
    wide = chain(3)
    wide["nodes"]["1"] = [0.0, 0.0, 400.0, 60.0]  # one box spans the whole drawing
    wide["nodes"]["1"][2] = wide["width"]
    assert wrapped(wide, 200.0) is None
    assert wrapped(chain(60), 1000.0) is None  # more than ROWS_MOST rows


def test_the_pendulum_energys_gradient_fits_its_pane_in_two_rows():
    """Tutorial 06's `%grad --graph --wrt theta,p hamiltonian(0.3, 0.5)`: before, 1,417 x
    220 px laid out in one line; now the forward pass above the backward pass."""
    with jax.enable_x64(True):

        def hamiltonian(theta, p):
            return p**2 / 2.0 + 9.81 * (1 - jnp.cos(theta))

        graph = jaxlab.jaxpr_graph(hamiltonian, 0.3, 0.5, grad=True, values=True, explore=True)
        view = GraphExplorer(graph).view
    assert view["width"] + 2 * VIEW_PAD <= PANE_W
    assert view["height"] + 2 * VIEW_PAD <= PANE_H
    assert overlapping(view["nodes"]) == []
    labels = {n["id"]: n["label"] for n in GraphExplorer(graph).model["nodes"]}
    row_of = {k: v[1] > 200 for k, v in view["nodes"].items()}
    assert {labels[k] for k, lower in row_of.items() if lower} >= {"neg", "mul"}
    assert not row_of["in0"] and not row_of["in1"]  # the inputs start the first row
