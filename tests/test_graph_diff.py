"""Two programs matched by structure (graph/diff.py): what is marked added, removed,
changed, and which boxes hold a difference; drawn side by side; ``%jaxpr --diff``."""

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab import ProgramDiff, jaxpr_graph
from jaxlab.graph import model as m
from jaxlab.graph.diff import ADDED, CHANGED, HOLDS, REMOVED, diff
from jaxlab.graph.labels import type_text
from jaxlab.graph.walk import walk


def f(x, w):
    return jnp.sin(x).sum() * 2.0 + jnp.cos(w).sum()


def _all_items(block):
    for item in block.items:
        yield item
        for sub in item.blocks:
            yield from _all_items(sub)


def _marked(graph):
    return {n.id: n.diff for n in graph.nodes if n.diff} | {
        c.id: c.diff for c in graph.clusters if c.diff
    }


def test_a_program_against_itself_marks_nothing():
    g = jaxpr_graph(f, jnp.ones(3), jnp.ones(2))
    d = diff(g, g)
    assert d.same
    assert (d.added, d.removed, d.changed, d.io, d.holds_after) == ((), (), (), (), ())
    assert len(d.pairs) == d.n_before == d.n_after == 6
    assert "the same program" in d.summary
    for graph in (d.graph(), d.graph(explore=True)):
        assert _marked(graph) == {}


def test_a_shape_change_marks_exactly_the_equations_whose_shapes_changed():
    a, b = jaxpr_graph(f, jnp.ones(3), jnp.ones(2)), jaxpr_graph(f, jnp.ones(4), jnp.ones(2))
    d = diff(a, b)
    ia = {i.id: i.eqn for i in _all_items(walk(a.jaxpr.jaxpr))}
    ib = {i.id: i.eqn for i in _all_items(walk(b.jaxpr.jaxpr))}

    def types(eqn):
        return [type_text(v.aval) for v in (*eqn.invars, *eqn.outvars)]

    expected = {k for k in ia if types(ia[k]) != types(ib[k])}
    assert expected == {"e0", "e1"}  # sin and its sum; cos(w) and the rest keep their shapes
    assert {c.before for c in d.changed} == {c.after for c in d.changed} == expected
    assert (d.added, d.removed) == ((), ())
    assert [(c.before, c.what) for c in d.io] == [("in0", "f32[3] → f32[4]")]
    assert next(c.what for c in d.changed if c.after == "e0") == "f32[3] → f32[4]"
    drawn = _marked(d.graph())
    assert drawn == {
        "before": HOLDS,
        "after": HOLDS,
        "before/e0": CHANGED,
        "before/e1": CHANGED,
        "after/e0": CHANGED,
        "after/e1": CHANGED,
        "before/in0": CHANGED,
        "after/in0": CHANGED,
    }


def test_an_added_equation_is_marked_added_and_only_it():
    def g(x):
        return jnp.sin(x) * 2.0

    def h(x):
        return jnp.exp(jnp.sin(x)) * 2.0

    d = diff(g, h, jnp.ones(3))
    assert d.added == ("e1",)
    assert (d.removed, d.changed, d.io) == ((), (), ())
    assert _marked(d.graph()) == {"after": HOLDS, "after/e1": ADDED}
    assert d.marks("after") == {"e1": ADDED} and d.marks("before") == {}


@jax.jit
def inner_sin(v):
    return jnp.sin(v) * 2.0


@jax.jit
def inner_sin3(v):
    return jnp.sin(v) * 3.0


def looped(inner):
    def run(x):
        return jax.lax.scan(lambda c, t: (c + inner(t), None), 0.0, x)[0]

    return run


def test_a_difference_inside_a_nested_jit_and_scan_marks_the_enclosing_boxes():
    x = jnp.arange(5.0)
    d = diff(looped(inner_sin), looped(inner_sin3), x)
    assert d.holds_after[-1] == "e0"  # the scan holds the jit that holds the change
    assert set(d.holds_after) == {"e0", "e0/e0"}
    mul = next(c for c in d.changed if c.after.endswith("e1"))
    assert mul.after == "e0/e0/e1" and "2.0 → 3.0" in mul.what
    drawn = d.graph()
    clusters = {c.id: c.diff for c in drawn.clusters}
    assert clusters["after/e0"] == HOLDS and clusters["after"] == HOLDS
    # The explorer's first view draws the scan closed: the box itself is marked.
    first = d.graph(explore=True)
    closed = {n.id: n.diff for n in first.nodes if n.kind == m.COLLAPSED}
    assert closed == {"before/e0": HOLDS, "after/e0": HOLDS}
    # Opened, the marks follow inside (each side's own ids, prefixed).
    opened = first.rebuild(frozenset({"before", "after", "after/e0", "after/e0/e0"}))
    assert opened.node("after/e0/e0/e1").diff == CHANGED
    assert {c.id: c.diff for c in opened.clusters}["after/e0/e0"] == CHANGED


def test_checkpoint_against_plain_shows_the_remat_as_added():
    def loss(x):
        return jnp.tanh(jnp.sin(x) * 3.0).sum()

    x = jnp.ones(4)
    d = diff(loss, jax.checkpoint(loss), x)
    assert d.added == ("e0",)
    assert (d.removed, d.changed) == ((), ())
    after = {i.id: i.primitive for i in _all_items(walk(d.after.jaxpr.jaxpr))}
    assert after["e0"].startswith(("remat", "checkpoint"))
    # The checkpoint's inside is matched with the plain program, equation by equation.
    assert ("e0", "e0/e0") in d.pairs


def test_two_programs_with_nothing_in_common_mark_everything():
    d = diff(lambda x: jnp.exp(x), lambda x: jnp.ones((2, 2)) @ jnp.ones((2, 2)), 1.0)
    assert d.removed == ("e0",) and len(d.added) == d.n_after
    assert not d.pairs
    drawn = d.graph()
    eqns = [n for n in drawn.nodes if n.kind == m.EQUATION]
    assert eqns and all(n.diff in (ADDED, REMOVED) for n in eqns)
    assert "equations added" in d.summary
    dot = drawn.to_dot()
    assert "#1a7f37" in dot and "#cf222e" in dot and "dashed" in dot


def test_dot_marks_changes_in_amber_and_boxes_on_the_outside():
    d = diff(looped(inner_sin), looped(inner_sin3), jnp.arange(5.0))
    dot = d.graph().to_dot()
    assert "holds a difference" in dot and "#b07800" in dot
    assert "compared:" in dot  # the legend row names the marks drawn
    bundle = d._repr_mimebundle_()
    assert bundle["text/plain"] == d.summary


def test_a_run_of_equations_holding_a_change_is_marked():
    def chain(x, k=None):
        for i in range(60):
            x = jnp.cos(x) if i == k else jnp.sin(x)
        return x

    d = diff(chain, lambda x: chain(x, 40), jnp.ones(3))
    assert d.removed == ("e40",) and d.added == ("e40",)
    for graph in (d.graph(explore=True), d.graph(budget=40)):  # 60 equations: runs
        runs = {n.id: n.diff for n in graph.nodes if n.kind == m.SEGMENT}
        held = [k for k, v in runs.items() if v == HOLDS]
        assert len(held) == 2 and all(k.startswith(("before/", "after/")) for k in held)
        assert len(runs) > 2  # the other runs are not marked


def test_jaxlab_diff_takes_graphs_and_rejects_other_things():
    g = jaxpr_graph(f, jnp.ones(3), jnp.ones(2))
    assert isinstance(jaxlab.diff(g, g.jaxpr), ProgramDiff)
    with pytest.raises(TypeError, match="compares Graphs"):
        jaxlab.diff(g, 3)


# --------------------------------------------------------------------------- the magic


@pytest.fixture
def sh(ip):
    ip.run_cell(
        "import jax\nimport jax.numpy as jnp\n"
        "def f(x):\n    return jnp.sin(x).sum()\n"
        "x = jnp.ones(3)\ny = jnp.ones(4)\n"
    )
    return ip


def test_magic_diff_returns_the_program_diff(sh):
    d = sh.run_line_magic("jaxpr", "--diff -o f(x) f(y)")
    assert isinstance(d, ProgramDiff)
    assert {c.after for c in d.changed} == {"e0", "e1"}
    assert d.before_title == "f(x)" and d.after_title == "f(y)"
    same = sh.run_line_magic("jaxpr", "--diff -o f(x) f(x)")
    assert same.same


def test_magic_diff_before_and_after_a_transformation(sh):
    d = sh.run_line_magic("jaxpr", "--diff -o f(x) jax.checkpoint(f)(x)")
    assert d.added == ("e0",) and not d.removed
    assert d.after_title == "jax.checkpoint(f)(x)"


@pytest.mark.parametrize("line", ["--diff f(x)", "--diff", "--diff f(x) g(", "--diff f(x) 3"])
def test_magic_diff_needs_two_calls(sh, line):
    before = dict(sh.user_ns)
    with pytest.raises(UsageError, match=r"--diff takes two calls.*%jaxpr --diff f\(x\) g\(x\)"):
        sh.run_line_magic("jaxpr", line)
    assert set(sh.user_ns) == set(before)


def test_magic_diff_names_a_missing_function(sh):
    with pytest.raises(UsageError, match="nope"):
        sh.run_line_magic("jaxpr", "--diff f(x) nope(x)")


# --------------------------------------------------------------------------- the explorer


def test_the_graph_explorer_draws_the_marks_and_their_legend():
    from jaxlab.widgets import GraphExplorer
    from jaxlab.widgets.graph_explorer import LEGEND

    assert {"added", "removed", "changed", "holds"} <= {mark for mark, _ in LEGEND}
    d = diff(looped(inner_sin), looped(inner_sin3), jnp.arange(5.0))
    explorer = GraphExplorer(d.graph(explore=True), opened=["before", "after"])
    records = {r["id"]: r for r in explorer.model["clusters"]}
    assert records["after/e0"]["diff"] == HOLDS  # the closed scan, marked outside
    assert {e["mark"] for e in explorer.legend} >= {"holds"}
    explorer.toggle("after/e0")
    explorer.toggle("after/e0/e0")
    nodes = {n["id"]: n["diff"] for n in explorer.model["nodes"]}
    assert nodes["after/e0/e0/e1"] == CHANGED
    marks = {e["mark"] for e in explorer.legend}
    assert {"changed", "holds"} <= marks and "added" not in marks
    assert "#b07800" in explorer._static_html()
    plain = GraphExplorer(jaxpr_graph(f, jnp.ones(3), jnp.ones(2), explore=True))
    assert not {"added", "removed", "changed", "holds"} & {e["mark"] for e in plain.legend}


# --------------------------------------------------------------------------- the compile log


def test_a_recompile_links_to_the_diff_of_its_program():
    from jaxlab import _jax_compat
    from jaxlab.compile.log import CompileLog

    log = CompileLog()

    def step(x):
        return jnp.tanh(x).sum()

    jitted = jax.jit(step)
    with log.recording():
        jitted(jnp.ones(3))
        assert log.programs("step") is None  # one compilation: nothing to compare
        with pytest.raises(ValueError, match="compile `step` twice"):
            jaxlab.recompile_diff("step", log)
        jitted(jnp.ones(4))
    assert log.events[-1].recompile
    d = jaxlab.recompile_diff("step", log)
    assert {c.after for c in d.changed} == {"e0", "e1"}
    assert "f32[3] → f32[4]" in d.summary
    # The log's row and text name the call that draws it, on the newest recompile only.
    from jaxlab.compile.log_view import log_html, log_text

    assert log_text(log).count("what changed: jaxlab.recompile_diff('step')") == 1
    assert log_html(log).count("jaxlab.recompile_diff(&#x27;step&#x27;)") == 1
    # Only the user's own functions, and what the reader finds outside a trace is None.
    assert all(name == "step" for name in log._programs)
    assert _jax_compat.jaxpr_being_traced() is None
    log.clear()
    assert log.programs("step") is None


def test_the_kept_programs_are_bounded_in_functions_and_a_dropped_one_is_freed(monkeypatch):
    import gc
    import weakref

    from jaxlab.compile import kept_programs
    from jaxlab.compile import log as log_module

    monkeypatch.setattr(kept_programs, "PROGRAM_FUNCTIONS", 3)
    log = log_module.CompileLog()
    sources = [f"lambda v: v * {k}.0 + 1.0" for k in range(6)]  # six functions, one line
    with log.recording():
        jax.jit(eval(sources[0]))(jnp.ones(2))
        first = log.events[-1].fun_name
        program = weakref.ref(log.last_program(first))
        for source in sources[1:]:
            jax.jit(eval(source))(jnp.ones(2))
        newest = log.events[-1].fun_name
    assert len(log._programs) == 3 and log.last_program(newest) is not None
    assert log.last_program(first) is None
    gc.collect()
    # A kept program keeps what JAX cached under it (its executable): dropped, it is freed.
    assert program() is None


def test_the_kept_programs_are_bounded(monkeypatch):
    from jaxlab.compile import kept_programs
    from jaxlab.compile import log as log_module

    monkeypatch.setattr(kept_programs, "PROGRAM_EQUATIONS", 4)
    log = log_module.CompileLog()
    with log.recording():
        jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(2))
        jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3))
        jax.jit(lambda x: jnp.cos(jnp.sin(jnp.exp(jnp.tanh(x)))))(jnp.ones(3))  # 4: too many
    assert sum(n for pair in log._programs.values() for _, n in pair) <= 4
