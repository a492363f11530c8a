"""Every entry of ``jaxlab._jax_compat`` on the installed JAX, and its fallback.

Each entry reaches for something private or version-dependent: the first test of each
pair says the installed JAX still has what the entry expects (a JAX release that moves
it fails here, not in a user's notebook); the second that the guard falls back quietly.
"""

import traceback
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import _jax_compat
from jaxlab.compile.log import CompileLog

# Its cases are what differs between JAX versions: every one runs in the 3.11 run too.
pytestmark = pytest.mark.every_case


# --------------------------------------------------------------------------- compile log
def _traced_calls(run):
    """What the two compile-log readers find from inside JAX's duration listener."""
    import jax.monitoring as monitoring

    found = []

    def listener(event, duration_secs, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            found.append(("trace", _jax_compat.jit_call_being_traced()))
        elif event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            found.append(("lower", _jax_compat.jaxpr_being_lowered()))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        run()
    finally:
        monitoring.unregister_event_duration_listener(listener)
    return found


def test_jit_call_being_traced_on_installed_jax():
    def scaled(x, n, *, y):
        return x * n + y["a"]

    jitted = jax.jit(scaled, static_argnums=1)
    found = _traced_calls(lambda: jitted(jnp.ones(3), 2, y={"a": 1.0}))
    traced = [c for kind, c in found if kind == "trace"]
    assert traced and all(c is not None for c in traced)  # jnp.ones's eager ops too
    (call,) = [c for c in traced if c.defined_at.startswith("scaled at ")]
    assert call.fun is scaled
    assert call.args[1] == 2 and 1 in call.static_argnums and "y" in call.kwargs
    assert call.arg_names == ("x", "y['a']")
    assert [str(a.shape) for a in call.avals] == ["(3,)", "()"]
    assert call.defined_at.startswith("scaled at ") and call.defined_at.endswith(
        f"test_jax_compat.py:{scaled.__code__.co_firstlineno}"
    )
    lowered = [c for kind, c in found if kind == "lower"]
    assert lowered and all(c is not None for c in lowered)
    (program,) = [c for c in lowered if c.defined_at == call.defined_at]
    assert program.fun is None and program.arg_names == ("x", "y['a']")


def test_jit_call_readers_fallback(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_JIT_TRACE_FRAME", ("_gone_away", "pjit.py"))
    monkeypatch.setattr(_jax_compat, "_LOWERING_LOCALS", ("no_such_local",))

    def fallback(x):
        return jnp.sin(x).sum()

    found = _traced_calls(lambda: jax.jit(fallback)(jnp.ones(2)))
    assert found and all(c is None for _, c in found)
    log = CompileLog()
    g = jax.jit(fallback)
    with log.recording():  # without the call, the log still records and says it cannot tell
        g(jnp.ones(3))
        g(jnp.ones(4))
    first, second = log.for_function("fallback")
    assert first.explanation == "first compilation"
    assert second.recompile and second.explanation.startswith("compiled again")
    assert _jax_compat.jit_call_being_traced() is None  # outside a trace: None, no error


# --------------------------------------------------------------------------- jit report
def test_cost_analysis_on_installed_jax():
    n = 4
    compiled = jax.jit(jnp.matmul).lower(jnp.ones((n, n)), jnp.ones((n, n))).compile()
    costs = _jax_compat.cost_analysis(compiled)
    assert costs["flops"] == 2 * n**3  # a multiply and an add per term
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in costs.items())


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([{"flops": 3}], {"flops": 3.0}),  # older JAX: one dict per device program
        ([], {}),
        (None, {}),  # a backend without a cost model
    ],
)
def test_cost_analysis_older_shapes(answer, expected):
    class Compiled:
        def cost_analysis(self):
            return answer

    assert _jax_compat.cost_analysis(Compiled()) == expected


def test_cost_analysis_when_the_backend_raises_or_has_none():
    class Raising:
        def cost_analysis(self):
            raise RuntimeError("no cost model")

    assert _jax_compat.cost_analysis(Raising()) == {}
    assert _jax_compat.cost_analysis(object()) == {}


# --------------------------------------------------------------------------- autodiff
def test_bind_equation_on_installed_jax():
    closed = jax.make_jaxpr(lambda x: jnp.split(x, 2))(jnp.arange(4.0))
    (eqn,) = closed.eqns
    assert eqn.primitive.multiple_results
    left, right = _jax_compat.bind_equation(eqn, [jnp.arange(4.0)])
    np.testing.assert_array_equal(left, [0.0, 1.0])
    np.testing.assert_array_equal(right, [2.0, 3.0])
    closed = jax.make_jaxpr(lambda x: jax.jit(jnp.cos)(x))(1.0)
    (eqn,) = closed.eqns  # a call primitive: its jaxpr travels in the params
    (out,) = _jax_compat.bind_equation(eqn, [jnp.float32(0.5)])
    assert float(out) == pytest.approx(np.cos(0.5))


def test_bind_equation_older_bind_params():
    """JAX < 0.4.36: ``get_bind_params`` returned ``(subfuns, params)``."""
    calls = []

    class Primitive:
        multiple_results = False

        def get_bind_params(self, params):
            return ["subfun"], {"scale": params["scale"]}

        def bind(self, *args, **params):
            calls.append((args, params))
            return args[1] * params["scale"]

    equation = SimpleNamespace(primitive=Primitive(), params={"scale": 3})
    assert _jax_compat.bind_equation(equation, [2]) == [6]
    assert calls == [(("subfun", 2), {"scale": 3})]


# --------------------------------------------------------------------------- errors (explain)
def test_transformation_source_traceback_on_installed_jax():
    with jax.debug_nans(True), pytest.raises(FloatingPointError) as info:
        jax.grad(lambda x: jnp.sqrt(jnp.abs(x)) * x)(0.0)
    tb = _jax_compat.transformation_source_traceback(info.value)
    assert tb is not None  # this JAX still chains the stack from before the grad
    lines = [(f.filename, f.line) for f in traceback.extract_tb(tb)]
    assert (__file__, "jax.grad(lambda x: jnp.sqrt(jnp.abs(x)) * x)(0.0)") in lines


def test_transformation_source_traceback_fallback():
    assert _jax_compat.transformation_source_traceback(ValueError("plain")) is None

    class Renamed(Exception):  # a JAX that renames the class: recognised by name only
        pass

    try:
        raise FloatingPointError("nan") from Renamed()
    except FloatingPointError as e:
        assert _jax_compat.transformation_source_traceback(e) is None


def test_xla_runtime_error_on_installed_jax():
    def fails(x):
        raise ValueError("inside the callback")

    shape = jax.ShapeDtypeStruct((), jnp.float32)
    with pytest.raises(Exception) as info:
        jax.jit(lambda x: jax.pure_callback(fails, shape, x))(1.0).block_until_ready()
    assert _jax_compat.is_xla_runtime_error(info.value)
    assert _jax_compat.is_xla_runtime_error(jax.errors.JaxRuntimeError("x"))


def test_xla_runtime_error_older_name():
    class XlaRuntimeError(RuntimeError):  # the name older jaxlib releases used
        pass

    assert _jax_compat.is_xla_runtime_error(XlaRuntimeError("x"))
    assert not _jax_compat.is_xla_runtime_error(RuntimeError("x"))


# --------------------------------------------------------------------------- timing
def test_hook_array_conversions_on_installed_jax():
    seen = []

    def wrap(name, method):
        def hooked(self, *args, **kwargs):
            seen.append(name)
            return method(self, *args, **kwargs)

        return hooked

    undo = _jax_compat.hook_array_conversions(("__float__", "item", "__bool__"), wrap)
    assert undo is not None  # this jaxlib's array class can be observed
    try:
        x = jnp.arange(3.0)
        assert float(x[1]) == 1.0 and x[2].item() == 2.0 and bool(x[1])
    finally:
        undo()
    assert seen == ["__float__", "item", "__bool__"]
    float(jnp.ones(()))  # restored: no longer observed
    assert seen == ["__float__", "item", "__bool__"]


def test_hook_array_conversions_fallback_on_a_class_that_refuses_attributes(monkeypatch):
    class Frozen(type(jax.Array)):
        def __setattr__(cls, name, value):
            raise TypeError("immutable type")

    class FrozenArray(jax.Array, metaclass=Frozen):
        def __float__(self):
            return 1.0

        def item(self):
            return 2.0

    original = dict(FrozenArray.__dict__)
    monkeypatch.setattr(jax, "device_put", lambda _: object.__new__(FrozenArray))
    assert _jax_compat.hook_array_conversions(("__float__", "item"), lambda n, m: m) is None
    assert dict(FrozenArray.__dict__) == original  # nothing changed
    monkeypatch.setattr(jax, "device_put", lambda _: object())  # not an array at all
    assert _jax_compat.hook_array_conversions(("__float__",), lambda n, m: m) is None


# --------------------------------------------------------------------------- key lineage
def test_key_data_now_on_installed_jax():
    key = jax.random.key(3)
    assert hasattr(key, _jax_compat._KEY_BASE_ARRAY)  # the fast path is taken
    assert np.array_equal(_jax_compat.key_data_now(key), np.asarray(jax.random.key_data(key)))
    keys = jax.random.split(key, 4)
    assert _jax_compat.key_data_now(keys).shape == (4, 2)


def test_key_data_now_fallback(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_KEY_BASE_ARRAY", "_gone_away")
    key = jax.random.key(4)
    assert np.array_equal(_jax_compat.key_data_now(key), np.asarray(jax.random.key_data(key)))


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_key_impl_now_on_installed_jax(impl):
    from jaxlab.keys.track import _impl

    key = jax.random.key(3, impl=impl)
    assert _jax_compat.key_impl_now(key) is not None  # the fast path is taken
    assert _jax_compat.key_impl_now(jax.random.key(4, impl=impl)) is _jax_compat.key_impl_now(key)
    assert _impl(key) == _impl(key) == str(jax.random.key_impl(key))
    assert impl in _impl(key)


def test_key_impl_now_fallback(monkeypatch):
    from jaxlab.keys.track import _impl

    monkeypatch.setattr(_jax_compat, "_KEY_IMPL", "_gone_away")
    key = jax.random.key(5, impl="rbg")
    assert _jax_compat.key_impl_now(key) is None
    assert _impl(key) == str(jax.random.key_impl(key))  # by the key type's name instead


def test_watch_key_unpacking_on_installed_jax():
    seen = []

    def watch(array, keys):
        made = tuple(keys)
        seen.append((array, made))
        return iter(made)

    undo = _jax_compat.watch_key_unpacking(watch)
    assert undo is not None  # the watch is taken on this JAX
    try:
        out = jax.random.split(jax.random.key(8), 3)
        a, b, c = out
    finally:
        undo()
    ((array, made),) = seen
    assert array is out and made == (a, b, c)
    keys = jax.random.key_data(out)
    assert all(np.array_equal(jax.random.key_data(k), keys[i]) for i, k in enumerate(made))
    tuple(out)  # undone: no longer watched
    assert len(seen) == 1


def test_watch_key_unpacking_takes_a_compiled_iter_made_from_jax_s_own():
    made_from = []

    def compiled(original):  # what jaxlab.keys.hot.watch hands over: JAX's __iter__ in
        made_from.append(original)
        return lambda self: iter(tuple(original(self))[::-1])  # (reversed: seen to be ours)

    undo = _jax_compat.watch_key_unpacking(lambda array, keys: keys, compiled)
    assert undo is not None
    try:
        out = jax.random.split(jax.random.key(8), 3)
        a, _, c = out
    finally:
        undo()
    (original,) = made_from
    assert callable(original) and original.__name__ == "__iter__"
    first, _, last = out  # undone: JAX's own order again
    assert np.array_equal(jax.random.key_data(a), jax.random.key_data(last))
    assert np.array_equal(jax.random.key_data(c), jax.random.key_data(first))


def test_watch_key_unpacking_fallback(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_KEY_ARRAY_CLASS", "GoneAway")
    assert _jax_compat.watch_key_unpacking(lambda array, keys: keys) is None


def test_key_bases_of_on_installed_jax():
    keys = jax.random.split(jax.random.key(9), 2)
    base, legacy = _jax_compat.key_bases_of([keys, np.zeros(2, np.uint32)])
    assert base is not None and np.array_equal(np.asarray(base), jax.random.key_data(keys))
    assert legacy is None


def test_key_bases_of_fallback(monkeypatch):
    from jaxlab.keys.calls import data_bytes

    keys = jax.random.split(jax.random.key(10), 3)
    legacy = jax.random.split(jax.random.PRNGKey(10), 2)
    want = [np.asarray(jax.random.key_data(keys)).tobytes(), np.asarray(legacy).tobytes()]
    assert data_bytes([keys, legacy]) == want
    monkeypatch.setattr(_jax_compat, "_KEY_BASE_ARRAY", "_gone_away")
    assert _jax_compat.key_bases_of([keys]) == [None]
    assert data_bytes([keys, legacy]) == want  # through jax.random.key_data instead


def test_tracing_loop_body_on_installed_jax():
    seen = []

    def body(carry, x):
        seen.append(_jax_compat.tracing_loop_body())
        return carry, x

    jax.lax.scan(body, 0.0, jnp.ones(3))
    jax.lax.fori_loop(0, 3, lambda i, c: (seen.append(_jax_compat.tracing_loop_body()), c)[1], 0)
    jax.jit(lambda x: (seen.append(_jax_compat.tracing_loop_body()), x)[1])(1.0)
    assert seen == [True, True, False]
    assert _jax_compat.tracing_loop_body() is False


def test_tracing_loop_body_fallback(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_LOOP_MODULE", ("gone", "away.py"))
    seen = []

    def body(c, x):
        seen.append(_jax_compat.tracing_loop_body())
        return c, x

    jax.lax.scan(body, 0.0, jnp.ones(2))
    assert seen == [False]  # keys inside loops are then recorded by callback: slower, correct


def test_scan_counts_on_installed_jax():
    def f(key, x):
        body = lambda c, xs: ((c[0], c[1] + xs), None)  # noqa: E731
        return jax.lax.scan(body, (key, 0.0), x)

    closed = jax.make_jaxpr(f)(jax.random.key(0), jnp.ones(3))
    (scan,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    consts, carry = _jax_compat.scan_counts(scan.params)
    assert consts + carry + 1 == len(scan.invars)  # one scanned-over input
    assert carry >= 1


def test_scan_counts_fallback():
    assert _jax_compat.scan_counts({"num_consts": 2, "num_carry": 1}) == (2, 1)
    with pytest.raises(NotImplementedError):
        _jax_compat.scan_counts({"ft_in": None})


def test_a_failing_callbacks_log_line_is_held_back_only_inside_the_check(caplog):
    import logging

    import numpy as np

    from jaxlab._jax_compat import CALLBACK_LOGGER, callbacks_failing_quietly

    def refuse(x):
        raise ValueError("did not converge")

    @jax.jit
    def solve(x):
        return jax.pure_callback(refuse, jax.ShapeDtypeStruct((), np.float32), x)

    def failures():
        caplog.clear()
        with pytest.raises(Exception, match="did not converge"):
            solve(np.float32(1.0)).block_until_ready()
        return [r for r in caplog.records if r.name == CALLBACK_LOGGER]

    with caplog.at_level(logging.ERROR, logger=CALLBACK_LOGGER):
        assert failures()  # JAX logs it under this name (else the check's notes would show)
        with callbacks_failing_quietly():
            assert failures() == []
        assert failures()  # the user's own callbacks' failures are logged as before


# --------------------------------------------------------------------------- profile join
def test_executable_fingerprint_on_installed_jax():
    """The installed JAX gives a compiled program's fingerprint, the same for the same
    program compiled again and another for another program."""

    def compiled(f):
        return jax.jit(f).lower(jnp.ones(3)).compile()

    first = _jax_compat.executable_fingerprint(compiled(jnp.sin))
    assert isinstance(first, bytes) and first
    assert _jax_compat.executable_fingerprint(compiled(jnp.sin)) == first
    assert _jax_compat.executable_fingerprint(compiled(jnp.cos)) != first


@pytest.mark.parametrize(
    "executable",
    [None, SimpleNamespace(), SimpleNamespace(xla_executable=SimpleNamespace(fingerprint=b""))],
)
def test_executable_fingerprint_falls_back_to_none(executable):
    assert _jax_compat.executable_fingerprint(SimpleNamespace(_executable=executable)) is None


def test_mend_trace_state_on_installed_jax():
    from jax._src import core

    assert _jax_compat.mend_trace_state() is False  # a sound state is left alone
    core.trace_ctx.set_trace(None)  # where an interrupt inside JAX 0.12's bind leaves it
    try:
        with pytest.raises(AttributeError, match="process_primitive"):
            jax.lax.sin(1.0)  # JAX itself cannot run (bind: no cached fast path)
    finally:
        mended = _jax_compat.mend_trace_state()
    assert mended is True and float(jax.lax.sin(0.0)) == 0.0
    assert core.trace_ctx.is_top_level() and _jax_compat.mend_trace_state() is False


def test_mend_trace_state_fallback(monkeypatch):
    from jax._src import core

    monkeypatch.delattr(core, "trace_ctx")  # a JAX that moved it: nothing mended
    assert _jax_compat.mend_trace_state() is False
