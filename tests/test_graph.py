"""The Graph model: structure of real JAX programs, ids, collapsing, escaping, rendering."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

import jaxlab
from jaxlab.graph import model as m
from jaxlab.graph.render import DotMissing, DotTimeout, graph_mimebundle


def mlp_loss(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


def mlp_params(layers, width=4):
    keys = jax.random.split(jax.random.key(0), layers)
    return [(jax.random.normal(k, (width, width)), jnp.zeros(width)) for k in keys]


@jax.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


softplus.defjvp(lambda p, t: (softplus(p[0]), jax.nn.sigmoid(p[0]) * t[0]))


def nested(x):
    y = jax.jit(lambda a: jnp.sin(a) * 2.0)(x)
    z = lax.cond(x.sum() > 0, lambda a: a + 1.0, lambda a: a - 1.0, y)
    c, ys = lax.scan(lambda c, xi: (c + xi, c * xi), 0.0, z)
    w = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0), (0, c))
    return w[1] + ys.sum()


def edges_by_id(graph):
    return {(e.src, e.dst) for e in graph.edges}


def test_scalar_function_nodes_edges_and_types():
    g = jaxlab.jaxpr_graph(lambda x: jnp.sin(x) * 2.0, 1.5)
    assert [n.primitive for n in g.equations] == ["sin", "mul"]
    assert [n.kind for n in g.nodes] == [m.INPUT, m.EQUATION, m.EQUATION, m.OUTPUT]
    sin, mul = g.equations
    assert sin.types == ("f32[]",) and sin.dtype == "f32"
    assert mul.label == "mul ·, 2.0"  # the literal operand folded into the label
    assert edges_by_id(g) == {("in0", sin.id), (sin.id, mul.id), (mul.id, "out0")}
    assert g.n_equations == 2 and g.clusters == ()


def test_float32_literals_print_at_their_own_precision():
    g = jaxlab.jaxpr_graph(lambda x: x * 1.1 + np.float32(2.5), jnp.ones(3, jnp.float32))
    assert [n.label for n in g.equations] == ["mul x, 1.1", "add ·, 2.5"]  # x: the argument


def test_input_names_follow_the_signature_and_pytree_paths():
    g = jaxlab.jaxpr_graph(lambda params, x: params["w"] * x, {"w": 2.0}, x=3.0)
    assert [n.label for n in g.nodes if n.kind == m.INPUT] == ["params['w']", "x"]


def test_source_line_points_at_the_users_code():
    def scaled(x):
        return jnp.cos(x) + 1.0  # the line the nodes must name

    g = jaxlab.jaxpr_graph(scaled, 0.5)
    line = scaled.__code__.co_firstlineno + 1
    assert all(n.source == f"test_graph.py:{line} (scaled)" for n in g.equations)


def test_nested_programs_become_clusters():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    labels = {c.label for c in g.clusters}
    # `x.sum() > 0` is a boolean: its branches read false (index 0) and true (index 1).
    assert {"jit <lambda>", "cond (2 branches)", "false", "true", "scan ×3"} <= labels
    assert {"while", "while condition", "while body"} <= labels
    assert g.cluster_primitives() == {"jit": 1, "cond": 3, "scan": 1, "while": 3}
    # Equations inside a cluster point at it; branch clusters sit inside the cond cluster.
    cond = next(c for c in g.clusters if c.label.startswith("cond"))
    branches = [c for c in g.clusters if c.parent == cond.id]
    assert len(branches) == 2 and all(c.depth == cond.depth == 1 for c in branches)
    inner = {n.primitive for n in g.equations if n.cluster in {b.id for b in branches}}
    assert inner == {"add", "sub"}
    # Data flows from the jit's result into both branches' parameters.
    jit = next(c for c in g.clusters if c.primitive == "jit")
    for b in branches:
        assert (f"{jit.id}/out0", f"{b.id}/in0") in edges_by_id(g)
    # The scan's carry result feeds the while loop's carry in both of its programs.
    scan = next(c for c in g.clusters if c.primitive == "scan")
    whiles = [c for c in g.clusters if c.label in ("while condition", "while body")]
    for w in whiles:
        assert (f"{scan.id}/out0", f"{w.id}/in1") in edges_by_id(g)


def _count_equations(jaxpr):
    return sum(
        1 + sum(_count_equations(sub) for sub in jax.extend.core.jaxprs_in_params(e.params))
        for e in jaxpr.eqns
    )


def test_equation_count_includes_nested_programs():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    expected = _count_equations(jax.make_jaxpr(nested)(jnp.ones(3)).jaxpr)
    assert g.n_equations == expected
    # Fully drawn: every equation is a node, or a cluster when it holds programs.
    holders = {c.id for c in g.clusters if re.search(r"(^|/)e\d+$", c.id)}
    assert len(g.equations) + len(holders) == expected


def test_grad_of_mlp_marks_forward_and_backward():
    params, x = mlp_params(3), jnp.ones((2, 4))
    g = jaxlab.jaxpr_graph(mlp_loss, params, x, grad=True)
    phases = {n.phase for n in g.equations}
    assert phases == {m.FORWARD, m.BACKWARD}
    # Forward has the model's tanh; backward has the transposed matmuls.
    assert all(n.phase == m.FORWARD for n in g.equations if n.primitive == "tanh")
    back = [n for n in g.equations if n.phase == m.BACKWARD]
    assert sum(n.primitive == "dot_general" for n in back) >= 3
    # Every backward equation comes after the forward ones it uses: no edge runs back
    # (but the one from the function's value to its seed, drawn below it).
    index = {n.id: i for i, n in enumerate(g.nodes)}
    assert all(index[e.src] < index[e.dst] for e in g.edges if e.kind != m.SEEDS)
    # The outputs are the gradient leaves: one per parameter array.
    assert sum(n.kind == m.OUTPUT for n in g.nodes) == 6


def test_custom_jvp_under_grad_keeps_its_structure():
    def f(x):
        return jnp.sum(softplus(x) * x)

    g = jaxlab.jaxpr_graph(f, jnp.ones(3))
    (cj,) = [c for c in g.clusters if c.primitive == "custom_jvp_call"]
    assert cj.label.startswith("custom_jvp")
    assert {n.primitive for n in g.equations if n.cluster == cj.id} >= {"exp", "log1p"}
    gg = jaxlab.jaxpr_graph(f, jnp.ones(3), grad=True)
    # Under grad JAX uses the custom rule: its sigmoid (logistic) shows in the program.
    assert "logistic" in gg.primitives()


def test_vmap_batches_the_primitives():
    g = jaxlab.jaxpr_graph(jax.vmap(lambda a: jnp.dot(a, a)), jnp.ones((5, 3)))
    assert g.primitives() == {"dot_general": 1}
    (node,) = g.equations
    assert node.types == ("f32[5]",)


def test_shard_map_and_pmap_on_two_cpu_devices():
    assert jax.device_count() >= 2
    mesh = jax.sharding.Mesh(jax.devices()[:2], ("i",))
    sm = jax.shard_map(
        lambda a: lax.psum(jnp.sin(a).sum(), "i"), mesh=mesh, in_specs=P("i"), out_specs=P()
    )
    g = jaxlab.jaxpr_graph(sm, jnp.ones(4))
    (c,) = g.clusters
    assert c.primitive == "shard_map" and c.label == "shard_map i=2"
    assert {n.primitive for n in g.equations if n.cluster == c.id} >= {"sin", "reduce_sum"}
    # The per-device block sees half the array.
    (sin,) = [n for n in g.equations if n.primitive == "sin"]
    assert sin.types == ("f32[2]",)

    pm = jax.pmap(lambda a: jnp.cos(a) * 2.0, axis_name="d")
    g = jaxlab.jaxpr_graph(pm, jnp.ones((2, 3)))
    prims = g.cluster_primitives()
    assert "xla_pmap" in prims or "shard_map" in prims
    assert "cos" in g.primitives()


def test_depth_collapses_deeper_programs_into_summaries():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3), depth=0)
    assert g.clusters == ()
    collapsed = {n.primitive: n for n in g.nodes if n.kind == m.COLLAPSED}
    assert set(collapsed) == {"jit", "cond", "scan", "while"}
    assert collapsed["scan"].label == "scan ×3"
    assert collapsed["scan"].n_equations == 5
    assert "mul×1" in collapsed["scan"].summary and "add×1" in collapsed["scan"].summary
    assert g.n_equations == jaxlab.jaxpr_graph(nested, jnp.ones(3)).n_equations
    assert any("depth 0" in note for note in g.notes)
    one = jaxlab.jaxpr_graph(nested, jnp.ones(3), depth=1)
    assert {c.primitive for c in one.clusters} == {"jit", "cond", "scan", "while"}
    assert all(c.depth == 1 for c in one.clusters if c.primitive in ("jit", "scan"))


def test_budget_collapses_the_largest_nested_programs_and_says_so():
    def big(x):
        x = jax.jit(lambda a: sum(jnp.sin(a + i) for i in range(60)))(x)
        return jax.jit(lambda a: a * 2.0)(x)

    full = jaxlab.jaxpr_graph(big, 1.0)
    assert len(full.nodes) > 60
    small = jaxlab.jaxpr_graph(big, 1.0, budget=40)
    assert len(small.nodes) <= 40
    (c,) = [n for n in small.nodes if n.kind == m.COLLAPSED]
    assert c.n_equations > 100  # the big program went, the small one stayed open
    assert [cl.label for cl in small.clusters] == ["jit <lambda>"]
    assert any("collapsed to stay under 40 nodes" in note for note in small.notes)


def test_flat_programs_past_the_budget_are_grouped_into_segments():
    def deep(w, b, x):  # 60 layers sharing one weight: a long flat program, few inputs
        for _ in range(60):
            x = jnp.tanh(x @ w + b)
        return jnp.sum(x)

    w, b, x = jnp.eye(4), jnp.zeros(4), jnp.ones((2, 4))
    g = jaxlab.jaxpr_graph(deep, w, b, x, grad=True, budget=150)
    assert g.n_equations > 400 and len(g.nodes) <= 150
    segments = [n for n in g.nodes if n.kind == m.SEGMENT]
    assert segments and sum(n.n_equations for n in segments) + len(g.equations) == g.n_equations
    assert {n.phase for n in segments} == {m.FORWARD, m.BACKWARD}  # never mixed in one segment
    assert any("grouped into runs" in note for note in g.notes)


def test_dot_says_what_its_colours_and_rows_mean():
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    plain = jaxlab.jaxpr_graph(loss, w, x).to_dot()
    grad = jaxlab.jaxpr_graph(loss, w, x, grad=True).to_dot()
    valued = jaxlab.jaxpr_graph(loss, w, x, grad=True, values=True).to_dot()
    assert "forward pass" not in plain and "adjoint" not in plain
    # No adjoint row to explain without values (add_any's label says "adjoints summed").
    assert "forward pass" in grad and "backward pass" in grad and "∂ adjoint" not in grad
    assert "∂ adjoint" in valued and "μ mean [min, max]" in valued
    # a cond branch of one equation is "1 eqn"
    one = jaxlab.jaxpr_graph(lambda a: lax.cond(a > 0, jnp.sin, jnp.cos, a), 1.0).to_dot()
    assert "1 eqn<" in one and "1 eqns" not in one


def test_segments_name_their_primitives_once():
    def deep(x):
        for _ in range(40):
            x = jnp.sin(x) * 1.5
        return x

    g = jaxlab.jaxpr_graph(deep, jnp.ones(3), budget=20)
    segment = next(n for n in g.nodes if n.kind == m.SEGMENT)
    dot = g.to_dot()
    line = next(row for row in dot.splitlines() if f'id="node_{segment.id}"' in row)
    assert f"{segment.n_equations} equations" in line and "eqns:" not in line
    assert "mul×" in line and "sin×" in line


def test_long_chains_are_grouped_to_stay_readable():
    def chain(x):
        for _ in range(300):
            x = jnp.sin(x)
        return x

    g = jaxlab.jaxpr_graph(chain, 1.0)  # 300 nodes fit the budget, but 300 rows do not
    segments = [n for n in g.nodes if n.kind == m.SEGMENT]
    assert len(segments) <= 160 and sum(n.n_equations for n in segments) == 300
    assert any("about 160 rows" in note for note in g.notes)
    assert not any(n.kind == m.SEGMENT for n in jaxlab.jaxpr_graph(chain, 1.0, budget=1000).nodes)


def test_dot_is_deterministic_across_traces():
    a = jaxlab.jaxpr_graph(nested, jnp.ones(3)).to_dot()
    b = jaxlab.jaxpr_graph(nested, jnp.ones(3)).to_dot()
    assert a == b
    assert not re.search(r"0x[0-9a-f]{6,}", a)  # no addresses


def test_user_strings_are_escaped_in_dot_and_svg():
    def evil(x):
        return jax.jit(lambda a: a + 1.0)(next(iter(x.values())))

    evil.__name__ = evil.__qualname__ = "<script>alert(1)</script>"
    g = jaxlab.jaxpr_graph(evil, {'"><script>': 1.0})
    assert g.title == "<script>alert(1)</script>"
    assert g.nodes[0].label == """x['"><script>']"""
    dot = g.to_dot()
    assert "<script>" not in dot and "&lt;script&gt;" in dot
    svg = g.to_svg()
    assert "<script" not in svg and "&lt;script&gt;" in svg
    # JSON is data for the browser, which escapes it there: the name round-trips intact.
    import json

    assert json.loads(g.to_json())["title"] == "<script>alert(1)</script>"


def test_svg_has_every_node_and_cluster():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    svg = g.to_svg()
    assert svg.startswith("<svg")
    for n in g.nodes:
        assert f'id="node_{n.id}"' in svg
    for c in g.clusters:
        assert f'id="clusterbox_{c.id}"' in svg


def test_without_dot_the_text_view_is_shown_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a real PATH without Graphviz on it
    g = jaxlab.jaxpr_graph(lambda x: jnp.sin(x), 1.0)
    with pytest.raises(DotMissing, match="apt-get install graphviz"):
        g.to_svg()
    bundle = graph_mimebundle(g)
    assert "image/svg+xml" not in bundle
    assert "apt-get install graphviz" in bundle["text/plain"]
    assert "sin" in bundle["text/plain"] and "sin" in bundle["text/html"]


def test_a_layout_past_its_time_limit_falls_back_to_the_text_view():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    with pytest.raises(DotTimeout, match="longer than"):
        g.to_svg(timeout=1e-4)  # no real layout finishes in 0.1 ms
    bundle = graph_mimebundle(g, timeout=1e-4)
    assert "image/svg+xml" not in bundle
    assert "took longer than" in bundle["text/plain"] and "scan" in bundle["text/plain"]


class _Clock:
    """A clock that moves 1 s a reading, and a CPU reading that is a given share of it: what
    the process did is decided by the test, not by how busy the machine is."""

    def __init__(self, cpu_share):
        self.now, self.cpu_share = 0.0, cpu_share

    def __call__(self):
        self.now += 1.0
        return self.now

    def cpu(self, pid):
        return self.cpu_share * self.now


def _budgeted(monkeypatch, cpu_share, cpu_s=20.0, wall_factor=6):
    from jaxlab.graph import budgeted
    from jaxlab.graph.budgeted import Overrun, run_budgeted

    monkeypatch.setattr(budgeted, "POLL_S", 0.002)  # the fake clock needs no real waits
    clock = _Clock(cpu_share)
    with pytest.raises(Overrun) as e:
        run_budgeted(
            ["sleep", "600"], b"", cpu_s, wall_factor, clock=clock, cpu_of=clock.cpu
        )  # stays alive until killed
    return e.value


def test_a_dot_that_computes_nothing_is_given_up_at_the_explorers_limit(monkeypatch):
    from jaxlab.graph.render import DOT_TIMEOUT_S
    from jaxlab.widgets.graph_dot import LAYOUT_TIMEOUT_S as explorer_limit

    assert explorer_limit == DOT_TIMEOUT_S
    hung = _budgeted(monkeypatch, 0.0, cpu_s=DOT_TIMEOUT_S)  # stopped: no CPU at all
    assert hung.limit == "hung" and DOT_TIMEOUT_S <= hung.spent_s <= DOT_TIMEOUT_S + 1
    assert hung.cpu_used_s == 0.0


def test_dot_is_budgeted_cpu_time_not_wall_time(monkeypatch):
    # Starved on a busy machine (10% of a core): not hung, stopped only by its CPU budget
    # or, past wall_factor x the budget, by the wall clock.
    starved = _budgeted(monkeypatch, 0.10, cpu_s=20.0, wall_factor=6)
    assert starved.limit == "wall" and starved.spent_s >= 120
    slow = _budgeted(monkeypatch, 0.5, cpu_s=20.0)  # computing: stopped by its CPU budget
    assert slow.limit == "cpu" and slow.cpu_used_s == 20.0 and slow.spent_s < 120
    # A real process: what it writes comes back; one that exits early is never killed.
    from jaxlab.graph.budgeted import run_budgeted

    done = run_budgeted(["cat"], b"through stdin", 5)
    assert done.stdout == b"through stdin" and done.returncode == 0


def test_a_hung_dot_falls_back_to_the_text_view_saying_so(monkeypatch, tmp_path):
    import os

    from jaxlab.graph import render

    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\nexec sleep 600\n")  # a dot that never answers
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    bundle = render.graph_mimebundle(g, timeout=0.3)  # a short limit: the test's own
    assert "made no progress" in bundle["text/plain"] and "image/svg+xml" not in bundle


def test_model_round_trips_to_json():
    import json

    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    data = json.loads(g.to_json())
    assert len(data["nodes"]) == len(g.nodes) and len(data["clusters"]) == len(g.clusters)
    assert data["n_equations"] == g.n_equations


def test_var_node_maps_every_equation_output():
    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    ids = {n.id for n in g.nodes}
    assert set(g.var_node.values()) <= ids
    for eqn in g.jaxpr.jaxpr.eqns:
        for v in eqn.outvars:
            if type(v).__name__ != "DropVar":
                assert v in g.var_node


# --------------------------------------------------------------------------- friendly labels


def test_matmul_reads_x_at_w_with_the_raw_form_kept():
    def layer(x, w):
        return jnp.sum(jnp.tanh(x @ w))

    g = jaxlab.jaxpr_graph(layer, jnp.ones((2, 3)), jnp.ones((3, 4)))
    (dot,) = [n for n in g.equations if n.primitive == "dot_general"]
    assert dot.label == "x @ w"
    assert dot.raw.startswith("dot_general dimension_numbers=(((1,), (0,)), ((), ()))")
    assert "dimension_numbers" not in dot.params  # the raw form is on hover, not on the node
    (total,) = [n for n in g.equations if n.primitive == "reduce_sum"]
    assert total.label == "sum over axes 0,1" and total.raw == "reduce_sum axes=(0, 1)"


def test_gradient_matmuls_read_as_transposed_products():
    g = jaxlab.jaxpr_graph(
        lambda w, x: jnp.sum(x @ w), jnp.ones((3, 4)), jnp.ones((2, 3)), grad=True
    )
    labels = {n.label for n in g.equations if n.primitive == "dot_general"}
    assert "x @ w" in labels
    # JAX computes ∂/∂w = xᵀ @ g as (gᵀ @ x)ᵀ: the cotangent transposed, times x.
    assert "·ᵀ @ x" in labels, labels
    assert "·ᵀ" in {n.label for n in g.equations if n.primitive == "transpose"}


def test_batched_dot_general_reads_as_a_product_per_batch_axis():
    f = jax.vmap(lambda a, b: a @ b)
    g = jaxlab.jaxpr_graph(f, jnp.ones((5, 2, 3)), jnp.ones((5, 3, 4)))
    (dot,) = g.equations
    # Not mistaken for a plain matrix product; the raw parameters only on hover.
    assert dot.label == "a @ b per axis 0" and dot.params == ""
    assert dot.raw.startswith("dot_general dimension_numbers=(((2,), (1,)), ((0,), (0,)))")
    # A contraction that is no product is said in words, axes and all.
    g = jaxlab.jaxpr_graph(
        lambda a, b: jnp.tensordot(a, b, ((0, 1), (1, 0))), *[jnp.ones((2, 3)), jnp.ones((3, 2))]
    )
    (dot,) = g.equations
    assert dot.label == "a·b over axes 0,1·1,0" and "dimension_numbers" not in dot.params


def test_backward_primitives_read_as_maths():
    def f(x):
        h = jnp.tanh(x)
        return jnp.sum(h.astype(jnp.float16).astype(jnp.float32) + h)

    g = jaxlab.jaxpr_graph(f, jnp.ones((32, 16)), grad=True)
    labels = {n.raw.split(" ")[0]: n.label for n in g.equations}
    assert labels["add_any"] == "adjoints summed"
    assert labels["convert_element_type"] in ("as f16", "as f32")
    assert labels["broadcast_in_dim"] == "broadcast to f32[32,16]"
    if "one_minus_square" in labels:  # JAX 0.12 differentiates tanh with it
        assert labels["one_minus_square"] == "1 - h²"  # h = jnp.tanh(x), named by its assignment
    assert not any("dimension_numbers" in n.params or "new_dtype" in n.params for n in g.equations)
    zeros = jaxlab.jaxpr_graph(lambda x: jnp.zeros((3, 2)) + x, 1.0)
    assert "zeros f32[3,2]" in {n.label for n in zeros.equations}


def test_integer_pow_is_written_as_a_power_not_y_equals():
    g = jaxlab.jaxpr_graph(lambda y: y**2, 3.0)
    (pow_,) = g.equations
    assert pow_.label == "y ** 2" and pow_.raw == "integer_pow y=2"


def test_boolean_cond_branches_read_true_and_false():
    g = jaxlab.jaxpr_graph(lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x), 1.0, 2.0)
    labels = {c.id: c.label for c in g.clusters}
    (cond,) = [c for c in g.clusters if c.primitive == "cond" and c.parent is None]
    assert labels[cond.id + "/0"] == "false" and labels[cond.id + "/1"] == "true"
    # lax.cond(pred, true_fun, false_fun): the true branch holds sin.
    prims = {n.primitive for n in g.equations if n.cluster == cond.id + "/1"}
    assert prims == {"sin"}
    # An integer index (lax.switch) keeps branch numbers.
    g = jaxlab.jaxpr_graph(lambda i, x: lax.switch(i, [jnp.sin, jnp.cos], x), 1, 2.0)
    assert {c.label for c in g.clusters if c.parent is not None} == {"branch 0", "branch 1"}


def test_scan_and_while_carries_are_loop_back_edges():
    def f(x, w):
        c, _ = lax.scan(lambda c, xi: (c * w + xi, None), x, jnp.ones(3))
        return lax.while_loop(lambda c: c < 100.0, lambda c: c * 2.0, c)

    g = jaxlab.jaxpr_graph(f, 1.0, 2.0)
    carries = [e for e in g.edges if e.kind == m.CARRY]
    (scan,) = [c for c in g.clusters if c.primitive == "scan"]
    (body,) = [c for c in g.clusters if c.label == "while body"]
    by_cluster = {g.node(e.dst).cluster for e in carries}
    assert by_cluster == {scan.id, body.id}
    for e in carries:
        src, dst = g.node(e.src), g.node(e.dst)
        assert dst.kind == m.PORT and src.cluster == dst.cluster
    # The scan's carry comes back from the add (c * w + xi), not the mul.
    (scan_carry,) = [e for e in carries if g.node(e.dst).cluster == scan.id]
    assert g.node(scan_carry.src).primitive == "add"


def test_equations_that_reach_no_output_are_marked_unused():
    def f(x):
        _ = jnp.sin(x) * 3.0  # computed, never used
        return jnp.cos(x)

    g = jaxlab.jaxpr_graph(f, 1.0)
    unused = {n.primitive for n in g.equations if n.unused}
    assert unused == {"sin", "mul"}
    assert not g.node(next(n.id for n in g.equations if n.primitive == "cos")).unused


def test_a_gradients_forward_value_is_live_and_its_seed_sits_by_it():
    def loss(w, x):
        _ = jnp.sin(w).sum()  # truly unused: still marked
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    g = jaxlab.jaxpr_graph(loss, w, x, grad=True, values=True)
    forward = [n for n in g.equations if n.phase == m.FORWARD]
    unused = [n.primitive for n in forward if n.unused]
    assert sorted(unused) == ["cos", "reduce_sum", "sin"]  # sin(w).sum() and its jvp's cos
    live = [n.primitive for n in forward if not n.unused]
    assert {"tanh", "integer_pow", "reduce_sum", "div"} <= set(live)
    (seeds,) = [e for e in g.edges if e.kind == m.SEEDS]
    value, seed = g.node(seeds.src), g.node(seeds.dst)
    assert seed.role == m.SEED and value.phase == m.FORWARD and not value.unused
    # The node the seed differentiates holds the function's value, as JAX computes it.
    assert value.value.scalar == pytest.approx(float(loss(w, x)), rel=1e-6)
    # Drawn: the seed below the value it differentiates (an edge dot ranks by).
    dot = g.to_dot()
    assert f'"{value.id}" -> "{seed.id}" [style=dotted' in dot


# --------------------------------------------------------------------------- GraphExplorer


def test_explorer_opens_clusters_one_at_a_time_and_lays_out_what_is_visible():
    from jaxlab.widgets import GraphExplorer
    from jaxlab.widgets.graph_explorer import visible

    g = jaxlab.jaxpr_graph(nested, jnp.ones(3))
    top = [c for c in g.clusters if c.parent is None]
    view = visible(g, [])
    # Closed: each top-level cluster is one box; nothing inside is drawn.
    assert sorted(view["boxes"]) == sorted("cluster:" + c.id for c in top)
    assert all(g.node(n).cluster is None for n in view["nodes"])
    w = GraphExplorer(g)
    assert set(w.view["nodes"]) == set(view["nodes"]) | set(view["boxes"])
    for x, y, width, height in w.view["nodes"].values():
        assert width > 0 and height > 0 and x >= 0 and y >= 0
    ends = {(e["src"], e["dst"]) for e in w.view["edges"]}
    assert ends == {tuple(e) for e, _ in view["edges"]}
    # Open the cond: its branches appear as boxes, its index port as a node, in a frame.
    (cond,) = [c for c in top if c.primitive == "cond"]
    w.toggle(cond.id)
    assert w.opened == [cond.id] and w.view["frames"] == [cond.id]
    assert {f"cluster:{cond.id}/0", f"cluster:{cond.id}/1"} <= set(w.view["nodes"])
    assert f"{cond.id}/index" in w.view["nodes"]
    w.toggle(f"{cond.id}/1")
    inner = {n.id for n in g.nodes if n.cluster == f"{cond.id}/1"}
    assert inner <= set(w.view["nodes"])
    # Closing the cond closes what was open inside it.
    w.toggle(cond.id)
    assert w.opened == [] and set(w.view["nodes"]) == set(view["nodes"]) | set(view["boxes"])
    w.toggle("no such cluster")
    assert w.opened == []


def test_explorer_sends_node_records_and_escapes_nothing_it_does_not_draw():
    from jaxlab.widgets import GraphExplorer

    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w))

    g = jaxlab.jaxpr_graph(f, jnp.ones((2, 3)), jnp.ones((3, 4)), grad=True, values=True)
    w = GraphExplorer(g)
    records = {n["id"]: n for n in w.model["nodes"]}
    (dot,) = [
        n
        for n in records.values()
        if n["raw"].startswith("dot_general") and n["phase"] == m.FORWARD
    ]
    assert dot["label"] == "x @ w" and dot["value"].startswith("μ")
    assert records["in1"]["role"] == m.FIXED and records["in1"]["adjoint"] is None
    # The saved notebook's view: the static SVG, inline (tooltips kept), no script.
    bundle = w.static_bundle()
    assert "<svg" in bundle["text/html"] and "<script" not in bundle["text/html"]
    assert "<img" not in bundle["text/html"]


def test_explorer_static_twin_draws_the_last_view_escaped():
    from jaxlab.widgets import GraphExplorer

    def f(p):
        return jnp.sum(jnp.sin(p["<b>&"]))

    w = GraphExplorer(jaxlab.jaxpr_graph(f, {"<b>&": jnp.ones(3)}, grad=True, values=True))
    html = w.static_bundle()["text/html"]
    assert "p[&#x27;&lt;b&gt;&amp;&#x27;]" in html and "<b>&" not in html
    # One <g> per node of the view, at the positions the browser draws.
    assert html.count("<rect ") == len(w.view["nodes"])
    assert 'font-size="14"' in html and 'font-size="9"' not in html


def test_explorer_static_twin_keeps_the_live_views_styling():
    import re

    from jaxlab.widgets import GraphExplorer

    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = GraphExplorer(jaxlab.jaxpr_graph(f, jnp.ones((2, 3)), jnp.ones((3, 4)), grad=True))
    html = w.static_bundle()["text/html"]
    # The title above the drawing, then the legend, then the SVG.
    assert html.index(w.model["title"]) < html.index("jaxlab-ge-legend") < html.index("<svg")
    # Every edge ends in the arrowhead the live view draws.
    paths = re.findall(r"<path d=\"M[0-9][^>]*stroke-opacity[^>]*>", html)
    assert paths and all('marker-end="url(#jaxlab-ge-arrow)"' in p for p in paths)
    assert '<marker id="jaxlab-ge-arrow"' in html
    # Boxes wear the live view's colours: inputs green, outputs amber, both passes.
    boxes = {k: box for k, box in w.view["nodes"].items()}
    assert len(re.findall(r'<rect [^>]*stroke="#3a9a3a"', html)) == sum(
        1 for k in boxes if k.startswith("in")
    )
    assert re.search(r'<rect [^>]*stroke="#c89400"', html)
    kinds = {n["phase"] for n in w.model["nodes"]} | {None}
    if "forward" in kinds:
        assert 'stroke="#3b6fb6"' in html
    assert 'stroke="#c04646"' in html  # the backward pass


def test_explorer_groups_named_scopes_forward_and_backward_apart():
    from jaxlab.widgets import GraphExplorer

    def f(x, w):
        with jax.named_scope("layer1"):
            h = jnp.tanh(x @ w)
        with jax.named_scope("head"):
            return jnp.sum(h**2)

    g = jaxlab.jaxpr_graph(f, jnp.ones((2, 3)), jnp.ones((3, 4)), grad=True)
    scopes = {n.id: n.scope for n in g.equations}
    assert set(scopes.values()) == {"layer1", "head"}  # transform wrappers stripped
    w = GraphExplorer(g)
    # Each scope is one box, forward and backward apart; the backward boxes mirror the
    # forward ones in reverse (graph/groups.py).
    boxes = {c["label"]: c for c in w.model["clusters"]}
    assert list(boxes) == ["layer1", "head", "∂ head", "∂ layer1"]
    seg = {n.id: n for n in g.rebuild(frozenset()).nodes if n.kind == m.SEGMENT}
    assert [seg[boxes[k]["id"]].phase for k in boxes] == [m.FORWARD] * 2 + [m.BACKWARD] * 2
    forward_layer1 = [n for n in g.equations if n.scope == "layer1" and n.phase == m.FORWARD]
    assert boxes["layer1"]["n_equations"] == len(forward_layer1)
    # Closed, each scope is one box; opened, its equations are drawn.
    assert set(w.view["nodes"]) >= {"cluster:" + c["id"] for c in boxes.values()}
    w.toggle(boxes["layer1"]["id"])
    inside = [n for n in w.model["nodes"] if n["kind"] == m.EQUATION]
    assert sorted(n["primitive"] for n in inside) == sorted(n.primitive for n in forward_layer1)
    assert w.view["frames"] == [boxes["layer1"]["id"]]
