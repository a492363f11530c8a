"""The static gradient graph (Graphviz SVG) as a reader sees it: font sizes, tooltips with
the raw JAX form, greyed fixed arguments and unused equations, loop-back carry edges,
text inside its box, and user strings escaped (issue 11)."""

import re
import shutil
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import pytest

from jaxlab.graph import model as m
from jaxlab.graph.gradient import gradient_graph
from jaxlab.graph.render import ROW_PT, TITLE_PT, graph_to_dot, graph_to_svg

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"


def loss(w, x):
    wasted = jnp.cos(x).sum()  # reaches no output: unused  # noqa: F841

    def body(c, xi):
        return c * w + xi, c

    c, _ = jax.lax.scan(body, 1.0, x)
    return jnp.sum(x * w) + c**2


@pytest.fixture(scope="module")
def graph():
    return gradient_graph(loss, (2.0, jnp.arange(3.0)), {}, wrt=(0,), values=True)


@pytest.fixture(scope="module")
def svg(graph):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is missing")
    return ET.fromstring(graph_to_svg(graph))


def _node_groups(root):
    return {
        g.get("id")[len("node_") :]: g
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "node" and (g.get("id") or "").startswith("node_")
    }


def _tooltip(g):
    return next(a.get(f"{XLINK}title") for a in g.iter(f"{SVG}a"))


def _box_x(g):
    """The x range of a node's outline (path, polygon or ellipse)."""
    xs = []
    for el in g.iter():
        if el.tag == f"{SVG}ellipse":
            cx, rx = float(el.get("cx")), float(el.get("rx"))
            xs += [cx - rx * 0.71, cx + rx * 0.71]  # the widest text row inside an ellipse
        elif el.tag in (f"{SVG}path", f"{SVG}polygon"):
            pts = el.get("d") or el.get("points")
            xs += [float(v) for v in re.findall(r"(-?[\d.]+),-?[\d.]+", pts)]
    return min(xs), max(xs)


@needs_dot
def test_every_text_is_at_least_12px_and_titles_14px(graph, svg):
    sizes = [float(t.get("font-size")) for t in svg.iter(f"{SVG}text")]
    assert sizes and min(sizes) >= ROW_PT >= 12 and TITLE_PT >= 14
    for node_id, g in _node_groups(svg).items():
        texts = list(g.iter(f"{SVG}text"))
        assert float(texts[0].get("font-size")) >= 14, node_id  # the title row
        if graph.node(node_id).kind == m.EQUATION:
            assert texts[0].get("font-weight") == "bold"


@needs_dot
def test_tooltip_holds_raw_form_type_source_value_and_adjoint(graph, svg):
    groups = _node_groups(svg)
    total = next(n for n in graph.equations if n.raw.startswith("reduce_sum"))
    assert total.label != total.raw  # the friendly label: "sum over axis 0"
    tip = _tooltip(groups[total.id]).split("\n")
    assert tip[0] == total.label
    assert f"jax: {total.raw}" in tip and "f32[]" in tip
    assert any(line.startswith("test_render_static.py:") for line in tip)
    assert f"value = {total.value.text()}" in tip
    w = graph.node("in0")
    tip_w = _tooltip(groups["in0"]).split("\n")
    assert w.label == "w" and f"adjoint ∂ = {w.adjoint.text()}" in tip_w
    # The adjoint of w is dloss/dw: sum(x) + 2 c dc/dw, checked against jax.grad.
    assert w.adjoint.scalar == pytest.approx(float(jax.grad(loss)(2.0, jnp.arange(3.0))))


@needs_dot
def test_fixed_argument_is_greyed_without_an_adjoint(graph, svg):
    x = graph.node("in1")
    assert x.label == "x" and x.role == m.FIXED
    g = _node_groups(svg)["in1"]
    outline = next(el for el in g.iter() if el.tag == f"{SVG}path")
    assert outline.get("fill") == "#f2f2f2" and outline.get("stroke-dasharray")
    rows = [t.text for t in g.iter(f"{SVG}text")]
    assert rows[0] == "x" and "fixed: not differentiated" in rows
    assert not any(r.startswith("∂") for r in rows)
    assert "adjoint ∂" not in _tooltip(g) and "fixed: not differentiated" in _tooltip(g)
    # A differentiated argument keeps its adjoint row and its colour.
    w_rows = [t.text for t in _node_groups(svg)["in0"].iter(f"{SVG}text")]
    assert any(r.startswith("∂ ") for r in w_rows)


@needs_dot
def test_unused_equations_are_greyed_and_marked(graph, svg):
    unused = [n for n in graph.equations if n.unused]
    # cos and its sum, and the primal loss itself (grad returns only the gradient).
    assert {"cos", "reduce_sum"} <= {n.primitive for n in unused}
    assert all(n.phase == m.FORWARD for n in unused)
    groups = _node_groups(svg)
    for n in unused:
        rows = [t.text for t in groups[n.id].iter(f"{SVG}text")]
        assert "unused: reaches no output" in rows
        assert all(t.get("fill") == "#5f5f5f" for t in groups[n.id].iter(f"{SVG}text"))
    used = [n for n in graph.equations if not n.unused]
    assert used and all(
        "unused" not in "".join(t.text for t in groups[n.id].iter(f"{SVG}text")) for n in used
    )


@needs_dot
def test_scan_carry_is_a_dashed_loop_back_edge(graph, svg):
    carries = [e for e in graph.edges if e.kind == m.CARRY]
    assert carries
    dot = graph_to_dot(graph)
    for e in carries:
        line = next(x for x in dot.splitlines() if f'"{e.src}" -> "{e.dst}" [' in x)
        assert "constraint=false" in line and "style=dashed" in line and 'label="carry"' in line
    edges = [g for g in svg.iter(f"{SVG}g") if "carry" in (g.get("class") or "").split()]
    assert len(edges) == len(carries)
    for g in edges:
        path = next(g.iter(f"{SVG}path"))
        assert path.get("stroke-dasharray")
        assert [t.text for t in g.iter(f"{SVG}text")] == ["carry"]
    # The plain dataflow edges are solid.
    plain = [g for g in svg.iter(f"{SVG}g") if (g.get("class") or "") == "edge"]
    assert plain and all(not next(g.iter(f"{SVG}path")).get("stroke-dasharray") for g in plain)


@needs_dot
def test_text_stays_inside_its_box(svg):
    # Browser sans-serif glyphs average under 0.62 em (0.68 em bold); dot's own metrics
    # are narrower, so the box must be sized for the browser.
    for node_id, g in _node_groups(svg).items():
        left, right = _box_x(g)
        for t in g.iter(f"{SVG}text"):
            size = float(t.get("font-size"))
            em = 0.68 if t.get("font-weight") == "bold" or size >= 14 else 0.62
            width = len(t.text or "") * em * size
            x = float(t.get("x"))
            start = x - width / 2 if t.get("text-anchor") == "middle" else x
            assert left <= start and start + width <= right + 0.5, (node_id, t.text)


def test_user_strings_are_escaped_in_labels_and_tooltips():
    def f(x):
        return jnp.sin(x).sum()

    f.__name__ = 'f<b>"&\x01'
    g = gradient_graph(f, (jnp.ones(2),), {}, wrt=(0,))
    dot = graph_to_dot(g)
    assert '<b>"&' not in dot and "\x01" not in dot
    assert "&lt;b&gt;&quot;&amp;\\\\x01" in dot
    if shutil.which("dot"):
        root = ET.fromstring(graph_to_svg(g))  # well-formed XML whatever the name
        texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
        assert 'f<b>"&\\x01' in texts
