"""compile_report / %jit and the %%jit cell cache, against JAX's own numbers."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab import _jax_compat
from jaxlab.compile.cell import CellJit, CellRun
from jaxlab.compile.log import ArgChange, CompileLog
from jaxlab.compile.report import CompileReport, count_equations, count_hlo_instructions
from jaxlab.program import ProgramError


def layer(x, w):
    return jnp.sin(x @ w)


# --------------------------------------------------------------------------- compile_report


def test_report_phases_costs_and_memory():
    def fresh_layer(x, w):  # a new function: nothing cached
        return jnp.sin(x @ w)

    x, w = jnp.ones((4, 3)), jnp.ones((3, 2))
    r = jaxlab.compile_report(fresh_layer, x, w)
    assert r.trace_s > 0 and r.lower_s > 0 and r.compile_s > 0
    assert r.first_run_s > 0 and r.steady_s > 0 and r.steady_runs >= 3
    assert r.cached == ()
    assert r.signature == ("f32[4,3]", "f32[3,2]")
    assert r.flops >= 2 * 4 * 3 * 2  # the matmul; XLA may count the sine's work too
    assert r.transcendentals == 4 * 2  # one sine per output element
    assert r.argument_bytes == 4 * (4 * 3 + 3 * 2)
    assert r.output_bytes == 4 * 4 * 2
    assert r.bytes_accessed > 0
    assert r.equations == len(jax.make_jaxpr(fresh_layer)(x, w).eqns) == 2
    assert r.hlo_instructions == count_hlo_instructions(r.hlo) > 0
    assert "stablehlo" in r.stablehlo or "func.func" in r.stablehlo
    np.testing.assert_allclose(r.value, layer(x, w))
    data = json.loads(json.dumps(r.to_dict()))
    assert data["fun_name"] == "fresh_layer" and "hlo" not in data


def test_report_says_which_phases_came_from_the_cache():
    jitted = jax.jit(lambda x: x * 2)
    x = jnp.ones(3)
    jaxlab.compile_report(jitted, x)
    again = jaxlab.compile_report(jitted, x)
    assert again.cached == ("trace", "lower", "compile")
    assert "(cached)" in str(again)


def test_report_static_arguments_by_name_and_position():
    def scale(x, n):
        return x * n

    x = jnp.arange(3.0)
    by_name = jaxlab.compile_report(scale, x, static_argnames="n", n=3)
    by_pos = jaxlab.compile_report(scale, x, 4, static_argnums=1)
    np.testing.assert_allclose(by_name.value, x * 3)
    np.testing.assert_allclose(by_pos.value, x * 4)
    assert by_name.signature == ("f32[3]",) and by_pos.signature == ("f32[3]",)
    assert "static n" in str(by_name)


def test_equations_count_nested_programs():
    def inner(x):
        return jnp.sin(x) * 2.0  # sin, mul

    def outer(x):
        return jax.jit(inner)(x) + 1.0  # the nested jit call, add

    jaxpr = jax.make_jaxpr(outer)(jnp.ones(2))
    assert len(jaxpr.eqns) == 2
    assert count_equations(jaxpr) == count_equations(jaxpr.jaxpr) == 4


def test_report_bad_input():
    with pytest.raises(TypeError, match="needs a function"):
        jaxlab.compile_report(3, jnp.ones(2))
    with pytest.raises(ValueError, match="already jitted"):
        jaxlab.compile_report(jax.jit(layer), jnp.ones((1, 1)), static_argnums=1)


def test_report_renders():
    r = jaxlab.compile_report(layer, jnp.ones((2, 2)), jnp.ones((2, 2)), show=("hlo",))
    bundle = r._repr_mimebundle_()
    assert "HloModule" in bundle["text/plain"] and "<table>" in bundle["text/html"]
    assert "jit(layer)(f32[2,2], f32[2,2])" in bundle["text/html"]


def test_compat_cost_analysis_shapes():
    class Listed:
        def cost_analysis(self):
            return [{"flops": 3}]

    class Raising:
        def cost_analysis(self):
            raise RuntimeError("no cost model")

    class Nothing:
        def cost_analysis(self):
            return None

    assert _jax_compat.cost_analysis(Listed()) == {"flops": 3.0}
    assert _jax_compat.cost_analysis(Raising()) == {}
    assert _jax_compat.cost_analysis(Nothing()) == {}
    compiled = jax.jit(layer).lower(jnp.ones((2, 2)), jnp.ones((2, 2))).compile()
    assert _jax_compat.cost_analysis(compiled)["flops"] >= 16


# --------------------------------------------------------------------------- %jit


def test_jit_magic_help_lists_its_options(ip):
    doc = ip.find_line_magic("jit").__doc__
    assert all(option in doc for option in ("--static", "--stablehlo", "--hlo", "-o", "--quiet"))
    assert "--static" in ip.find_cell_magic("jit").__doc__


def test_jit_magic_returns_report(ip):
    ip.user_ns.update(layer=layer, x=jnp.ones((2, 3)), w=jnp.ones((3, 4)))
    r = ip.run_line_magic("jit", "-o layer(x, w)")
    assert isinstance(r, CompileReport) and r.signature == ("f32[2,3]", "f32[3,4]")
    with capture_output() as out:
        ip.run_line_magic("jit", "--stablehlo layer(x, w)")
    (shown,) = out.outputs
    assert "stablehlo" in shown.data["text/html"].lower()


def test_jit_magic_static_by_name(ip):
    ip.run_cell("import jax.numpy as jnp\ndef power(x, n):\n    return x ** n\nx = jnp.arange(3.0)")
    r = ip.run_line_magic("jit", "--static n -o power(x, n=3)")
    np.testing.assert_allclose(r.value, np.arange(3.0) ** 3)
    assert r.static_argnames == ("n",)


def test_jit_magic_bad_input_leaves_namespace(ip):
    ip.run_cell(
        "import jax, jax.numpy as jnp\nx = jnp.ones(3)\njitted = jax.jit(jnp.sin)\n"
        "def branchy(x):\n    if x.sum() > 0:\n        return x\n    return -x"
    )
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match="not a function"):
        ip.run_line_magic("jit", "x(3)")
    control_flow = r"(?s)TracerBoolConversionError.*line 5 of `branchy`.*lax\.cond"
    with pytest.raises(UsageError, match=control_flow):
        ip.run_line_magic("jit", "branchy(x)")
    with pytest.raises(UsageError, match="not defined"):
        ip.run_line_magic("jit", "nope(x)")
    with pytest.raises(UsageError, match="already jitted"):
        ip.run_line_magic("jit", "--static 0 jitted(x)")
    with pytest.raises(UsageError, match="give a call"):
        ip.run_line_magic("jit", "")
    # A string argument is held static (as eqx.filter_jit holds it); what fails is then the
    # user's own line, named as such.
    with pytest.raises(UsageError, match=r"(?s)AttributeError.*line 5 of `branchy`"):
        ip.run_line_magic("jit", 'branchy("abc")')
    # The user's own jax.jit receives the string itself: the advice is not `--static`
    # (refused for a jitted function) but the plain function or eqx.filter_jit.
    ip.run_cell("jitted_branchy = jax.jit(branchy)")
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match=r"(?s)compiled by jax\.jit.*eqx\.filter_jit") as e:
        ip.run_line_magic("jit", 'jitted_branchy("abc")')
    assert "--static" not in str(e.value)
    assert {k: v for k, v in ip.user_ns.items() if not k.startswith("_")} == {
        k: v for k, v in before.items() if not k.startswith("_")
    }


# --------------------------------------------------------------------------- %%jit core


SOURCE = "y = jnp.tanh(x @ w) * scale\nz = y + b\nz.sum()"


def plain(source, ns):
    """Run a cell the ordinary way and return (namespace, value)."""
    import ast

    tree = ast.parse(source)
    last = tree.body.pop()
    exec(compile(tree, "<plain>", "exec"), ns)
    return ns, eval(compile(ast.Expression(last.value), "<plain>", "eval"), ns)


def namespace():
    return {
        "jnp": jnp,
        "x": jnp.arange(6.0).reshape(2, 3) / 6,
        "w": jnp.ones((3, 2)),
        "b": jnp.array([0.5, -0.5]),
        "scale": 2.0,
    }


def test_cell_results_equal_the_plain_cell():
    cells = CellJit(CompileLog())
    ns = namespace()
    value, run = cells.run(SOURCE, ns)
    expected_ns, expected = plain(SOURCE, namespace())
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    for name in ("y", "z"):
        np.testing.assert_allclose(ns[name], expected_ns[name], rtol=1e-6)
    assert isinstance(run, CellRun) and run.compiled and run.explanation == "first run"
    assert json.loads(json.dumps(run.to_dict()))["outputs"] == ["y", "z"]
    assert run.inputs == ("x", "w", "b") and run.static == (
        "scale",
    )  # the module jnp is static too, but not shown
    assert run.outputs == ("y", "z")


def test_cell_cache_hit_and_new_shape():
    log = CompileLog()
    cells = CellJit(log)
    ns = namespace()
    with log.recording():
        _, first = cells.run(SOURCE, ns)
        assert first is not None
        name = first.name
        compiles = len(log.for_function(name))
        _, hit = cells.run(SOURCE, ns)
        assert hit is None and len(log.for_function(name)) == compiles == 1
        ns["x"] = jnp.ones((5, 3))
        _, new = cells.run(SOURCE, ns)
    assert new is not None and new.compiled
    assert new.changes == (ArgChange("x", "f32[2,3]", "f32[5,3]"),)
    assert json.loads(json.dumps(new.to_dict()))["changes"] == [
        {"name": "x", "before": "f32[2,3]", "after": "f32[5,3]"}
    ]
    events = log.for_function(name)
    assert len(events) == 2 and events[-1].recompile
    assert events[-1].explanation == "x: f32[2,3] → f32[5,3]"
    assert ns["y"].shape == (5, 2)


def test_cell_static_value_change_recompiles_and_says_why():
    log = CompileLog()
    cells = CellJit(log)
    ns = namespace()
    with log.recording():
        cells.run(SOURCE, ns)
        ns["scale"] = 3.0
        value, run = cells.run(SOURCE, ns)
    assert run is not None and run.changes == (ArgChange("scale", "2.0 (static)", "3.0 (static)"),)
    assert log.for_function(run.name)[-1].explanation == "scale: 2.0 (static) → 3.0 (static)"
    np.testing.assert_allclose(value, plain(SOURCE, dict(namespace(), scale=3.0))[1], rtol=1e-6)


def test_cell_pytree_inputs_and_forced_static():
    cells = CellJit(CompileLog())
    ns = {"jnp": jnp, "params": {"w": jnp.ones(3), "b": jnp.zeros(3)}, "k": 2}
    value, run = cells.run("out = params['w'] * k + params['b']\nout", ns)
    np.testing.assert_allclose(value, 2 * np.ones(3))
    assert run is not None and run.inputs == ("params",)
    ns2 = {"jnp": jnp, "shape": (2, 2)}
    value, _ = cells.run("z = jnp.zeros(shape)\nz", ns2, static=("shape",))
    assert value.shape == (2, 2)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x + 1", None),  # a final expression alone is fine
        ("import math", "assigns no name"),
        ("global y\ny = x", "global y"),
        ("print(x)\ny = x", "jax.debug.print"),
        ("x[0] = 1.0\ny = x", "changes `x` in place"),
        ("d.append(x)\ny = x", "changes `d` in place"),
        ("y = x + undefined_thing", "`undefined_thing`, which is not defined"),
        ("y = x\nif y.sum() > 0:\n    y = -y", r"(?s)line 2 of the cell.*lax\.cond"),
        ("y = x.reshape(7)", "line 1 of the cell: TypeError"),
        ("y = x\nlabel = 'text'", "not a valid JAX type"),
        ("y = cfg * x", "`cfg` is a list"),
    ],
)
def test_cell_bad_input_names_the_problem_and_changes_nothing(source, message):
    cells = CellJit(CompileLog())
    ns = {"x": jnp.ones(3), "d": [], "cfg": [1, 2]}
    snapshot = dict(ns)
    if message is None:
        value, _ = cells.run(source, ns)
        np.testing.assert_allclose(value, 2 * np.ones(3))
        return
    with pytest.raises(ProgramError, match=message):
        cells.run(source, ns)
    assert ns == snapshot and ns["d"] == []


def test_cell_static_name_must_be_read():
    with pytest.raises(ProgramError, match="does not read"):
        CellJit(CompileLog()).run("y = x", {"x": jnp.ones(1)}, static=("n",))


def test_jit_cell_twin():
    ns = {"jnp": jnp, "x": jnp.arange(3.0)}
    value = jaxlab.jit_cell("y = jnp.sin(x)\ny.sum()", ns)
    np.testing.assert_allclose(value, np.sin(np.arange(3.0)).sum(), rtol=1e-6)
    np.testing.assert_allclose(ns["y"], np.sin(np.arange(3.0)), rtol=1e-6)


# --------------------------------------------------------------------------- %%jit magic


def test_cell_magic_value_outputs_and_notes(ip):
    ip.run_cell("import jax.numpy as jnp\nx = jnp.arange(4.0)\nn = 2")
    with capture_output() as out:
        result = ip.run_cell("%%jit\ny = x ** n\ny.sum()")
    assert result.error_in_exec is None
    assert float(result.result) == pytest.approx(14.0)
    np.testing.assert_allclose(ip.user_ns["y"], np.arange(4.0) ** 2)
    assert any("compiled" in o.data["text/plain"] for o in out.outputs)
    with capture_output() as out:
        ip.run_cell("%%jit\ny = x ** n\ny.sum()")
    assert out.outputs == []  # a cache hit is silent
    run = ip.run_cell_magic("jit", "-o", "y = x ** n\ny.sum()")
    assert isinstance(run, CellRun) and not run.compiled
    ip.run_cell("x = jnp.arange(5.0)")
    with capture_output() as out:
        ip.run_cell("%%jit\ny = x ** n\ny.sum()")
    (note,) = out.outputs
    assert "x: f32[4] → f32[5]" in note.data["text/plain"]


def test_cell_magic_failure_leaves_namespace(ip):
    ip.run_cell("import jax.numpy as jnp\nx = jnp.ones(3)")
    before = set(ip.user_ns)
    with pytest.raises(UsageError, match=r"%%jit: the cell calls print"):
        ip.run_cell_magic("jit", "", "y = x\nprint(y)")
    with pytest.raises(UsageError, match=r"lax\.cond"):
        ip.run_cell_magic("jit", "", "y = x * 2\nif y[0] > 1:\n    y = y + 1")
    with pytest.raises(UsageError, match="--stablehlo / --hlo belong to %jit"):
        ip.run_cell_magic("jit", "--hlo", "y = x")
    with pytest.raises(UsageError, match="--static takes names"):
        ip.run_cell_magic("jit", "--static 'a b'", "y = x")
    assert set(ip.user_ns) == before and "y" not in ip.user_ns


def test_cell_magic_static_option(ip):
    ip.run_cell("import jax.numpy as jnp\nshape = (2, 3)")
    run = ip.run_cell_magic("jit", "--static shape -o", "z = jnp.ones(shape)\nz.sum()")
    assert run.static == ("shape",) and float(run.value) == 6.0


def test_cell_magic_first_line_read_once_means_the_same_each_run(ip):
    # The cell form keeps each first line's options (argparse per run was half of what the
    # magic added): a line read before means what it meant, a bad one fails every time.
    ip.run_cell("import jax.numpy as jnp\nshape = (2, 3)\nx = jnp.ones(3)")
    for _ in range(2):
        run = ip.run_cell_magic("jit", "--static shape -o", "z = jnp.ones(shape)\nz.sum()")
        assert run.static == ("shape",) and float(run.value) == 6.0
        assert ip.run_cell_magic("jit", "-q", "z = x * 2\nz.sum()") == 6.0
        with pytest.raises(UsageError, match="--stablehlo / --hlo belong to %jit"):
            ip.run_cell_magic("jit", "--hlo", "y = x")
        with pytest.raises(UsageError, match="--static takes names"):
            ip.run_cell_magic("jit", "--static 'a b'", "y = x")
        with pytest.raises(UsageError, match="options only on its first line"):
            ip.run_cell_magic("jit", "f(x)", "y = x")


# --------------------------------------------------------------------- loops counted whole
# XLA's cost analysis counts a loop body once; the report multiplies by the jaxpr's trips.


def _scan_steps(c, w):
    return jax.lax.scan(lambda c, _: (c @ w, None), c, None, length=1000)[0]


def test_report_counts_a_scan_of_1000_steps_whole():
    c, w = jnp.ones(8), jnp.ones((8, 8))
    r = jaxlab.compile_report(_scan_steps, c, w)
    assert r.flops == pytest.approx(1000 * 2 * 8 * 8, rel=1e-3)  # 128 FLOPs a step
    assert "1,000 steps" in r.loops_note and "loops" in str(r)


def test_report_counts_nested_loops_and_static_fori_bounds():
    c, w = jnp.ones(8), jnp.ones((8, 8))

    def nested(c, w):
        def outer(c, _):
            return jax.lax.scan(lambda c, _: (c @ w, None), c, None, length=10)[0], None

        return jax.lax.scan(outer, c, None, length=100)[0]

    def fori(c, w):
        return jax.lax.fori_loop(0, 50, lambda i, c: c @ w, c)

    # the counter each loop adds is XLA's one FLOP a step: within 1%
    assert jaxlab.compile_report(nested, c, w).flops == pytest.approx(100 * 10 * 128, rel=1e-2)
    assert jaxlab.compile_report(fori, c, w).flops == pytest.approx(50 * 128, rel=1e-2)


def test_report_says_a_while_loop_body_was_counted_once():
    c, w = jnp.ones(8), jnp.ones((8, 8))

    def until(c, w):
        return jax.lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] @ w), (0, c))[1]

    r = jaxlab.compile_report(until, c, w)
    assert r.flops < 2 * 128  # XLA's count: the body once
    assert "while_loop body counted once" in r.loops_note


def test_jit_magic_shows_the_scan_counted_whole(ip):
    ip.user_ns.update(steps=_scan_steps, c=jnp.ones(8), w=jnp.ones((8, 8)))
    r = ip.run_line_magic("jit", "-o steps(c, w)")
    assert r.flops == pytest.approx(128_000, rel=1e-3)
    assert "1,000 steps" in r._repr_mimebundle_()["text/html"]


def test_the_premise_xla_counts_a_loop_body_once_is_checked_not_assumed(monkeypatch):
    from jaxlab.compile import loop_costs

    assert loop_costs.xla_counts_body_once("cpu")  # on CPU: a 10-step probe reads as one step
    monkeypatch.setattr(loop_costs, "xla_counts_body_once", lambda platform: False)
    c, w = jnp.ones(8), jnp.ones((8, 8))
    r = jaxlab.compile_report(_scan_steps, c, w)  # a backend that counts steps: left alone
    assert r.flops < 2 * 128 and r.loops_note == ""
