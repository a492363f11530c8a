"""Values and adjoints inside ``scan`` bodies, per iteration.

Each program is written twice: as the user would, and by hand with an additive
per-iteration perturbation ``δ[name][t]`` at every intermediate (zero, so the values are
unchanged). ``jax.grad`` with respect to ``δ[name]`` is d output / d name_t for every
iteration t: the independent reference each annotated node is checked against.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from planted import planted_sin

from jaxlab import jaxpr_graph
from jaxlab.graph import interpret, scan_body
from jaxlab.graph import model as m

SCAN = interpret.Policy(custom=False, cond=False, scan=True)


def _d(row, name):
    """This iteration's perturbation of ``name`` (0 when the program has none for it)."""
    return row.get(name, 0.0)


# --------------------------------------------------------------------------- programs
# Each entry: (program, its arguments, the hand-written twin). The twin takes the
# arguments and a dict of stacked perturbations and returns (output, {name: (primitive,
# stacked values)}); a name's primitive is what the body equation computing it is
# called, or "carry"/"row" for the body's parameters.

T = 6
# Initial carries as strong float32 arrays (a weak-typed jnp.full(3, 0.1) would add a
# convert_element_type to the body that the hand-written twin does not have).
_S0 = np.zeros(3, np.float32)
_H0 = np.full(3, 0.1, np.float32)


def _rnn(w, xs):
    def body(carry, x):
        s, h = carry
        s2 = s + x  # the cumulative sum
        h2 = jnp.tanh(h * w + s2)
        return (s2, h2), h2 * s2

    (s, h), ys = jax.lax.scan(body, (_S0, _H0), xs)
    return jnp.sum(ys) + jnp.sum(h * s)


def _rnn_by_hand(w, xs, delta):
    def body(carry, inputs):
        x, d = inputs
        s, h = carry
        s = s + _d(d, "carry s")
        h = h + _d(d, "carry h")
        x = x + _d(d, "row x")
        s2 = s + x + _d(d, "s2")
        a = h * w + _d(d, "h*w")
        b = a + s2 + _d(d, "b")
        h2 = jnp.tanh(b) + _d(d, "h2")
        y = h2 * s2 + _d(d, "y")
        seen = {"carry s": s, "carry h": h, "row x": x, "s2": s2, "h*w": a, "b": b}
        return (s2, h2), (y, seen | {"h2": h2, "y": y})

    (s, h), (ys, seen) = jax.lax.scan(body, (_S0, _H0), (xs, delta))
    prims = {"carry s": "carry", "carry h": "carry", "row x": "row", "s2": "add"}
    prims |= {"h*w": "mul", "b": "add", "h2": "tanh", "y": "mul"}
    return jnp.sum(ys) + jnp.sum(h * s), {k: (prims[k], v) for k, v in seen.items()}


def _fori(x):
    # (a float32 0.1: a Python 0.1 would be weak-typed and add a second conversion)
    return jax.lax.fori_loop(0, T, lambda i, c: jnp.sin(c) * x + jnp.float32(0.1) * i, x)


def _fori_by_hand(x, delta):
    def body(carry, d):
        i, c = carry
        c = c + _d(d, "carry c")
        s = jnp.sin(c) + _d(d, "sin")
        sx = s * x + _d(d, "sin*x")
        fi = i.astype(jnp.float32) + _d(d, "float(i)")
        ti = jnp.float32(0.1) * fi + _d(d, "0.1*i")
        c2 = sx + ti + _d(d, "c2")
        seen = {"carry c": c, "sin": s, "sin*x": sx, "float(i)": fi, "0.1*i": ti, "c2": c2}
        return (i + 1, c2), seen

    (_, c), seen = jax.lax.scan(body, (jnp.int32(0), x), delta, length=T)
    prims = {"carry c": "carry", "sin": "sin", "sin*x": "mul", "float(i)": "convert_element_type"}
    prims |= {"0.1*i": "mul", "c2": "add"}
    return c, {k: (prims[k], v) for k, v in seen.items()}


# The pendulum of notebooks/06, velocity Verlet without diffrax: H = p²/2 + K (1 - cos θ).
K, DT = 9.81, 0.05


def _verlet(theta0, p0):
    def step(state, _):
        theta, p = state
        p_half = p - (0.5 * DT * K) * jnp.sin(theta)
        theta_new = theta + DT * p_half
        p_new = p_half - (0.5 * DT * K) * jnp.sin(theta_new)
        return (theta_new, p_new), theta_new

    (theta, p), thetas = jax.lax.scan(step, (theta0, p0), None, length=T)
    return p**2 / 2 + K * (1 - jnp.cos(theta)) + 0.1 * jnp.sum(thetas)


def _verlet_by_hand(theta0, p0, delta):
    def step(state, d):
        theta, p = state
        theta = theta + _d(d, "carry theta")
        p = p + _d(d, "carry p")
        f0 = jnp.sin(theta) + _d(d, "sin theta")
        k0 = (0.5 * DT * K) * f0 + _d(d, "kick 1")
        p_half = p - k0 + _d(d, "p_half")
        dtheta = DT * p_half + _d(d, "drift")
        theta_new = theta + dtheta + _d(d, "theta_new")
        f1 = jnp.sin(theta_new) + _d(d, "sin theta_new")
        k1 = (0.5 * DT * K) * f1 + _d(d, "kick 2")
        p_new = p_half - k1 + _d(d, "p_new")
        seen = {"carry theta": theta, "carry p": p, "sin theta": f0, "kick 1": k0}
        seen |= {"p_half": p_half, "drift": dtheta, "theta_new": theta_new}
        seen |= {"sin theta_new": f1, "kick 2": k1, "p_new": p_new}
        return (theta_new, p_new), (theta_new, seen)

    (theta, p), (thetas, seen) = jax.lax.scan(step, (theta0, p0), delta, length=T)
    prims = {"carry theta": "carry", "carry p": "carry", "sin theta": "sin", "kick 1": "mul"}
    prims |= {"p_half": "sub", "drift": "mul", "theta_new": "add", "sin theta_new": "sin"}
    prims |= {"kick 2": "mul", "p_new": "sub"}
    out = p**2 / 2 + K * (1 - jnp.cos(theta)) + 0.1 * jnp.sum(thetas)
    return out, {k: (prims[k], v) for k, v in seen.items()}


_W = jnp.array([0.5, -0.8, 1.2])
_XS = jnp.asarray(np.random.default_rng(0).normal(size=(T, 3)), jnp.float32) * 0.5
PROGRAMS = {
    "rnn": (_rnn, (_W, _XS), _rnn_by_hand),
    "fori_loop": (_fori, (jnp.float32(0.7),), _fori_by_hand),
    "verlet": (_verlet, (jnp.float32(1.0), jnp.float32(0.0)), _verlet_by_hand),
}


def _reference(name):
    """{intermediate: (primitive, stacked values, stacked d output / d it)} by jax.grad."""
    program, args, by_hand = PROGRAMS[name]
    out, seen = by_hand(*args, {})
    np.testing.assert_allclose(out, program(*args), rtol=1e-6)  # the twin is the program
    zeros = {k: jnp.zeros_like(v) for k, (_, v) in seen.items()}
    grads = jax.grad(lambda d: by_hand(*args, d)[0])(zeros)
    return {k: (prim, np.asarray(v), np.asarray(grads[k])) for k, (prim, v) in seen.items()}


def _match(reference, primitive, close):
    found = [k for k, (p, v, _) in reference.items() if p == primitive and close(v)]
    assert len(found) == 1, (primitive, found)
    return found[0]


# --------------------------------------------------------------------------- interpreter


def test_evaluate_runs_a_scan_body_per_iteration():
    w, xs = PROGRAMS["rnn"][1]
    closed = jax.make_jaxpr(_rnn)(w, xs)
    ev = interpret.evaluate(closed, [w, xs], policy=interpret.Policy(scan=True))
    reference = _reference("rnn")
    (tanh,) = [s for s in ev.steps if s.eqn.primitive.name == "tanh"]
    (slot,) = tanh.outputs
    assert ev.iterations[slot] == T and ev.avals[slot].shape == (T, 3)
    np.testing.assert_allclose(ev.values[slot], reference["h2"][1], rtol=1e-6)
    np.testing.assert_allclose(ev.values[ev.outputs[0]], _rnn(w, xs), rtol=1e-6)
    assert "e0" not in ev.summarised and not [s for s in ev.steps if s.summarised]
    # Without the policy the scan is bound whole, as before: no slots inside.
    whole = interpret.evaluate(closed, [w, xs])
    assert not whole.iterations and [s.eqn.primitive.name for s in whole.steps if s.summarised]
    np.testing.assert_allclose(whole.values[whole.outputs[0]], _rnn(w, xs), rtol=1e-6)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_body_adjoint_equals_grad_wrt_a_perturbation_there(name):
    program, args, _ = PROGRAMS[name]
    reference = _reference(name)
    adj = interpret.adjoints(jax.make_jaxpr(program)(*args), list(args), policy=SCAN)
    ev = adj.evaluation
    matched = set()
    for slot, length in ev.iterations.items():
        a, value = adj.adjoints[slot], np.asarray(ev.values[slot])
        if a is None or slot in ev.literals:
            continue  # an integer (the loop counter) or a literal: no derivative
        step = ev.producer[slot]
        primitive = ev.steps[step].eqn.primitive.name if step is not None else None
        if primitive is None:  # a body parameter: a carry or a row of xs
            primitive = _param_kind(ev, slot)
        key = _match(reference, primitive, _array_close(value))
        np.testing.assert_allclose(a, reference[key][2], rtol=2e-5, atol=1e-6, err_msg=key)
        assert length == T and np.shape(a) == np.shape(value) and np.shape(a)[0] == T
        matched.add(key)
    assert matched == set(reference)  # every intermediate has its adjoint


def _array_close(value):
    return lambda v: np.allclose(v, value, rtol=1e-5, atol=1e-6)


def _param_kind(ev, slot):
    sources = [src for src, dst in ev.links if dst == slot]
    return "carry" if len(sources) == 2 else "row"  # a carry comes from init and body


# --------------------------------------------------------------------------- graphs


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradient_graph_shows_every_body_adjoint(name):
    program, args, _ = PROGRAMS[name]
    reference = _reference(name)
    g = jaxpr_graph(program, *args, grad=True, values=True)
    forward_scan = {c.id for c in g.clusters if c.primitive == "scan"} & {
        n.cluster for n in g.nodes if n.phase == m.FORWARD
    }
    (scan,) = forward_scan
    inside = [n for n in g.nodes if n.cluster == scan and n.phase == m.FORWARD]
    shown = [n for n in inside if n.adjoint is not None and not n.label.startswith("out")]
    matched = set()
    for n in shown:
        if n.kind == m.PORT:
            close = _summary_close(n.value)
            kinds = [p for p in ("carry", "row") if _any_match(reference, p, close)]
            if not kinds:  # a const parameter: the whole argument, not per iteration
                continue
            key = _match(reference, kinds[0], close)
        else:
            key = _match(reference, n.primitive, _summary_close(n.value))
        want = reference[key][2]
        assert n.adjoint.shape == want.shape and want.shape[0] == T
        assert n.adjoint.mean == pytest.approx(float(want.mean()), rel=2e-5, abs=1e-6), key
        assert n.adjoint.min == pytest.approx(float(want.min()), rel=2e-5, abs=1e-6), key
        assert n.adjoint.max == pytest.approx(float(want.max()), rel=2e-5, abs=1e-6), key
        matched.add(key)
    assert matched == set(reference)
    # What has no adjoint inside is what JAX adds for the backward pass (cos, 1 - tanh²)
    # or the integer loop counter; the legend says so and says values are per iteration.
    missing = [n for n in inside if n.kind == m.EQUATION and n.adjoint is None]
    factors = {"cos", "one_minus_square", "mul", "sub", "neg"}
    assert all(n.primitive in factors or n.value.dtype.startswith("int") for n in missing)
    (note,) = [s for s in g.notes if s.startswith("inside a scan body")]
    assert f"×{T} iterations" in note and "per iteration" in note
    assert not any("loop bod" in s for s in g.notes if s.startswith("no adjoint"))
    # The input's adjoint is still the gradient.
    grad = np.asarray(jax.grad(program)(*args))
    assert g.node("in0").adjoint.mean == pytest.approx(float(grad.mean()), rel=1e-5)


def _summary_close(summary):
    def close(v):
        return (
            v.shape == summary.shape
            and np.isclose(v.mean(), summary.mean, rtol=1e-5, atol=1e-6)
            and np.isclose(v.min(), summary.min, rtol=1e-5, atol=1e-6)
            and np.isclose(v.max(), summary.max, rtol=1e-5, atol=1e-6)
        )

    return close


def _any_match(reference, primitive, close):
    return any(p == primitive and close(v) for p, v, _ in reference.values())


def test_values_graph_shows_per_iteration_values():
    w, xs = PROGRAMS["rnn"][1]
    g = jaxpr_graph(_rnn, w, xs, values=True)
    (tanh,) = [n for n in g.equations if n.primitive == "tanh"]
    h2 = _reference("rnn")["h2"][1]
    assert tanh.value.shape == (T, 3) and tanh.adjoint is None
    assert tanh.value.mean == pytest.approx(float(h2.mean()), rel=1e-6)
    (note,) = [s for s in g.notes if s.startswith("inside a scan body")]
    assert "value is per iteration" in note


def test_per_iteration_summaries_say_how_many_iterations():
    w, xs = PROGRAMS["rnn"][1]
    g = jaxpr_graph(_rnn, w, xs, grad=True, values=True)
    (tanh,) = [n for n in g.equations if n.primitive == "tanh" and n.phase == m.FORWARD]
    assert tanh.value.iterations == T and tanh.adjoint.iterations == T
    assert tanh.value.shape[0] == T
    # Outside the body: one value, no iteration count (the stacked ys is an array).
    assert g.node("in0").value.iterations is None and g.node("in0").adjoint.iterations is None
    (out,) = [n for n in g.nodes if n.kind == m.OUTPUT]
    assert out.value.iterations is None
    dot = g.to_dot()
    stacked = [n for n in g.nodes if n.value is not None and n.value.iterations]
    value_rows = dot.count(f'">= {tanh.value.text()} ×{T} iterations</font>')
    assert value_rows >= 1 and dot.count(f"×{T} iterations") >= len(stacked)
    assert f"value = {tanh.value.text()} ×{T} iterations" in dot  # the tooltip
    assert f"adjoint ∂ = {tanh.adjoint.text()} ×{T} iterations" in dot
    assert f"{g.node('in0').value.text()} ×" not in dot


# --------------------------------------------------------------------------- a check that can fail


def _with_custom_sin(sin):
    def f(x):
        def body(c, xi):
            b = c * 0.9 + xi
            return sin(b), None

        c, _ = jax.lax.scan(body, x, jnp.linspace(-0.5, 0.5, T))
        return c

    return f


def _finite_difference(x, t, eps=1e-3):
    """d output / d b_t by central differences (the forward pass never uses the rule)."""

    def f(delta):
        def body(c, inputs):
            xi, d = inputs
            return jnp.sin(c * 0.9 + xi + d), None

        xs = jnp.linspace(-0.5, 0.5, T)
        c, _ = jax.lax.scan(body, jnp.float64(x), (xs, delta))
        return c

    with jax.enable_x64(True):
        step = np.zeros(T)
        step[t] = eps
        return float((f(jnp.asarray(step)) - f(jnp.asarray(-step))) / (2 * eps))


@pytest.mark.parametrize("factor", [1.0, 2.0])
def test_a_wrong_custom_vjp_in_the_body_shows_against_finite_differences(factor):
    f = _with_custom_sin(planted_sin(factor))
    x = 0.3
    adj = interpret.adjoints(jax.make_jaxpr(f)(x), [x], policy=SCAN)
    ev = adj.evaluation
    (add,) = [
        s for s in ev.steps if s.eqn.primitive.name == "add" and s.outputs[0] in ev.iterations
    ]
    shown = np.asarray(adj.adjoints[add.outputs[0]])
    fd = np.array([_finite_difference(x, t) for t in range(T)])
    if factor == 1.0:  # the right rule: the adjoint is the derivative
        np.testing.assert_allclose(shown, fd, rtol=1e-3)
    else:  # the planted rule doubles each step's derivative: 2^(T - t) too large at t
        assert not np.allclose(shown, fd, rtol=1e-2)
        np.testing.assert_allclose(shown, fd * 2.0 ** np.arange(T, 0, -1), rtol=1e-3)
    # The graph shows the same adjoint the rule gives.
    g = jaxpr_graph(f, x, grad=True, values=True)
    (node,) = [
        n
        for n in g.equations
        if n.primitive == "add" and n.phase == m.FORWARD and n.value.shape == (T,)
    ]
    assert node.adjoint.mean == pytest.approx(float(shown.mean()), rel=1e-5)


# --------------------------------------------------------------------------- legend


def test_while_loop_body_is_counted_with_its_reason():
    def f(x, k):
        n = jax.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0 + 0.5, k)
        return jnp.sum(jnp.sin(x) * n)

    g = jaxpr_graph(f, jnp.array([0.2, 0.4]), 1.0, grad=True, values=True)
    bodies = {c.id for c in g.clusters if c.primitive == "while"}
    inside = [n for n in g.equations if n.cluster in bodies and n.phase == m.FORWARD]
    assert inside and all(n.adjoint is None for n in inside)
    (note,) = [s for s in g.notes if s.startswith("no adjoint")]
    assert f"{len(inside)} inside while_loop bodies" in note or (
        len(inside) == 1 and "1 inside a while_loop body" in note
    )
    assert "JAX cannot reverse-differentiate a while_loop" in note
    assert "known only at run time" in note


def test_nested_and_oversized_scans_are_counted_with_their_reasons(monkeypatch):
    def nested(x):
        def outer(c, _):
            inner, _ = jax.lax.scan(lambda d, _: (jnp.sin(d) * 0.5, None), c, None, length=2)
            return jnp.cos(inner) + c, None

        c, _ = jax.lax.scan(outer, x, None, length=3)
        return c

    g = jaxpr_graph(nested, 0.4, grad=True, values=True)
    scans = {c.id: c for c in g.clusters if c.primitive == "scan"}
    inner = [c for c in scans.values() if c.parent in scans]
    assert inner, "the nested scan is drawn inside the outer body"
    inner_ids = {c.id for c in inner}
    deep = [n for n in g.equations if n.cluster in inner_ids and n.phase == m.FORWARD]
    assert deep and all(n.adjoint is None and n.value is None for n in deep)
    (note,) = [s for s in g.notes if s.startswith("no adjoint")]
    assert "nested in scan bodies" in note or "nested in a scan body" in note
    cos = [n for n in g.equations if n.primitive == "cos" and n.cluster in scans]
    assert any(n.adjoint is not None and n.adjoint.shape == (3,) for n in cos)
    values = jaxpr_graph(nested, 0.4, values=True)  # without a gradient: values only
    assert "no values inside 1 scan body: 1 nested in another scan's body" in "".join(values.notes)

    monkeypatch.setattr(scan_body, "LOOP_BYTES", 16)
    g = jaxpr_graph(PROGRAMS["fori_loop"][0], *PROGRAMS["fori_loop"][1], grad=True, values=True)
    (note,) = [s for s in g.notes if s.startswith("no adjoint")]
    assert "too large to keep every iteration" in note
    assert not any(s.startswith("inside a scan body") for s in g.notes)


# --------------------------------------------------------------------------- %grad --graph


def test_grad_magic_graph_shows_per_iteration_adjoints(ip):
    w, xs = PROGRAMS["rnn"][1]
    ip.user_ns.update(rnn=_rnn, w=w, xs=xs)
    r = ip.run_line_magic("grad", "-o --graph --wrt w,xs rnn(w, xs)")
    reference = _reference("rnn")
    (tanh,) = [n for n in r.graph.equations if n.primitive == "tanh" and n.phase == m.FORWARD]
    want = reference["h2"][2]
    assert tanh.adjoint.shape == (T, 3)
    assert tanh.adjoint.mean == pytest.approx(float(want.mean()), rel=2e-5)
    assert tanh.adjoint.min == pytest.approx(float(want.min()), rel=2e-5)
    np.testing.assert_allclose(r.grad[0], jax.grad(_rnn)(w, xs), rtol=1e-5)
    assert any(s.startswith("inside a scan body (×6 iterations)") for s in r.graph.notes)


@pytest.mark.slow  # a diffrax solve: 15-20 s; once per `make test` (Python 3.12)
def test_grad_magic_graph_on_a_diffrax_solve(ip):
    diffrax = pytest.importorskip("diffrax")

    def solve(y0, k):
        term = diffrax.ODETerm(lambda t, y, args: -args * y)
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, args=k, max_steps=16)
        return jnp.sum(sol.ys[-1])

    ip.user_ns.update(solve=solve, y0=jnp.array([1.0, 2.0]))
    r = ip.run_line_magic("grad", "-o --graph solve(y0, 0.5)")
    expected = np.asarray(jax.grad(solve)(jnp.array([1.0, 2.0]), 0.5))
    np.testing.assert_allclose(r.grad, expected, rtol=1e-5)
    adjoint = r.graph.node("in0").adjoint
    assert adjoint is not None and adjoint.mean == pytest.approx(float(expected.mean()), rel=1e-4)
    assert not any(s.startswith("adjoints left out") for s in r.graph.notes)
