"""%bench and jaxlab.bench: records checked against JAX and against what was called."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.timing.bench import BenchError
from jaxlab.timing.peak import machine_peak


@jax.jit
def matmul(a):
    return a @ a


def test_bench_result_is_consistent_and_compiles_once():
    traces = []

    @jax.jit
    def f(a):
        traces.append(1)  # runs once per trace
        return jnp.tanh(a @ a)

    a = jnp.ones((300, 300), jnp.float32)
    r = jaxlab.bench(f, a, repeats=3)
    assert len(traces) == 1  # the first call compiled; nothing after it did
    assert r.ready_s >= r.dispatch_s > 0
    assert r.ready_min_s <= r.ready_s <= r.ready_max_s
    assert r.compile_s > r.ready_s  # the first call includes compiling
    assert r.runs >= 1 and r.repeats == 3 and r.asynchronous
    assert r.output == "f32[300,300]"
    assert r.flops == pytest.approx(2 * 300**3, rel=0.02)  # XLA: 2·n³ for the matmul (+ tanh)
    assert r.bytes_accessed >= 2 * 300 * 300 * 4  # read a, write the result
    assert r.flops_s == pytest.approx(r.flops / r.ready_s)
    assert r.flops_fraction == pytest.approx(r.flops_s / machine_peak().flops_s)
    json.dumps(r.to_dict())  # JSON-ready


def test_naive_single_call_is_far_below_the_blocked_figure_for_a_large_matmul():
    a = jnp.ones((800, 800), jnp.float32)
    r = jaxlab.bench(matmul, a, runs=2, repeats=3)
    # 1 GFLOP of work behind a call that returns after dispatching it
    assert r.naive_s * 5 < r.ready_s
    assert r.naive_ratio == pytest.approx(r.ready_s / r.naive_s)
    assert "too fast" in str(r)


def test_compare_interleaves_rounds_and_reports_the_ratio():
    order = []

    def f(a):
        order.append("f")
        return a + 1

    def g(a):
        order.append("g")
        return a * 2

    a = jnp.ones(4)
    r = jaxlab.bench(f, a, runs=1, repeats=3, compare=(g, a))
    assert r.compare is not None and r.compare.name == "g(f32[4])"
    assert "fgfgfg" in "".join(order)  # rounds alternate, so drift hits both alike
    assert r.ratio == r.compare.ready_s / r.ready_s
    assert "g(f32[4])" in str(r)


def test_a_call_that_returns_no_arrays_is_timed_and_said_to_be_synchronous():
    r = jaxlab.bench(lambda: sum(range(100)), repeats=2)
    assert not r.asynchronous
    assert r.dispatch_s == r.naive_s == r.ready_s
    assert r.flops is None
    assert "nothing ran behind it" in str(r)


def test_explain_keeps_a_timeline_in_which_work_finishes_in_order():
    a = jnp.ones((300, 300))
    r = jaxlab.bench(matmul, a, runs=1, repeats=1, explain=True)
    assert len(r.timeline) == 4
    for span in r.timeline:
        assert span.start_s <= span.return_s <= span.ready_s
    readies = [s.ready_s for s in r.timeline]
    assert readies == sorted(readies)
    assert "<svg" in r._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize(("runs", "repeats"), [(0, 3), (-1, 3), (None, 0), (2, -5)])
def test_nonsensical_counts_are_refused(runs, repeats):
    with pytest.raises(BenchError, match="whole number"):
        jaxlab.bench(matmul, jnp.ones((2, 2)), runs=runs, repeats=repeats)


def test_machine_peak_is_measured_once_per_session():
    first = machine_peak()
    assert machine_peak() is first
    assert first.flops_s > 0 and first.bytes_s > 0


def test_a_library_model_equinox_mlp():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(4, 2, width_size=8, depth=1, key=jax.random.key(0))
    x = jnp.ones((4,))
    r = jaxlab.bench(eqx.filter_jit(lambda m, v: m(v)), model, x, repeats=2)
    assert r.output == "f32[2]"
    assert r.flops is not None and r.flops >= 2 * (4 * 8 + 8 * 2)  # two matmuls at least


# ------------------------------------------------------------------------------ the magic


def test_bench_magic_returns_the_record_with_o(ip):
    ip.run_cell(
        "import jax, jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"
    )
    r = ip.run_line_magic("bench", "-o -n 3 -r 2 f(x)")
    assert isinstance(r, jaxlab.BenchResult)
    assert r.name == "f(x)" and r.runs == 3 and r.repeats == 2
    assert r.flops == pytest.approx(2 * 64**3, rel=0.02)


def test_bench_magic_displays_html_and_compares_a_call_with_spaces(ip):
    ip.run_cell(
        "import jax, jax.numpy as jnp\nf = jax.jit(lambda a: a + 1)\n"
        "g = jax.jit(lambda a, b: a * b)\nx = jnp.ones(8)"
    )
    with capture_output() as out:
        ip.run_line_magic("bench", "-n 2 -r 2 --compare g(x, 2.0) f(x)")
    html = out.outputs[0].data["text/html"]
    assert "g(x, 2.0)" in html and "f(x)" in html


def test_bench_magic_escapes_the_call_in_html(ip):
    ip.run_cell("import jax.numpy as jnp\nd = {'<b>': lambda a: a + 1}\nx = jnp.ones(3)")
    r = ip.run_line_magic("bench", "-o -n 1 -r 1 d['<b>'](x)")
    html = r._repr_mimebundle_()["text/html"]
    assert "&lt;b&gt;" in html and "<b>'" not in html


def test_bench_magic_bad_input_is_a_usage_error_and_changes_nothing(ip):
    ip.run_cell("import jax.numpy as jnp\nf = lambda a: a + 1\nx = jnp.ones(3)")
    before = set(ip.user_ns)
    for line in ("-n 0 f(x)", "-r -2 f(x)", "", "f(undefined)", "-n many f(x)"):
        with pytest.raises(UsageError):
            ip.run_line_magic("bench", line)
    assert set(ip.user_ns) == before


def test_bench_magic_a_raising_call_is_told_once_with_its_line(ip):
    ip.run_cell(
        "calls = []\ndef broken(a):\n    calls.append(1)\n    return a / 'x'\n"
        "import jax.numpy as jnp\nx = jnp.ones(3)"
    )
    with pytest.raises(UsageError, match="calling `broken\\(x\\)` failed with TypeError") as e:
        ip.run_line_magic("bench", "broken(x)")
    assert "return a / 'x'" in str(e.value)
    assert ip.user_ns["calls"] == [1]  # not retried


def test_bench_magic_logs_only_the_users_function_in_the_compile_log(ip):
    from jaxlab.timing import peak

    peak._measure.cache_clear()  # so this %bench measures the peak (jaxlab's own work)
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(a):\n    return jnp.sin(a) @ a\n")
    ip.run_cell("x = jnp.ones((32, 32))\nmine = jax.jit(f)")
    log = jaxlab.compile_log()
    log.clear()
    r = ip.run_line_magic("bench", "-o -n 2 -r 1 mine(x)")
    assert r.flops is not None and r.peak_flops_s is not None  # cost and peak were measured
    names = [e.fun_name for e in log.events]
    assert names == ["f"]  # the user's function, compiled once; nothing of jaxlab's
    # jaxlab's own compilations were counted instead: the cost analysis at least (the
    # peak's kernels may be in JAX's cache from an earlier measurement in this process)
    assert log.jaxlab_count >= 1


def test_bench_magic_on_something_not_callable_is_a_usage_error(ip):
    ip.run_cell("import jax.numpy as jnp\nx = jnp.ones(3)\nnot_a_function = 3")
    with pytest.raises(UsageError):
        ip.run_line_magic("bench", "not_a_function(x)")
