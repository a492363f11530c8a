"""``%grad --split``: three programs stacked at full width, each residual numbered and
linked to the primal node that computed it (issue 11).

Every link is checked against JAX: the primal node's value, computed by jaxlab's
interpreter, equals the residual array the linearized program holds, and both equal what
JAX computes for that node (``jnp.sin(x1)``, the MLP's hidden ``tanh``).
"""

import re
import shutil

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import GradSplit
from jaxlab.autodiff.residuals import VALUE, Linearization, find_residuals
from jaxlab.autodiff.split import grad_split
from jaxlab.graph import model as m
from jaxlab.graph.interpret import evaluate
from jaxlab.graph.render import TAG_COLOURS, graph_to_dot, tag_colour

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")
DERIVATIVE_ONLY = "computed for the derivative, not by the primal program"


def sin_times(x1):
    return jnp.sin(x1) * x1


def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
    return jnp.mean((h @ params[1]["W"] - y) ** 2)


def _mlp_point():
    k1, k2 = jax.random.split(jax.random.key(0))
    params = [
        {"W": jax.random.normal(k1, (3, 4)), "b": jnp.linspace(-0.5, 0.5, 4)},
        {"W": jax.random.normal(k2, (4, 1))},
    ]
    return params, jnp.linspace(-1.0, 1.0, 15).reshape(5, 3), jnp.ones((5, 1))


def _primal_values(split: GradSplit, flat_args):
    """Every primal node's value, by the interpreter: node id -> array."""
    run = evaluate(split.primal, flat_args)
    return {node: run.values[slot] for node, slot in run.node_slots.items()}


def _check_links(split: GradSplit, flat_args) -> dict[str, m.Node]:
    """Each residual numbered r1..rN in order; each linked one badged on exactly its
    primal node, whose value is the residual's array; returns name -> primal node."""
    assert [r.name for r in split.residuals] == [f"r{k}" for k in range(1, split.n_residuals + 1)]
    primal, linear, transposed = split.graphs()
    values = _primal_values(split, flat_args)
    linked = {}
    for r, const in zip(split.residuals, split.linear.consts, strict=True):
        tagged = [n for n in primal.nodes if r.name in n.tag.split(",")]
        if r.producer is None:
            assert tagged == [] and r.origin() in split.text()
            continue
        assert [n.id for n in tagged] == [r.producer]
        np.testing.assert_array_equal(np.asarray(values[r.producer]), np.asarray(const))
        linked[r.name] = tagged[0]
    # The linearized program's constants are the residuals, badged and named by them.
    consts = [n for n in linear.nodes if n.kind == m.CONST]
    assert [n.tag for n in consts] == [r.name for r in split.residuals]
    assert all(n.label.startswith(n.tag) for n in consts)
    # The transposed program holds the same arrays: the same badges, whatever the order.
    held = {id(c) for c in split.transposed.consts}
    want = [r.name for r, c in zip(split.residuals, split.linear.consts, strict=True)]
    want = sorted(name for name, c in zip(want, split.linear.consts, strict=True) if id(c) in held)
    assert want and sorted(n.tag for n in transposed.nodes if n.tag) == want
    return linked


def test_sin_times_x_links_sin_and_x_and_says_cos_is_for_the_derivative():
    x1 = jnp.float32(0.7)
    split = grad_split(sin_times, x1)
    linked = _check_links(split, [x1])
    by_expression = {r.expression: r for r in split.residuals}
    assert set(by_expression) == {"sin(x1)", "cos(x1)", "x1"}
    sin_r, cos_r, x_r = by_expression["sin(x1)"], by_expression["cos(x1)"], by_expression["x1"]
    # sin(x1) is the primal's sin node, x1 its input; cos(x1) only the derivative needs.
    assert linked[sin_r.name].primitive == "sin" and sin_r.matched_by == "computation"
    assert linked[x_r.name].kind == m.INPUT and linked[x_r.name].label == "x1"
    assert cos_r.producer is None and cos_r.origin() == DERIVATIVE_ONLY
    consts = dict(zip((r.name for r in split.residuals), split.linear.consts, strict=True))
    np.testing.assert_allclose(consts[sin_r.name], jnp.sin(x1), rtol=0)
    np.testing.assert_allclose(consts[cos_r.name], jnp.cos(x1), rtol=0)
    # The transposed program still gives jax.grad's gradient.
    (g,) = split.apply_transposed()
    np.testing.assert_allclose(g, jax.grad(sin_times)(x1), rtol=1e-6)
    # Names on inputs and outputs of the three programs.
    primal, linear, transposed = split.graphs()
    assert [n.label for n in primal.nodes if n.kind == m.INPUT] == ["x1"]
    assert [n.label for n in linear.nodes if n.kind == m.INPUT] == ["dx1"]
    assert [n.label for n in transposed.nodes if n.kind == m.OUTPUT] == ["∂sin_times/∂x1"]
    # The text names the residuals as the graphs do, each with where it comes from.
    text = split.text()
    for r in split.residuals:
        assert f"{r.name} = {r.expression} f32[]" in text
    assert f"{cos_r.name} = cos(x1) f32[]" in text and DERIVATIVE_ONLY in text


def test_mlp_loss_links_tanh_and_the_data_and_lists_the_rest():
    params, x, y = _mlp_point()
    split = grad_split(mlp_loss, params, x, y)
    flat = jax.tree_util.tree_leaves(params)
    linked = _check_links(split, flat)
    assert split.leaf_names == ("params[0]['W']", "params[0]['b']", "params[1]['W']")
    assert split.const_names == ("x", "y")  # the data, captured by the primal by name
    hidden = [r for r in split.residuals if r.producer_label == "tanh"]
    assert len(hidden) == 1 and linked[hidden[0].name].primitive == "tanh"
    want = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
    np.testing.assert_allclose(split.linear.consts[hidden[0].number - 1], want, rtol=1e-6)
    # The data x is kept as it is: drawn as the primal's input x, greyed (not differentiated).
    data = [r for r in split.residuals if r.expression == "x"]
    assert len(data) == 1 and data[0].producer_label == "argument x"
    node = linked[data[0].name]
    assert node.kind == m.INPUT and node.label == "x" and node.role == m.FIXED
    # Residuals only the derivative needs (from tanh's derivative: 1 - h² on JAX 0.12,
    # 1 - h on 0.10; the square's 2·e) are unmatched and listed; one computed from another
    # names it (r2 = one_minus_square(r4)).
    unmatched = [r for r in split.residuals if r.producer is None]
    assert len(unmatched) == 2
    assert any(
        f"({hidden[0].name})" in r.expression or f", {hidden[0].name})" in r.expression
        for r in unmatched
    )
    legend = split._repr_mimebundle_()["text/html"]
    for r in unmatched:
        assert f"{r.name}</span>" in legend
    assert legend.count(DERIVATIVE_ONLY) == 2
    # Outputs of the transposed program name the gradient, in leaf order.
    transposed = split.graphs()[2]
    assert [n.label for n in transposed.nodes if n.kind == m.OUTPUT] == [
        "∂mlp_loss/∂" + name for name in split.leaf_names
    ]
    grads = jax.tree_util.tree_leaves(jax.grad(mlp_loss)(params, x, y))
    for got, expected in zip(split.apply_transposed(), grads, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_equinox_mlp_with_relu_links_each_layers_activation():
    model = eqx.nn.MLP(3, 1, 4, 2, activation=jax.nn.relu, key=jax.random.key(1))
    x = jnp.linspace(-1.0, 1.0, 3)

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    split = grad_split(loss, model, x)
    flat = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))
    linked = _check_links(split, flat)
    assert split.leaf_names[0] == "model.layers[0].weight"
    # relu is a custom_jvp: its max(·, 0) is found inside the call, once per hidden layer,
    # and holds the layer's activation as JAX computes it.
    relus = [r for r in split.residuals if r.producer_label == "max"]
    assert len(relus) == 2
    h1 = jax.nn.relu(model.layers[0](x))
    np.testing.assert_allclose(split.linear.consts[relus[0].number - 1], h1, rtol=1e-6)
    assert all(linked[r.name].primitive == "max" for r in relus)


def test_a_value_equal_by_coincidence_is_not_linked():
    # Inside the scan, cos's derivative keeps sin(x) per iteration; the primal also
    # computes sin(x), elsewhere. Equal arrays, different computations: no link.
    def f(x):
        c, _ = jax.lax.scan(lambda c, xi: (c * jnp.cos(xi), None), 1.0, x)
        return jnp.sum(jnp.sin(x)) + c

    x = jnp.array([0.1, 0.2])
    split = grad_split(f, x)
    sin_x = np.asarray(jnp.sin(x))
    kept = [
        r
        for r, c in zip(split.residuals, split.linear.consts, strict=True)
        if np.array_equal(np.asarray(c), sin_x)
    ]
    assert len(kept) == 1 and kept[0].producer is None and kept[0].in_loop == "scan"
    assert "from inside the scan" in kept[0].origin()


def test_without_the_traced_forward_program_residuals_are_matched_by_unique_value():
    x1 = jnp.float32(0.7)
    split = grad_split(sin_times, x1)
    _, eager = jax.linearize(sin_times, x1)  # the linear function alone, no forward program
    linear = jax.make_jaxpr(eager)(jnp.float32(0.0))
    found = find_residuals(split.primal, [x1], linear, Linearization(eager), ["x1"])
    assert len(found) == len(linear.consts)
    by_value = {float(c): r for c, r in zip(linear.consts, found, strict=True)}
    sin_r = by_value[float(jnp.sin(x1))]
    assert sin_r.producer == "e0" and sin_r.producer_label == "sin" and sin_r.matched_by == VALUE
    assert "(an identical value)" in sin_r.origin()
    assert by_value[float(jnp.cos(x1))].producer is None


def test_html_stacks_the_programs_and_escapes_every_user_string():
    def f(params):
        return jnp.sum(jnp.sin(params["<img src=x>"]) * 2.0)

    f.__name__ = "f<script>alert(1)</script>"
    split = grad_split(f, {"<img src=x>": jnp.ones(3)})
    html = split._repr_mimebundle_()["text/html"]
    assert "<script>" not in html and "<img src=x>" not in html
    assert "f&lt;script&gt;" in html and "&lt;img src=x&gt;" in html
    # Stacked: three sections one under the other, none in a flex row; a legend first.
    assert html.count('class="jaxlab-split-program"') == 3 and "flex" not in html
    assert html.index("jaxlab-split-residuals") < html.index("jaxlab-split-program")
    titles = re.findall(r'font-size:(\d+)px;font-weight:bold">([^:<]+):', html)
    assert [t for _, t in titles] == ["primal", "linearized (JVP)", "transposed (VJP)"]
    assert all(int(size) >= 14 for size, _ in titles)
    # Each badge in the legend has its residual's colour.
    for r in split.residuals:
        assert f"background:{tag_colour(r.name)};" in html
    if shutil.which("dot"):
        # Full width, never shrunk below 3/4 (12 pt text stays 12 px or more): it scrolls.
        widths = re.findall(r'<svg width="([\d.]+)pt"[^>]*min-width:(\d+)px', html)
        assert len(widths) == 3
        assert all(abs(float(w) - float(mw)) <= 1 for w, mw in widths)
        # Three small programs fit any output at least NARROW_OUTPUT_PX wide: no scroll
        # cue shows but where its program scrolls (a narrower pane)
        cues = re.findall(r'class="jaxlab-split-scroll" style="([^"]*)"', html)
        assert all("max-height:0;overflow:hidden;" in c for c in cues)


@needs_dot
def test_a_program_too_wide_for_the_output_says_it_scrolls():
    from jaxlab.autodiff.split_drawing import ALWAYS_FITS_PX, CUE_STYLE, NARROW_OUTPUT_PX

    def mlp(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean(x**2)

    params = [(jnp.full((4, 4), 0.1), jnp.zeros(4)) for _ in range(8)]
    html = grad_split(mlp, params, jnp.ones((2, 4)))._repr_mimebundle_()["text/html"]
    sections = html.split('class="jaxlab-split-program"')[1:]
    for section in sections:
        smallest = float(re.search(r"min-width:(\d+)px", section).group(1))
        cue = re.search(r'jaxlab-split-scroll" style="([^"]*)">↔ ([\d,]+) px wide', section)
        # The cue is there when the drawing may not fit its output, and it sits above the
        # drawing, where the eye is; where the browser cannot tell whether it scrolls
        # (no scroll-driven animations, CUE_STYLE) it shows only for a drawing wider than
        # a narrow output.
        assert (cue is not None) == (smallest > ALWAYS_FITS_PX)
        if cue is not None:
            hidden = "max-height:0;overflow:hidden;" in cue.group(1)
            assert hidden == (smallest <= NARROW_OUTPUT_PX)
            assert "position:sticky;left:0" in cue.group(1)  # in sight as it scrolls
        if cue is not None:
            assert int(cue.group(2).replace(",", "")) == round(smallest)
            assert section.index("jaxlab-split-scroll") < section.index("<svg")
    assert any("jaxlab-split-scroll" in s for s in sections)
    assert html.count(CUE_STYLE) == 1  # the cue's rule, once per output


@needs_dot
def test_static_svg_draws_each_badge_in_its_colour():
    split = grad_split(sin_times, jnp.float32(0.7))
    primal, linear, _ = split.graphs()
    sin_r = next(r for r in split.residuals if r.expression == "sin(x1)")
    for graph in (primal, linear):
        svg = graph.to_svg()
        colour = tag_colour(sin_r.name)
        assert f'fill="{colour}"' in svg and f'stroke="{colour}"' in svg  # badge, border
        assert f">{sin_r.name}</text>" in svg
    assert "values the linearized program keeps" in primal.to_svg()


def test_tag_colours_cycle_and_tags_are_escaped_in_dot():
    colours = [tag_colour(f"r{k}") for k in range(1, len(TAG_COLOURS) + 2)]
    assert colours[: len(TAG_COLOURS)] == list(TAG_COLOURS)
    assert colours[-1] == colours[0] and len(set(TAG_COLOURS)) == len(TAG_COLOURS)
    assert tag_colour("<b>") == tag_colour("<b>") in TAG_COLOURS
    node = m.Node("e0", m.EQUATION, "sin", primitive="sin", tag='r1"<b>&')
    dot = graph_to_dot(m.Graph("t", (node,), (), ()))
    assert "r1&quot;&lt;b&gt;&amp;" in dot and '<b>&"' not in dot


def test_magic_returns_the_split_with_its_residuals(ip):
    ip.run_cell(
        "import jax.numpy as jnp\ndef f(x1):\n    return jnp.sin(x1) * x1\nx = jnp.float32(0.3)"
    )
    split = ip.run_line_magic("grad", "-o --split f(x)")
    assert isinstance(split, GradSplit)
    # named as the call line names the argument (x), as %jaxpr does, not by f's parameter
    assert {r.expression for r in split.residuals} == {"sin(x)", "cos(x)", "x"}
    assert sum(r.producer is None for r in split.residuals) == 1


def test_residuals_stay_numbered_when_the_primal_cannot_be_interpreted(monkeypatch):
    import jaxlab.autodiff.residuals as residuals

    x1 = jnp.float32(0.7)
    split = grad_split(sin_times, x1)
    lin = residuals.traced_linearize(sin_times, [x1])

    def refuse(*args, **kwargs):
        raise NotImplementedError("no rule for this primitive")

    monkeypatch.setattr(residuals, "evaluate", refuse)
    found = find_residuals(split.primal, [x1], split.linear, lin, ["x1"])
    assert [r.name for r in found] == ["r1", "r2", "r3"]
    assert all(r.producer is None and r.type == "f32[]" for r in found)


G = 9.81


def projectile_range(v, theta):
    return v**2 * jnp.sin(2 * theta) / G


def test_an_argument_not_differentiated_stays_a_named_input_not_a_folded_constant():
    """02_autodiff's projectile_range(v, theta) with theta = 0.5, a Python float: the primal
    program draws the input theta (held fixed) and sin of 2 * theta, never `sin 1.0`."""
    split = grad_split(projectile_range, 20.0, 0.5)  # only v differentiated
    assert split.names == ("v",) and split.const_names == ("theta",)
    primal_text = str(split.primal)
    assert "sin 1.0" not in primal_text and "sin 1.0" not in split.text()
    primal = split.graphs()[0]
    inputs = {n.label: n for n in primal.nodes if n.kind == m.INPUT}
    assert set(inputs) == {"v", "theta"} and inputs["theta"].role == m.FIXED
    assert not any(n.kind == m.CONST and "1.0" in n.label for n in primal.nodes)
    assert "sin" in primal.primitives() and "mul" in primal.primitives()
    by_expression = {r.expression: r for r in split.residuals}
    assert by_expression["sin(mul(2.0, theta))"].producer_label == "sin"
    # Held as an array, theta computes what the float did.
    (dv,) = split.apply_transposed()
    np.testing.assert_allclose(dv, jax.grad(projectile_range)(20.0, 0.5), rtol=1e-6)


def test_integers_and_flags_are_not_made_arrays():
    def power(x, n, flag):
        return x**n if flag else x

    split = grad_split(power, 2.0, 3, True)
    assert split.names == ("x",) and "integer_pow" in str(split.primal)


def test_a_literal_residual_is_called_a_constant_not_computed_for_the_derivative():
    split = grad_split(projectile_range, 20.0, 0.5, wrt="v,theta")
    by_expression = {r.expression: r for r in split.residuals}
    two = by_expression["2.0"]
    assert two.constant and two.producer is None
    assert "constant" in two.text() and DERIVATIVE_ONLY not in two.text()
    assert any(f"{two.name}" in line and "constant" in line for line in split.legend())
    assert "a constant of the program" in split._repr_mimebundle_()["text/html"]
    # cos 2θ is still computed for the derivative: it depends on theta.
    assert by_expression["cos(mul(2.0, theta))"].origin() == DERIVATIVE_ONLY
    assert not by_expression["cos(mul(2.0, theta))"].constant


def test_the_magics_split_compiles_nothing_as_the_users(ip):
    """``%grad --split`` makes its tangents and cotangent eagerly: jaxlab's compilations,
    counted apart, never in the user's compile log (shapes no other test uses, so each
    eager op compiles here)."""
    import jaxlab

    ip.run_cell(
        "import jax.numpy as jnp\n"
        "def fit(w, x):\n"
        "    return jnp.mean(jnp.tanh(x @ w) ** 2)\n"
        "w, x = jnp.full((13, 11), 0.1), jnp.ones((17, 13))",
        store_history=True,
    )
    log = jaxlab.compile_log()
    count, ours = log.count, log.jaxlab_count
    assert ip.run_cell("s = %grad -o --split fit(w, x)", store_history=True).success
    assert isinstance(ip.user_ns["s"], GradSplit)
    assert log.count == count and log.jaxlab_count > ours
