"""%grad and %%grad in a real IPython shell: results, displays, and bad input."""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from jaxlab import GradReport, GradSplit
from jaxlab.magics._options import split_options
from jaxlab.magics.grad import _VALUED

SETUP = """
import jax, jax.numpy as jnp
def R(v, theta, g=9.81):
    return v ** 2 * jnp.sin(2 * theta) / g
def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)
w = jnp.full((3, 2), 0.3)
x = jnp.ones((4, 3))
n = 3
"""


@pytest.fixture
def shell(ip):
    ip.run_cell(SETUP)
    return ip


def _names(ip):
    return {k for k in ip.user_ns if not k.startswith("_i") and k not in ("_", "__", "___")}


def test_split_options():
    assert split_options("--wrt x,y -o f(x, -1)", _VALUED) == ("--wrt x,y -o", "f(x, -1)")
    assert split_options("--hvp v --check f(x)", _VALUED) == ("--hvp v --check", "f(x)")
    assert split_options("f(x)", _VALUED) == ("", "f(x)")


def test_line_magic_returns_report(shell):
    r = shell.run_line_magic("grad", "-o --wrt v,theta --check R(10.0, 0.3)")
    assert isinstance(r, GradReport)
    assert float(r.grad[0]) == pytest.approx(2 * 10.0 * np.sin(0.6) / 9.81, rel=1e-5)
    assert r.check.passed


def test_line_magic_displays_html_table(shell):
    with capture_output() as captured:
        out = shell.run_line_magic("grad", "loss(w, x)")
    assert out is None
    (shown,) = captured.outputs
    assert "text/html" in shown.data and "<table>" in shown.data["text/html"]
    expected = jax.grad(lambda w: jnp.sum(jnp.tanh(jnp.ones((4, 3)) @ w) ** 2))(
        jnp.full((3, 2), 0.3)
    )
    assert f"{float(jnp.linalg.norm(expected)):.6g}" in shown.data["text/plain"]
    # the gradient's row carries the heading's ∇, so it does not read as w itself
    rows = shown.data["text/plain"].splitlines()
    assert rows[0].startswith("∇ loss w.r.t. w") and any(r.startswith("  ∇ w ") for r in rows)
    assert "<td>∇ w</td>" in shown.data["text/html"]


def test_argnums_hessian_hvp_and_jacobian(shell):
    r = shell.run_line_magic("grad", "-o --argnums 1 loss(w, x)")
    assert r.names == ("x",)
    h = shell.run_line_magic("grad", "-o --hessian R(10.0, 0.3)")
    assert float(h.grad) == pytest.approx(2 * np.sin(0.6) / 9.81, rel=1e-5)
    hv = shell.run_line_magic(
        "grad", "-o --hvp jnp.ones(3) (lambda z: jnp.sum(z ** 3))(jnp.arange(3.0))"
    )
    np.testing.assert_allclose(hv.grad, 6 * np.arange(3.0))
    j = shell.run_line_magic("grad", "-o jnp.sin(jnp.arange(3.0))")
    assert j.kind == "jacobian"
    np.testing.assert_allclose(j.grad, np.diag(np.cos(np.arange(3.0))), rtol=1e-6)


def test_split_view(shell):
    s = shell.run_line_magic("grad", "-o --split R(10.0, 0.3)")
    assert isinstance(s, GradSplit)
    (g,) = s.apply_transposed()
    assert float(g) == pytest.approx(2 * 10.0 * np.sin(0.6) / 9.81, rel=1e-5)


def test_graph_option_attaches_annotated_graph(shell):
    r = shell.run_line_magic("grad", "-o --graph loss(w, x)")
    assert r.graph is not None and r.graph.grad
    # The input node's adjoint is the gradient the report shows.
    adjoint = r.graph.node("in0").adjoint
    assert adjoint.shape == (3, 2)
    assert adjoint.mean == pytest.approx(float(jnp.mean(r.grad)), rel=1e-5)
    assert adjoint.max == pytest.approx(float(jnp.max(r.grad)), rel=1e-5)
    html = r._repr_mimebundle_()["text/html"]
    if shutil.which("dot"):  # without Graphviz the graph's text view stands in
        assert "<svg" in html


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("--wrt z R(1.0, 0.2)", "no argument `z`"),
        ("R(1, 0.2)", "the float `1.0`"),
        ("--argnums 0 --wrt v R(1.0, 0.2)", "not both"),
        ("--bogus R(1.0, 0.2)", "unrecognized"),
        ("undefined(x)", "not defined"),
        ("(lambda a: jnp.argmax(a))(x)", "no derivative"),
        ("(lambda a: a.reshape(7).sum())(w)", "reshape"),
        ("--hessian jnp.sin(jnp.ones(2))", "scalar"),
        ("--jacobian R(1.0, 0.2)", "%%grad"),
        # --split draws reverse mode's three programs; an option it would ignore is refused.
        ("--split --hessian R(1.0, 0.2)", "--split and --hessian do not go together"),
        ("--split --check R(1.0, 0.2)", "--split and --check do not go together"),
        ("--split --hvp 1.0 R(1.0, 0.2)", "--split and --hvp"),
        ("--split --graph R(1.0, 0.2)", "--split and --graph"),
        ("--split --mode fwd R(1.0, 0.2)", "--split and --mode"),
        ("--split --has-aux R(1.0, 0.2)", "--split and --has-aux"),
        # Nothing returned: %grad and %grad --split refuse alike.
        ("(lambda a: None)(x)", "returns no array: there is nothing to differentiate"),
        ("--split (lambda a: None)(x)", "returns no array: there is nothing to differentiate"),
    ],
)
def test_bad_line_input_is_a_usage_error_and_changes_nothing(shell, line, needle):
    before = _names(shell)
    with pytest.raises(UsageError, match="%grad") as e:
        shell.run_line_magic("grad", line)
    assert needle in str(e.value)
    assert _names(shell) == before


def test_help_lists_options(shell):
    doc = shell.find_line_magic("grad").__doc__
    for option in ("--wrt", "--argnums", "--check", "--hessian", "--hvp", "--split", "--graph"):
        assert option in doc
    assert "--static" in doc and "GraphExplorer" in doc


# --------------------------------------------------------------------------- %%grad


def test_cell_magic_stores_exactly_the_promised_names(shell):
    before = _names(shell)
    r = shell.run_cell_magic(
        "grad", "-o --wrt w", "h = jnp.tanh(x @ w)\nscale = 2.0\n(h ** 2).sum() * scale"
    )
    added = _names(shell) - before
    assert added == {"h", "scale", "grad_w", "_grad"}
    assert shell.user_ns["_grad"] is r
    np.testing.assert_allclose(
        shell.user_ns["h"], jnp.tanh(jnp.ones((4, 3)) @ jnp.full((3, 2), 0.3))
    )
    expected = jax.grad(lambda w: 2.0 * jnp.sum(jnp.tanh(jnp.ones((4, 3)) @ w) ** 2))(
        jnp.full((3, 2), 0.3)
    )
    np.testing.assert_allclose(shell.user_ns["grad_w"], expected, rtol=1e-6)


def test_cell_magic_defaults_to_every_float_array_read(shell):
    shell.run_cell("b = jnp.zeros(2)\nparams = {'w': jnp.ones(2), 'b': jnp.zeros(2)}")
    r = shell.run_cell_magic("grad", "-o", "y = x @ w + b * n\n(y ** 2).sum() + params['w'].sum()")
    assert r.names == ("x", "w", "b", "params")  # not n (an int), not jnp (a module)
    assert {"grad_x", "grad_w", "grad_b", "grad_params", "y"} <= set(shell.user_ns)
    np.testing.assert_allclose(shell.user_ns["grad_params"]["w"], jnp.ones(2))


def test_cell_magic_jacobian_and_check(shell):
    r = shell.run_cell_magic("grad", "-o --wrt w --jacobian --check", "jnp.sin(w).sum(axis=0)")
    assert r.kind == "jacobian" and r.grad.shape == (2, 3, 2)
    assert r.check.passed


def test_cell_magic_displays_without_o(shell):
    with capture_output() as captured:
        shell.run_cell_magic("grad", "--wrt w", "loss(w, x)")
    assert "∇ the cell w.r.t. w" in captured.outputs[0].data["text/plain"]


@pytest.mark.parametrize(
    ("options", "cell", "needle"),
    [
        ("", "y = loss(w, x)", "no final expression"),
        ("--wrt w", "jnp.tanh(x @ w)", "not a scalar"),
        ("--wrt nowhere", "y = 1\nloss(w, x)", "not defined"),
        ("--wrt ,", "y = 1\nloss(w, x)", "names no variable"),
        ("--wrt jnp", "y = 1\njnp.sum(w)", "not an array"),
        ("--wrt n", "y = 1\njnp.sum(w) * n", "only floating-point"),
        ("--wrt w", "w = x[0]\njnp.sum(w)", "assigns `w` before reading"),
        ("--wrt x", "y = 1\njnp.sum(w)", "does not read `x`"),
        ("--hessian", "y = 1\njnp.sum(w)", "--hessian"),
        ("", "y = 1\nundefined_thing(w)", "NameError"),
    ],
)
def test_bad_cell_input_changes_nothing(shell, options, cell, needle):
    before = _names(shell)
    with pytest.raises(UsageError, match=r"%%?grad") as e:
        shell.run_cell_magic("grad", options, cell)
    assert needle in str(e.value)
    assert _names(shell) == before
    assert "y" not in shell.user_ns


def test_graph_of_a_dynamic_while_loop_keeps_the_forward_report(shell):
    shell.run_cell(
        "from jax import lax\n"
        "def newton_sqrt(a):\n"
        "    def cond(s): return jnp.abs(s[0] ** 2 - a) > 1e-6\n"
        "    def body(s): return (0.5 * (s[0] + a / s[0]),)\n"
        "    return lax.while_loop(cond, body, (a,))[0]\n"
    )
    plain = shell.run_line_magic("grad", "-o newton_sqrt(2.0)")
    r = shell.run_line_magic("grad", "-o --graph newton_sqrt(2.0)")
    assert r.mode == plain.mode == "forward"
    assert float(r.grad) == pytest.approx(float(plain.grad)) == pytest.approx(0.5 / 2**0.5, 1e-5)
    assert r.graph is None
    assert any("gradient graph is left out" in n and "while_loop" in n for n in r.notes)
    with capture_output() as captured:
        shell.run_line_magic("grad", "--graph newton_sqrt(2.0)")
    assert "graph is left out" in captured.outputs[0].data["text/plain"]


def test_python_number_returned_gives_a_zero_gradient(shell):
    shell.run_cell("def stub(p):\n    return 0.0\n")
    r = shell.run_line_magic("grad", "-o stub(x)")
    np.testing.assert_array_equal(r.grad, np.zeros((4, 3)))
    np.testing.assert_array_equal(r.grad, jax.grad(lambda p: 0.0)(jnp.ones((4, 3))))


def test_check_graph_and_split_on_an_equinox_max_pool(shell):
    pytest.importorskip("equinox")
    shell.run_cell(
        "import equinox as eqx\n"
        "class Net(eqx.Module):\n"
        "    w: jax.Array\n"
        "    pool: eqx.nn.MaxPool1d\n"
        "    def __call__(self, x):\n"
        "        return jnp.sum(self.pool((x * self.w)[None]) ** 2)\n"
        "net = Net(jnp.linspace(0.5, 1.5, 6), eqx.nn.MaxPool1d(2, 2))\n"
        "sig = jnp.linspace(-1.0, 1.0, 6)\n"
        "pool_loss = lambda net, sig: net(sig)\n"
    )
    want = jax.grad(
        lambda w: shell.user_ns["net"].__class__(w, shell.user_ns["net"].pool)(shell.user_ns["sig"])
    )(shell.user_ns["net"].w)
    r = shell.run_line_magic("grad", "-o --check pool_loss(net, sig)")
    np.testing.assert_allclose(r.grad.w, want, rtol=1e-6)
    assert r.grad.pool.init is None and r.fixed == ("net.pool.init",)
    assert r.check.passed and np.isfinite(r.check.max_error)
    s = shell.run_line_magic("grad", "-o --split pool_loss(net, sig)")
    (only,) = s.apply_transposed()  # one cotangent: w's, none for the pool's -inf
    np.testing.assert_allclose(only, want, rtol=1e-6)


# --------------------------------------------------------------------------- the explorer


def test_live_notebook_grad_graph_shows_the_explorer_and_static_keeps_the_svg(shell, monkeypatch):
    from jaxlab.magics import grad as magic
    from jaxlab.magics import jaxpr as jaxpr_magic
    from jaxlab.widgets import GraphExplorer

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)
    shell.run_line_magic("grad", "--graph loss(w, x)")  # a terminal shell: the static view
    (report,) = shown
    assert isinstance(report, GradReport) and report.graph is not None

    class Live:
        kernel = object()

    monkeypatch.setattr(jaxpr_magic, "get_ipython", lambda: Live())
    shown.clear()
    shell.run_line_magic("grad", "--graph loss(w, x)")
    table, explorer, steps = shown  # and the button that plays its chain rule
    assert steps.children[0].description.startswith("▶ play the chain rule")
    steps.close()
    assert isinstance(table, GradReport) and table.graph is None  # the table, no SVG
    assert "<svg" not in table._repr_mimebundle_()["text/html"]
    want = jax.grad(lambda w: jnp.sum(jnp.tanh(shell.user_ns["x"] @ w) ** 2))(shell.user_ns["w"])
    np.testing.assert_allclose(table.grad, want, rtol=1e-6)
    assert isinstance(explorer, GraphExplorer) and explorer.graph.grad
    assert explorer.view["nodes"]  # laid out on creation
    w_node = explorer.graph.node("in0")
    assert w_node.label == "w" and w_node.adjoint is not None
    assert explorer.graph.node("in1").label == "x" and explorer.graph.node("in1").role == "fixed"
    # Its static twin (what a saved notebook shows) is the last view, with tooltips.
    twin = explorer.static_bundle()["text/html"]
    assert "<svg" in twin and "<title>" in twin
    # The cell magic too.
    shown.clear()
    shell.run_cell_magic("grad", "--wrt w --graph", "loss(w, x)")
    table, explorer = shown  # (a widget's class is made per instance: isinstance)
    assert isinstance(table, GradReport) and isinstance(explorer, GraphExplorer)
    assert table.graph is None and explorer.graph.node("in0").label == "w"
    # --static keeps the report with its SVG inside; -o returns the report whole.
    shown.clear()
    shell.run_line_magic("grad", "--graph --static loss(w, x)")
    (static,) = shown
    assert isinstance(static, GradReport) and static.graph is not None
    if shutil.which("dot"):
        html = static._repr_mimebundle_()["text/html"]
        assert "<svg" in html and 'font-size="14.00"' in html
    returned = shell.run_line_magic("grad", "-o --graph loss(w, x)")
    assert isinstance(returned, GradReport) and returned.graph is not None


@pytest.mark.parametrize("magic", ["line", "cell"])
def test_static_without_graph_is_a_usage_error(shell, magic):
    before = _names(shell)
    with pytest.raises(UsageError, match="--static chooses how --graph draws; add --graph"):
        if magic == "line":
            shell.run_line_magic("grad", "--static loss(w, x)")
        else:
            shell.run_cell_magic("grad", "--wrt w --static", "loss(w, x)")
    assert _names(shell) == before
