"""The jaxpr interpreter and the graph's value/adjoint annotation.

An adjoint annotation is checked the way the issue asks: rewrite the program with the
intermediate as an input and take ``jax.grad`` with respect to it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import jaxpr_graph
from jaxlab._jax_compat import bind_equation
from jaxlab.graph import interpret
from jaxlab.graph import model as m
from jaxlab.graph.annotate import summarise


def _forward(graph, primitive):
    return [n for n in graph.equations if n.primitive == primitive and n.phase == m.FORWARD]


# --------------------------------------------------------------------------- interpreter


def test_bind_equation_applies_one_equation():
    closed = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
    (out,) = bind_equation(closed.eqns[0], [jnp.float32(0.5)])
    assert float(out) == pytest.approx(np.sin(0.5))
    closed = jax.make_jaxpr(lambda x: jax.jit(jnp.cos)(x))(1.0)
    (out,) = bind_equation(closed.eqns[0], [jnp.float32(0.5)])  # a call primitive
    assert float(out) == pytest.approx(np.cos(0.5))


def test_evaluate_keeps_every_value_and_recurses_into_jit():
    def f(x):
        return jax.jit(lambda y: jnp.tanh(y) * 3.0)(x) + jnp.exp(x)

    x = jnp.array([0.1, 0.5])
    ev = interpret.evaluate(jax.make_jaxpr(f)(x), [x])
    prims = {s.node_id: s.eqn.primitive.name for s in ev.steps}
    assert prims["e0/e0"] == "tanh" and prims["e0/e1"] == "mul"
    np.testing.assert_allclose(ev.values[ev.node_slots["e0/e0"]], jnp.tanh(x))
    np.testing.assert_allclose(ev.values[ev.node_slots["e0/out0"]], 3 * jnp.tanh(x))
    np.testing.assert_allclose(ev.values[ev.outputs[0]], f(x), rtol=1e-6)
    assert ev.summarised == []


def test_evaluate_summarises_loops_and_follows_the_taken_branch():
    def f(x):
        s = jax.lax.fori_loop(0, 3, lambda i, c: c * x, x)
        return jax.lax.cond(x > 0, jnp.sin, jnp.cos, s)

    ev = interpret.evaluate(jax.make_jaxpr(f)(2.0), [2.0])
    loops = [s for s in ev.steps if s.eqn.primitive.name in ("scan", "while")]
    assert len(loops) == 1 and loops[0].summarised
    taken = [s for s in ev.steps if s.node_id.endswith("/1/e0")]  # branch 1: sin
    assert [s.eqn.primitive.name for s in taken] == ["sin"]
    assert not [s for s in ev.steps if s.node_id.endswith("/0/e0")]  # cos never ran
    assert float(ev.values[ev.outputs[0]]) == pytest.approx(np.sin(16.0), rel=1e-5)


def test_adjoints_of_intermediates_equal_grad_of_rewritten_program():
    def f(x):
        s = jnp.sin(x)
        return jnp.sum(s * x + jnp.exp(s))

    def rewritten(x, s):  # the intermediate s as an input
        return jnp.sum(s * x + jnp.exp(s))

    x = jnp.array([0.3, -1.2, 2.0])
    adj = interpret.adjoints(jax.make_jaxpr(f)(x), [x])
    sin_step = next(s for s in adj.evaluation.steps if s.eqn.primitive.name == "sin")
    expected = jax.grad(rewritten, argnums=1)(x, jnp.sin(x))
    np.testing.assert_allclose(adj.adjoints[sin_step.outputs[0]], expected, rtol=1e-6)
    np.testing.assert_allclose(adj.adjoints[adj.evaluation.inputs[0]], jax.grad(f)(x), rtol=1e-6)


def test_adjoints_respect_custom_rules():
    @jax.custom_jvp
    def halve_grad(x):
        return x

    halve_grad.defjvp(lambda primals, tangents: (primals[0], 0.5 * tangents[0]))

    def f(x):
        return jnp.sum(halve_grad(x) ** 2)

    x = jnp.array([1.0, 3.0])
    adj = interpret.adjoints(jax.make_jaxpr(f)(x), [x])
    np.testing.assert_allclose(adj.adjoints[adj.evaluation.inputs[0]], jax.grad(f)(x))
    np.testing.assert_allclose(jax.grad(f)(x), x)  # the custom rule halved 2x


# --------------------------------------------------------------------------- graphs


def test_value_annotation_matches_the_computation():
    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    x, w = jnp.ones((2, 3)), jnp.full((3, 4), 0.2)
    g = jaxpr_graph(f, x, w, values=True)
    (tanh,) = [n for n in g.equations if n.primitive == "tanh"]
    h = np.tanh(np.asarray(x @ w))
    assert tanh.value.shape == (2, 4)
    assert tanh.value.mean == pytest.approx(float(h.mean()), rel=1e-6)
    assert tanh.value.max == pytest.approx(float(h.max()), rel=1e-6)
    assert g.node("in0").value.shape == (2, 3)
    out = g.node("out0").value
    assert out.scalar == pytest.approx(float(f(x, w)), rel=1e-6)
    assert all(n.adjoint is None for n in g.nodes)  # values only without grad


def test_gradient_graph_adjoints_equal_grad_of_rewritten_program():
    def f(x):
        h = jnp.tanh(x * 2.0)
        return jnp.sum(h * jnp.sin(h))

    def rewritten(h):
        return jnp.sum(h * jnp.sin(h))

    x = jnp.array([0.2, -0.7, 1.5])
    g = jaxpr_graph(f, x, grad=True, values=True)
    (tanh,) = _forward(g, "tanh")
    h = jnp.tanh(x * 2.0)
    expected = jax.grad(rewritten)(h)
    assert tanh.adjoint is not None and tanh.value is not None
    assert tanh.adjoint.mean == pytest.approx(float(expected.mean()), rel=1e-5)
    assert tanh.adjoint.min == pytest.approx(float(expected.min()), rel=1e-5)
    assert tanh.adjoint.max == pytest.approx(float(expected.max()), rel=1e-5)
    assert tanh.value.mean == pytest.approx(float(h.mean()), rel=1e-6)
    # The input's adjoint is the gradient itself.
    grad = jax.grad(f)(x)
    assert g.node("in0").adjoint.mean == pytest.approx(float(grad.mean()), rel=1e-5)
    # Backward equations carry values (cotangents) but no adjoint.
    backward = [n for n in g.equations if n.phase == m.BACKWARD]
    assert backward and all(n.adjoint is None and n.value is not None for n in backward)


def test_scalar_intermediate_adjoint_micrograd_style():
    # L = (a*b + c) * f at a=2, b=-3, c=10, f=-2 (micrograd's example): dL/d(a*b+c) = f.
    def loss(a, b, c, f):
        e = a * b
        d = e + c
        return d * f

    g = jaxpr_graph(loss, 2.0, -3.0, 10.0, -2.0, grad=True, values=True)
    add = next(n for n in _forward(g, "add"))
    assert add.value.scalar == pytest.approx(4.0)
    assert add.adjoint.scalar == pytest.approx(-2.0)
    mul_e = next(n for n in _forward(g, "mul") if n.value.scalar == pytest.approx(-6.0))
    assert mul_e.adjoint.scalar == pytest.approx(-2.0)
    assert g.node("in0").adjoint.scalar == pytest.approx(6.0)  # dL/da = b * f


def test_residuals_are_forward_values_read_by_backward_equations():
    g = jaxpr_graph(lambda x: jnp.sum(jnp.sin(x) * x), jnp.ones(3), grad=True, values=True)
    residual = [n for n in g.nodes if n.residual]
    assert residual, "sin's derivative (cos) is kept for the backward pass"
    phase = {n.id: n.phase for n in g.nodes}
    for n in residual:
        assert n.phase == m.FORWARD
        assert any(e.src == n.id and phase[e.dst] == m.BACKWARD for e in g.edges)
    assert "cos" in {n.primitive for n in residual}


def test_shared_jit_program_annotates_each_call_site():
    inner = jax.jit(jnp.sin)

    def f(x):
        return inner(x) * inner(2.0 * x)

    g = jaxpr_graph(f, 0.5, grad=True, values=True)
    sins = sorted(n.value.scalar for n in _forward(g, "sin"))
    assert sins == pytest.approx(sorted([np.sin(0.5), np.sin(1.0)]), rel=1e-6)
    adjoints = sorted(n.adjoint.scalar for n in _forward(g, "sin"))
    assert adjoints == pytest.approx(sorted([np.sin(1.0), np.sin(0.5)]), rel=1e-6)


def test_mlp_hidden_layer_adjoint_equals_grad_wrt_that_layer():
    rng = np.random.default_rng(0)
    w1 = jnp.asarray(rng.normal(size=(3, 5)), jnp.float32)
    w2 = jnp.asarray(rng.normal(size=(5, 2)), jnp.float32)
    x = jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)

    def loss(w1, w2, x):
        h = jnp.tanh(x @ w1)
        return jnp.mean((h @ w2) ** 2)

    def from_hidden(h):
        return jnp.mean((h @ w2) ** 2)

    g = jaxpr_graph(loss, w1, w2, x, grad=True, values=True)
    (tanh,) = _forward(g, "tanh")
    expected = jax.grad(from_hidden)(jnp.tanh(x @ w1))
    assert tanh.adjoint.shape == (4, 5)
    assert tanh.adjoint.mean == pytest.approx(float(expected.mean()), rel=1e-4, abs=1e-7)
    assert tanh.adjoint.max == pytest.approx(float(expected.max()), rel=1e-5)


def test_summarise():
    s = summarise(jnp.array([1.0, 2.0, 3.0]))
    assert (s.shape, s.mean, s.min, s.max, s.scalar) == ((3,), 2.0, 1.0, 3.0, None)
    assert summarise(jnp.float32(2.5)).scalar == 2.5
    assert summarise(jax.random.key(0)) is None
    assert summarise("text") is None
    stacked = summarise(jnp.arange(6.0).reshape(3, 2), iterations=3)
    assert (stacked.iterations, stacked.shape, stacked.mean) == (3, (3, 2), 2.5)
    assert s.iterations is None


# ---------------------------------------------------------------- adjoints wherever defined
# Each program below is f(x) = sum(inner(x) ** 2) with inner(a) = sin(tanh(a)) * a wrapped
# differently. Every forward node that shows an adjoint is checked against jax.grad of the
# program rewritten from that node's value; the nodes without one must be the derivative
# factors JAX adds (the output does not depend on them), and the legend must count them.


@jax.custom_vjp
def _sin_vjp(a):
    return jnp.sin(a)


_sin_vjp.defvjp(lambda a: (jnp.sin(a), jnp.cos(a)), lambda cos, g: (cos * g,))


def _inner(a):
    return jnp.sin(jnp.tanh(a)) * a


_PROGRAMS = {
    "checkpoint": lambda x: jnp.sum(jax.checkpoint(_inner)(x) ** 2),
    "inner jit": lambda x: jnp.sum(jax.jit(_inner)(x) ** 2),
    "custom_vjp": lambda x: jnp.sum((_sin_vjp(jnp.tanh(x)) * x) ** 2),
}


def _expected_adjoints(x):
    """(primitive, adjoint) of each intermediate, by jax.grad of the rewritten program."""
    t = jnp.tanh(x)
    s = jnp.sin(t)
    p = s * x
    q = p**2
    return [
        ("tanh", jax.grad(lambda t: jnp.sum((jnp.sin(t) * x) ** 2))(t)),
        ("sin", jax.grad(lambda s: jnp.sum((s * x) ** 2))(s)),
        ("mul", jax.grad(lambda p: jnp.sum(p**2))(p)),
        ("integer_pow", jax.grad(jnp.sum)(q)),
        ("reduce_sum", jnp.float32(1.0)),
    ]


@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_adjoint_of_every_shown_node_equals_grad_wrt_that_intermediate(name):
    f = _PROGRAMS[name]
    x = jnp.array([0.3, -1.2, 0.7])
    g = jaxpr_graph(f, x, grad=True, values=True)
    forward = [n for n in g.equations if n.phase == m.FORWARD]
    shown = [n for n in forward if n.adjoint is not None]
    expected = _expected_adjoints(x)
    assert sorted(n.primitive for n in shown) == sorted(p for p, _ in expected)
    for primitive, adjoint in expected:
        (node,) = [n for n in shown if n.primitive == primitive]
        want = np.asarray(adjoint, np.float64).reshape(-1)
        got = node.adjoint
        assert got.mean == pytest.approx(float(want.mean()), rel=1e-5, abs=1e-6), primitive
        assert got.min == pytest.approx(float(want.min()), rel=1e-5, abs=1e-6), primitive
        assert got.max == pytest.approx(float(want.max()), rel=1e-5, abs=1e-6), primitive
    # The input's adjoint is the gradient.
    grad = np.asarray(jax.grad(f)(x))
    assert g.node("in0").adjoint.mean == pytest.approx(float(grad.mean()), rel=1e-5)
    # The rest are derivative factors (cos, 1 - tanh², 2·p), and the legend counts them.
    missing = [n for n in forward if n.adjoint is None]
    # (JAX 0.10 writes 1 - tanh² as sub and mul, 0.12 as one_minus_square.)
    factors = {"cos", "one_minus_square", "mul", "sub"}
    assert missing and {n.primitive for n in missing} <= factors
    (note,) = [s for s in g.notes if s.startswith("no adjoint")]
    assert note.startswith(f"no adjoint on {len(missing)} forward node")
    assert "derivative factor" in note


def test_custom_jvp_insides_get_adjoints_through_the_insides():
    # softplus is a custom_jvp (logaddexp): its inner log1p's adjoint is d out / d log1p.
    def f(x):
        return jnp.sum(jax.nn.softplus(x) * x)

    x = jnp.array([0.3, -1.2, 0.7])
    g = jaxpr_graph(f, x, grad=True, values=True)
    logs = [n for n in g.equations if n.primitive == "log1p" and n.phase == m.FORWARD]
    assert logs and all(n.adjoint is not None for n in logs)
    # softplus(x) = max(x, 0) + log1p(exp(-|x|)): d out / d log1p = x (the multiplier).
    (log,) = logs
    assert log.adjoint.mean == pytest.approx(float(x.mean()), rel=1e-5)


@pytest.mark.slow  # a diffrax solve: 15-20 s; once per `make test` (Python 3.12)
def test_diffrax_solve_is_annotated():
    diffrax = pytest.importorskip("diffrax")

    def solve(y0, k):
        term = diffrax.ODETerm(lambda t, y, args: -args * y)
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, args=k, max_steps=16)
        return jnp.sum(sol.ys[-1])

    y0 = jnp.array([1.0, 2.0])
    g = jaxpr_graph(solve, y0, 0.5, grad=True, values=True)
    expected = np.asarray(jax.grad(solve)(y0, 0.5))
    adj = g.node("in0").adjoint
    assert adj is not None and adj.mean == pytest.approx(float(expected.mean()), rel=1e-4)
    assert g.node("in1").role == m.FIXED and g.node("in1").adjoint is None
    (out,) = [n for n in g.nodes if n.kind == m.OUTPUT]
    assert out.label == "∂solve/∂y0" and out.value.mean == pytest.approx(
        float(expected.mean()), rel=1e-4
    )


def test_cond_branch_taken_shows_adjoints_and_the_legend_counts_the_other():
    def f(x):
        y = jnp.sin(x) * 2
        z = jax.lax.cond(x > 0, lambda a: jnp.cos(a) * a, lambda a: a**3, y)
        return z * 3

    g = jaxpr_graph(f, 0.7, grad=True, values=True)
    taken = [n for n in g.nodes if n.kind == m.EQUATION and n.cluster == "e5/1"]
    other = [n for n in g.nodes if n.kind == m.EQUATION and n.cluster == "e5/0"]
    assert {n.primitive for n in taken} >= {"cos", "mul"} and all(n.value for n in taken)
    assert all(n.value is None for n in other)  # x > 0: the false branch never ran
    # d out / d cos(a) = 3a and d out / d (cos(a)·a) = 3, a = 2 sin(0.7).
    a = 2 * np.sin(np.float32(0.7))
    (cos,) = [n for n in taken if n.primitive == "cos"]
    (mul,) = [n for n in taken if n.primitive == "mul"]
    assert cos.adjoint.scalar == pytest.approx(3 * a, rel=1e-6)
    assert mul.adjoint.scalar == pytest.approx(3.0)
    legend = g.notes[-1]
    assert f"{len(other)} in cond branches not taken" in legend
    assert "branches taken" not in legend  # (once left out whole: adjoints are shown now)
