"""Gradient graphs name every node a user can name (issue 11, section 1).

Asserted on the Graph model: argument names and pytree paths for inputs (those not
differentiated too, marked fixed, with no adjoint), the seed cotangent ``∂loss/∂loss = 1``,
outputs ``∂loss/∂x1`` in argument order, and never ``wrt[``, ``in0`` or ``const`` for an
argument.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.autodiff.report import grad_report
from jaxlab.graph import model as m
from jaxlab.graph.gradient import gradient_graph, leaf_names


def neuron(x1, x2, w1, w2, b):
    return jnp.tanh(x1 * w1 + x2 * w2 + b)


def loss(params, x, y):
    h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
    return jnp.sum((h @ params[1]["W"] - y) ** 2)


def _params():
    rng = np.random.default_rng(0)
    return [
        {"W": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32), "b": jnp.zeros(4)},
        {"W": jnp.asarray(rng.normal(size=(4, 1)), jnp.float32)},
    ]


def _io(g, kind):
    return [n for n in g.nodes if n.kind == kind]


def _no_raw_names(g):
    labels = [n.label for n in g.nodes if n.kind in (m.INPUT, m.OUTPUT, m.CONST)]
    assert not any("wrt[" in s or s.startswith(("in0", "out0", "const")) for s in labels), labels


def test_grad_wrt_five_scalars_names_inputs_and_outputs_in_argument_order():
    r = grad_report(neuron, 2.0, 0.0, -3.0, 1.0, 6.88, wrt="b,x1,x2,w1,w2", graph=True)
    g = r.graph
    _no_raw_names(g)
    inputs = [n.label for n in _io(g, m.INPUT)]
    assert inputs == ["x1", "x2", "w1", "w2", "b"]
    (seed,) = [n for n in g.nodes if n.role == m.SEED]
    assert seed.label == "∂neuron/∂neuron = 1" and seed.value.scalar == 1.0
    outputs = [n.label for n in _io(g, m.OUTPUT)]
    assert outputs == ["∂neuron/∂" + a for a in ("x1", "x2", "w1", "w2", "b")]
    # Each output's value is JAX's gradient with respect to the argument it names.
    expected = jax.grad(neuron, argnums=(0, 1, 2, 3, 4))(2.0, 0.0, -3.0, 1.0, 6.88)
    got = [n.value.scalar for n in _io(g, m.OUTPUT)]
    assert got == pytest.approx([float(e) for e in expected], rel=1e-5)


def test_data_arguments_stay_named_and_fixed_without_adjoint():
    params, x, y = _params(), jnp.ones((5, 3)), jnp.full((5, 1), 0.5)
    g = grad_report(loss, params, x, y, graph=True).graph
    _no_raw_names(g)
    # x and y are not folded into constants: the only constant is the seed.
    assert [n.role for n in g.nodes if n.kind == m.CONST] == [m.SEED]
    by_label = {n.label: n for n in _io(g, m.INPUT) + _io(g, m.CONST)}
    assert set(by_label) == {
        "params[0]['W']",
        "params[0]['b']",
        "params[1]['W']",
        "x",
        "y",
        "∂loss/∂loss = 1",
    }
    for name in ("x", "y"):
        assert by_label[name].role == m.FIXED and by_label[name].adjoint is None
        assert by_label[name].value is not None
    seed = by_label["∂loss/∂loss = 1"]
    assert seed.role == m.SEED and seed.value.scalar == 1.0 and seed.adjoint is None
    # The differentiated inputs' adjoints are the gradient itself.
    grads = jax.grad(loss)(params, x, y)
    w = by_label["params[0]['W']"]
    assert w.role == "" and w.adjoint.mean == pytest.approx(float(grads[0]["W"].mean()), rel=1e-5)
    outputs = [n.label for n in _io(g, m.OUTPUT)]
    assert outputs == ["∂loss/∂params[0]['W']", "∂loss/∂params[0]['b']", "∂loss/∂params[1]['W']"]


def test_seed_feeds_the_backward_pass():
    g = jaxlab.jaxpr_graph(loss, _params(), jnp.ones((5, 3)), jnp.ones((5, 1)), grad=True)
    (seed,) = [n for n in g.nodes if n.role == m.SEED]
    phase = {n.id: n.phase for n in g.nodes}
    targets = [e.dst for e in g.edges if e.src == seed.id]
    assert targets and all(phase[t] == m.BACKWARD for t in targets)


def test_jaxpr_grad_names_other_arguments_not_constants():
    g = jaxlab.jaxpr_graph(loss, _params(), jnp.ones((5, 3)), jnp.ones((5, 1)), grad=True)
    _no_raw_names(g)
    fixed = sorted(n.label for n in g.nodes if n.role == m.FIXED)
    assert fixed == ["x", "y"]


def test_one_argument_output_reads_df_dx():
    g = jaxlab.jaxpr_graph(lambda x: jnp.sin(x) * x, 1.0, grad=True, values=True)
    (out,) = _io(g, m.OUTPUT)
    assert out.label == "∂<lambda>/∂x".replace("<lambda>", "lambda")
    assert out.value.scalar == pytest.approx(float(jax.grad(lambda x: jnp.sin(x) * x)(1.0)))


def test_keyword_and_pytree_leaf_names_follow_jax_flattening():
    def f(a, b, *, scale, bias):
        return a

    names = leaf_names(f, ({"z": 1.0, "a": 2.0}, [3.0]), {"scale": 1.0, "bias": (0.0, 1.0)})
    # JAX flattens dicts by sorted key: kwargs bias before scale, "a" before "z".
    assert names == ["a['a']", "a['z']", "b[0]", "bias[0]", "bias[1]", "scale"]
    flat = jax.tree_util.tree_leaves((({"z": 1.0, "a": 2.0}, [3.0]), {"scale": 1.0}))
    assert len(flat) == 4


def test_keyword_argument_differentiated_by_name():
    def f(x, *, w):
        return jnp.sum(x * w)

    x, w = jnp.arange(3.0), jnp.ones(3)
    g = gradient_graph(f, (x,), {"w": w}, wrt=["w"], values=True)
    (out,) = _io(g, m.OUTPUT)
    assert out.label == "∂f/∂w"
    np.testing.assert_allclose(out.value.mean, float(x.mean()))
    assert {n.label: n.role for n in _io(g, m.INPUT)}["x"] == m.FIXED


def test_equinox_module_names_its_fields():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(2, 1, 3, 1, key=jax.random.key(0))

    def mse(model, x):
        return jnp.mean(jax.vmap(model)(x) ** 2)

    x = jnp.ones((4, 2))
    g = grad_report(mse, model, x, graph=True).graph
    _no_raw_names(g)
    inputs = [n.label for n in _io(g, m.INPUT)]
    assert "model.layers[0].weight" in inputs and "x" in inputs
    outputs = [n.label for n in _io(g, m.OUTPUT)]
    assert "∂mse/∂model.layers[0].weight" in outputs
    grads = eqx.filter_grad(mse)(model, x)
    (w,) = [n for n in _io(g, m.OUTPUT) if n.label == "∂mse/∂model.layers[0].weight"]
    assert w.value.mean == pytest.approx(float(grads.layers[0].weight.mean()), rel=1e-5)


def test_grad_magic_wrt_names(ip):
    ip.user_ns.update(neuron=neuron)
    r = ip.run_line_magic("grad", "--graph -o --wrt x1,w1 neuron(2.0, 0.0, -3.0, 1.0, 6.88)")
    g = r.graph
    _no_raw_names(g)
    assert [n.label for n in _io(g, m.OUTPUT)] == ["∂neuron/∂x1", "∂neuron/∂w1"]
    roles = {n.label: n.role for n in _io(g, m.INPUT)}
    assert roles["x2"] == roles["w2"] == roles["b"] == m.FIXED
    assert roles["x1"] == roles["w1"] == ""


def test_grad_split_programs_name_inputs_tangents_and_gradients():
    from jaxlab.autodiff.split import grad_split

    params = _params()
    split = grad_split(loss, params, jnp.ones((5, 3)), jnp.ones((5, 1)))
    primal, linear, transposed = split.graphs()
    leaves = ["params[0]['W']", "params[0]['b']", "params[1]['W']"]
    inputs = _io(primal, m.INPUT)
    assert [n.label for n in inputs if n.role != m.FIXED] == leaves
    # the data, not differentiated, are inputs too: held fixed (never folded in)
    assert sorted(n.label for n in inputs if n.role == m.FIXED) == ["x", "y"]
    assert [n.label for n in _io(primal, m.OUTPUT)] == ["loss"]
    assert [n.label for n in _io(linear, m.INPUT)] == ["d" + s for s in leaves]
    assert [n.label for n in _io(transposed, m.INPUT)] == ["∂loss/∂loss = 1"]
    assert [n.label for n in _io(transposed, m.OUTPUT)] == ["∂loss/∂" + s for s in leaves]
    for g in (primal, linear, transposed):
        assert not any(n.label.startswith("in") for n in _io(g, m.INPUT))
    # The transposed program's outputs, run on the seed, are the gradient they name.
    grads = jax.tree_util.tree_leaves(jax.grad(loss)(params, jnp.ones((5, 3)), jnp.ones((5, 1))))
    for got, want in zip(split.apply_transposed(), grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


# --------------------------------------------------------------------------- issue 20: names


def rnn(params, xs, h):
    def step(h, x):
        h = jnp.tanh(h @ params["Wh"] + x @ params["Wx"])
        return h, h

    h, hs = jax.lax.scan(step, h, xs)
    return jnp.sum(hs) + jnp.sum(h)


def _rnn_args():
    p = {"Wh": jnp.ones((4, 4)), "Wx": jnp.ones((3, 4))}
    return p, jnp.ones((20, 3)), jnp.ones(4)


def test_an_opened_scan_body_names_its_carries_and_what_it_stacks():
    from jaxlab.widgets import GraphExplorer

    w = GraphExplorer(jaxlab.jaxpr_graph(rnn, *_rnn_args()))
    (scan,) = [c["id"] for c in w.model["clusters"] if c["primitive"] == "scan"]
    w.toggle(scan)
    labels = {n["id"]: n["label"] for n in w.model["nodes"]}
    body = [labels[k] for k in sorted(labels) if k.startswith(f"{scan}/in")]
    # Closed-over parameters by the outer name, the carry and the slice by the body's own.
    assert body == ["params['Wh']", "params['Wx']", "h", "x"]
    results = [labels[f"{scan}/out0"], labels[f"{scan}/out1"]]
    assert results == ["h", "stacked h"]
    # The body's products read with those names, not "· @ ·".
    assert {"h @ params['Wh']", "x @ params['Wx']"} <= set(labels.values())
    assert not any(re.fullmatch(r"(in|out)\d+", label) for label in labels.values())


def test_a_single_output_takes_the_function_name_and_several_their_paths():
    g = jaxlab.jaxpr_graph(rnn, *_rnn_args())
    assert [n.label for n in _io(g, m.OUTPUT)] == ["rnn"]

    def stats(x):
        return {"mean": jnp.mean(x), "spread": (jnp.min(x), jnp.max(x))}

    g = jaxlab.jaxpr_graph(stats, jnp.ones(3))
    outputs = [n.label for n in _io(g, m.OUTPUT)]
    assert outputs == ["stats['mean']", "stats['spread'][0]", "stats['spread'][1]"]


def test_inner_jit_and_cond_operands_carry_their_names():
    @jax.jit
    def inner(a, b):
        return {"s": a * b, "t": a}

    def f(h, u):
        r = inner(h, u)
        return jax.lax.cond(h[0] > 0, lambda p, q: p + q, lambda p, q: p - q, r["s"], u).sum()

    g = jaxlab.jaxpr_graph(f, jnp.ones(3), jnp.ones(3))
    ports = {n.id: n.label for n in g.nodes if n.kind == m.PORT}
    jit_id = next(c.id for c in g.clusters if c.primitive == "pjit" or c.label.startswith("jit"))
    assert [ports[f"{jit_id}/in0"], ports[f"{jit_id}/in1"]] == ["a", "b"]
    assert [ports[f"{jit_id}/out0"], ports[f"{jit_id}/out1"]] == ["inner['s']", "inner['t']"]
    cond = next(c.id for c in g.clusters if c.primitive == "cond")
    assert [ports[f"{cond}/0/in0"], ports[f"{cond}/0/in1"]] == ["p", "q"]


def test_names_up_to_40_characters_are_drawn_whole():
    from jaxlab.graph.names import WHOLE, shorten
    from jaxlab.widgets import GraphExplorer
    from jaxlab.widgets.graph_explorer import shown_title

    def hamiltonian(params, state):
        kinetic = jnp.sum(params["mass_of_each_particle_in_kg"] * state["velocity"] ** 2)
        long = params["a_parameter_whose_name_runs_past_forty_characters"]
        return kinetic + jnp.sum(long * state["position_of_the_particles"])

    params = {
        "mass_of_each_particle_in_kg": jnp.ones(3),
        "a_parameter_whose_name_runs_past_forty_characters": jnp.ones(3),
    }
    state = {"velocity": jnp.ones(3), "position_of_the_particles": jnp.ones(3)}
    for grad in (False, True):
        w = GraphExplorer(jaxlab.jaxpr_graph(hamiltonian, params, state, grad=grad))
        records = {n["id"]: n for n in w.model["nodes"]}
        drawn = 0
        for node_id, (_, _, width, _) in w.view["nodes"].items():
            if node_id not in records:
                continue
            label = records[node_id]["label"]
            shown = shown_title(label, width)
            if len(label) <= WHOLE:
                assert shown == label, (label, width)
                drawn += 1
            else:  # shortened, keeping the distinguishing end
                assert shown == shorten(label) and shown.endswith(label[-20:])
        assert drawn >= 4
    long_name = "∂hamiltonian/∂params['a_parameter_whose_name_runs_past_forty_characters']"
    assert len(shorten(long_name)) == WHOLE and shorten(long_name).endswith("characters']")


def test_text_calls_arguments_by_the_graphs_names():
    from jaxlab.graph.text import jaxpr_text

    def f(c, params):  # "c" is also a name JAX gives one of its own variables
        return jnp.sum(jnp.sin(c) * params["w"] + c)

    args = (jnp.ones(3), {"w": jnp.ones(3)})
    g = jaxlab.jaxpr_graph(f, *args)
    text = g.to_text()
    assert re.search(r"^\{ lambda ; c:f32\[3\] params\['w'\]:f32\[3\]\. let", text, re.M)
    # JAX's own "c" made distinct, not confused with the argument.
    assert "c_:f32[3] = sin c\n" in text and "= mul c_ params['w']\n" in text
    assert jaxpr_text(g.jaxpr).text == text  # the names JAX kept on the program agree
    # Run as JAX's text would be: the same program, variable for variable.
    jax_text = str(jax.make_jaxpr(f)(*args))
    assert len(text.split()) == len(jax_text.split())


def test_the_legend_lists_exactly_the_marks_drawn():
    from jaxlab.widgets import GraphExplorer

    def marks(w):
        return [entry["mark"] for entry in w.legend]

    w = GraphExplorer(jaxlab.jaxpr_graph(rnn, *_rnn_args()))
    # Not a gradient: no forward or backward colour; the scan closed, no carry yet.
    assert marks(w) == ["input", "output", "closed", "upstream", "downstream"]
    (scan,) = [c["id"] for c in w.model["clusters"] if c["primitive"] == "scan"]
    w.toggle(scan)
    assert marks(w) == ["input", "output", "port", "carry", "upstream", "downstream"]
    assert {e["kind"] for e in w.view["edges"]} >= {m.CARRY}

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    g = jaxlab.jaxpr_graph(loss, jnp.ones((3, 2)), jnp.ones((4, 3)), grad=True, values=True)
    w = GraphExplorer(g)
    drawn = [g.node(k) for k in w.view["nodes"] if not k.startswith("cluster:")]
    assert not any(n.unused for n in drawn)  # the forward pass is live: no "unused" entry
    assert marks(w) == [
        "forward",
        "backward",
        "input",
        "output",
        "seed",
        "residual",
        "fixed",
        "seeds",
        "upstream",
        "downstream",
    ]
    # Each entry's words say what the mark is; the saved view keeps them.
    texts = {entry["mark"]: entry["text"] for entry in w.legend}
    assert texts["fixed"].startswith("faded") and texts["seed"].startswith("seed ∂f/∂f")
    assert texts["backward"] in w.static_bundle()["text/html"]


def test_the_dependency_highlight_has_colours_of_its_own():
    from pathlib import Path

    import jaxlab.widgets

    css = (Path(jaxlab.widgets.__file__).parent / "static" / "graph_explorer.css").read_text()
    colour = dict(re.findall(r"--ge-(\w+): (#[0-9a-f]{6});", css))
    highlight = {colour["upstream"], colour["downstream"]}
    assert len(highlight) == 2 and not highlight & {colour["forward"], colour["backward"]}
    for side in ("upstream", "downstream"):
        assert re.search(rf"\.jaxlab-ge-{side} rect \{{ stroke: var\(--ge-{side}\)", css)


# ------------------------------------------------- top-level inputs: the caller's names


def _per_device(block):
    everyone = jax.lax.all_gather(block, "atoms", tiled=True)
    return block * jnp.sum(everyone)


@jax.jit
def _scaled(a):
    return jnp.sin(a) * 2.0


def _input_labels(g):
    return [n.label for n in _io(g, m.INPUT)]


def test_a_shard_map_programs_input_is_named_as_the_call_line_passes_it(ip):
    """`%jaxpr forces_sharded(sharded)` draws its input `sharded`; `block`, the per-device
    slice's name inside the shard_map'd function, is not a top-level input (in the drawing
    and in the GraphExplorer's first view)."""
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxlab.graph.build import call_graph
    from jaxlab.program import parse_call

    mesh = Mesh(np.array(jax.devices()[:2]), ("atoms",))
    spec = P("atoms")
    ip.user_ns["forces_sharded"] = jax.jit(
        jax.shard_map(_per_device, mesh=mesh, in_specs=spec, out_specs=spec)
    )
    ip.user_ns["sharded"] = jax.device_put(jnp.ones((8, 3)), NamedSharding(mesh, spec))
    g = ip.run_line_magic("jaxpr", "-o forces_sharded(sharded)")
    assert _input_labels(g) == ["sharded"]
    assert any("shard_map" in c.label for c in g.clusters)
    call = parse_call("forces_sharded(sharded)", ip.user_ns)
    first = call_graph(call.fun, call.args, call.kwargs, explore=True, arg_names=call.arg_names)
    assert _input_labels(first) == ["sharded"]


def test_a_jitted_functions_inputs_take_the_callers_names_not_its_parameters(ip):
    ip.user_ns.update(scaled=_scaled, x=jnp.ones(3), params={"w": jnp.ones(2)})
    assert _input_labels(ip.run_line_magic("jaxpr", "-o scaled(x)")) == ["x"]
    g = ip.run_line_magic("jaxpr", "-o scaled(params['w'])")
    assert _input_labels(g) == ["params['w']"]
    # An expression names nothing: the parameter's name stands in.
    ip.user_ns["jnp"] = jnp
    assert _input_labels(ip.run_line_magic("jaxpr", "-o scaled(jnp.ones(3))")) == ["a"]
    # A pytree argument: the caller's name, then each leaf's path.
    ip.user_ns["tree_fun"] = jax.jit(lambda p, q=1.0: p["u"] * p["v"] + q)
    ip.user_ns["q0"] = jnp.float32(2.0)
    g = ip.run_line_magic("jaxpr", "-o tree_fun({'u': x, 'v': x}, q=q0)")
    assert _input_labels(g) == ["p['u']", "p['v']", "q0"]


def test_the_call_line_names_each_argument_or_nothing_when_unpacked():
    from jaxlab.program import parse_call

    ns = {"f": lambda *a, **k: None, "x": 1, "m": {"w": 2}, "xs": [1, 2], "kw": {"b": 1}}
    call = parse_call("f(x, m['w'], x + 1, b=x)", ns)
    assert call.arg_names == ("x", "m['w']", None) and call.kwarg_names == {"b": "x"}
    assert parse_call("f(*xs)", ns).arg_names is None
    assert parse_call("f(x, **kw)", ns).arg_names is None
