"""Calls as real code writes them: static arguments passed by position, traces JAX already
cached, modules (equinox, flax nnx) and eqx.filter_jit functions as arguments, hints that
name the real parameter — each checked against plain JAX's numbers (issue 9, items 8-10,
21b, 22)."""

import dataclasses
import functools
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from jax.extend.core import jaxpr_as_fun

import jaxlab
from jaxlab.compile.report import duration
from jaxlab.explain.finding import blamed_parameter
from jaxlab.program.static_leaves import call_with_bound, resolve_static, split_static


def power(x, n):
    r = 1.0
    for _ in range(n):
        r = r * x
    return r


def negate_if(x, neg):
    if neg:
        return -x
    return x


def call(model, v):
    return model(v).sum()


class Scaled(eqx.Module):
    """An equinox module holding an array, a Python float and a function."""

    w: jax.Array
    scale: float
    act: object

    def __call__(self, v):
        return self.act(self.w @ v) * self.scale


def _user_ns(ip):
    return {k: v for k, v in ip.user_ns.items() if not k.startswith("_")}


def _arrays(tree):
    return [leaf for leaf in jax.tree_util.tree_leaves(tree) if eqx.is_array(leaf)]


# --------------------------------------------------------------------------- item 8: statics


def test_static_name_passed_by_position_is_static(ip):
    expected = jax.jit(power, static_argnames="n")(2.0, 3)
    r = jaxlab.compile_report(power, 2.0, 3, static_argnames="n")
    np.testing.assert_allclose(r.value, expected)
    assert r.signature == ("f32[]{weak}",)  # only x is traced
    ip.user_ns.update(power=power)
    m = ip.run_line_magic("jit", "-o --static n power(2.0, 3)")
    np.testing.assert_allclose(m.value, 8.0)
    assert m.static_argnames == ("n",) and "static n" in str(m)


def test_position_maps_to_name_too():
    assert resolve_static(power, (1,), ()) == ((1,), ("n",))
    assert resolve_static(power, (), ("n",)) == ((1,), ("n",))
    r = jaxlab.compile_report(power, 3.0, n=2, static_argnums=1)  # n by keyword
    np.testing.assert_allclose(r.value, 9.0)


def test_unknown_static_name_names_the_parameters(ip):
    ip.user_ns.update(power=power)
    before = _user_ns(ip)
    with pytest.raises(UsageError, match=r"power has no parameter 'm' \(its parameters: x, n\)"):
        ip.run_line_magic("jit", "--static m power(2.0, 3)")
    with pytest.raises(UsageError, match="static position 5"):
        ip.run_line_magic("jit", "--static 5 power(2.0, 3)")
    assert _user_ns(ip) == before


def test_the_advised_static_command_works(ip):
    ip.user_ns.update(power=power, negate_if=negate_if, x=jnp.arange(3.0))
    with pytest.raises(UsageError, match=r"`%jit --static n power\(2\.0, 3\)`") as e:
        ip.run_line_magic("jit", "power(2.0, 3)")
    assert "NAME" not in str(e.value)
    with pytest.raises(UsageError, match=r"`%jit --static neg negate_if\(x, True\)`"):
        ip.run_line_magic("jit", "negate_if(x, True)")
    r = ip.run_line_magic("jit", "-o --static neg negate_if(x, True)")
    np.testing.assert_allclose(r.value, -np.arange(3.0))


# --------------------------------------------------------------------------- item 21b: names


def test_jaxpr_hint_binds_the_parameter_jax_blames(ip):
    ip.user_ns.update(negate_if=negate_if, x=jnp.arange(3.0))
    with pytest.raises(UsageError) as e:
        ip.run_line_magic("jaxpr", "negate_if(x, True)")
    assert "functools.partial(negate_if, neg=True)(x)" in str(e.value)
    assert "n=3" not in str(e.value)
    ip.run_cell("import functools")
    g = ip.run_line_magic("jaxpr", "-o functools.partial(negate_if, neg=True)(x)")
    assert g.primitives() == {"neg": 1}


def test_call_with_bound_keeps_the_other_parameters():
    def f(n, x, y=0):
        return x

    assert call_with_bound("f(3, a, y=b)", f, "n") == "functools.partial(f, n=3)(x=a, y=b)"
    assert call_with_bound("f(a, n=2)", f, "n") is None  # a would bind to n: refused
    assert call_with_bound("g.h(x, neg)", negate_if, "neg") == (
        "functools.partial(g.h, neg=neg)(x)"
    )
    assert call_with_bound("negate_if(x)", negate_if, "neg") is None


def test_blamed_parameter_is_a_parameter_of_the_function():
    try:
        jax.make_jaxpr(negate_if)(jnp.ones(2), True)
    except jax.errors.TracerBoolConversionError as e:
        assert blamed_parameter(negate_if, e) == "neg"
        assert blamed_parameter(lambda a, b: a, e) is None


# --------------------------------------------------------------------------- item 9: caches


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="needs Python 3.12's sys.monitoring")
def test_trace_cached_by_jaxpr_is_flagged(ip):
    def traced_once(x):
        return jnp.sin(x) * 2.0

    ip.user_ns.update(traced_once=traced_once, x=jnp.ones(3))
    fresh = jaxlab.compile_report(lambda x: jnp.cos(x) + 1.0, jnp.ones(3))
    assert "trace" not in fresh.cached
    ip.run_line_magic("jaxpr", "-o traced_once(x)")
    r = ip.run_line_magic("jit", "-o traced_once(x)")
    assert "trace" in r.cached
    assert "trace: " in str(r) and "(cached)" in str(r).splitlines()[1]
    np.testing.assert_allclose(r.value, jnp.sin(jnp.ones(3)) * 2.0)


def test_phase_times_below_a_microsecond():
    assert duration(0.0) == "< 1 µs"
    assert duration(4e-7) == "< 1 µs"
    assert duration(2.5e-6) == "2.5 µs"
    r = jaxlab.compile_report(lambda x: x + 1.0, jnp.ones(2))
    text = str(dataclasses.replace(r, trace_s=0.0, steady_s=0.0))
    assert "trace: < 1 µs" in text and "0.00 µs" not in text and " 0 µs" not in text


# --------------------------------------------------------------------------- item 10: modules


@pytest.fixture
def models():
    mlp = eqx.nn.MLP(3, 2, 5, 2, key=jax.random.key(0))
    scaled = Scaled(jax.random.normal(jax.random.key(1), (2, 3)), 0.5, jnp.tanh)
    linear = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    return {"mlp": mlp, "scaled": scaled, "linear": linear}


@pytest.mark.parametrize("name", ["mlp", "scaled", "linear"])
def test_modules_through_jaxpr_grad_and_jit(ip, models, name):
    model, v = models[name], jnp.array([0.3, -1.2, 2.0])
    ip.user_ns.update(call=call, model=model, v=v)
    expected = call(model, v)
    arrays = _arrays(model)

    g = ip.run_line_magic("jaxpr", "-o call(model, v)")
    (value,) = jaxpr_as_fun(g.jaxpr)(*arrays, v)
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    assert len(g.jaxpr.jaxpr.invars) == len(arrays) + 1  # arrays traced, the rest static

    gg = ip.run_line_magic("jaxpr", "-o --grad call(model, v)")
    if isinstance(model, nnx.Module):
        want = _arrays(nnx.grad(call)(model, v))
    else:
        want = _arrays(eqx.filter_grad(call)(model, v))
    got = jaxpr_as_fun(gg.jaxpr)(*arrays, v)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    twin = jaxlab.jaxpr_graph(call, model, v, grad=True)
    assert twin.primitives() == gg.primitives()

    r = ip.run_line_magic("jit", "-o call(model, v)")
    np.testing.assert_allclose(r.value, expected, rtol=1e-6)
    # the model called itself (jax.jit of an equinox module hashed its arrays and raised)
    called = ip.run_line_magic("jit", "-o model(v)")
    np.testing.assert_allclose(called.value, model(v), rtol=1e-6)
    text = ip.run_line_magic("jaxpr", "-o --text call(model, v)")
    assert "dot_general" in text.text


def test_static_leaves_are_named(models):
    g = jaxlab.jaxpr_graph(call, models["scaled"], jnp.ones(3))
    assert any("model.scale" in n and "model.act" in n for n in g.notes)
    r = jaxlab.compile_report(call, models["scaled"], jnp.ones(3))
    assert r.static_leaves == ("model.scale", "model.act")
    assert "held static (not arrays): model.scale, model.act" in str(r)
    # The float is held static (as eqx.filter_jit holds it): a new value compiles anew.
    assert r.signature == ("f32[2,3]", "f32[3]")


def test_plain_calls_pass_through_unchanged():
    x = jnp.ones(3)
    params = {"w": 1.0, "b": x}
    split = split_static(call, (params, x), {"k": 2})
    assert split.fun is call and split.args[0] is params and not split.changed


def test_filter_jit_function_reported_on_what_it_wraps(ip, models):
    fj = eqx.filter_jit(call)
    mlp, v = models["mlp"], jnp.ones(3)
    ip.user_ns.update(fj=fj, mlp=mlp, v=v)
    r = ip.run_line_magic("jit", "-o fj(mlp, v)")
    np.testing.assert_allclose(r.value, fj(mlp, v), rtol=1e-6)
    assert r.fun_name == "call" and any("equinox.filter_jit" in n for n in r.notes)
    assert "model.activation" in r.static_leaves
    before = _user_ns(ip)
    with pytest.raises(UsageError, match="filter_jit, which holds every non-array"):
        ip.run_line_magic("jit", "--static model fj(mlp, v)")
    assert _user_ns(ip) == before
    g = ip.run_line_magic("jaxpr", "-o fj(mlp, v)")
    (value,) = jaxpr_as_fun(g.jaxpr)(*_arrays(mlp), v)
    np.testing.assert_allclose(value, fj(mlp, v), rtol=1e-6)


def test_lowered_texts_of_a_module_call(models):
    text = jaxlab.stablehlo_text(call, models["mlp"], jnp.ones(3)).text
    assert "stablehlo.dot_general" in text or "dot_general" in text
    assert "HloModule" in jaxlab.hlo_text(call, models["mlp"], jnp.ones(3)).text


def test_users_jax_jit_on_a_module_gets_advice_that_works(ip, models):
    ip.user_ns.update(jcall=jax.jit(call), mlp=models["mlp"], v=jnp.ones(3), call=call)
    with pytest.raises(UsageError, match=r"(?s)compiled by jax\.jit.*eqx\.filter_jit") as e:
        ip.run_line_magic("jit", "jcall(mlp, v)")
    assert "--static" not in str(e.value)
    with pytest.raises(UsageError, match=r"compiled by jax\.jit"):
        ip.run_line_magic("jaxpr", "jcall(mlp, v)")
    # The advice: the plain function works.
    r = ip.run_line_magic("jit", "-o call(mlp, v)")
    np.testing.assert_allclose(r.value, call(models["mlp"], jnp.ones(3)), rtol=1e-6)


def test_partial_of_a_module_call():
    mlp = eqx.nn.MLP(3, 1, 4, 1, key=jax.random.key(2))
    bound = functools.partial(call, mlp)
    r = jaxlab.compile_report(bound, jnp.ones(3))
    np.testing.assert_allclose(r.value, call(mlp, jnp.ones(3)), rtol=1e-6)


def test_one_idea_of_an_array_leaf_for_calls_and_cells(ip):
    """program.leaves is what both split_static (a call's arguments) and %%jit (a cell's
    inputs) call an array: an equinox model's arrays are traced and its activation held
    static in both, and its leaves come back in place."""
    from jaxlab.program.leaves import combine, is_array, is_array_input, partition

    model = eqx.nn.MLP(2, 1, 4, 1, key=jax.random.PRNGKey(0))
    leaves = jax.tree_util.tree_leaves(model)
    traced, statics = partition(leaves)
    assert [i for i, _ in traced] == [i for i, v in enumerate(leaves) if eqx.is_array(v)]
    assert [v for _, v in statics] == [v for v in leaves if not eqx.is_array(v)]
    assert combine([v for _, v in traced], statics) == leaves
    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    assert (is_array(np.float32(1)), is_array(1.0), is_array(spec)) == (True, False, False)
    assert is_array_input(spec)
    # The same model through both paths: the same static leaves, the same numbers.
    split = split_static(lambda m, v: m(v), (model, jnp.ones(2)), {})
    held = [p.removeprefix("m") for p in split.static_paths]
    assert len(held) == len(statics)
    ip.user_ns.update(model=model, v=jnp.ones(2))
    ip.run_cell_magic("jit", "", "y = model(v)")
    want = model(jnp.ones(2))
    np.testing.assert_allclose(ip.user_ns["y"], want, rtol=1e-6)
    np.testing.assert_allclose(split.fun(*split.args), want, rtol=1e-6)


# ------------------------------------------------ %%jit writes an nnx module's state back


class _Counted(nnx.Module):
    """A layer that counts its calls in an nnx.Variable, as a user's module might."""

    def __init__(self, rngs):
        self.linear = nnx.Linear(3, 2, rngs=rngs)
        self.calls = nnx.Variable(jnp.array(0))

    def __call__(self, x):
        self.calls[...] = self.calls[...] + 1
        return self.linear(x)


def test_jit_cell_writes_an_nnx_modules_mutated_state_back(ip):
    """A %%jit cell that updates a BatchNorm's running statistics and a counter
    Variable leaves the user's modules as plain execution of the same cell does."""
    x = jax.random.normal(jax.random.key(3), (8, 3)) * 2.0 + 1.0
    plain = {"bn": nnx.BatchNorm(3, rngs=nnx.Rngs(0)), "counted": _Counted(nnx.Rngs(1))}
    ip.user_ns.update(bn=nnx.BatchNorm(3, rngs=nnx.Rngs(0)), counted=_Counted(nnx.Rngs(1)), x=x)
    bn, counted = ip.user_ns["bn"], ip.user_ns["counted"]
    cell = "y = bn(x)\nz = counted(x)"
    for step in range(1, 4):  # the first run compiles, the next ones are cache hits
        ip.run_cell_magic("jit", "", cell)
        want_y, want_z = plain["bn"](x), plain["counted"](x)
        np.testing.assert_allclose(ip.user_ns["y"], want_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ip.user_ns["z"], want_z, rtol=1e-5, atol=1e-6)
        assert int(counted.calls[...]) == step
        np.testing.assert_allclose(bn.mean[...], plain["bn"].mean[...], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(bn.var[...], plain["bn"].var[...], rtol=1e-5, atol=1e-7)
    # The modules are the user's own objects, updated in place, not replaced.
    assert ip.user_ns["bn"] is bn and ip.user_ns["counted"] is counted


def test_failing_jit_cell_leaves_an_nnx_module_unchanged(ip):
    counted = _Counted(nnx.Rngs(1))
    ip.user_ns.update(counted=counted, x=jnp.ones((2, 3)))
    with pytest.raises(UsageError):
        ip.run_cell_magic("jit", "", "z = counted(x)\nw = z[jnp.zeros(3)]")
    assert int(counted.calls[...]) == 0
    assert "z" not in ip.user_ns


# --------------------------------------------------------------------------- issue 22: outputs


def _training_step():
    """An equinox MLP trained by optax under eqx.filter_jit: the step returns the updated
    model, whose activation function JAX cannot return (eqx.filter_jit passes it through)."""
    import optax

    model = eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(0))
    opt = optax.sgd(1e-1)
    state = opt.init(eqx.filter(model, eqx.is_array))
    x, y = jnp.linspace(-1.0, 1.0, 8).reshape(4, 2), jnp.ones((4, 1))

    def loss(m, x, y):
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)

    @eqx.filter_jit
    def step(model, state, x, y):
        value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
        updates, state = opt.update(grads, state)
        return value, eqx.apply_updates(model, updates), state

    return step, loss, model, state, x, y


def test_a_filter_jit_training_step_returning_the_model_works_in_every_magic(ip):
    step, loss, model, state, x, y = _training_step()
    ip.user_ns.update(step=step, loss=loss, model=model, state=state, x=x, y=y)
    before = _user_ns(ip)
    value, new_model, _ = step(model, state, x, y)  # eqx.filter_jit's own answer
    arrays = [*_arrays(model), *_arrays(state), x, y]

    # %jaxpr: the program returns the arrays; the activation passes through, and is named.
    g = ip.run_line_magic("jaxpr", "-o step(model, state, x, y)")
    out = jaxpr_as_fun(g.jaxpr)(*arrays)
    np.testing.assert_allclose(out[0], value, rtol=1e-6)
    for a, b in zip(out[1 : 1 + len(_arrays(new_model))], _arrays(new_model), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert any("returned as they are" in n and "[1].activation" in n for n in g.notes)
    text = ip.run_line_magic("jaxpr", "-o --text step(model, state, x, y)")
    assert "dot_general" in text.text

    # %jit: the report's value is the step's own output, the model whole (its activation).
    r = ip.run_line_magic("jit", "-o step(model, state, x, y)")
    assert r.fun_name == "step"
    np.testing.assert_allclose(r.value[0], value, rtol=1e-6)
    assert r.value[1].activation is model.activation
    assert eqx.tree_equal(r.value[1], new_model, rtol=1e-6, atol=1e-7)

    # %jaxpr --grad of a step that returns a tuple is refused with the reason; of its loss,
    # drawn, and equal to equinox's gradient.
    with pytest.raises(UsageError, match=r"returns a tuple of \d+ arrays, not a float scalar"):
        ip.run_line_magic("jaxpr", "--grad step(model, state, x, y)")
    gg = ip.run_line_magic("jaxpr", "-o --grad loss(model, x, y)")
    got = jaxpr_as_fun(gg.jaxpr)(*_arrays(model), x, y)
    want = _arrays(eqx.filter_grad(loss)(model, x, y))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert _user_ns(ip) == before


def test_plain_function_returning_a_model_passes_it_through_under_filter_jit():
    model = eqx.nn.MLP(2, 1, 4, 1, key=jax.random.key(3))

    @eqx.filter_jit
    def scaled(m, k):
        return jax.tree_util.tree_map(lambda a: a * k if eqx.is_array(a) else a, m)

    split = split_static(scaled, (model, 2.0), {})
    dynamic = jax.jit(split.fun)(*split.args)  # plain jax.jit takes it: arrays only out
    assert split.outputs.paths == (".activation", ".final_activation")
    assert dynamic.activation is None
    back = split.outputs.rebuild(dynamic)
    assert back.activation is model.activation
    assert eqx.tree_equal(back, scaled(model, 2.0), rtol=1e-6)


def test_a_filter_jit_function_of_arrays_is_answered_from_the_cache_the_second_time():
    @eqx.filter_jit
    def wave(x, y):
        return {"out": jnp.sin(x) * y, "how": jnp.sin}  # a function passed through

    x = jnp.ones(3)
    first, second = jaxlab.compile_report(wave, x, x), jaxlab.compile_report(wave, x, x)
    # (A cached trace is told on Python 3.12 only, by sys.monitoring.)
    assert first.cached == () and {"lower", "compile"} <= set(second.cached)
    assert second.value["how"] is jnp.sin
    np.testing.assert_allclose(second.value["out"], jnp.sin(x), rtol=1e-6)


class _Dropped(nnx.Module):
    """A flax nnx model whose call changes its state: dropout advances its RNG count."""

    def __init__(self, rngs):
        self.lin = nnx.Linear(4, 4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.lin(x))


def test_jit_of_a_stateful_nnx_call_reports_it_and_leaves_the_module_as_it_was(ip):
    x = jnp.ones((2, 4))
    reference = _Dropped(nnx.Rngs(0))  # nnx itself, eagerly: two calls, two masks
    want = [reference(x), reference(x)]
    assert not np.allclose(want[0], want[1])
    model = _Dropped(nnx.Rngs(0))
    ip.user_ns.update(m=model, x=x)
    with capture_output():
        r = ip.run_line_magic("jit", "-o m(x)")  # raised TraceContextError (module closed over)
    assert r.fun_name == "_Dropped"
    np.testing.assert_allclose(r.value, want[0], rtol=1e-6)  # the call as nnx makes it
    np.testing.assert_allclose(model(x), want[0], rtol=1e-6)  # its RNG count not advanced
    for expected in want[1:]:  # a %%jit cell is the user's call: it writes the count back
        with capture_output():
            ip.run_cell_magic("jit", "", "y = m(x)")
        np.testing.assert_allclose(ip.user_ns["y"], expected, rtol=1e-6)
    ip.user_ns["closes"] = lambda v: model(v)  # the module closed over: jax.jit cannot
    with pytest.raises(UsageError, match=r"Run it in a %%jit cell.*`y = closes\(x\)`"):
        ip.run_line_magic("jit", "closes(x)")
