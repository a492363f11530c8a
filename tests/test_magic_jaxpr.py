"""%jaxpr in a real shell: what it displays and returns matches JAX's own jaxpr, every
option works, bad input is a UsageError that changes nothing, user text is escaped."""

import re
from collections import Counter

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from jaxlab import Graph, LoweredText, jaxpr_graph
from jaxlab.graph.model import BACKWARD, COLLAPSED, FORWARD
from jaxlab.graph.text import JaxprText, highlight, jaxpr_text, with_names
from jaxlab.magics._options import split_options
from jaxlab.magics.jaxpr import _VALUED

SETUP = """
import functools
import jax
import jax.numpy as jnp

def f(x, w):
    return jnp.tanh(x @ w).sum()

@jax.jit
def inner(v):
    return jnp.sin(v) * 2.0

def nested(x):
    return inner(x).sum()

def branchy(x):
    if x.sum() > 0:
        return x
    return -x

def power(x, n):
    for _ in range(n):
        x = x * x
    return x

def keyed(x, depth=2.0):
    return x * depth

def long(x):
    for _ in range(30):
        x = jnp.sin(x)
    return x

x = jnp.ones((4, 3))
w = jnp.ones((3, 2))
"""


@pytest.fixture
def sh(ip):
    ip.run_cell(SETUP)
    return ip


def primitives_of(closed):
    return Counter(e.primitive.name for e in closed.jaxpr.eqns)


def svg_model(svg):
    """Node ids and edges graphviz drew (its <title> elements)."""
    titles = [t.replace("&#45;&gt;", "->") for t in re.findall(r"<title>(.*?)</title>", svg)]
    edges = {tuple(t.split("->")) for t in titles if "->" in t}
    nodes = {t for t in titles if "->" not in t} - {"jaxpr"}
    return nodes, edges


# --------------------------------------------------------------------------- the graph


def test_displays_svg_of_the_traced_model(sh):
    with capture_output() as out:
        assert sh.run_line_magic("jaxpr", "f(x, w)") is None
    assert len(out.outputs) == 1
    svg = out.outputs[0].data["image/svg+xml"]
    ns = sh.user_ns
    model = jaxpr_graph(ns["f"], ns["x"], ns["w"])
    nodes, edges = svg_model(svg)
    assert nodes == {n.id for n in model.nodes}
    assert edges == {(e.src, e.dst) for e in model.edges}
    assert model.primitives() == Counter({"dot_general": 1, "tanh": 1, "reduce_sum": 1})


def test_o_returns_the_graph_and_displays_nothing(sh):
    with capture_output() as out:
        g = sh.run_line_magic("jaxpr", "-o f(x, w)")
    assert out.outputs == []
    assert isinstance(g, Graph)
    ns = sh.user_ns
    assert g.primitives() == primitives_of(jax.make_jaxpr(ns["f"])(ns["x"], ns["w"]))
    assert [n.shape for n in g.nodes if n.kind == "input"] == ["f32[4,3]", "f32[3,2]"]
    assert g.n_equations == 3


def test_grad_draws_the_gradient_program(sh):
    g = sh.run_line_magic("jaxpr", "-o --grad f(x, w)")
    ns = sh.user_ns
    expected = jax.make_jaxpr(jax.grad(ns["f"]))(ns["x"], ns["w"])
    assert g.grad and g.title == "grad(f)"
    assert g.primitives() == primitives_of(expected)
    phases = Counter(n.phase for n in g.equations)
    assert phases[FORWARD] > 0 and phases[BACKWARD] > 0
    assert [n.shape for n in g.nodes if n.kind == "output"] == ["f32[4,3]"]  # d f / d x


def test_depth_collapses_nested_programs(sh):
    full = sh.run_line_magic("jaxpr", "-o nested(x)")
    assert full.cluster_primitives() == Counter({"jit": 1})
    assert full.primitives()["sin"] == 1
    flat = sh.run_line_magic("jaxpr", "-o --depth 0 nested(x)")
    assert flat.clusters == ()
    assert [n.primitive for n in flat.nodes if n.kind == COLLAPSED] == ["jit"]
    assert "sin" not in flat.primitives()
    assert flat.n_equations == full.n_equations


def test_budget_bounds_the_drawing(sh):
    full = sh.run_line_magic("jaxpr", "-o long(x)")
    small = sh.run_line_magic("jaxpr", "-o --budget 12 long(x)")
    assert full.primitives()["sin"] == 30 and not full.notes
    assert small.n_equations == full.n_equations == 30
    assert len(small.nodes) <= 12 < len(full.nodes)
    assert small.notes


def test_keywords_named_like_options_reach_the_function(sh):
    g = sh.run_line_magic("jaxpr", "-o keyed(x, depth=3.0)")
    assert g.primitives()["mul"] == 1 and g.clusters == ()


# --------------------------------------------------------------------------- text views


def test_text_is_jax_pretty_print_coloured(sh):
    ns = sh.user_ns
    printed = str(jax.make_jaxpr(ns["f"])(ns["x"], ns["w"]))
    with capture_output() as out:
        sh.run_line_magic("jaxpr", "--text f(x, w)")
    html = out.outputs[0].data["text/html"]
    # JAX's printout with the arguments called as the graph calls them (issue 20).
    text = out.outputs[0].data["text/plain"]
    assert re.search(r"^\{ lambda ; x:f32\[4,3\] w:f32\[3,2\]\. let", text, re.M)
    assert re.sub(r"\b[a-z_]+\b", "v", text) == re.sub(r"\b[a-z_]+\b", "v", printed)
    prims = set(re.findall(r'<span class="jx-prim">([^<]*)</span>', html))
    assert prims == {"dot_general", "tanh", "reduce_sum"}
    t = sh.run_line_magic("jaxpr", "-o --text --grad f(x, w)")
    assert isinstance(t, JaxprText)
    assert t.text == with_names(str(jax.make_jaxpr(jax.grad(ns["f"]))(ns["x"], ns["w"])), "xw")
    assert " x:f32[4,3] w:f32[3,2]. let" in t.text


def test_text_drops_the_colour_codes_jax_prints_in_a_jupyter_kernel():
    # In a Jupyter kernel JAX prints a jaxpr with ANSI colours (its printer's use_color);
    # HTML would show them as `[34;1m` litter, so both views carry the plain text.
    closed = jax.make_jaxpr(lambda a: jnp.sin(a) * 2.0)(1.0)

    class Coloured:
        def __str__(self):
            return closed.pretty_print(use_color=True)

    assert "\x1b[" in str(Coloured())
    t = jaxpr_text(Coloured())
    assert t.text == closed.pretty_print(use_color=False)
    assert "\x1b" not in t.html() and '<span class="jx-prim">sin</span>' in t.html()


def test_highlight_keeps_every_character_and_tags_roles():
    def program(x, key):
        y = jax.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
        z = jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, y)[1]
        return z + jax.random.uniform(key, z.shape)

    closed = jax.make_jaxpr(program)(jnp.ones(3), jax.random.key(0))
    text = str(closed)
    page = highlight(text)
    import html as h

    assert h.unescape(re.sub(r"<[^>]+>", "", page)) == text
    roles = {}
    for role, token in re.findall(r'<span class="(jx-\w+)">([^<]*)</span>', page):
        roles.setdefault(role, set()).add(h.unescape(token))

    def all_primitives(jaxpr):
        for e in jaxpr.eqns:
            yield e.primitive.name
            for sub in jax.extend.core.jaxprs_in_params(e.params):
                yield from all_primitives(sub)

    assert roles["jx-prim"] == set(all_primitives(closed.jaxpr))
    assert {"lambda", "let", "in"} <= roles["jx-kw"]
    top = re.findall(r"^\{ lambda [^;]*; (.*?)\. let", text, re.MULTILINE)[-1]  # unindented
    binders = {b.split(":")[0] for b in top.split()}
    assert len(binders) == len(closed.jaxpr.invars) and binders <= roles["jx-var"]
    assert {"f32[3]", "key<fry>[]"} <= roles["jx-type"]
    assert {"2.0", "1.0"} <= roles["jx-lit"]


def test_stablehlo_is_what_jit_lowers_to(sh):
    ns = sh.user_ns
    t = sh.run_line_magic("jaxpr", "-o --stablehlo f(x, w)")
    assert isinstance(t, LoweredText) and t.stage == "stablehlo"
    assert t.text == jax.jit(ns["f"]).lower(ns["x"], ns["w"]).as_text()
    assert '<span class="hx-op">stablehlo.tanh</span>' in t._repr_mimebundle_()["text/html"]


def test_hlo_is_the_compiled_module(sh):
    with capture_output() as out:
        sh.run_line_magic("jaxpr", "--hlo f(x, w)")
    data = out.outputs[0].data
    assert data["text/plain"].startswith("HloModule")
    assert "tanh" in data["text/plain"] and "hx-op" in data["text/html"]
    t = sh.run_line_magic("jaxpr", "-o --hlo nested(x)")
    assert t.stage == "hlo" and "sine" in t.text


def test_help_lists_the_options(sh):
    doc = sh.find_line_magic("jaxpr").__doc__
    for option in ("--text", "--stablehlo", "--hlo", "--grad", "--depth", "--budget", "-o"):
        assert option in doc


@pytest.mark.parametrize(
    ("line", "options", "call"),
    [
        ("f(x)", "", "f(x)"),
        ("--depth 2 -o f(x, -1)", "--depth 2 -o", "f(x, -1)"),
        ("--budget=5 --grad  g(a, b='x y')", "--budget=5 --grad", "g(a, b='x y')"),
        ("-o (lambda v: -v)(x)", "-o", "(lambda v: -v)(x)"),
    ],
)
def test_split_options(line, options, call):
    assert split_options(line, _VALUED) == (options, call)


# --------------------------------------------------------------------------- bad input

BAD = [
    ("", "line is empty"),
    ("--grad", "line is empty"),
    ("undefined_fn(x)", "'undefined_fn' is not defined.*define it in a cell"),
    ("f(x, undefined_arg)", "'undefined_arg' is not defined"),
    ("f", "is not a call"),
    ("x", "is not a call"),
    ("f(x, w", "brackets are unbalanced"),
    ("f(x, w))", "not a Python expression"),
    # An explained error reads as it does under jax.jit: what happened, your line, the
    # fix, the docs; then the static argument written as a %jaxpr call.
    (
        "branchy(x)",
        r"(?s)failed\.\n.*TracerBoolConversionError\)\n  your line  In\[\d+\], line \d+, "
        r"in branchy:  if x\.sum\(\) > 0:\n  fix .*jax\.lax\.cond.*\n  docs       https://"
        r".*\n  static     %jaxpr functools\.partial\(branchy, x=x\)\(\)",
    ),
    (
        "power(x, 3)",
        r"(?s)TracerIntegerConversionError\)\n  your line .*for _ in range\(n\):.*fori_loop.*"
        r"docs .*static     %jaxpr functools\.partial\(power, n=3\)\(x\)",
    ),
    # A string is held static (as eqx.filter_jit holds it): the user's line fails, and the
    # message says the argument reached it as a string.
    ("f(x, 'abc')", r"(?s)line \d+ of `f`.*Argument `w` is a str \('abc'\).*held static"),
    (
        "f(x, x)",
        r"(?s)inner sizes to agree.*\(TypeError\)\n  your line  In\[\d+\], line \d+, in f:  "
        r"return jnp\.tanh\(x @ w\)\.sum\(\)\n  fix .*w\.T",
    ),
    ("--grad jnp.sin(x)", r"(?s)output is one number.*\(TypeError\)\n  fix .*jax\.jacrev"),
    # No float to differentiate: jaxlab's own message, as a UsageError (it was a raw
    # ValueError), naming what the argument holds and the fix.
    ("--grad power(3, 2)", r"holds a float to differentiate \(`x` is the int 3\).*pass floats"),
    (
        "--grad (lambda n: jnp.sin(n * 1.0).sum())(jnp.arange(3))",
        r"\(`n` is int32\[3\]\).*without --grad",
    ),
    ("--text --stablehlo f(x, w)", "choose one of --text / --stablehlo"),
    ("--depth -1 f(x, w)", "--depth must be 0 or more"),
    ("--budget 0 f(x, w)", "--budget must be 1 or more"),
    ("--depth two f(x, w)", "invalid int value"),
    ("--frobnicate f(x, w)", "unrecognized arguments: --frobnicate"),
]


@pytest.mark.parametrize(("line", "message"), BAD, ids=[b[0] or "empty" for b in BAD])
def test_bad_input_is_a_usage_error(sh, line, message):
    with pytest.raises(UsageError, match=message) as info:
        sh.run_line_magic("jaxpr", line)
    assert str(info.value).startswith("%jaxpr: ")


def _user_state(ip):
    ns = ip.user_ns
    history = re.compile(r"_i+$|_i\d+$|_ih$|In$|_\d+$|_+$|Out$|_oh$")
    rest = {k: v for k, v in ns.items() if not history.match(k)}
    return rest, dict(ns["Out"]), ns.get("_")


@pytest.mark.parametrize(("line", "message"), BAD, ids=[b[0] or "empty" for b in BAD])
def test_bad_input_changes_nothing_and_shows_no_traceback(sh, line, message):
    sh.run_cell("1 + 1", store_history=True)  # gives `_` and Out something to lose
    keys_before, out_before, last_before = _user_state(sh)
    values_before = {k: id(v) for k, v in keys_before.items()}
    with capture_output() as out:
        result = sh.run_cell(f"%jaxpr {line}", store_history=True)
    assert isinstance(result.error_in_exec, UsageError)
    keys_after, out_after, last_after = _user_state(sh)
    assert {k: id(v) for k, v in keys_after.items()} == values_before
    assert out_after == out_before and last_after == last_before == 2
    shown = out.stdout + out.stderr
    assert "UsageError: %jaxpr" in shown
    assert "Traceback" not in shown and "kernel_ext" not in shown


def test_success_leaves_namespace_alone(sh):
    keys_before, out_before, _ = _user_state(sh)
    values_before = {k: id(v) for k, v in keys_before.items()}
    with capture_output():
        sh.run_cell("%jaxpr --grad f(x, w)", store_history=True)
    keys_after, out_after, _ = _user_state(sh)
    assert {k: id(v) for k, v in keys_after.items()} == values_before
    assert out_after == out_before


# --------------------------------------------------------------------------- escaping

HOSTILE = "<script>alert('x')</script>"


def test_user_names_are_escaped_everywhere(sh):
    sh.run_cell(
        f"f.__name__ = f.__qualname__ = {HOSTILE!r}\nevil = f\nx_evil = jnp.ones((4, 3))",
    )
    g = sh.run_line_magic("jaxpr", "-o evil(x_evil, w)")
    assert g.title == HOSTILE
    renderings = {
        "dot": g.to_dot(),
        "svg": g.to_svg(),
        "bundle": "".join(g._repr_mimebundle_().get(k, "") for k in ("image/svg+xml", "text/html")),
        "text": sh.run_line_magic("jaxpr", "-o --text evil(x_evil, w)").html(),
        "stablehlo": sh.run_line_magic("jaxpr", "-o --stablehlo evil(x_evil, w)").html(),
        "hlo": sh.run_line_magic("jaxpr", "-o --hlo evil(x_evil, w)").html(),
    }
    for name, rendering in renderings.items():
        assert "<script" not in rendering.lower(), name
    assert "&lt;script&gt;" in renderings["text"]
    with capture_output() as out:
        sh.run_line_magic("jaxpr", "evil(x_evil, w)")
    assert "<script" not in out.outputs[0].data["image/svg+xml"].lower()


def test_hostile_string_argument_is_escaped_in_the_message(sh):
    sh.run_cell(f"s = {HOSTILE!r}")
    with pytest.raises(UsageError, match="is a str") as info:
        sh.run_line_magic("jaxpr", "f(x, s)")  # held static, then refused by `x @ w`
    assert HOSTILE in str(info.value)  # plain text: IPython prints it, never renders HTML


def test_a_bug_in_jaxlab_is_not_blamed_on_the_program(sh, monkeypatch):
    import jaxlab.graph.build

    empty = Graph("empty", (), (), ())

    def broken(*args, **kwargs):
        return empty.node("internal")  # raises KeyError inside jaxlab's own model code

    monkeypatch.setattr(jaxlab.graph.build, "graph_from_jaxpr", broken)
    with pytest.raises(KeyError, match="internal"):
        sh.run_line_magic("jaxpr", "f(x, w)")


def test_nodes_name_the_notebook_cell_and_line(ip):
    ip.run_cell(
        "import jax.numpy as jnp\n\ndef wave(x):\n    return jnp.sin(x)", store_history=True
    )
    cell = ip.execution_count - 1
    g = ip.run_line_magic("jaxpr", "-o wave(1.0)")
    assert [n.source for n in g.equations] == [f"In[{cell}], line 4 (wave)"]


# --------------------------------------------------------------------------- the explorer


def test_live_notebook_shows_the_graph_explorer_and_static_keeps_the_svg(sh, monkeypatch):
    from jaxlab.graph.model import Graph
    from jaxlab.magics import jaxpr as magic
    from jaxlab.widgets import GraphExplorer

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)
    sh.run_line_magic("jaxpr", "f(x, w)")  # a terminal shell: no kernel, the static view
    assert isinstance(shown[-1], Graph)

    class Live:
        kernel = object()

    monkeypatch.setattr(magic, "get_ipython", lambda: Live())
    sh.run_line_magic("jaxpr", "--grad f(x, w)")
    explorer = shown[-1]
    assert isinstance(explorer, GraphExplorer)
    assert explorer.graph.grad and explorer.view["nodes"]  # laid out on creation
    sh.run_line_magic("jaxpr", "--static f(x, w)")
    assert isinstance(shown[-1], Graph)
    sh.run_line_magic("jaxpr", "--text f(x, w)")
    assert not isinstance(shown[-1], Graph | GraphExplorer)
    # -o returns the Graph, whatever the front end.
    assert isinstance(sh.run_line_magic("jaxpr", "-o f(x, w)"), Graph)


# --------------------------------------------------------------------------- --open


def test_open_names_what_the_explorer_opens_and_refuses_what_it_cannot(sh):
    from jaxlab.widgets import GraphExplorer

    sh.run_cell(
        "def step(c, _):\n"
        "    th, p = c\n"
        "    return (th + 0.1 * p, p - 0.1 * jnp.sin(th)), th\n"
        "def two_scans(th, p):\n"
        "    a = jax.lax.scan(step, (th, p), None, length=10)[1]\n"
        "    b = jax.lax.scan(step, (th * 2, p), None, length=10)[1]\n"
        "    return a.sum() + inner(b).sum()\n"
    )
    g = sh.run_line_magic("jaxpr", "-o two_scans(0.3, 0.1)")
    explorer = g.rebuild.explorer
    scans = [
        i
        for i in explorer.nested
        if explorer.where[i][0].items[explorer.where[i][1]].primitive == "scan"
    ]
    assert len(scans) == 2
    # By primitive: both scans open, their bodies (sin inside) drawn; the jit stays closed
    # (fit=False: all that is asked, even past a projector's pane; tests/test_fit_screen.py
    # checks what a first view keeps).
    w = GraphExplorer(g, opened=explorer.boxes_to_open(["scan"]), fit=False)
    assert sorted(w.view["frames"]) == sorted(scans)
    drawn = {n["primitive"] for n in w.model["nodes"] if n["kind"] == "eqn"}
    assert "sin" in drawn and any(k.startswith("cluster:") for k in w.view["nodes"])
    # By the function's name, and by depth: everything at depth 1 opens.
    assert explorer.boxes_to_open(["inner"]) and set(explorer.boxes_to_open(["1"])) >= set(scans)
    # Through the magic: accepted (shown in a live notebook), or refused with the reason.
    with capture_output() as out:
        assert sh.run_line_magic("jaxpr", "--open scan two_scans(0.3, 0.1)") is None
    assert out.outputs
    before = dict(sh.user_ns)
    with pytest.raises(UsageError, match=r"no nested program .* named so .*scan"):
        sh.run_line_magic("jaxpr", "--open scna two_scans(0.3, 0.1)")
    with pytest.raises(UsageError, match="--open chooses what the GraphExplorer opens"):
        sh.run_line_magic("jaxpr", "--open scan --static two_scans(0.3, 0.1)")
    assert sh.user_ns.keys() == before.keys()
