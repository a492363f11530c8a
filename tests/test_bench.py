"""%bench and jaxlab.bench: records checked against JAX and against what was called."""

from __future__ import annotations

import gc
import json
import re
import time
import warnings
import weakref

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.timing import bench_cost
from jaxlab.timing.bench import BenchError
from jaxlab.timing.peak import machine_peak


@pytest.fixture
def never_slow(monkeypatch):
    """No call counts as slow (``SLOW_S``): a busy machine can make a ~1 ms call take 10 ms,
    and a slow call's dispatch figures are read off its rounds, with no pipeline round. The
    tests that count the pipeline's calls pin it here instead of reading the clock."""
    from jaxlab.timing import bench as bench_module

    monkeypatch.setattr(bench_module, "SLOW_S", float("inf"))


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
    if "flops" in r.above_peak:  # faster than the session's peak matmul: no share
        assert r.flops_fraction is None and r.flops_s > r.peak_flops_s
    else:
        assert r.flops_fraction == pytest.approx(r.flops_s / r.peak_flops_s)
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
    rounds = re.sub(r"(.)\1*", r"\1", "".join(order))  # each run of calls of one function
    assert "fgfgfg" in rounds  # rounds alternate, so drift hits both alike
    assert r.ratio == r.compare.ready_s / r.ready_s
    assert "g(f32[4])" in str(r)


def test_a_call_that_returns_no_arrays_is_timed_and_said_to_be_synchronous():
    r = jaxlab.bench(lambda: sum(range(100)), repeats=2)
    assert not r.asynchronous
    assert r.dispatch_s == r.naive_s == r.ready_s
    assert r.flops is None
    assert "nothing ran behind it" in str(r) and r.output == "int"


def test_explain_keeps_a_timeline_in_which_work_finishes_in_order(never_slow):
    a = jnp.ones((300, 300))
    r = jaxlab.bench(matmul, a, runs=1, repeats=1, explain=True)
    assert not r.derived and len(r.timeline) == 4  # four calls, none slow (never_slow)
    for span in r.timeline:
        assert span.start_s <= span.return_s <= span.ready_s
    readies = [s.ready_s for s in r.timeline]
    assert readies == sorted(readies)
    assert "<svg" in r._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize(("runs", "repeats"), [(0, 3), (-1, 3), (None, 0), (2, -5)])
def test_nonsensical_counts_are_refused(runs, repeats):
    with pytest.raises(BenchError, match="whole number"):
        jaxlab.bench(matmul, jnp.ones((2, 2)), runs=runs, repeats=repeats)


def test_machine_peak_is_kept_with_its_conditions_and_refreshed_on_demand():
    first = machine_peak()
    assert machine_peak() is first
    assert first.flops_s > 0 and first.bytes_s > 0
    assert first.measured_at > 0 and "measured at" in first.conditions
    assert machine_peak(refresh=True) is not first


def test_a_library_model_equinox_mlp():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(4, 2, width_size=8, depth=1, key=jax.random.key(0))
    x = jnp.ones((4,))
    r = jaxlab.bench(eqx.filter_jit(lambda m, v: m(v)), model, x, repeats=2)
    assert r.output == "f32[2]"
    assert r.flops is not None and r.flops >= 2 * (4 * 8 + 8 * 2)  # two matmuls at least


# ------------------------------------------------------------------------------ the magic


def test_bench_magic_returns_the_record_with_o(ip, never_slow):
    ip.run_cell(
        "import jax, jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"
    )
    r = ip.run_line_magic("bench", "-o -n 3 -r 2 f(x)")
    assert isinstance(r, jaxlab.BenchResult)
    assert r.name == "f(x)" and r.runs == 3 and r.repeats == 2
    assert r.timeit_loops == 3  # as `%timeit -n 3` would loop
    assert r.pipeline_calls == 3  # the pipeline round queues no more than a round's calls
    assert r.flops == pytest.approx(2 * 64**3, rel=0.02)


def test_bench_magic_times_a_call_given_a_typed_key(ip, never_slow):
    ip.run_cell(
        "import jax\nf = jax.jit(lambda k: jax.random.normal(k, (64,)))\nk = jax.random.key(0)"
    )  # a typed key array has no weak_type: the cost's signature once raised on it
    r = ip.run_line_magic("bench", "-o -n 3 -r 2 f(k)")
    assert isinstance(r, jaxlab.BenchResult)
    assert r.runs == 3 and r.repeats == 2 and r.pipeline_calls == 3
    assert bench_cost.signature((jax.random.key(1),), {}) == bench_cost.signature(
        (jax.random.key(2),), {}
    )  # one cost for every key of one type


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


def test_bench_magic_logs_only_the_users_function_in_the_compile_log(ip, tmp_path, monkeypatch):
    from jaxlab.timing import peak

    monkeypatch.setenv("JAXLAB_PEAK_FILE", str(tmp_path / "peak.json"))  # none kept yet
    peak.forget_peak()  # so this %bench measures the peak (jaxlab's own work)
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(a):\n    return jnp.sin(a) @ a\n")
    ip.run_cell("x = jnp.ones((32, 32))\nmine = jax.jit(f)")
    log = jaxlab.compile_log()
    log.clear()
    r = ip.run_line_magic("bench", "-o -n 2 -r 1 mine(x)")
    assert r.flops is not None and r.peak_flops_s is not None  # cost and peak were measured
    names = [e.fun_name for e in log.events]
    assert names == ["f"]  # the user's function, compiled once; nothing of jaxlab's
    # jaxlab's own compilations were counted instead: the peak's stream at least (its
    # matmul may be in JAX's cache from an earlier measurement in this process; the cost
    # analysis reuses the executable of the call's first call: tests/test_bench_cost.py)
    assert log.jaxlab_count >= 1


def test_bench_magic_peak_measures_again_and_says_when(ip, capsys):
    from jaxlab.timing.peak import Peak, machine_peak

    before = machine_peak()
    p = ip.run_line_magic("bench", "--peak -o")
    assert isinstance(p, Peak) and p is not before and p is machine_peak()
    ip.run_line_magic("bench", "--peak")
    assert "measured at" in capsys.readouterr().out


def test_bench_magic_on_something_not_callable_is_a_usage_error(ip):
    ip.run_cell("import jax.numpy as jnp\nx = jnp.ones(3)\nnot_a_function = 3")
    with pytest.raises(UsageError):
        ip.run_line_magic("bench", "not_a_function(x)")


# --------------------------------------------------------------- what each figure means


def test_the_headline_is_one_call_awaited_before_the_next(never_slow):
    """In a round of the quoted figure, each call finds the previous call's output ready
    (a loop that reads `float(loss)`); the pipeline of queued calls is the other figure."""
    from jaxlab.timing import rounds

    g = jax.jit(lambda a: a @ a)
    found = []

    def f(a):
        if found:
            found[-1] = found[-1].is_ready()
        out = g(a)
        found.append(out)
        return out

    a = jnp.ones((400, 400))
    rounds.ready_round(lambda: f(a), 30)
    assert found[:-1] == [True] * 29
    r = jaxlab.bench(g, a, runs=30, repeats=2)
    assert r.pipeline_s is not None and r.pipeline_calls == 20
    assert "each awaited" in str(r) and "20 queued at once" in str(r)
    assert r.ready_min_s <= r.ready_s <= r.ready_max_s and r.ready_s >= r.dispatch_s


def test_one_array_is_awaited_by_its_own_method_as_the_users_timeit_awaits_it(monkeypatch):
    """A call returning one array is awaited by ``out.block_until_ready()``, as the user's
    ``%timeit f(x).block_until_ready()``: ``jax.block_until_ready`` walks a tree first,
    0.6-2 µs a call, which read a 1×1 add 18-28% slower than that timeit (issue 33;
    benchmarks/bench_accuracy.py). Each call still finds the previous one's output ready;
    several arrays are awaited by jax.block_until_ready, every one of them."""
    from jaxlab.timing import bench as bench_module
    from jaxlab.timing import rounds

    g = jax.jit(lambda a: a @ a)
    a = jnp.ones((400, 400))
    found: list = []

    def f():
        if found:
            found[-1] = found[-1].is_ready()
        found.append(g(a))
        return found[-1]

    real = jax.block_until_ready
    walked: list = []
    monkeypatch.setattr(jax, "block_until_ready", lambda t: walked.append(t) or real(t))
    rounds.ready_round(f, 20, single=True)
    rounds.recorded_round(f, 5, single=True)
    assert walked == [] and found[:-1] == [True] * 24
    pair = jax.jit(lambda a: (a @ a, a.T @ a))
    rounds.ready_round(lambda: pair(a), 5)
    assert len(walked) == 5 and all(isinstance(t, tuple) for t in walked)
    one, two = bench_module.target(g, (a,), {}), bench_module.target(pair, (a,), {})
    bench_module._first_call(one)
    bench_module._first_call(two)
    assert one.single and not two.single


def test_a_scan_of_1000_steps_is_counted_whole():
    w, c = jnp.ones((8, 8)), jnp.ones(8)
    steps = jax.jit(lambda c, w: jax.lax.scan(lambda c, _: (c @ w, None), c, None, length=1000)[0])
    r = jaxlab.bench(steps, c, w, runs=2, repeats=1)
    assert r.flops == pytest.approx(1000 * 2 * 8 * 8, rel=1e-3)  # XLA alone says 130
    assert "1,000 steps" in r.loops_note and "loops" in str(r)


def _shares(text):
    return [float(m) for m in re.findall(r"(\d+)% of this machine", text)]


def test_a_call_faster_than_the_peak_never_raises_it_and_is_said_to_run_from_cache(
    monkeypatch,
):
    from jaxlab.timing import peak

    monkeypatch.setenv("JAXLAB_PEAK_FILE", "off")  # no peak kept by this machine
    monkeypatch.setattr(peak, "_KEPT", {})
    measured = []

    def low(platform):  # a planted peak every call beats
        measured.append(platform)
        return peak.Peak(platform, 1.0, 1.0, 1, 1, time.time(), 0.5, (0.9, 1.1), (0.9, 1.1))

    monkeypatch.setattr(peak, "measure_peak", low)
    monkeypatch.setattr(peak, "_PEAKS", {})
    monkeypatch.setattr(peak, "load_average", lambda: 9.0)  # the load moved: still one peak
    r = jaxlab.bench(matmul, jnp.ones((300, 300)), runs=2, repeats=1)
    again = jaxlab.bench(matmul, jnp.ones((300, 300)), runs=2, repeats=1)
    assert measured == [jax.default_backend()]  # one peak per session
    assert peak.machine_peak().flops_s == 1.0 and peak.machine_peak().bytes_s == 1.0
    for result in (r, again):
        assert result.peak_flops_s == 1.0 and result.peak_bytes_s == 1.0  # not raised
        assert result.above_peak == "flops and bytes"
        assert result.flops_fraction is None and result.bytes_fraction is None
        text = str(result)
        assert _shares(text) == []  # no share of memory bandwidth (nor of the peak matmul)
        assert "faster than memory: it runs from cache" in text
        assert "rounds 0.9–1.1 B/s" in text  # the peak with its spread


def _peaked(**changes):
    base = dict(
        flops=5e6, bytes_accessed=1e6, peak_flops_s=1e10, peak_bytes_s=1e9,
        peak_flops_spread="9–11 GFLOP/s", peak_bytes_spread="0.9–1.1 GB/s",
        peak_note="measured at 10:52:45",
    )  # fmt: skip
    return _result(**(base | changes))


def test_a_share_is_shown_below_the_peak_and_a_cache_note_above_it():
    below = _peaked()  # 1e6 B in 5 ms: 200 MB/s of a 1 GB/s memory
    assert below.bytes_fraction == pytest.approx(0.2) and _shares(str(below)) == [10, 20]
    row = next(line for line in str(below).splitlines() if "memory traffic" in line)
    assert "20% of this machine's 1 GB/s (rounds 0.9–1.1 GB/s, measured at 10:52:45)" in row
    above = _peaked(above_peak="bytes", bytes_accessed=1e8)  # 20 GB/s: from cache
    row = next(line for line in str(above).splitlines() if "memory traffic" in line)
    assert above.bytes_fraction is None and "%" not in row
    assert "faster than memory: it runs from cache" in row
    assert _shares(str(above)) == [10]  # the compute share stays
    cached = _peaked(data_bytes=256, cache_bytes=300 << 20)  # a scan over an 8x8 matrix
    row = next(line for line in str(cached).splitlines() if "memory traffic" in line)
    assert cached.bytes_fraction is None and "%" not in row
    assert "its arrays (256 B) fit in this machine's 300 MiB cache: it runs from cache" in row
    streamed = _peaked(data_bytes=600 << 20, cache_bytes=300 << 20)
    assert streamed.bytes_fraction == pytest.approx(0.2)


def test_the_stream_kernel_is_sized_past_the_last_level_cache(tmp_path):
    from jaxlab.timing import peak

    for cache in (None, 8 << 20, 300 << 20, 2 << 30):
        elements = peak.stream_elements(cache)
        assert elements * 4 >= peak.MIN_STREAM_BYTES
        if cache:
            assert elements * 4 >= 2 * cache  # twice the cache at least: cannot fit in it
    for i, size in enumerate(("32K", "1024K", "307200K", "64K")):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert peak.last_level_cache_bytes(tmp_path) == 307200 << 10
    assert peak.last_level_cache_bytes(tmp_path / "absent") is None
    assert peak.parse_size("32M") == 32 << 20 and peak.parse_size("?") is None


def test_the_first_call_row_only_when_the_call_compiled_in_this_bench():
    f = jax.jit(lambda a: a * 3.0 + 1.0)
    a = jnp.ones(7)
    fresh = jaxlab.bench(f, a, runs=2, repeats=1)
    assert fresh.compiled and "first call (compile + run)" in str(fresh)
    again = jaxlab.bench(f, a, runs=2, repeats=1)  # compiled by the bench above
    assert not again.compiled and "first call" not in str(again)
    assert "first call" not in again._repr_mimebundle_()["text/html"]


def test_ratios_read_as_people_read_them():
    from jaxlab.timing.bench_view import times

    assert [times(x) for x in (1.031, 1.5, 3.44, 42.4, 2925.23)] == [
        "1.03×", "1.50×", "3.4×", "42×", "2,925×",
    ]  # fmt: skip
    slow = _result(compare=_result(name="g(x)", ready_s=5e-3 * 2925.23))
    assert "2,925× slower than f(x)" in str(slow) and "2925.23" not in str(slow)
    near = _result(compare=_result(name="g(x)", ready_s=5e-3 * 1.031))
    assert "1.03× slower" in str(near)


def test_two_timings_of_the_calls_return_that_contradict_are_not_shown_side_by_side():
    text = str(_result(ready_s=2e-4, ready_min_s=2e-4, ready_max_s=2e-4, dispatch_s=139e-6,
                       naive_s=10.8e-6, timeit_s=2e-4))  # fmt: skip
    assert "until the call returns" not in text
    row = next(line for line in text.splitlines() if "unblocked single call" in line)
    assert "10.8 µs" in row and "returned after 139 µs" in row
    agreeing = str(_result(dispatch_s=1e-5, naive_s=1.2e-5))
    assert "until the call returns" in agreeing and "unblocked single call" in agreeing


def test_a_large_output_is_held_at_most_twice(monkeypatch, never_slow):
    from jaxlab.timing import bench as bench_module

    monkeypatch.setattr(bench_module, "HELD_BYTES", 4 << 20)
    double = jax.jit(lambda a: a * 2.0)
    alive, most = [], [0]

    def f(a):
        out = double(a)
        if not isinstance(out, jax.core.Tracer):
            alive[:] = [ref for ref in alive if ref() is not None]
            alive.append(weakref.ref(out))
            most[0] = max(most[0], len(alive))
        return out

    a = jnp.ones((1 << 20,), jnp.float32)  # 4 MiB in, 4 MiB out
    before = sum(1 for x in jax.live_arrays() if x.shape == a.shape)
    r = jaxlab.bench(f, a, runs=4, repeats=2, explain=True)
    assert r.pipeline_calls == 2 and len(r.timeline) == 2
    assert most[0] <= 2  # every loop: the pipeline, %timeit's, the naive calls, the timeline
    assert sum(1 for x in jax.live_arrays() if x.shape == a.shape) == before  # none kept


def test_a_slow_call_is_not_called_again_for_its_dispatch_figures(monkeypatch):
    from jaxlab.timing import bench as bench_module

    monkeypatch.setattr(bench_module, "SLOW_S", 0.0)  # every call counts as slow
    calls = []
    g = jax.jit(lambda a: a + 1)

    def f(a):
        if not isinstance(a, jax.core.Tracer):
            calls.append(1)
        return g(a)

    r = jaxlab.bench(f, jnp.ones(3), runs=2, repeats=3)
    assert len(calls) == 1 + 2 * 3  # the first call, then the timed rounds only
    assert r.derived and r.pipeline_s is None
    assert r.dispatch_s == r.naive_s == r.timeit_s <= r.ready_s
    assert "read off the timed rounds" in str(r)
    r = jaxlab.bench(matmul, jnp.ones((30, 30)), runs=1, repeats=1, explain=True)
    assert r.derived and len(r.timeline) == 2  # a slow call's timeline keeps two calls
    for span in r.timeline:
        assert span.start_s <= span.return_s <= span.ready_s


def test_a_function_that_is_not_jitted_is_timed_as_it_is_and_said_so():
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    w, x = jnp.ones((16, 4)), jnp.ones((8, 16))
    r = jaxlab.bench(loss, w, x, runs=5, repeats=2)
    expected = len(jax.make_jaxpr(loss)(w, x).eqns)
    assert not r.jitted and r.dispatches == expected
    assert f"{expected} operations one by one" in str(r)
    assert "jax.jit(loss) compiles it once" in str(r)
    assert jaxlab.bench(jax.jit(loss), w, x, runs=5, repeats=1).jitted


def _result(**changes):
    base = dict(
        name="f(x)", platform="cpu", output="f32[3]", asynchronous=True, compile_s=0.1,
        ready_s=5e-3, ready_min_s=4.9e-3, ready_max_s=5.1e-3, dispatch_s=1e-5, naive_s=1e-5,
        timeit_s=5e-3, timeit_loops=40, runs=40, repeats=7,
    )  # fmt: skip
    return jaxlab.BenchResult(**(base | changes))


def test_no_row_calls_milliseconds_of_work_dispatch():
    row = next(line for line in str(_result(dispatch_s=4.9e-3)).splitlines() if "returns" in line)
    assert "4.9 ms" in row and "dispatch" not in row
    row = next(line for line in str(_result()).splitlines() if "returns" in line)
    assert "dispatch" in row  # 10 µs of 5 ms: that is queueing


def test_an_unblocked_figure_slower_than_the_awaited_one_is_noise_not_too_slow():
    text = str(_result(timeit_s=7e-3))
    assert "too slow" not in text and "agrees within noise" in text
    assert "too fast" in str(_result(timeit_s=1e-3))


def test_the_html_hides_a_reopened_notebooks_missing_progress_bar_model():
    html = _result()._repr_mimebundle_()["text/html"]
    assert ":has(+ .jp-OutputArea-child .jaxlab-bench)" in html and "class='jaxlab-bench'" in html


def test_in_a_terminal_a_long_measurement_says_one_line_and_draws_no_frames(capsys):
    from jaxlab.timing.bench_progress import Progress

    with Progress(rounds=7, seconds=12.0, name="f(x)") as p:
        for _ in range(7):
            p.advance()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\r" not in err and "f(x)" in err


# ---------------------------------------------------------------------- bad input (issue 22)


def test_bench_magic_presents_a_bad_static_argument_as_the_users_error(ip):
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(a):\n    return a + 1\nx = jnp.ones(3)")
    before = set(ip.user_ns)
    with pytest.raises(UsageError) as e:
        ip.run_line_magic("bench", "jax.jit(f, static_argnums=0)(x)")
    text = str(e.value)
    assert "calling `jax.jit(f, static_argnums=0)(x)` failed with ValueError" in text
    assert "hashable" in text.lower()
    assert set(ip.user_ns) == before


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def target(a):\n    yield a", "generator function"),
        ("async def target(a):\n    return a", "async function"),
        ("class target:\n    def __init__(self, a):\n        self.a = a", "is a class"),
        ("async def work(a):\n    return a\ntarget = lambda a: work(a)", "returned a coroutine"),
    ],
)
def test_bench_magic_refuses_what_only_creates_an_object(ip, source, reason):
    ip.run_cell("import jax.numpy as jnp\nx = jnp.ones(3)\n" + source)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(UsageError, match=reason):
            ip.run_line_magic("bench", "target(x)")
        gc.collect()  # an unawaited coroutine warns when it is collected
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_an_equinox_model_called_op_by_op_counts_its_dispatches():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(4, 1, 8, 1, key=jax.random.key(0))  # its activation is not an array

    def loss(m, x):
        return jnp.mean(jax.vmap(m)(x) ** 2)

    x = jnp.ones((16, 4))
    r = jaxlab.bench(loss, model, x, runs=2, repeats=1)
    assert not r.jitted and r.dispatches == len(eqx.filter_make_jaxpr(loss)(model, x)[0].eqns)
    assert r.flops is not None and r.flops >= 16 * 2 * (4 * 8 + 8 * 1)


class _VirtualClock:
    """``time.perf_counter`` for a test: a call moves it by what the test says the call
    took (and each reading by a microsecond), so the rounds are the test's, not the
    machine's: a busy machine cannot make a steady call unsteady."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1e-6
        return self.now

    def spend(self, seconds):
        self.now += seconds


def test_rounds_at_two_levels_are_called_unsteady_and_steady_ones_are_not(monkeypatch):
    clock = _VirtualClock()
    monkeypatch.setattr(time, "perf_counter", clock)
    calls = []

    def step():  # 1 ms a call, then 4 ms from the 17th on: two levels, as a callback moves
        calls.append(1)
        clock.spend(0.001 if len(calls) <= 16 else 0.004)

    r = jaxlab.bench(step, runs=5, repeats=6)
    assert r.spread >= 2 and r.unsteady
    row = next(line for line in str(r).splitlines() if line.strip().startswith("unsteady"))
    assert f"{r.spread:.1f}×" in row and "-r 20" in row
    steady = jaxlab.bench(lambda: clock.spend(0.002), runs=20, repeats=6)
    assert steady.spread < 1.01
    assert not steady.unsteady and "unsteady" not in str(steady)


def test_a_rate_is_said_per_awaited_call_and_queued_where_queued_calls_run_much_quicker():
    # The figures of a 2048x2048 float32 matmul on a TPU v5e (benchmarks/device_check.py):
    # each awaited call 597 us, 4 queued at once 186 us each; the peak 171 TFLOP/s, 370 GB/s.
    tpu = _result(
        platform="tpu", ready_s=597e-6, ready_min_s=596e-6, ready_max_s=604e-6,
        pipeline_s=186e-6, pipeline_calls=4, flops=2 * 2048**3, bytes_accessed=117.6e6,
        peak_flops_s=171e12, peak_bytes_s=370e9,
    )  # fmt: skip
    rows = {line.split()[0]: line for line in str(tpu).splitlines() if line.strip()}
    compute, memory = rows["compute"], rows["memory"]
    assert "28.8 TFLOP/s" in compute and "17% of this machine's 171 TFLOP/s" in compute
    assert compute.endswith("per awaited call; 4 queued at once reach 92.4 TFLOP/s, 54%")
    # Queued, its traffic is above memory's peak: no share of it is claimed.
    assert "197 GB/s" in memory and "53% of this machine's 370 GB/s" in memory
    assert memory.endswith("per awaited call; 4 queued at once reach 632 GB/s")
    # Queued calls about as quick as awaited ones (a CPU): the note is the share alone.
    cpu = _result(pipeline_s=4.5e-3, pipeline_calls=4, flops=5e6, peak_flops_s=1e10)
    compute = next(line for line in str(cpu).splitlines() if "compute" in line)
    assert compute.endswith("10% of this machine's 10 GFLOP/s") and "queued" not in compute
