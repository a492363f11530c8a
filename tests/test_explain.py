"""``jaxlab.explain``: one planted error per class in a real IPython shell.

Each test plants the error in a cell, takes the exception IPython recorded and asserts on
the Explanation record: its kind, the user's own line, and the fix, which is then run
(where it is the user's line rewritten) and checked against JAX itself.
"""

import json
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.explain.control_flow import rewrite_for_range, rewrite_if, rewrite_while
from jaxlab.explain.rewrite import rewrite_item_assignment, rewrite_key_reuse
from jaxlab.explain.shapes import broadcast_fix, matmul_fix


def plant(ip, cell):
    """Run ``cell`` (it must fail) and return the exception IPython recorded."""
    ip.run_cell("import jax\nimport jax.numpy as jnp\nimport numpy as np")
    result = ip.run_cell(textwrap.dedent(cell).lstrip("\n"))
    assert result.error_in_exec is not None, "the planted error did not happen"
    return result.error_in_exec


def explained(ip, cell, kind):
    exc = plant(ip, cell)
    found = jaxlab.explain(exc)
    assert found is not None, f"no explanation for {type(exc).__name__}: {exc}"
    assert found.kind == kind
    assert found.error_type == type(exc).__name__  # never replaced
    assert found.error_message == str(exc).strip().splitlines()[0]
    return found


def run_function(body, params, namespace, *args):
    """Define ``def f(params): body`` in ``namespace`` and call it jitted."""
    source = f"def _fixed({params}):\n" + textwrap.indent(body, "    ")
    exec(source, namespace)
    return jax.jit(namespace["_fixed"])(*args)


# --------------------------------------------------------------------------- tracer errors
def test_if_on_a_traced_value_becomes_lax_cond(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def f(x):
            if x > 0:
                return x
            return -x
        f(1.0)
        """,
        "tracer-bool",
    )
    assert found.user_line.text == "if x > 0:"
    assert found.user_line.lineno == 3 and found.user_line.function == "f"
    assert found.user_line.label.startswith("In[") and found.user_line.label.endswith("line 3")
    first = found.fix.splitlines()[0]
    assert first == "return jax.lax.cond(x > 0, lambda: x, lambda: -x)"
    assert found.rewritten
    assert "jnp.where(x > 0, x, -x)" in found.fix
    assert found.docs_url.endswith("#jax.errors.TracerBoolConversionError")
    # the rewritten line compiles and agrees with abs
    assert float(run_function(first, "x", {"jax": jax}, -2.5)) == 2.5


def test_if_assigning_both_branches_passes_the_bound_names_as_operands(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def g(x, y):
            if x > y:
                y = y + 1
                x = x * 2
            return x + y
        g(3.0, 1.0)
        """,
        "tracer-bool",
    )
    assert found.rewritten
    body = found.fix + "\nreturn x + y"
    for x, y in [(3.0, 1.0), (0.0, 1.0)]:
        expected = (x * 2 + y + 1) if x > y else (x + y)
        assert float(run_function(body, "x, y", {"jax": jax}, x, y)) == expected


def test_while_on_a_traced_value_becomes_lax_while_loop(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def h(x):
            while x < 10:
                x = x * 2
            return x
        h(1.0)
        """,
        "tracer-bool",
    )
    assert found.user_line.text == "while x < 10:"
    assert found.fix == "x = jax.lax.while_loop(lambda x: x < 10, lambda x: x * 2, x)"
    assert float(run_function(found.fix + "\nreturn x", "x", {"jax": jax}, 1.0)) == 16.0


def test_while_on_an_integer_argument_offers_static_argnums(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def twice_n(x, n):
            i = 0
            while i < n:
                x = x * 2
                i += 1
            return x
        twice_n(1.0, 3)
        """,
        "tracer-bool",
    )
    assert "x, i = jax.lax.while_loop(cond_fun, body_fun, (x, i))" in found.fix
    assert "@functools.partial(jax.jit, static_argnums=1)" in found.fix
    loop = found.fix.split("\n# or")[0]
    body = "i = 0\n" + loop + "\nreturn x"
    assert float(run_function(body, "x, n", {"jax": jax}, 1.0, 3)) == 8.0


def test_power_loop_becomes_fori_loop_or_static_argnums(ip):
    found = explained(
        ip,
        """
        def power_loop(x, n):
            r = 1.0
            for _ in range(n):
                r = r * x
            return r
        jax.jit(power_loop)(2.0, 3)
        """,
        "tracer-integer",
    )
    assert found.user_line.text == "for _ in range(n):"
    loop, note, static = found.fix.splitlines()
    assert loop == "r = jax.lax.fori_loop(0, n, lambda _, r: r * x, r)"
    assert "`n`" in note
    assert static == "jax.jit(power_loop, static_argnums=1)(2.0, 3)"
    assert float(run_function("r = 1.0\n" + loop + "\nreturn r", "x, n", {"jax": jax}, 2.0, 3)) == 8
    assert float(eval(static, {"jax": jax, "power_loop": ip.user_ns["power_loop"]})) == 8.0


def test_numpy_on_a_tracer_becomes_jnp(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def s(x):
            return np.sin(x)
        s(jnp.ones(3))
        """,
        "tracer-array",
    )
    assert found.user_line.text == "return np.sin(x)"
    assert found.fix == "return jnp.sin(x)"
    out = run_function(found.fix, "x", {"jnp": jnp}, jnp.arange(3.0))
    np.testing.assert_allclose(out, np.sin(np.arange(3.0)), rtol=1e-6)


def test_concrete_size_from_an_argument_asks_for_static_argnums(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def zeros_like_n(n):
            return jnp.zeros(n)
        zeros_like_n(3)
        """,
        "concretization",
    )
    assert found.user_line.text == "return jnp.zeros(n)"
    assert found.fix.startswith("@functools.partial(jax.jit, static_argnums=0)")


def test_float_of_a_tracer_becomes_astype(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def plus_one(x):
            return float(x) + 1
        plus_one(2.0)
        """,
        "concretization",
    )
    assert found.fix == "return x.astype(float) + 1"  # x is data, not a setting: no static


def test_boolean_mask_becomes_where(ip):
    found = explained(
        ip,
        """
        @jax.jit
        def positive_sum(x):
            return x[x > 0].sum()
        positive_sum(jnp.ones(3))
        """,
        "boolean-index",
    )
    first, pad = found.fix.splitlines()
    assert first == "return x.sum(where=x > 0)"
    assert "jnp.extract(x > 0, x, size=K)" in pad
    x = jnp.array([-1.0, 2.0, 3.0])
    assert float(run_function(first, "x", {}, x)) == 5.0


def test_leaked_tracer_names_the_side_effect(ip):
    found = explained(
        ip,
        """
        leak = []
        @jax.jit
        def store(x):
            y = x * 2
            leak.append(y)
            return x
        store(1.0)
        jnp.sin(leak[0])
        """,
        "leaked-tracer",
    )
    assert found.user_line.text == "jnp.sin(leak[0])"
    assert "`leak.append(y)`" in found.what and "line 5" in found.what
    assert found.fix.splitlines()[-1] == "return x, y"


# --------------------------------------------------------------------------- arrays, autodiff, keys
@pytest.mark.parametrize(
    ("line", "fix", "expected"),
    [
        ("x[0] = 1.0", "x = x.at[0].set(1.0)", [1.0, 0.0, 0.0]),
        ("x[1] += 2", "x = x.at[1].add(2)", [0.0, 2.0, 0.0]),
        ("x[1:] = 5.0", "x = x.at[1:].set(5.0)", [0.0, 5.0, 5.0]),
    ],
)
def test_item_assignment_becomes_at(ip, line, fix, expected):
    found = explained(ip, f"x = jnp.zeros(3)\n{line}\n", "item-assignment")
    assert found.user_line.text == line
    assert found.fix == fix
    namespace = {"x": jnp.zeros(3)}
    exec(found.fix, namespace)
    assert namespace["x"].tolist() == expected


def test_grad_of_a_vector_output_offers_jacobian_or_sum(ip):
    found = explained(
        ip,
        """
        def double(x):
            return x * 2
        jax.grad(double)(jnp.ones(3))
        """,
        "grad-non-scalar",
    )
    assert "(3,)" in found.what
    jacobian, _, summed = found.fix.splitlines()
    assert jacobian == "jax.jacrev(double)(jnp.ones(3))"
    namespace = {"jax": jax, "jnp": jnp, "double": ip.user_ns["double"]}
    np.testing.assert_array_equal(eval(jacobian, namespace), 2 * np.eye(3))
    np.testing.assert_array_equal(eval(summed, namespace), [2.0, 2.0, 2.0])


def test_grad_of_an_integer_becomes_a_float(ip):
    found = explained(
        ip,
        """
        def square(x):
            return x ** 2
        jax.grad(square)(3)
        """,
        "grad-integer",
    )
    assert found.fix == "jax.grad(square)(3.0)"
    assert float(eval(found.fix, {"jax": jax, "square": ip.user_ns["square"]})) == 6.0


def test_grad_of_an_integer_name_converts_it(ip):
    found = explained(ip, "def cube(x): return x ** 3\nn = 2\njax.grad(cube)(n)\n", "grad-integer")
    assert found.fix == "jax.grad(cube)(float(n))"


@pytest.fixture
def key_reuse_checks():
    with jax.debug_key_reuse(True):  # the planted cells run on this thread
        yield


def test_key_reuse_splits_the_key(ip, key_reuse_checks):
    found = explained(
        ip,
        """
        k = jax.random.key(0)
        a = jax.random.normal(k)
        b = jax.random.uniform(k)
        """,
        "key-reuse",
    )
    assert found.user_line.text == "b = jax.random.uniform(k)"
    assert "first used at" in found.what and "line 2" in found.what
    assert found.fix == "k, subkey = jax.random.split(k)\nb = jax.random.uniform(subkey)"
    namespace = {"jax": jax, "k": jax.random.key(0)}
    exec(found.fix, namespace)  # with the checks on, the fix itself reuses nothing
    assert 0.0 <= float(namespace["b"]) < 1.0


def test_key_reuse_inside_jit_points_at_the_reusing_line(ip, key_reuse_checks):
    found = explained(
        ip,
        """
        @jax.jit
        def two(key):
            return jax.random.normal(key) + jax.random.normal(key)
        two(jax.random.key(1))
        """,
        "key-reuse",
    )
    assert found.user_line.function == "two"
    assert found.fix.splitlines() == [
        "key1, key2 = jax.random.split(key)",
        "return jax.random.normal(key1) + jax.random.normal(key2)",
    ]


# --------------------------------------------------------------------------- shapes
def test_matmul_mismatch_names_both_shapes_and_transposes(ip):
    found = explained(
        ip, "a = jnp.ones((3, 4))\nb = jnp.ones((3, 4))\nc = a @ b\n", "shape-mismatch"
    )
    assert "(3, 4)" in found.what and "4 and 3" in found.what
    assert found.fix.splitlines()[0].startswith("c = a @ b.T")
    assert "jax.vmap(jnp.dot)(a, b)" in found.fix


def test_dot_mismatch_keeps_the_call(ip):
    found = explained(
        ip, "w = jnp.ones((5, 4))\nxs = jnp.ones((8, 4))\ny = jnp.dot(xs, w)\n", "shape-mismatch"
    )
    assert "`xs` has shape (8, 4)" in found.what and "`w` has shape (5, 4)" in found.what
    assert found.fix.startswith("y = jnp.dot(xs, w.T)")


def test_operands_read_from_dict_entries(ip):
    found = explained(
        ip,
        'batch = {"x": jnp.ones((8, 3))}\nw = jnp.ones((2, 3))\ny = batch["x"] @ w\n',
        "shape-mismatch",
    )
    assert "`batch['x']` has shape (8, 3)" in found.what
    assert found.fix.startswith("y = batch['x'] @ w.T")


def test_broadcast_mismatch_adds_the_missing_axis(ip):
    found = explained(ip, "u = jnp.ones((8, 3))\nv = jnp.ones((8,))\nz = u - v\n", "shape-mismatch")
    assert "(8, 3)" in found.what and "(8,)" in found.what
    fixed = found.fix.split("  #")[0]
    assert fixed == "z = u - v[:, None]"
    namespace = {"u": jnp.ones((8, 3)), "v": jnp.arange(8.0)}
    exec(fixed, namespace)
    assert namespace["z"].shape == (8, 3)


def test_shape_fixes_by_shape():
    assert matmul_fix("a", "b", (2, 5), (2, 3)) == ("a.T @ b", "transpose `a`: (2, 5) → (5, 2)")
    assert matmul_fix("a", "b", (2, 4), (8,))[0] == "a @ b.reshape(4, -1)"
    assert broadcast_fix("b", (3, 4), (4, 3))[0] == "b.T"
    assert broadcast_fix("b", (2, 3, 4), (2, 3))[0] == "b[:, :, None]"
    assert broadcast_fix("b", (5, 7), (3, 2)) is None


# --------------------------------------------------------------------------- memory and NaNs
def test_out_of_memory_explains_preallocation():
    exc = jax.errors.JaxRuntimeError(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 171798691840 bytes."
    )
    found = jaxlab.explain(exc)
    assert found.kind == "out-of-memory"
    assert "160.00 GiB" in found.what
    assert 'XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"' in found.fix
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" in found.fix
    assert found.docs_url.endswith("gpu_memory_allocation.html")
    assert found.user_line is None


def test_other_runtime_errors_are_not_explained():
    assert jaxlab.explain(jax.errors.JaxRuntimeError("INVALID_ARGUMENT: bad")) is None


@pytest.fixture
def nan_checks():
    with jax.debug_nans(True):
        yield


def test_nan_names_the_primitive_and_the_line(ip, nan_checks):
    found = explained(
        ip,
        """
        def root(x):
            y = jnp.sqrt(x)
            return y * 2
        jax.jit(root)(-1.0)
        """,
        "nan",
    )
    assert "`sqrt`" in found.what and "backward" not in found.what
    assert found.user_line.text == "y = jnp.sqrt(x)"
    assert found.fix == "y = jnp.sqrt(jnp.maximum(x, 1e-12))"


def test_nan_in_the_backward_pass_points_at_the_forward_line(ip, nan_checks):
    found = explained(
        ip,
        """
        def h(x):
            return jnp.sqrt(jnp.abs(x)) * x
        jax.grad(h)(0.0)
        """,
        "nan",
    )
    # Which op JAX blames depends on its version and caches (the product, jnp.sqrt's jit,
    # the cotangent sum), and so does its message's form: the explanation names the
    # primitive that JAX's message names.
    named = re.search(r"primitive `(\w+)`", found.what)
    assert named is not None and named.group(1) in found.error_message
    assert "backward pass" in found.what
    assert found.user_line.text == "return jnp.sqrt(jnp.abs(x)) * x"
    fixed = found.fix
    assert fixed == "return jnp.sqrt(jnp.maximum(jnp.abs(x), 1e-12)) * x"
    assert np.isfinite(float(jax.grad(lambda x: run_function(fixed, "x", {"jnp": jnp}, x))(0.0)))


def test_numpy_floating_point_errors_are_not_explained():
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError) as info:
        np.sqrt(np.array(-1.0))
    assert jaxlab.explain(info.value) is None


# --------------------------------------------------------------------------- what is not JAX's
def test_errors_that_are_not_jax_s_get_no_explanation(ip):
    assert jaxlab.explain(plant(ip, "1 / 0")) is None
    assert jaxlab.explain(plant(ip, "1 + 'a'")) is None
    # JAX's words, but raised by the user's own code: not a JAX error
    raised = plant(ip, "raise TypeError('dot_general requires contracting dimensions')")
    assert jaxlab.explain(raised) is None
    assert jaxlab.explain(KeyboardInterrupt()) is None


# --------------------------------------------------------------------------- the record
def test_explanation_is_json_and_renders_escaped(ip):
    found = explained(ip, "x = jnp.zeros(3)\nx[0] = 1.0  # <script>\n", "item-assignment")
    record = json.loads(json.dumps(found.to_dict()))
    assert record["user_line"]["text"] == "x[0] = 1.0  # <script>"
    bundle = found._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "<script>" not in bundle["text/html"] and "&lt;script&gt;" in bundle["text/html"]
    assert bundle["text/plain"] == str(found)
    lines = found.lines()
    assert 2 <= len(lines) <= 4
    assert lines[1].endswith("x[0] = 1.0  # <script>")
    assert lines[2].endswith("x = x.at[0].set(1.0)")


# --------------------------------------------------------------------------- rewrites alone
def _stmt(source):
    import ast

    return ast.parse(textwrap.dedent(source)).body[0]


def test_rewrites_leave_shapes_they_do_not_understand():
    assert rewrite_item_assignment(_stmt("f()[0] = 1")) is None
    assert rewrite_if(_stmt("if a:\n    return 1\nelif b:\n    return 2"), None, "lax", ()) is None
    assert rewrite_while(_stmt("while x < 3:\n    x += 1\n    break"), "lax", {"x"}) is None
    assert rewrite_for_range(_stmt("for i in range(0, n, 2):\n    r = r + i"), "lax", {"r"}) is None
    assert rewrite_key_reuse(_stmt("y = f(k)"), lambda prefix: False) is None


def test_nested_item_assignment_becomes_one_index():
    assert rewrite_item_assignment(_stmt("x[i][j] = v")) == "x = x.at[i, j].set(v)"
    assert rewrite_item_assignment(_stmt("self.w[0] *= 2")) == "self.w = self.w.at[0].multiply(2)"
