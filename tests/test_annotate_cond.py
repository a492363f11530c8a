"""Adjoints inside the branch a ``cond`` took.

Each program is written twice: as the user would, and by hand with the branch taken
inlined and an additive perturbation ``δ[name]`` (zero) at every intermediate.
``jax.grad`` with respect to ``δ[name]`` is d output / d name: the independent reference
each annotated node is checked against. A planted wrong ``custom_vjp`` inside a branch
shows against central differences, so the check can fail.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from planted import planted_sin

from jaxlab import jaxpr_graph
from jaxlab.graph import interpret
from jaxlab.graph import model as m

COND = interpret.Policy(custom=False, cond=True)


def _bool_cond(x):
    y = jnp.sin(x) * 2
    z = lax.cond(jnp.sum(x) > 0, lambda a: jnp.cos(a) * a, lambda a: a**3, y)
    return jnp.sum(z * 3)


def _bool_cond_by_hand(x, d):
    """The true branch taken (sum(x) > 0); returns (output, {name: (primitive, value)}).
    The predicate's sum is perturbed too: the output does not depend on it (adjoint 0)."""
    sx = jnp.sum(x) + d["sum x"]
    s = jnp.sin(x) + d["sin"]
    y = s * 2 + d["y"]
    c = jnp.cos(y) + d["cos"]
    z = c * y + d["cos(y)*y"]
    t = z * 3 + d["z*3"]
    out = jnp.sum(t) + d["sum"]
    return out, {
        "sum": ("reduce_sum", out),
        "sum x": ("reduce_sum", sx),
        "sin": ("sin", s),
        "y": ("mul", y),
        "cos": ("cos", c),
        "cos(y)*y": ("mul", z),
        "z*3": ("mul", t),
    }


def _switch(x):
    i = jnp.argmax(x)  # 1 for the argument below
    h = jnp.tanh(x)
    branches = [lambda a: a**2, lambda a: jnp.exp(-a) * a, lambda a: jnp.sin(a)]
    z = lax.switch(i, branches, h)
    return jnp.sum(z * x)


def _switch_by_hand(x, d):
    """Branch 1 taken: exp(-h) * h."""
    h = jnp.tanh(x) + d["tanh"]
    n = -h + d["neg"]
    e = jnp.exp(n) + d["exp"]
    z = e * h + d["exp*h"]
    t = z * x + d["z*x"]
    out = jnp.sum(t) + d["sum"]
    return out, {
        "sum": ("reduce_sum", out),
        "tanh": ("tanh", h),
        "neg": ("neg", n),
        "exp": ("exp", e),
        "exp*h": ("mul", z),
        "z*x": ("mul", t),
    }


PROGRAMS = {
    "boolean cond": (_bool_cond, _bool_cond_by_hand, jnp.array([0.3, -1.2, 2.0]), {"cos", "mul"}),
    "switch, 3 branches": (
        _switch,
        _switch_by_hand,
        jnp.array([0.3, 1.1, -0.4]),
        {"neg", "exp", "mul"},
    ),
}


class _Zeros(dict):
    def __missing__(self, key):
        return 0.0


def _reference(name):
    """{name: (primitive, value, d output / d name)} from the hand-written twin."""
    _, by_hand, x, _ = PROGRAMS[name]
    _, values = by_hand(x, _Zeros())
    zeros = {k: jnp.zeros_like(v) for k, (_, v) in values.items()}
    grads = jax.grad(lambda d: by_hand(x, d)[0])(zeros)
    return {k: (p, np.asarray(v), np.asarray(grads[k])) for k, (p, v) in values.items()}


def _match(reference, primitive, close):
    found = [k for k, (p, v, _) in reference.items() if p == primitive and close(v)]
    assert len(found) == 1, (primitive, found)
    return found[0]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_adjoints_in_the_taken_branch_equal_grad_wrt_a_perturbation_there(name):
    program, _, x, _ = PROGRAMS[name]
    reference = _reference(name)
    adj = interpret.adjoints(jax.make_jaxpr(program)(x), [x], policy=COND)
    ev = adj.evaluation
    ((node_id, branch),) = ev.branches.items()
    assert branch == 1  # true; argmax 1
    matched = set()
    for step in ev.steps:
        (slot,) = step.outputs if len(step.outputs) == 1 else (None,)
        if slot is None or adj.adjoints[slot] is None or step.eqn.primitive.name == "cond":
            continue
        value = np.asarray(ev.values[slot])
        key = _match(reference, step.eqn.primitive.name, lambda v, w=value: np.allclose(v, w))
        np.testing.assert_allclose(adj.adjoints[slot], reference[key][2], rtol=1e-5, atol=1e-6)
        matched.add(key)
    assert matched == set(reference)
    inside = [s for s in ev.steps if s.node_id.startswith(f"{node_id}/{branch}/")]
    assert inside and all(adj.adjoints[o] is not None for s in inside for o in s.outputs)
    np.testing.assert_allclose(adj.adjoints[ev.inputs[0]], jax.grad(program)(x), rtol=1e-5)


def _summary_close(summary):
    def close(v):
        return (
            v.shape == summary.shape
            and np.isclose(v.mean(), summary.mean, rtol=1e-5, atol=1e-6)
            and np.isclose(v.min(), summary.min, rtol=1e-5, atol=1e-6)
            and np.isclose(v.max(), summary.max, rtol=1e-5, atol=1e-6)
        )

    return close


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradient_graph_shows_adjoints_in_the_taken_branch(name):
    program, _, x, branch_primitives = PROGRAMS[name]
    reference = _reference(name)
    g = jaxpr_graph(program, x, grad=True, values=True)
    forward = [n for n in g.equations if n.phase == m.FORWARD]
    shown = [n for n in forward if n.adjoint is not None]
    matched = set()
    for n in shown:
        key = _match(reference, n.primitive, _summary_close(n.value))
        want = reference[key][2]
        assert n.adjoint.shape == want.shape, key
        assert n.adjoint.mean == pytest.approx(float(want.mean()), rel=1e-5, abs=1e-6), key
        assert n.adjoint.min == pytest.approx(float(want.min()), rel=1e-5, abs=1e-6), key
        assert n.adjoint.max == pytest.approx(float(want.max()), rel=1e-5, abs=1e-6), key
        matched.add(key)
    assert matched == set(reference)  # every intermediate, in the branch and out, shown
    # The forward cond's branches: the one taken shows its computation's adjoints; what
    # it leaves without one is a derivative factor or a residual placeholder; the others
    # never ran.
    forward_cond = {n.cluster.split("/")[0] for n in forward if n.cluster}
    (cond,) = [
        c for c in forward_cond if any(k.id == c and k.primitive == "cond" for k in g.clusters)
    ]
    taken = [n for n in forward if n.cluster == f"{cond}/1"]
    assert {n.primitive for n in taken if n.adjoint is not None} == branch_primitives
    left = [n for n in taken if n.adjoint is None]
    assert all(n.value is not None for n in taken)
    factors = {"sin", "cos", "mul", "neg"}  # what JAX adds for the backward pass
    placeholders = [n for n in left if n.primitive not in factors]
    assert all(
        n.primitive.startswith("empty") or (n.primitive == "broadcast_in_dim" and n.value.max == 0)
        for n in placeholders
    )
    others = [
        n for n in forward if n.cluster and n.cluster.startswith(f"{cond}/") and n not in taken
    ]
    assert others and all(n.value is None and n.adjoint is None for n in others)
    (legend,) = [s for s in g.notes if s.startswith("no adjoint")]
    assert f"{len(others)} in cond branches not taken" in legend
    assert "branches taken" not in legend  # (they were once left out as a whole)
    if placeholders:
        k = len(placeholders)
        assert f"{k} placeholder{'s' if k != 1 else ''} for" in legend
    # The input's adjoint is still the gradient.
    grad = np.asarray(jax.grad(program)(x))
    assert g.node("in0").adjoint.mean == pytest.approx(float(grad.mean()), rel=1e-5)


def test_values_pass_fixes_the_branch_of_a_traced_run():
    closed = jax.make_jaxpr(_bool_cond)(PROGRAMS["boolean cond"][2])
    layout = interpret.evaluate(closed, [None], policy=COND, compute=False)
    assert not layout.branches  # no values: no branch to follow
    x = jnp.array([-0.3, -1.2, 0.4])  # sum < 0: the false branch (a ** 3)
    ev = interpret.evaluate(closed, [x], policy=COND)
    ((node_id, branch),) = ev.branches.items()
    assert branch == 0
    given = interpret.evaluate(closed, [None], policy=COND, compute=False, branches={node_id: 0})
    assert len(given.values) == len(ev.values) and given.signatures == ev.signatures
    (pow_,) = [s for s in ev.steps if s.eqn.primitive.name == "integer_pow"]
    adj = interpret.adjoints(closed, [x], policy=COND)
    y = np.sin(np.asarray(x)) * 2
    np.testing.assert_allclose(adj.adjoints[pow_.outputs[0]], np.full(3, 3.0), rtol=1e-6)
    np.testing.assert_allclose(adj.adjoints[pow_.inputs[0]], 9 * y**2, rtol=1e-5)


def test_a_cond_in_a_scan_body_is_counted_with_its_reason():
    def f(x):
        def body(c, xi):
            return lax.cond(xi > 0, jnp.sin, lambda a: a * 2.0, c + xi), None

        c, _ = lax.scan(body, x, jnp.linspace(-1.0, 1.0, 5))
        return c

    g = jaxpr_graph(f, 0.7, grad=True, values=True)
    branches = [
        n
        for n in g.equations
        if n.phase == m.FORWARD
        and any(c.id == n.cluster and c.primitive == "cond" for c in g.clusters)
    ]
    # Each iteration may take another branch: the interpreter follows none in a loop body.
    assert branches and all(n.value is None and n.adjoint is None for n in branches)
    (legend,) = [s for s in g.notes if s.startswith("no adjoint")]
    k = len(branches)
    assert f"{k} inside conds in loop bodies (the branch taken may change" in legend
    assert "not taken" not in legend
    assert g.node("in0").adjoint.scalar == pytest.approx(float(jax.grad(f)(0.7)), rel=1e-5)


# --------------------------------------------------------------------------- a check that can fail


def _with_custom_sin(sin):
    def f(x):
        return lax.cond(x > 0, lambda a: sin(a * 0.9) * 3.0, lambda a: a, x)

    return f


def _finite_difference(x, eps=1e-3):
    """d output / d (0.9 x) by central differences (the forward pass never uses the rule)."""
    with jax.enable_x64(True):
        b = 0.9 * np.float64(x)
        return float((3 * np.sin(b + eps) - 3 * np.sin(b - eps)) / (2 * eps))


@pytest.mark.parametrize("factor", [1.0, 2.0])
def test_a_wrong_custom_vjp_in_the_branch_shows_against_finite_differences(factor):
    f = _with_custom_sin(planted_sin(factor))
    x = 0.7
    adj = interpret.adjoints(jax.make_jaxpr(f)(x), [x], policy=COND)
    ev = adj.evaluation
    (mul,) = [
        s
        for s in ev.steps
        if s.eqn.primitive.name == "mul"
        and "/1/" in s.node_id
        and float(ev.values[s.outputs[0]]) == pytest.approx(0.9 * x)
    ]
    shown = float(adj.adjoints[mul.outputs[0]])
    fd = _finite_difference(x)
    if factor == 1.0:  # the right rule: the adjoint is the derivative
        assert shown == pytest.approx(fd, rel=1e-4)
    else:  # the planted rule doubles it, and the annotation shows what JAX computes
        assert shown != pytest.approx(fd, rel=1e-2)
        assert shown == pytest.approx(2 * fd, rel=1e-4)
    assert shown == pytest.approx(float(jax.grad(f)(x)) / 0.9, rel=1e-5)
    # The custom call is bound whole: it shows no steps of its insides in this pass.
    assert not [s for s in ev.steps if s.eqn.primitive.name == "sin"]
    # The graph shows the same adjoint the rule gives.
    g = jaxpr_graph(f, x, grad=True, values=True)
    (node,) = [
        n
        for n in g.equations
        if n.primitive == "mul"
        and n.phase == m.FORWARD
        and n.value.scalar == pytest.approx(0.9 * x)
    ]
    assert node.adjoint.scalar == pytest.approx(shown, rel=1e-5)
