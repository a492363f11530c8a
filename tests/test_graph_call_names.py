"""Boxes are named after the function called again and again, not after its caller
(issue 33): ``loss -> mlp -> for p in params: x = layer(p, x)`` draws ``mlp (layer ×20)``
opening to ``layer 3 (params[3])``, forward and backward alike; before, it drew
``mlp ×20`` opening to ``mlp 3 (params[3])``."""

import jax.numpy as jnp

import jaxlab
from jaxlab.graph import model as m

LAYERS = 20


def layer(p, x):
    return jnp.tanh(x @ p["W"] + p["b"])


def mlp(params, x):
    for p in params:
        x = layer(p, x)
    return x


def loss(params, x):
    return (mlp(params, x) ** 2).mean()


PARAMS = [
    {"W": jnp.full((16 if i == 0 else 32, 32), 0.01), "b": jnp.zeros(32)} for i in range(LAYERS)
]
X = jnp.ones((8, 16))


def _labels(graph):
    """Every box's title in the view with every box open."""
    view = graph.rebuild(frozenset(graph.rebuild.explorer.openable()))
    return [n.label for n in view.nodes if n.kind == m.SEGMENT] + [c.label for c in view.clusters]


def test_a_caller_of_a_repeated_function_is_one_box_holding_its_calls():
    labels = _labels(jaxlab.jaxpr_graph(loss, PARAMS, X))
    assert f"mlp (layer ×{LAYERS})" in labels
    calls = [label for label in labels if label.startswith("layer ")]
    assert calls[0] == "layer 0 (params[0])" and "layer 3 (params[3])" in calls
    assert len(calls) == LAYERS and not [label for label in labels if label.startswith("mlp ×")]


def test_the_backward_pass_names_the_same_function():
    labels = _labels(jaxlab.jaxpr_graph(loss, PARAMS, X, grad=True))
    assert f"mlp (layer ×{LAYERS})" in labels and f"∂ mlp (layer ×{LAYERS})" in labels
    backward = [label for label in labels if label.startswith("∂ layer ")]
    assert len(backward) == LAYERS and backward[0].startswith("∂ layer 19 ")
    assert not [label for label in labels if label.startswith(("mlp ×", "∂ mlp ×"))]


def test_the_gradient_view_names_the_arguments_as_the_call_line_does(ip):
    ip.run_cell(
        "import jax.numpy as jnp\nX = jnp.ones((4, 3))\nY = jnp.ones((3, 2))\n"
        "def f(x, y):\n    return jnp.tanh(x @ y).sum()"
    )
    plain = ip.run_line_magic("jaxpr", "-o --static f(X, Y)")
    grad = ip.run_line_magic("jaxpr", "-o --static --grad f(X, Y)")
    assert plain.input_names() == grad.input_names() == ["X", "Y"]
    outputs = [n.label for n in grad.nodes if n.kind == m.OUTPUT]
    assert "∂f/∂X" in outputs and not [o for o in outputs if o.endswith("/∂x")]
    # an argument written as an expression keeps its parameter's name
    grad = ip.run_line_magic("jaxpr", "-o --static --grad f(X * 2, Y)")
    assert grad.input_names() == ["x", "Y"]


def test_the_grad_graph_names_the_arguments_as_the_call_line_does(ip):
    ip.run_cell(
        "import jax.numpy as jnp\nX = jnp.ones((4, 3))\nY = jnp.ones((3, 2))\n"
        "def f(x, y):\n    return jnp.tanh(x @ y).sum()"
    )
    report = ip.run_line_magic("grad", "-o --graph --static f(X, Y)")
    assert report.graph.input_names()[:2] == ["X", "Y"]
    assert "∂f/∂X" in [n.label for n in report.graph.nodes if n.kind == m.OUTPUT]


def test_the_split_names_the_arguments_as_the_call_line_does(ip):
    ip.run_cell(
        "import jax.numpy as jnp\nX = jnp.ones((4, 3))\nY = jnp.ones((3, 2))\n"
        "def f(x, y):\n    return jnp.tanh(x @ y).sum()"
    )
    split = ip.run_line_magic("grad", "-o --split f(X, Y)")
    assert split.names == ("X",) and split.leaf_names == ("X",)
    assert "Y" in split.const_names  # the argument held fixed, named as the line names it
    primal = split.graphs()[0] if hasattr(split, "graphs") else None
    assert primal is None or "X" in primal.input_names()
    split = ip.run_line_magic("grad", "-o --split f(X + 0, y=Y)")
    assert split.names == ("x",) and "Y" in split.const_names
