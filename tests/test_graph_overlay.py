"""Overlays (graph/overlay.py): the user's numbers per equation, line or box, drawn on the
Graph and every GraphExplorer view as a colour scale."""

import math
import re

import jax
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.graph import model as m
from jaxlab.graph import overlay as ov
from jaxlab.widgets import GraphExplorer
from jaxlab.widgets.graph_explorer import legend_entries, view_model


@jax.jit
def inner(a):
    return jnp.sin(a) * 3.0


def program(x):
    y = jnp.tanh(x)
    z = inner(y)
    return jnp.sum(z + y)


LINE = program.__code__.co_firstlineno + 3  # return jnp.sum(z + y): two equations
INNER_LINE = inner.__wrapped__.__code__.co_firstlineno + 2  # (after its decorator)


@pytest.fixture(scope="module")
def graph():
    return jaxlab.jaxpr_graph(program, jnp.ones(3), explore=True)


def ids(graph):
    return {n.id: n.overlay for n in graph.nodes}


def test_keys_by_equation_id_line_and_box(graph):
    line = f"test_graph_overlay.py:{LINE}"
    g = graph.overlay({"e0": 1.0, "e1/e0": 2.0, "e1/e1": 3.0, line: 4.0}, name="t", unit="ms")
    got = ids(g)
    assert got["e0"] == 1.0
    assert got["e1"] == 5.0  # the closed box: the sum of what it holds
    assert got["e2"] == got["e3"] == 2.0  # a line's value split between its equations
    assert got["in0"] is None and got["out0"] is None
    assert g.overlay_name == "t" and g.overlay_unit == "ms"
    assert g.overlay_range == (1.0, 5.0) and g.overlay_total == 10.0
    assert g.overlay_unmatched == ()
    # The line with its function name, as Node.source writes it, matches too.
    g = graph.overlay({f"{line} (program)": 2.0})
    assert ids(g)["e2"] == 1.0


def test_a_box_given_a_value_keeps_it(graph):
    g = graph.overlay({"e1": 9.0, "e1/e0": 2.0})
    assert ids(g)["e1"] == 9.0
    assert ids(g.rebuild(frozenset({"e1"})))["e1/e0"] == 2.0


def test_keys_matching_nothing_are_listed_on_the_graph_and_in_its_notes(graph):
    g = graph.overlay({"e0": 1.0, "e99": 2.0, "nowhere.py:3": 1.0})
    assert g.overlay_unmatched == ("e99", "nowhere.py:3")
    assert any("2 keys match nothing: e99, nowhere.py:3" in n for n in g.notes)


def test_nan_is_no_value_and_negatives_make_a_diverging_scale(graph):
    g = graph.overlay({"e0": math.nan, "e1/e0": -2.0, "e1/e1": 3.0, "e2": 1.0})
    got = ids(g)
    assert math.isnan(got["e0"])
    assert got["e1"] == 1.0  # -2 + 3
    assert ov.colour(g, got["e0"]) is None
    assert ov.node_text(g, got["e0"]).endswith("no value")
    assert any("NaN or infinite" in n for n in g.notes)
    assert ov.diverging(g) and ov.colour(g, 0.0) == ov.DIVERGING[2]
    # Values of both signs: no share of a total.
    assert "%" not in ov.node_text(g, 1.0)
    record = view_model(g, {"nodes": {"e0": [0, 0, 1, 1]}, "frames": [], "edges": []})
    assert record["nodes"][0]["overlay"] is None  # NaN never reaches the page's JSON


def test_ranked_equations_over_the_whole_program(graph):
    g = graph.overlay({"e0": 1.0, "e1/e0": 7.0, "e2": 2.0}, name="time", unit="s")
    top = g.overlay_ranked(2)
    assert [r.id for r in top] == ["e1/e0", "e2"]
    assert top[0].primitive == "sin" and top[0].share == pytest.approx(0.7)
    assert top[0].source and "(inner)" in top[0].source
    assert (top[0].code, top[1].code) == ("jnp.sin(a)", "z + y")
    # The notes name the code and its line, never jaxlab's ids (e1/e0).
    sin = f"time largest: jnp.sin(a) at test_graph_overlay.py:{INNER_LINE} (inner): 7 s (70%)"
    assert sin in g.notes, g.notes
    assert not any(re.search(r"\be\d", n) for n in g.notes if "largest" in n)


def test_value_text_writes_seconds_in_their_unit():
    assert ov.value_text(0.0031, "s") == "3.1 ms"
    assert ov.value_text(2.5e-6, "s") == "2.5 µs"
    assert ov.value_text(math.nan, "s") == "no value"


def test_the_overlay_survives_opening_a_box_and_reaches_the_static_twin(graph):
    g = graph.overlay({"e0": 1.0, "e1/e0": 2.0, "e1/e1": 3.0}, name="time", unit="ms")
    explorer = GraphExplorer(g)
    closed = {r["id"]: r for r in explorer.model["clusters"]}
    assert closed["e1"]["overlay_text"] == "time: 5 ms (83.3%)"
    assert closed["e1"]["overlay_colour"] == ov.SEQUENTIAL[-1]
    explorer.toggle("e1")
    drawn = ids(explorer.drawn)
    assert drawn["e1/e0"] == 2.0 and drawn["e1/e1"] == 3.0
    records = {r["id"]: r for r in explorer.model["nodes"]}
    assert records["e1/e1"]["overlay_colour"] == ov.SEQUENTIAL[-1]
    assert records["e0"]["overlay_colour"] == ov.SEQUENTIAL[0]
    legend = [e for e in explorer.legend if e["mark"] == "overlay"]
    assert legend and legend[0]["text"].startswith("time: 1 ms – 3 ms")
    twin = explorer._static_html()
    assert f'fill="{ov.SEQUENTIAL[-1]}"' in twin
    assert "time: 3 ms (50.0%)" in twin  # in the <title> of e1/e1
    explorer.toggle("e1")
    assert ids(explorer.drawn)["e1"] == 5.0


def test_a_graph_without_an_overlay_draws_no_overlay(graph):
    view = {"nodes": {"e0": [0, 0, 1, 1]}, "frames": [], "edges": []}
    assert not any(e["mark"].startswith("overlay") for e in legend_entries(graph, view))
    assert all(n.overlay is None for n in graph.nodes)


def loss(w, x):
    return jnp.sum(jnp.tanh(x * w) ** 2)


def test_adjoints_become_an_overlay():
    g = jaxlab.jaxpr_graph(loss, jnp.full(3, 0.5), jnp.ones(3), grad=True, values=True)
    g = g.overlay_from_adjoints()
    with_adjoint = [n for n in g.nodes if n.adjoint is not None]
    assert with_adjoint and all(n.overlay is not None for n in with_adjoint)
    n = with_adjoint[0]
    expect = max(abs(n.adjoint.min), abs(n.adjoint.max))
    if n.adjoint.scalar is not None:
        expect = abs(n.adjoint.scalar)
    assert n.overlay == pytest.approx(expect)
    view = g.rebuild(frozenset())
    assert view.overlay_name == "|∂| largest"
    assert any(x.overlay is not None for x in view.nodes if x.kind == m.EQUATION)


def dense(x, w, b):
    return jnp.tanh(x @ w + b)


def test_an_equation_is_named_by_the_expression_that_made_it():
    from jaxlab.graph.equation_code import equation_code

    closed = jax.make_jaxpr(dense)(jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones(4))
    named = {str(e.primitive): equation_code(e) for e in closed.jaxpr.eqns}
    assert named["dot_general"] == "x @ w"
    assert named["add"] == "x @ w + b"
    assert named["tanh"] == "jnp.tanh(x @ w + b)"
    # no readable source: no name (the primitive stands in)
    lost = jax.make_jaxpr(eval("lambda v: v * 2.0"))(jnp.ones(2))
    assert equation_code(lost.jaxpr.eqns[0]) is None
