"""What ``%%profile --graph`` reads once and reuses (issue 37): a compiled program's HLO
text (by its fingerprint) and its reading, the program drawn for the join, a kept
program's compilation; and the collector paused while a profile is read and shown."""

import gc

import jax
import jax.numpy as jnp
import pytest
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.timing import hlo_map, profiled_call
from jaxlab.timing.attribution import call_attribution, program_equations


def step(x, w):
    return jnp.tanh(x @ w).sum()


@pytest.fixture
def compiles():
    """The XLA compilations started while the test runs (JAX's own monitoring event)."""
    seen = []

    def listen(event, duration, **kwargs):
        if event == "/jax/compilation_cache/compile_requests_use_cache" or (
            event == "/jax/core/compile/backend_compile_duration"
        ):
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    yield seen
    jax.monitoring.unregister_event_duration_listener(listen)


def profiled(fun, *args):
    jitted = jax.jit(fun)
    jax.block_until_ready(jitted(*args))
    with jaxlab.profile() as p:
        jax.block_until_ready(jitted(*args))
    return p.result, jitted


def test_a_compiled_programs_text_is_asked_of_xla_once():
    x = jnp.ones((16, 16))
    compiled = jax.jit(step).trace(x, x).lower().compile()
    text = hlo_map.compiled_text(compiled)
    assert text == compiled.as_text() and text.startswith("HloModule jit_step")
    again = jax.jit(step).trace(x, x).lower().compile()  # another object, one program
    assert hlo_map.compiled_text(again) is text
    y = jnp.ones((8, 8))
    other = jax.jit(step).trace(y, y).lower().compile()  # another program
    assert hlo_map.compiled_text(other) != text


def test_a_text_is_read_once_and_the_kept_ones_are_bounded():
    x = jnp.ones((8, 8))
    texts = [
        jax.jit(step).trace(jnp.ones((n, 8)), x).lower().compile().as_text()
        for n in range(1, hlo_map.KEPT_MODULES + 3)
    ]
    first = hlo_map.read_hlo(texts[0])
    assert hlo_map.read_hlo(str(texts[0])) is first  # equal text: the same reading
    for text in texts[1:]:
        hlo_map.read_hlo(text)
    assert len(hlo_map._read) == hlo_map.KEPT_MODULES and texts[0] not in hlo_map._read
    reread = hlo_map.read_hlo(texts[0])  # dropped, read again: the same instructions
    assert reread is not first and reread.instructions == first.instructions


def test_the_program_is_drawn_once_per_program_and_names(compiles, monkeypatch):
    from jaxlab.graph import build

    def own_step(x, w):  # a program no other test drew
        return jnp.tanh(x @ w).sum()

    x, w = jnp.ones((32, 32)), jnp.ones((32, 32))
    result, jitted = profiled(own_step, x, w)
    compiles.clear()
    drawn = []
    draw = build.graph_from_jaxpr

    def counted(*args, **kwargs):
        drawn.append(kwargs.get("input_names"))
        return draw(*args, **kwargs)

    monkeypatch.setattr(build, "graph_from_jaxpr", counted)
    first = call_attribution(result, jitted, (x, w), {}, ("x", "w"), {})
    second = call_attribution(result, jitted, (x, w), {}, ("x", "w"), {})
    assert drawn == [["x", "w"]]  # drawn for the first join only
    assert second.times == first.times and second.share == first.share > 0.5
    assert second.graph is not first.graph  # each join overlays its own copy
    assert first.graph.overlay_name == second.graph.overlay_name == "time"
    renamed = call_attribution(result, jitted, (x, w), {}, ("P", "X"), {})
    inputs = [n.label for n in renamed.graph.nodes if n.kind == "input"]
    assert inputs == ["P", "X"] and len(drawn) == 2  # other names: drawn again
    assert compiles == []  # the profiled program's compilation, reused


def test_a_program_is_kept_only_for_the_same_object_and_key():
    x = jnp.ones((4, 4))
    closed = jax.make_jaxpr(step)(x, x)
    drawn = []

    def graph_of(c):
        drawn.append(c)
        return jaxlab.graph.build.graph_from_jaxpr(c, title="step", explore=True)

    a = program_equations(closed, graph_of, key=("step",))
    assert program_equations(closed, graph_of, key=("step",)) is a
    assert program_equations(closed, graph_of, key=("other",)) is not a
    assert program_equations(closed, graph_of) is not a  # no key: never kept
    assert len(drawn) == 3


def test_a_kept_program_is_compiled_once(compiles):
    from jaxlab.timing.profiled_call import attribution_from_program

    x, w = jnp.ones((32, 32)), jnp.ones((32, 32))
    result, _ = profiled(step, x, w)
    closed = jax.make_jaxpr(step)(x, w)
    compiles.clear()
    first = attribution_from_program(result, "step", closed, module="jit_step")
    made = len(compiles)
    second = attribution_from_program(result, "step", closed, module="jit_step")
    assert made >= 1 and len(compiles) == made  # the second join compiled nothing
    assert second.times == first.times and second.share > 0.5
    assert profiled_call._compiled_once(closed) is not None


@pytest.mark.parametrize("user_paused", [False, True])
def test_a_profile_is_read_and_shown_with_the_collector_paused(ip, user_paused):
    from jaxlab.timing import trace_session

    ip.run_cell(
        "import jax, jax.numpy as jnp\n"
        "def cell_step(x):\n    return jnp.tanh(x @ x).sum()\n"
        "f = jax.jit(cell_step)\nx = jnp.ones((32, 32)); f(x)"
    )
    seen = []
    stop = trace_session.TraceSession.stop

    def watched_stop(self, read=True):
        seen.append(("read", gc.isenabled()))
        return stop(self, read)

    from jaxlab.widgets import graph_explorer

    explorer_init = graph_explorer.GraphExplorer.__init__

    def watched_init(self, *args, **kwargs):
        seen.append(("drawn", gc.isenabled()))
        explorer_init(self, *args, **kwargs)

    trace_session.TraceSession.stop = watched_stop
    graph_explorer.GraphExplorer.__init__ = watched_init
    if user_paused:
        gc.disable()
    try:
        with capture_output():
            ip.run_cell_magic("profile", "--graph", "f(x).block_until_ready()")
        with pytest.raises(ZeroDivisionError):  # the cell's own error, after the trace
            ip.run_cell_magic("profile", "", "f(x).block_until_ready()\n1 / 0")
        assert gc.isenabled() is not user_paused  # as it was before the magic
    finally:
        trace_session.TraceSession.stop = stop
        graph_explorer.GraphExplorer.__init__ = explorer_init
        gc.enable()
    assert seen == [("read", False), ("drawn", False), ("read", False)]
