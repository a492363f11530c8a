"""Every entry of ``jaxlab._jax_compat`` on the installed JAX, and its fallback.

Each entry reaches for something private or version-dependent: the first test of each
pair says the installed JAX still has what the entry expects (a JAX release that moves
it fails here, not in a user's notebook); the second that the guard falls back quietly.
"""

import logging
import traceback
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import _jax_compat
from jaxlab.compile.log import ArgChange, CompileLog


# --------------------------------------------------------------------------- compile log
def test_compile_message_loggers_on_installed_jax():
    assert _jax_compat.compile_message_loggers() == {
        "jax._src.interpreters.partial_eval": False,
        "jax._src.interpreters.pxla": True,  # the argument types come at DEBUG
        "jax._src.compiler": False,
        "jax._src.compilation_cache": False,
    }


def test_compile_message_loggers_fallback(monkeypatch):
    monkeypatch.setattr(_jax_compat, "_COMPILE_MESSAGE_LOGGERS", {"jax._src.gone_away": True})
    assert _jax_compat.compile_message_loggers() == {"jax": False}

    def fallback(x):  # a function JAX has not seen: its first compilation is logged
        return jnp.sin(x).sum()

    log = CompileLog()
    g = jax.jit(fallback)
    handlers = list(logging.getLogger("jax").handlers)
    with log.recording():  # explanations still arrive through the `jax` logger
        g(jnp.ones(2))
        g(jnp.ones(3))
    first, second = log.for_function("fallback")
    assert second.changes == (ArgChange("x", "f32[2]", "f32[3]"),)
    assert first.signature == ()  # no argument types without pxla's DEBUG records
    assert logging.getLogger("jax").handlers == handlers  # the fallback logger is left clean


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
