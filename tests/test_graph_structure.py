"""The GraphExplorer's boxes follow the structure the user wrote (graph/groups.py): named
scopes and libraries' module paths, the user's calls, a Python loop's iterations, and
flax nnx modules found through the parameters they read; gradients mirror them."""

import re

import jax
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.graph import model as m

LAYERS = 20


def layer(h, w):
    return jnp.tanh(h @ w)


def mlp(params, x):
    h = x
    for w in params:
        h = layer(h, w)
    return jnp.sum(h**2)


def inlined(params, x):
    h = x
    for w in params:
        h = h @ w
        h = jnp.tanh(h)
    return jnp.sum(h**2)


PARAMS = [jnp.full((4, 4), 0.1) for _ in range(LAYERS)]
X = jnp.ones((2, 4))


def boxes(graph):
    return [n for n in graph.nodes if n.kind == m.SEGMENT]


def box(graph, label):
    found = [n for n in boxes(graph) if n.label == label]
    assert len(found) == 1, [n.label for n in boxes(graph)]
    return found[0]


def opened(graph, *labels):
    """The view with the boxes titled ``labels`` opened, one after the other."""
    ids: frozenset[str] = frozenset()
    for label in labels:
        ids |= {box(graph, label).id}
        graph = graph.rebuild(ids)
    return graph


def equations_in(graph, node):
    """The equations a closed box holds, read from the explorer's tree."""
    explorer = graph.rebuild.explorer
    lo, hi = (int(k) for k in node.id.removeprefix("run").split("-"))
    return [item.eqn for item in explorer.tree.items[lo : hi + 1]]


def test_mlp_opens_to_one_box_per_call_named_by_function_and_parameters():
    g = jaxlab.jaxpr_graph(mlp, PARAMS, X, explore=True)
    assert boxes(g)[0].label == f"layer ×{LAYERS}"
    view = opened(g, f"layer ×{LAYERS}")
    layers = [n for n in boxes(view) if n.label.startswith("layer ")]
    assert [n.label for n in layers] == [f"layer {k} (params[{k}])" for k in range(LAYERS)]
    for k, node in enumerate(layers):
        eqns = equations_in(g, node)
        # Each box is exactly one call: a matmul with params[k], then its tanh.
        assert [e.primitive.name for e in eqns] == ["dot_general", "tanh"]
        assert eqns[0].invars[1] is g.jaxpr.jaxpr.invars[k]
    # No box is named by its size only.
    assert not [n for n in boxes(view) if re.fullmatch(r"\d+ equations", n.label)]


def test_gradient_of_mlp_mirrors_the_forward_boxes():
    g = jaxlab.jaxpr_graph(mlp, PARAMS, X, grad=True, explore=True)
    labels = [n.label for n in boxes(g)]
    assert f"layer ×{LAYERS}" in labels and f"∂ layer ×{LAYERS}" in labels
    back = box(g, f"∂ layer ×{LAYERS}")
    assert back.phase == m.BACKWARD and box(g, f"layer ×{LAYERS}").phase == m.FORWARD
    view = opened(g, f"∂ layer ×{LAYERS}")
    mirrored = [n for n in boxes(view) if n.label.startswith("∂ layer ")]
    # The backward pass runs the calls in reverse: layer 19's adjoint first. Layer 0's
    # needs no w (nothing flows back to x), so it reads no parameter to be named by.
    assert [n.label for n in mirrored] == [
        f"∂ layer {k} (params[{k}])" if k else "∂ layer 0" for k in reversed(range(LAYERS))
    ]
    assert {n.phase for n in mirrored} == {m.BACKWARD}
    # ∂ layer k reads params[k] (the matmul's transpose needs w) and nothing of another's.
    invars = g.jaxpr.jaxpr.invars
    for node in mirrored:
        k = int(node.label.split()[2])
        read = {v for e in equations_in(g, node) for v in e.invars if v in set(invars)}
        # (x is the last input: layer 0's ∂w is x transposed times the adjoint.)
        assert read == ({invars[k]} if k else {invars[-1]})
        # Each mirrored box holds one call's transpose: a matmul per adjoint it makes.
        dots = [e for e in equations_in(g, node) if e.primitive.name == "dot_general"]
        assert len(dots) == (2 if k else 1)


def test_python_loop_inlined_in_one_function_shows_its_iterations():
    g = jaxlab.jaxpr_graph(inlined, PARAMS, X, explore=True)
    (loop,) = [n for n in boxes(g) if n.label.startswith(f"loop ×{LAYERS}")]
    view = g.rebuild(frozenset({loop.id}))
    its = [n.label for n in boxes(view) if n.label.startswith("iteration")]
    assert its == [f"iteration {k} (params[{k}])" for k in range(LAYERS)]
    # The loss after the loop is not an iteration's.
    last = box(view, f"iteration {LAYERS - 1} (params[{LAYERS - 1}])")
    assert [e.primitive.name for e in equations_in(g, last)] == ["dot_general", "tanh"]


def test_named_scopes_are_boxes():
    def f(x):
        with jax.named_scope("encoder"):
            for _ in range(20):
                x = jnp.sin(x) * 2.0
        with jax.named_scope("decoder"):
            for _ in range(20):
                x = jnp.cos(x) + 1.0
        return x

    g = jaxlab.jaxpr_graph(f, jnp.ones(3), explore=True)
    assert [n.label for n in boxes(g)] == ["encoder", "decoder"]
    assert box(g, "encoder").n_equations == 40
    # A loop that is all a scope holds: opening the scope shows its iterations (a box
    # as big as the one opened is skipped).
    its = [n for n in boxes(opened(g, "encoder")) if n.label.startswith("iteration")]
    assert [n.label for n in its] == [f"iteration {k}" for k in range(20)]
    assert all(n.n_equations == 2 for n in its)


def _module_labels(graph):
    return [n.label for n in boxes(graph)]


def test_equinox_mlp_shows_its_module_then_its_layers():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(4, 2, 16, 3, key=jax.random.key(0))

    def loss(model, x):
        return jnp.sum(jax.vmap(model)(x) ** 2)

    g = jaxlab.jaxpr_graph(loss, model, jnp.ones((5, 4)), explore=True)
    assert _module_labels(g)[0] == "eqx.nn.MLP"
    inner = [n.label for n in boxes(opened(g, "eqx.nn.MLP"))]
    linear = [label for label in inner if label.startswith("eqx.nn.Linear")]
    assert linear == [f"eqx.nn.Linear (model.layers[{k}])" for k in range(4)]
    grad = jaxlab.jaxpr_graph(loss, model, jnp.ones((5, 4)), grad=True, explore=True)
    assert {"eqx.nn.MLP", "∂ eqx.nn.MLP (model.layers)"} <= set(_module_labels(grad))


def test_flax_nnx_modules_are_found_by_the_parameters_they_read():
    nnx = pytest.importorskip("flax.nnx")

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(4, 16, rngs=rngs)
            self.l2 = nnx.Linear(16, 16, rngs=rngs)
            self.l3 = nnx.Linear(16, 2, rngs=rngs)

        def __call__(self, x):
            return self.l3(nnx.relu(self.l2(nnx.relu(self.l1(x)))))

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    g = jaxlab.jaxpr_graph(loss, Net(nnx.Rngs(0)), jnp.ones((5, 4)), explore=True)
    assert _module_labels(g)[:3] == ["model.l1", "model.l2", "model.l3"]
    invars = g.jaxpr.jaxpr.invars
    names = g.rebuild.explorer.input_names
    for label in ("model.l1", "model.l2", "model.l3"):
        read = {
            names[invars.index(v)]
            for e in equations_in(g, box(g, label))
            for v in e.invars
            if v in set(invars)
        }
        assert read and all(name.startswith(label + ".") for name in read if name != "x")


def test_flax_linen_and_haiku_module_paths():
    nn = pytest.importorskip("flax.linen")
    hk = pytest.importorskip("haiku")

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(3):
                x = nn.relu(nn.Dense(16)(x))
            return nn.Dense(2)(x)

    net = Net()
    params = net.init(jax.random.key(0), jnp.ones((5, 4)))
    g = jaxlab.jaxpr_graph(
        lambda params, x: jnp.sum(net.apply(params, x) ** 2), params, jnp.ones((5, 4)), explore=True
    )
    assert _module_labels(g)[0] == "Net"
    dense = [n for n in _module_labels(opened(g, "Net")) if n.startswith("Dense")]
    assert [d.split()[0] for d in dense] == [f"Dense_{k}" for k in range(4)]

    forward = hk.transform(lambda x: hk.nets.MLP([16, 16, 2])(x))
    hparams = forward.init(jax.random.key(0), jnp.ones((5, 4)))
    h = jaxlab.jaxpr_graph(
        lambda params, x: jnp.sum(forward.apply(params, None, x) ** 2),
        hparams,
        jnp.ones((5, 4)),
        explore=True,
    )
    assert _module_labels(h)[0] == "mlp"
    inner = [n.split()[0] for n in _module_labels(opened(h, "mlp"))]
    assert inner[:3] == ["linear_0", "linear_1", "linear_2"]


def test_repeated_identical_calls_are_marked_as_repeats():
    from jaxlab.graph.explore import REPEAT
    from jaxlab.widgets import GraphExplorer

    def block(h, w, b):
        return jnp.tanh(h @ w + b)

    def odd(h, w):  # a call of the same site that differs: never a repeat
        return jnp.sin(h @ w)

    def net(params, x):
        h = x
        for k, (w, b) in enumerate(params):
            h = block(h, w, b) if k != 2 else odd(h, w)
        return jnp.sum(h)

    params = [(jnp.full((4, 4), 0.1), jnp.zeros(4)) for _ in range(5)]
    g = jaxlab.jaxpr_graph(net, params, X, explore=True)
    segments = {n.label: n for n in boxes(g)}
    calls = [label for label in segments if label.startswith(("block", "odd"))]
    # A function defined inside another is named as written (not net.<locals>.block).
    assert calls == [
        "block 0 (params[0])",
        "block 1 (params[1])",
        "odd (params[2][0])",
        "block 0 (params[3])",
        "block 1 (params[4])",
    ]
    repeated = [label for label in calls if segments[label].summary.startswith(REPEAT)]
    # The first call of a run of one site is never a repeat, nor is another site's call.
    assert repeated == ["block 1 (params[1])", "block 1 (params[4])"]
    w = GraphExplorer(g)
    marks = [entry["mark"] for entry in w.legend]
    assert "repeat" in marks
    assert "equations · repeat" in w.static_bundle()["text/html"]
    # A program with no repeated call has no such entry.
    single = GraphExplorer(jaxlab.jaxpr_graph(net, params[:1], X))
    assert "repeat" not in [entry["mark"] for entry in single.legend]


@pytest.mark.parametrize("grad", [False, True])
def test_first_view_of_the_20_layer_mlp_fits_1280x720_with_parameters_as_one_node(grad):
    from jaxlab.widgets import GraphExplorer

    w = GraphExplorer(jaxlab.jaxpr_graph(mlp, PARAMS, X, grad=grad))
    # Drawn at scale 1 (titles 14 px, rows 12 px), the whole first view fits the screen.
    assert w.view["width"] <= 1280 and w.view["height"] <= 720
    records = {n["id"]: n for n in w.model["nodes"]}
    inputs = [n for n in records.values() if n["kind"] == m.INPUT]
    assert [n["label"] for n in inputs] == [f"params ({LAYERS} arrays)", "x"]
    # Its hover lists the arrays it holds; its edges run to the boxes that read them.
    assert inputs[0]["params"].startswith("params[0] f32[4,4], params[1] f32[4,4]")
    into = {e["dst"] for e in w.view["edges"] if e["src"] == inputs[0]["id"]}
    layer_boxes = {
        "cluster:" + c["id"] for c in w.model["clusters"] if c["label"].endswith(f"layer ×{LAYERS}")
    }
    assert into == layer_boxes and len(layer_boxes) == (2 if grad else 1)
    outputs = [n["label"] for n in records.values() if n["kind"] == m.OUTPUT]
    assert outputs == ([f"∂mlp/∂params ({LAYERS} arrays)"] if grad else ["mlp"])


def test_open_by_name_opens_the_boxes_the_structure_names():
    from jaxlab.widgets import GraphExplorer

    g = jaxlab.jaxpr_graph(mlp, PARAMS, X, explore=True)
    ids = g.rebuild.explorer.boxes_to_open(["layer"])
    w = GraphExplorer(g, opened=ids, fit=False)  # all asked, past a projector's pane
    # The call site's box opens to its 20 calls, and each call to its equations.
    drawn = [n["primitive"] for n in w.model["nodes"] if n["kind"] == m.EQUATION]
    assert drawn.count("tanh") == LAYERS and drawn.count("dot_general") == LAYERS
    assert not g.rebuild.explorer.boxes_to_open(["nothing_is_called_so"])
