"""grad_report, its finite-difference check, NaN localisation and the split view,
against analytic derivatives and against JAX itself."""

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.autodiff import derivative
from jaxlab.autodiff.report import GradError, grad_report
from jaxlab.autodiff.split import grad_split

G = 9.81


def projectile_range(v, theta, g=G):
    return v**2 * jnp.sin(2 * theta) / g


def pendulum_energy(state, m=1.5, length=0.8, g=G):
    theta, omega = state["theta"], state["omega"]
    return 0.5 * m * length**2 * omega**2 + m * g * length * (1 - jnp.cos(theta))


def mlp_init(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"w": jnp.asarray(rng.normal(size=(a, b)) / math.sqrt(a), jnp.float32), "b": jnp.zeros(b)}
        for a, b in itertools.pairwise(sizes)
    ]


def mlp_loss(params, x, y):
    h = x
    for layer in params[:-1]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    out = h @ params[-1]["w"] + params[-1]["b"]
    return jnp.mean((out - y) ** 2)


# --------------------------------------------------------------------------- analytic


def test_projectile_range_matches_analytic_and_passes_check():
    v, theta = 12.0, 0.4
    r = grad_report(projectile_range, v, theta, wrt="v,theta", check=True)
    assert r.names == ("v", "theta")
    assert r.kind == "gradient" and r.mode == "reverse"
    assert float(r.value) == pytest.approx(v**2 * math.sin(2 * theta) / G, rel=1e-6)
    dv, dtheta = r.grad
    assert float(dv) == pytest.approx(2 * v * math.sin(2 * theta) / G, rel=1e-5)
    assert float(dtheta) == pytest.approx(2 * v**2 * math.cos(2 * theta) / G, rel=1e-5)
    assert r.check is not None and r.check.passed
    assert set(r.check.errors) == {"v", "theta"}
    assert r.check.tolerance == pytest.approx(1e-3)
    assert r.check.max_error < 1e-5
    assert not jax.config.read("jax_enable_x64")  # restored after the float64 check


def test_pendulum_energy_pytree_argument():
    state = {"theta": jnp.float32(0.7), "omega": jnp.float32(-1.3)}
    r = grad_report(pendulum_energy, state, check=True)
    m, length = 1.5, 0.8
    assert set(r.grad) == {"theta", "omega"}
    assert float(r.grad["theta"]) == pytest.approx(m * G * length * math.sin(0.7), rel=1e-5)
    assert float(r.grad["omega"]) == pytest.approx(m * length**2 * -1.3, rel=1e-5)
    assert r.check.passed
    paths = [leaf.path for leaf in r.leaves()]
    assert paths == ["state['omega']", "state['theta']"]


def test_mlp_loss_equals_jax_grad_and_passes_check():
    params = mlp_init([4, 8, 8, 2])
    x = jnp.asarray(np.random.default_rng(1).normal(size=(5, 4)), jnp.float32)
    y = jnp.ones((5, 2))
    r = grad_report(mlp_loss, params, x, y, check=True, directions=3)
    expected = jax.grad(mlp_loss)(params, x, y)
    for got, want in zip(jax.tree.leaves(r.grad), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert r.check.passed and r.check.directions == 3
    assert len(r.check.args[0].directional_fd) == 3


def test_argnums_tuple_gives_tuple_and_keyword_by_name():
    def f(x, w, scale=1.0):
        return scale * jnp.sum(jnp.sin(x) * w)

    x, w = jnp.arange(3.0), jnp.ones(3)
    r = grad_report(f, x, w, argnums=(0, 1))
    assert isinstance(r.grad, tuple) and len(r.grad) == 2
    np.testing.assert_allclose(r.grad[0], jnp.cos(x) * w, rtol=1e-6)
    r2 = grad_report(f, x, w, scale=2.0, wrt="scale")
    assert float(r2.grad) == pytest.approx(float(jnp.sum(jnp.sin(x))), rel=1e-6)
    r3 = grad_report(f, x, w, argnums="1")
    np.testing.assert_allclose(r3.grad, jnp.sin(x), rtol=1e-6)


def test_equinox_module_argument_filters_static_leaves():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 1, width_size=4, depth=2, key=jax.random.key(0))
    x = jnp.ones(3)

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    r = grad_report(loss, model, x, check=True)
    expected = eqx.filter_grad(loss)(model, x)
    got_leaves = jax.tree.leaves(eqx.filter(r.grad, eqx.is_array))
    want_leaves = jax.tree.leaves(eqx.filter(expected, eqx.is_array))
    assert len(got_leaves) == len(want_leaves) > 0
    for got, want in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert r.grad.activation is None  # a static leaf (a function) has no gradient
    assert r.check.passed


def test_python_float_argument():
    r = grad_report(lambda x: x**3, 2.0)
    assert float(r.grad) == pytest.approx(12.0)


# --------------------------------------------------------------------------- non-scalar


def test_jacobian_chooses_rev_when_outputs_are_fewer():
    def f(x):
        return jnp.stack([jnp.sum(x**2), jnp.prod(x)])

    x = jnp.array([1.0, 2.0, 3.0])
    r = grad_report(f, x, check=True)
    assert r.kind == "jacobian" and r.mode == "reverse"
    assert "jacrev" in r.why and "2 output" in r.why
    np.testing.assert_allclose(r.grad, jax.jacrev(f)(x), rtol=1e-6)
    assert r.check.passed


def test_jacobian_chooses_fwd_when_inputs_are_fewer_and_mode_forces():
    def f(x):
        return jnp.outer(x, jnp.arange(1.0, 4.0)).reshape(-1)

    x = jnp.array([0.5, -1.0])
    r = grad_report(f, x)
    assert r.mode == "forward" and "jacfwd" in r.why
    np.testing.assert_allclose(r.grad, jax.jacfwd(f)(x))
    forced = grad_report(f, x, mode="rev")
    assert forced.mode == "reverse" and "--mode rev" in forced.why
    np.testing.assert_allclose(forced.grad, r.grad)


def test_hessian_and_hvp_match_jax():
    def f(x):
        return jnp.sum(jnp.sin(x) * x[0]) + jnp.sum(x**3)

    x = jnp.array([0.3, -0.2, 1.1])
    v = jnp.array([1.0, 2.0, -1.0])
    h = grad_report(f, x, hessian=True, check=True)
    np.testing.assert_allclose(h.grad, jax.hessian(f)(x), rtol=1e-5)
    assert h.kind == "hessian" and h.check.passed
    hv = grad_report(f, x, hvp=v, check=True)
    np.testing.assert_allclose(hv.grad, jax.hessian(f)(x) @ v, rtol=1e-5)
    assert hv.kind == "hvp" and hv.check.passed


def test_while_loop_falls_back_to_forward_mode():
    def f(x):
        def body(c):
            return c[0] * 1.5, c[1] + 1

        out, _ = jax.lax.while_loop(lambda c: c[1] < 3 + (jnp.sum(c[0]) > 1e9), body, (x, 0))
        return jnp.sum(out**2)

    x = jnp.array([1.0, 2.0])
    with pytest.raises(ValueError, match="Reverse-mode"):
        jax.grad(f)(x)
    r = grad_report(f, x, check=True)
    np.testing.assert_allclose(r.grad, 2 * 1.5**6 * x, rtol=1e-5)
    assert r.mode == "forward"
    assert any("forward mode" in n for n in r.notes)
    assert r.check.passed


def test_while_loop_too_large_for_forward_explains(monkeypatch):
    monkeypatch.setattr(derivative, "FORWARD_LIMIT", 1)

    def f(x):
        out, _ = jax.lax.while_loop(
            lambda c: c[1] < 2 + (c[0][0] > 1e9), lambda c: (c[0] * 2, c[1] + 1), (x, 0)
        )
        return jnp.sum(out)

    with pytest.raises(GradError, match=r"while_loop.*lax.scan"):
        grad_report(f, jnp.ones(3))


# --------------------------------------------------------------------------- NaN


def test_nan_from_sqrt_at_zero_names_the_equation_and_line():
    def norm(x):
        return jnp.sqrt(jnp.sum(x**2))  # the culprit line

    r = grad_report(norm, jnp.zeros(3))
    assert not all(leaf.finite for leaf in r.leaves())
    nf = r.nonfinite
    assert nf is not None and nf.where == "gradient" and nf.primitive == "sqrt"
    assert nf.source is not None and "test_autodiff.py" in nf.source and "norm" in nf.source
    assert "sqrt(x + eps)" in nf.fix or "sqrt(jnp.sum(x**2) + eps)" in nf.fix
    assert not nf.masked
    data = json.loads(json.dumps(r.to_dict()))
    assert data["nonfinite"]["primitive"] == "sqrt" and data["nonfinite"]["masked"] is False
    assert data["grad"][0]["finite"] is False and data["grad"][0]["shape"] == [3]


def test_nan_behind_where_suggests_double_where():
    def f(x):
        return jnp.sum(jnp.where(x > 0, jnp.log(x), 0.0))

    r = grad_report(f, jnp.array([0.0, 2.0]))
    assert math.isnan(float(r.grad[0]))
    nf = r.nonfinite
    assert nf.primitive == "log" and nf.masked
    assert "double-where" in nf.fix
    assert "adjoint 0" in nf.detail


def test_nan_in_value_is_found_in_the_forward_pass():
    r = grad_report(lambda x: jnp.sum(jnp.log(x) * 0.0 + x), jnp.array([-1.0, 1.0]))
    assert r.nonfinite.where == "value" and r.nonfinite.primitive == "log"


def test_finite_gradient_has_no_nonfinite_report():
    assert grad_report(lambda x: jnp.sum(x**2), jnp.ones(2)).nonfinite is None


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("arg", "needle"),
    [(2, "`2.0`"), (True, "a float"), (jnp.arange(3), "astype(jnp.float32)")],
)
def test_integer_and_boolean_arguments_are_refused_with_a_fix(arg, needle):
    with pytest.raises(GradError, match="only floating-point") as e:
        grad_report(lambda x: x * 2.0, arg)
    assert needle in str(e.value)


def test_integer_output_is_refused():
    with pytest.raises(GradError, match=r"no derivative.*argmax"):
        grad_report(lambda x: jnp.argmax(x), jnp.ones(3))


def test_leaked_tracer_is_explained():
    saved = []

    def leaky(x):
        saved.append(x)
        return jnp.sum(x**2)

    with pytest.raises(GradError, match="leaks a tracer"):
        grad_report(leaky, jnp.ones(3))


def test_wrt_unknown_name_and_missing_argument():
    with pytest.raises(GradError, match=r"no argument `z`.*v, theta"):
        grad_report(projectile_range, 1.0, 0.2, wrt="z")
    with pytest.raises(GradError, match="does not pass it"):
        grad_report(projectile_range, 1.0, 0.2, wrt="g")
    with pytest.raises(GradError, match="out of range"):
        grad_report(projectile_range, 1.0, 0.2, argnums=3)
    with pytest.raises(GradError, match="names no argument"):
        grad_report(projectile_range, 1.0, 0.2, wrt=" , ")


def test_non_scalar_refused_without_jacobian_and_for_hessian():
    with pytest.raises(GradError, match="not a scalar"):
        grad_report(jnp.sin, jnp.ones(3), jacobian=False)
    with pytest.raises(GradError, match="Hessian needs a scalar"):
        grad_report(jnp.sin, jnp.ones(3), hessian=True)


def test_has_aux_needs_a_pair():
    r = grad_report(lambda x: (jnp.sum(x), {"n": 3}), jnp.ones(2), has_aux=True)
    assert r.aux == {"n": 3}
    np.testing.assert_allclose(r.grad, jnp.ones(2))
    with pytest.raises(GradError, match="pair"):
        grad_report(lambda x: jnp.sum(x), jnp.ones(2), has_aux=True)


def test_hessian_of_custom_vjp_explains():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * jnp.cos(x),))
    with pytest.raises(GradError, match="custom_vjp"):
        grad_report(lambda x: jnp.sum(f(x)), jnp.ones(2), hessian=True)


# --------------------------------------------------------------------------- records


def test_report_is_json_and_escapes_html():
    def f(x):
        return jnp.sum(x**2)

    f.__name__ = "<b>evil</b>"
    r = grad_report(f, jnp.ones(2), check=True)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["grad"][0]["shape"] == [2] and data["check"]["passed"]
    bundle = r._repr_mimebundle_()
    assert "<b>evil</b>" not in bundle["text/html"]
    assert "&lt;b&gt;evil" in bundle["text/html"]
    assert "passed" in bundle["text/plain"]


def test_public_api_exports():
    assert jaxlab.grad_report is grad_report
    assert jaxlab.grad_split is grad_split


# --------------------------------------------------------------------------- split


def test_split_is_consistent_transposed_jvp_is_the_gradient():
    def f(x, w):
        return jnp.sum(jnp.tanh(x * w) ** 2)

    x, w = jnp.array([0.1, -0.4, 0.9]), jnp.array([1.0, 2.0, 0.5])
    s = grad_split(f, x, w, argnums=(0, 1))
    gx, gw = jax.grad(f, argnums=(0, 1))(x, w)
    tx, tw = s.apply_transposed()
    np.testing.assert_allclose(tx, gx, rtol=1e-6)
    np.testing.assert_allclose(tw, gw, rtol=1e-6)
    # The linearized program is the JVP.
    dx, dw = jnp.array([1.0, 0.0, -1.0]), jnp.array([0.5, 0.5, 0.5])
    (lin,) = s.apply_linear([dx, dw])
    _, jvp = jax.jvp(f, (x, w), (dx, dw))
    np.testing.assert_allclose(lin, jvp, rtol=1e-6)
    assert s.n_residuals == len(s.linear.consts) > 0
    assert [e.primitive.name for e in s.primal.eqns].count("tanh") == 1
    assert "tanh" not in [e.primitive.name for e in s.transposed.eqns]  # linear: no tanh


def test_split_graphs_and_html():
    s = grad_split(lambda x: jnp.sum(jnp.sin(x) * x), jnp.ones(2))
    graphs = s.graphs()
    assert [g.title.split(":")[0] for g in graphs] == [
        "primal",
        "linearized (JVP)",
        "transposed (VJP)",
    ]
    assert graphs[0].primitives()["sin"] == 1
    html = s._repr_mimebundle_()["text/html"]
    # Stacked, each program at full width (issue 11), not three columns of a flex row.
    assert html.count('class="jaxlab-split-program"') == 3 and "flex" not in html


def test_failed_check_names_custom_rules():
    @jax.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))
    r = grad_report(lambda x: jnp.sum(clip_gradient(x) ** 2), jnp.array([2.0, 3.0]), check=True)
    np.testing.assert_allclose(r.grad, [0.1, 0.1])  # the rule, not the true 2x
    assert not r.check.passed and r.check.max_error > 0.5
    assert any("custom_vjp clip_gradient" in n for n in r.notes)


def test_graph_option_names_inputs_after_the_argument():
    r = grad_report(
        lambda params, x: jnp.sum(jnp.tanh(x @ params["w"])),
        {"w": jnp.ones((3, 2))},
        jnp.ones((4, 3)),
        graph=True,
    )
    assert r.graph.grad
    assert [n.label for n in r.graph.nodes if n.kind == "input"] == ["params['w']", "x"]
    assert r.graph.node("in0").adjoint is not None


def test_check_runs_in_the_reported_dtypes_and_never_touches_x64():
    # Reading the config inside the function, on every call the check makes: a check
    # that switched jax_enable_x64 on would be seen here (and would change the function).
    seen = []

    def f(x):
        seen.append(bool(jax.config.read("jax_enable_x64")))
        return jnp.sum(jnp.sin(x) ** 2)

    r = grad_report(f, jnp.linspace(0, 1, 5), check=True)
    assert r.check.passed and r.check.dtype == "float32"
    # The check compiles the function once for its evaluations; jax_enable_x64 is part of
    # jit's cache key, so a check that switched it on would trace again and be seen here.
    assert len(seen) >= 2 and not any(seen)
    assert "central differences in float32" in r.check.text()


def test_dropout_loss_with_a_fixed_key_passes_the_check_and_equals_jax_grad():
    key = jax.random.key(0)

    def dropout_loss(w, x):
        keep = jax.random.bernoulli(key, 0.5, x.shape)
        h = jnp.where(keep, x * w / 0.5, 0.0)
        return jnp.sum(jnp.tanh(h) ** 2)

    w, x = jnp.linspace(0.1, 1.0, 8), jnp.linspace(-1.0, 1.0, 8)
    r = grad_report(dropout_loss, w, x, check=True)
    np.testing.assert_allclose(r.grad, jax.grad(dropout_loss)(w, x), rtol=1e-6)
    assert r.check.passed and r.check.max_error < 1e-3
    assert not jax.config.read("jax_enable_x64")


def _planted_sin():
    """sin with a custom_jvp whose derivative is 1.5× too large."""

    @jax.custom_jvp
    def bad_sin(x):
        return jnp.sin(x)

    @bad_sin.defjvp
    def _(primals, tangents):
        return bad_sin(primals[0]), 1.5 * jnp.cos(primals[0]) * tangents[0]

    return lambda x: jnp.sum(bad_sin(x))


def test_planted_wrong_rule_fails_the_first_order_check():
    f, x = _planted_sin(), jnp.array([0.3, 1.1, -0.7])
    r = grad_report(f, x, check=True)
    np.testing.assert_allclose(r.grad, 1.5 * jnp.cos(x), rtol=1e-6)  # the rule's numbers
    assert not r.check.passed and r.check.max_error == pytest.approx(1 / 3, abs=0.02)
    assert not r.check.kink
    assert any("custom_jvp bad_sin" in n for n in r.notes)


def test_planted_wrong_rule_fails_the_hessian_and_hvp_checks():
    f, x = _planted_sin(), jnp.array([0.3, 1.1, -0.7])
    h = grad_report(f, x, hessian=True, check=True)
    np.testing.assert_allclose(h.grad, jnp.diag(-1.5 * jnp.sin(x)), rtol=1e-5, atol=1e-7)
    assert h.check.order == 2 and not h.check.passed
    assert h.check.max_error == pytest.approx(1 / 3, abs=0.02)
    assert "second differences of the value" in h.check.text()
    hv = grad_report(f, x, hvp=jnp.array([1.0, 2.0, 3.0]), check=True)
    assert not hv.check.passed and hv.check.max_error == pytest.approx(1 / 3, abs=0.02)
    # The same checks pass on the true sin: they can tell right from wrong.
    good = grad_report(lambda x: jnp.sum(jnp.sin(x)), x, hessian=True, check=True)
    assert good.check.passed and good.check.max_error < 1e-2


@pytest.mark.parametrize("fn", [jax.nn.relu, jax.nn.selu], ids=["relu", "selu"])
def test_check_at_a_kink_says_so_and_does_not_blame_a_rule(fn):
    r = grad_report(lambda x: jnp.sum(fn(x)), jnp.zeros(3), check=True)
    assert not r.check.passed and r.check.kink
    assert "kink" in r.check.text() and "move the point" in r.check.text()
    assert not any("custom" in n for n in r.notes)
    # Away from the kink (by more than the step) the same check passes.
    shifted = grad_report(lambda x: jnp.sum(fn(x)), jnp.full(3, 0.5), check=True)
    assert shifted.check.passed and not shifted.check.kink


def test_python_number_output_has_a_zero_gradient_as_jax_grad():
    def stub(p):
        return 0.0

    x = jnp.ones(3)
    r = grad_report(stub, x, check=True)
    np.testing.assert_array_equal(r.grad, jax.grad(stub)(x))
    assert float(r.value) == 0.0 and r.check.passed


def test_python_floats_beside_arrays_are_held_fixed_and_named():
    params = {"w": jnp.array([1.0, 2.0]), "scale": 3.0}

    def f(p):
        return p["scale"] * jnp.sum(p["w"] ** 2)

    r = grad_report(f, params, check=True)
    np.testing.assert_allclose(r.grad["w"], [6.0, 12.0])
    assert r.grad["scale"] is None and r.fixed == ("p['scale']",)
    assert any("held fixed" in n and "p['scale']" in n for n in r.notes)
    assert r.check.passed
    # Alone, Python floats are what the user differentiates (as jax.grad).
    alone = grad_report(lambda p: p["a"] ** 2, {"a": 3.0})
    assert float(alone.grad["a"]) == pytest.approx(6.0) and alone.fixed == ()


def test_jax_own_leak_error_is_explained():
    saved = []
    jax.grad(lambda x: saved.append(x) or x)(1.0)
    stale = saved[0]

    def uses_stale(x):
        return x * stale

    with pytest.raises(GradError, match="leaks a tracer"):
        grad_report(uses_stale, 2.0)


def test_check_of_a_jacobian_tests_the_reported_numbers():
    # jacrev follows the custom rule (a clipped cotangent), finite differences do not:
    # the check must compare the Jacobian reported, not a fresh forward-mode one.
    @jax.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def f(x):
        return jnp.stack([jnp.sum(clip_gradient(x) ** 2), jnp.sum(x)])

    x = jnp.array([2.0, 3.0, 1.0])
    r = grad_report(f, x, check=True)
    assert r.kind == "jacobian"
    np.testing.assert_allclose(r.grad, [[0.1, 0.1, 0.1], [1.0, 1.0, 1.0]])
    assert not r.check.passed and r.check.max_error > 0.5
    assert any("custom_vjp clip_gradient" in n for n in r.notes)


def test_jacobian_of_a_pytree_output_in_two_arguments_matches_jax_and_passes_check():
    def f(x, w):
        return {"a": jnp.sin(x) * w, "b": jnp.sum(x * w) ** 2}

    x, w = jnp.array([0.3, -1.2]), jnp.array([2.0, 0.5])
    r = grad_report(f, x, w, argnums=(0, 1), check=True)
    want = jax.jacrev(f, argnums=(0, 1))(x, w)
    for i in range(2):
        for key in ("a", "b"):
            np.testing.assert_allclose(r.grad[i][key], want[key][i], rtol=1e-6)
    assert r.kind == "jacobian" and r.check.passed


# --------------------------------------------------------------------------- words


def test_a_table_of_scalars_has_a_value_column_and_no_empty_ones():
    r = grad_report(lambda x: x**0.5, 2.0)
    lines = r.text().splitlines()
    row = next(line for line in lines if line.strip().startswith("∇ x"))
    cells = row.split()
    # The value once, six digits; no min, max or first entries repeating or empty.
    assert cells[-1] == "0.353553" and row.count("0.353553") == 1
    assert float(cells[-1]) == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-5)
    header = lines[lines.index(row) - 2]
    assert "min" not in header and "first entries" not in header
    html = r._repr_mimebundle_()["text/html"]
    assert "<th>min</th>" not in html and "<th>first entries</th>" not in html
    assert html.count("0.353553") == 1
    # Beside an array, a scalar leaves the array's columns blank instead of repeating.
    mixed = grad_report(lambda x, y: jnp.sum(x) * y, jnp.ones(3), 2.0, argnums=(0, 1))
    text = mixed.text()
    assert "min" in text and "first entries" in text
    scalar_row = next(line for line in text.splitlines() if line.strip().startswith("∇ y"))
    assert scalar_row.split()[-1] == "3"


def test_words_say_ties_plurals_and_a_scalars_one_direction():
    from jaxlab.autodiff.derivative import _mode_why

    assert "a tie" in _mode_why(2, 2) and "beat" not in _mode_why(2, 2)
    assert _mode_why(1, 3).startswith("jacfwd: 1 input element < 3 output elements")
    assert "1 backward pass (VJPs)" in _mode_why(5, 1)
    r = grad_report(lambda x: x**3, 2.0, check=True)
    assert r.check.passed and "along each scalar's one direction" in r.check.text()
    assert len(r.check.args[0].directional_fd) == 1
    r = grad_report(lambda x, y: jnp.sum(x**2) * y, jnp.ones(3), 2.0, argnums=(0, 1), check=True)
    assert "2 random directions per array, a scalar's one direction" in r.check.text()


def test_small_jacobian_is_shown_as_a_matrix():
    a = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    r = grad_report(lambda x: a @ x, jnp.ones(3))
    summary = next(s for s in r.leaves())
    assert summary.whole and summary.first == tuple(np.asarray(a).reshape(-1))
    text = r.text()
    assert "[[1  2   3]" in text and " [4  5   6]" in text and " [7  8  10]]" in text
    assert "…" not in text
    html = r._repr_mimebundle_()["text/html"]
    assert html.count('<table class="matrix">') == 1 and "<td>10</td></tr></table>" in html
    # A large leaf still shows its first entries only.
    big = grad_report(lambda x: jnp.sum(x**2), jnp.ones(20))
    assert "[2, 2, 2, 2, …]" in big.text()


def test_nan_report_names_the_primitive_and_line_in_plain_text_and_code_in_html():
    def norm(x):
        return jnp.sqrt(jnp.sum(x**2))

    r = grad_report(norm, jnp.zeros(3))
    line = next(s for s in r.text().splitlines() if "non-finite in" in s)
    assert "`" not in line and "equation" not in line
    assert line.startswith("the gradient first turns non-finite in sqrt at ")
    assert "test_autodiff.py" in line and "(norm)" in line
    html = r._repr_mimebundle_()["text/html"]
    assert "<code>sqrt</code>" in html and "`" not in html


def test_split_says_one_residual_in_the_singular():
    s = grad_split(lambda x: jnp.sin(x), 1.0)
    assert s.n_residuals == 1
    assert "(1 residual kept" in s.text()
    assert "1 residual kept" in s._repr_mimebundle_()["text/html"]


def test_check_grows_the_step_where_rounding_hides_the_comparison():
    # A large offset: float32's rounding of |f| ~ 1e3 swamps the change a step of 1e-2
    # makes along a random direction in 1000 dimensions; a longer step resolves it.
    x = jnp.linspace(-2.0, 2.0, 1000)
    r = grad_report(lambda x: 1e3 + jnp.sum(jnp.sin(x)), x, check=True)
    (arg,) = r.check.args
    assert r.check.passed and arg.step > 1e-2 and arg.noise <= 0.1


def test_check_too_noisy_to_tell_is_inconclusive_not_passed():
    # 1e6 + 1e-3·Σx: float32 cannot even represent the change; the check must say it
    # cannot tell, and must not blame a rule.
    r = grad_report(lambda x: 1e6 + jnp.sum(1e-3 * x), jnp.ones(4), check=True)
    assert not r.check.passed and not r.check.failed and r.check.inconclusive
    assert "inconclusive" in r.check.text() and "float64" in r.check.text()
    assert not any("custom" in n for n in r.notes)
    assert r.check.to_dict()["inconclusive"] is True


def test_python_float_arguments_are_really_checked():
    # 0.4 is not a float32: the step is taken from float32(0.4), as JAX computes, so
    # the planted wrong rule is caught on a Python float too.
    r = grad_report(_planted_sin(), 0.4, check=True)
    assert r.check.failed and r.check.args[0].directional_fd[0] > 0
    assert grad_report(lambda x: jnp.sin(x), 0.4, check=True).check.passed


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_exact_steps_are_representable_in_the_leaf_dtype(dtype):
    """autodiff.differences: x ± δ are exact in the leaf's dtype, so the difference sees
    the step it was given, and the shifted arguments are those points in that dtype."""
    from jaxlab.autodiff import differences as fd

    x = jnp.asarray(np.linspace(-3.0, 3.0, 13), dtype=dtype)
    direction = np.random.default_rng(0).standard_normal(13)
    delta = fd.exact_step(x, direction, 0.1)
    wide = np.asarray(x, dtype=np.float64)
    for sign in (1.0, -1.0):
        moved = wide + sign * delta
        np.testing.assert_array_equal(np.asarray(moved.astype(dtype), np.float64), moved)
    assert np.count_nonzero(delta) >= 10  # only a rare component left out
    (up,), (down,) = fd.shifted([[x]], [[delta]], 1.0)[0], fd.shifted([[x]], [[delta]], -1.0)[0]
    assert up.dtype == dtype
    np.testing.assert_array_equal(np.asarray(up, np.float64) - wide, delta)
    np.testing.assert_array_equal(wide - np.asarray(down, np.float64), delta)


def test_check_derivative_tells_a_wrong_derivative_from_a_right_one():
    from jaxlab.autodiff.check import check_derivative

    x = jnp.linspace(-1.0, 2.0, 5)

    def run(factor):
        return check_derivative(
            names=("x",),
            diff=[[x]],
            fun=lambda xs: jnp.sum(jnp.sin(xs[0][0])),
            apply=lambda d: factor * jnp.vdot(jnp.cos(x), d[0][0]),
            dtype=jnp.float32,
        )

    good, bad = run(1.0), run(1.5)
    assert good.passed and not good.failed and good.max_error < 1e-3
    assert bad.failed and 0.2 < bad.max_error < 0.5  # |1.5 - 1| / 1.5
