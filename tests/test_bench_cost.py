"""What ``%bench`` itself costs (issue 37): rounds that stop once the median is known, side
rounds a tenth of a timed round, work already done reused (the first call's compilation,
the cost analysis), and the machine's peak measured once a session or read from the
machine's file. Rounds here come from a virtual clock or are written out: a busy machine
cannot change what these tests see."""

from __future__ import annotations

import json
import math
import time

import jax
import jax.monitoring as monitoring
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.timing import bench as bench_module
from jaxlab.timing import bench_cost, peak, rounds


class _VirtualClock:
    """``time.perf_counter`` for a test: each reading moves it a microsecond, and a call
    moves it by what the test says the call took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    virtual = _VirtualClock()
    monkeypatch.setattr(time, "perf_counter", virtual)
    return virtual


# ------------------------------------------------------------------- when rounds stop


def test_the_medians_precision_is_students_interval_of_the_rounds():
    steady = [2.0e-3, 2.02e-3, 2.01e-3]
    sd = 0.01e-3  # the standard deviation of those three
    expected = 4.303 * 1.2533 * sd / math.sqrt(3) / 2.01e-3
    assert rounds.median_precision(steady) == pytest.approx(expected, rel=1e-3)
    assert rounds.known(steady)  # ±1.6%: within the ±2% the rounds stop at
    assert not rounds.known(steady[:2])  # two rounds never stop: three at least
    assert not rounds.known([2.0e-3, 2.6e-3, 2.0e-3])  # one round 30% off: go on
    assert rounds.known([2.0e-3, 2.6e-3, 2.0e-3], precision=0.6)  # ±54%
    assert rounds.median_precision([1.0]) == math.inf
    # seven rounds of a noisy call: t for 6 degrees of freedom
    noisy = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.0]
    sd = 0.0645497  # statistics.stdev(noisy)
    assert rounds.median_precision(noisy) == pytest.approx(
        2.447 * 1.2533 * sd / math.sqrt(7), rel=1e-4
    )


def _counted(clock, seconds_of_call):
    calls = []

    def step():
        calls.append(1)
        clock.spend(seconds_of_call(len(calls)))

    return step, calls


def test_a_steady_call_stops_after_three_rounds_its_median_known(clock):
    step, calls = _counted(clock, lambda k: 0.002)
    r = jaxlab.bench(step)
    # 2 ms a call: the autorange tries 1, 2, 5, ..., 100 calls (100 make 0.2 s), that last
    # round counts as the first; two more rounds and the median is known
    assert r.runs == 100 and r.repeats == 3
    assert len(calls) == 1 + (1 + 1 + 2 + 5 + 10 + 20 + 50 + 100) + 2 * 100
    assert r.precision is not None and r.precision <= rounds.PRECISION
    assert r.precision_goal == rounds.PRECISION
    text = str(r)
    assert "median of 3 rounds of 100 calls, known within ±" in text
    assert "not the ±2%" not in text


def test_a_noisy_call_goes_on_to_seven_rounds_and_says_the_precision_it_reached(clock):
    # each round's calls 2 ms, 2.4 ms, 2 ms, 2.4 ms...: the rounds differ by 20%
    step, _ = _counted(clock, lambda k: 0.002 if (k // 100) % 2 == 0 else 0.0024)
    r = jaxlab.bench(step, runs=100)
    assert r.repeats == rounds.MAX_ROUNDS
    assert r.precision is not None and r.precision > rounds.PRECISION
    assert "not the ±2% the rounds stop at" in str(r)


def test_repeats_given_are_all_measured_and_no_goal_is_claimed(clock):
    step, calls = _counted(clock, lambda k: 0.002)
    r = jaxlab.bench(step, runs=10, repeats=6)
    assert r.repeats == 6 and len(calls) == 1 + 6 * 10
    assert r.precision_goal is None and "not the ±" not in str(r)
    one = jaxlab.bench(step, runs=10, repeats=1)
    assert one.repeats == 1 and one.precision is None and "known within" not in str(one)


def test_compared_calls_go_on_together_until_both_are_known(clock):
    steady, steady_calls = _counted(clock, lambda k: 0.002)
    noisy, noisy_calls = _counted(clock, lambda k: 0.002 if (k // 100) % 2 == 0 else 0.003)
    r = jaxlab.bench(steady, runs=100, compare=noisy)
    assert r.compare is not None
    assert r.repeats == r.compare.repeats == rounds.MAX_ROUNDS  # interleaved to the end
    assert len(steady_calls) == len(noisy_calls) == 1 + 7 * 100


def test_the_magic_stops_early_by_default_and_takes_r_as_given(ip, clock):
    ip.user_ns["clock"] = clock
    ip.run_cell("def step():\n    clock.spend(0.002)")
    assert ip.run_line_magic("bench", "-o step()").repeats == 3
    assert ip.run_line_magic("bench", "-o -n 5 -r 5 step()").repeats == 5


# ------------------------------------------------------- side rounds: a tenth of a round


def test_side_rounds_make_a_tenth_of_a_timed_rounds_calls(monkeypatch):
    """A fast call's pipeline and %timeit rounds make SIDE_SHARE of a round's calls (two
    at least; all of them with -n) after the first SIDE_ROUNDS timed rounds only: together
    they cost a fifth of three rounds."""
    made = []
    real = rounds.pipeline_round

    def pipeline(call, n, depth):
        made.append(("pipeline", n, depth))
        return real(call, n, depth)

    unblocked = rounds.unblocked_round
    monkeypatch.setattr(rounds, "pipeline_round", pipeline)
    monkeypatch.setattr(
        rounds, "unblocked_round", lambda call, n: made.append(("timeit", n)) or unblocked(call, n)
    )
    add = jax.jit(lambda a: a + 1.0)
    r = jaxlab.bench(add, jnp.ones(4), runs=400, repeats=3)
    assert r.timeit_loops == 400  # -n: as %timeit -n 400
    made.clear()
    r = jaxlab.bench(add, jnp.ones(4), repeats=5)
    side = max(2, math.ceil(r.runs * bench_module.SIDE_SHARE))
    assert r.timeit_loops == side
    # one of each after the first three timed rounds, none after the last two
    assert made.count(("pipeline", side, min(20, side))) == bench_module.SIDE_ROUNDS == 3
    assert made.count(("timeit", side)) == 3 and len(made) == 6
    assert r.pipeline_calls == min(20, side)


# ---------------------------------------------------------------- work already done


@pytest.fixture
def planted_peak(monkeypatch):
    """A peak known for the session: no kernel of the peak compiles in these tests."""
    known = peak.Peak(jax.default_backend(), 1e11, 1e10, 256, 1 << 28, time.time(), 0.5)
    monkeypatch.setattr(peak, "_PEAKS", {jax.default_backend(): known})
    return known


def _compiles():
    seen = []

    def listener(event, duration, **kwargs):
        if event == bench_module.BACKEND_COMPILE:
            seen.append(event)

    monitoring.register_event_duration_secs_listener(listener)
    return seen, lambda: monitoring.unregister_event_duration_listener(listener)


def test_a_jitted_calls_cost_reuses_its_first_calls_compilation(planted_peak):
    from jaxlab.compile.loop_costs import xla_counts_body_once

    xla_counts_body_once(jax.default_backend())  # loop_costs' probe: once a process
    f = jax.jit(lambda a: jnp.tanh(a @ a))
    a = jnp.ones((32, 32))
    f(a).block_until_ready()  # compiled by the user's own call
    seen, stop = _compiles()
    try:
        r = jaxlab.bench(f, a, runs=2, repeats=1)
    finally:
        stop()
    assert seen == []  # the cost analysis compiled nothing: JAX's executable was reused
    assert r.flops == pytest.approx(2 * 32**3, rel=0.05)


def test_a_calls_cost_is_kept_per_function_and_argument_types(planted_peak, monkeypatch):
    costed = []
    real = bench_cost._cost
    monkeypatch.setattr(bench_cost, "_cost", lambda *a: costed.append(a[0]) or real(*a))
    scan = jax.jit(
        lambda c, w: jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), c, None, length=50)[0]
    )
    c, w = jnp.ones(8), jnp.ones((8, 8))
    scan(c, w).block_until_ready()
    first = bench_cost.call_cost(scan, (c, w), {})
    seen, stop = _compiles()
    try:
        again = jaxlab.bench(scan, jnp.zeros(8), w, runs=2, repeats=1)  # same types
    finally:
        stop()
    assert costed == [scan] and seen == []  # not costed again: no loop body recompiled
    assert again.flops == first.flops and first.flops >= 50 * 2 * 8 * 8  # 50 steps counted
    bench_cost.call_cost(scan, (jnp.ones(16), jnp.ones((16, 16))), {})  # other shapes
    bench_cost.call_cost(scan, (c.astype(jnp.float16), w.astype(jnp.float16)), {})
    assert costed == [scan] * 3
    static = jax.jit(lambda a, n: a * n, static_argnums=1)
    for n in (2, 3, 2):
        bench_cost.call_cost(static, (c, n), {})
    assert costed.count(static) == 2  # a static argument's value is part of the key
    assert bench_cost.signature((c, [1, 2]), {"opts": {"k": 3}}) is not None
    assert bench_cost.signature(({1, 2},), {}) is None  # a set leaf: not kept, costed each time


def test_costing_a_plain_function_leaves_the_users_own_jit_of_it_to_compile(planted_peak):
    def plain(a):
        return jnp.tanh(a @ a).sum()

    a = jnp.ones((16, 16))
    jaxlab.bench(plain, a, runs=2, repeats=1)  # costed through a jit of jaxlab's own
    seen, stop = _compiles()
    try:
        jax.jit(plain)(a).block_until_ready()  # the user's: compiles (logged as theirs)
    finally:
        stop()
    assert seen == [bench_module.BACKEND_COMPILE]


# ------------------------------------------------------------- the machine's kept peak


@pytest.fixture
def peak_file(tmp_path, monkeypatch):
    """The machine's peak file in a folder of the test's; no peak of this session."""
    path = tmp_path / "cache" / "peak.json"
    monkeypatch.setenv("JAXLAB_PEAK_FILE", str(path))
    monkeypatch.setattr(peak, "_PEAKS", {})
    monkeypatch.setattr(peak, "_KEPT", {})
    measured = []

    def planted(platform):
        measured.append(platform)
        return peak.Peak(
            platform, 2e11, 3e10, 1024, 1 << 29, time.time(), 0.4, (1.8e11, 2.1e11),
            (2.9e10, 3.1e10), 32 << 20, 0.6,
        )  # fmt: skip

    monkeypatch.setattr(peak, "measure_peak", planted)
    monkeypatch.setattr(peak, "load_average", lambda: 0.5)
    return path, measured


def test_the_peak_is_measured_once_kept_in_the_machines_file_and_read_next_session(peak_file):
    path, measured = peak_file
    first = peak.known_peak()
    assert measured == [jax.default_backend()] and first.kept == ""
    assert peak.known_peak() is first  # once a session
    saved = json.loads(path.read_text())["peaks"]
    assert list(saved) == [peak.machine_key(jax.default_backend())]
    peak.forget_peak()  # a new session
    kept = peak.known_peak()
    assert measured == [jax.default_backend()]  # read, not measured again
    assert (kept.flops_s, kept.bytes_s, kept.bytes_range) == (2e11, 3e10, (2.9e10, 3.1e10))
    assert kept.measured_at == first.measured_at and kept.load == 0.4
    assert kept.kept == str(path) and f"kept in {path}" in kept.when
    r = jaxlab.bench(jax.jit(lambda a: a @ a), jnp.ones((64, 64)), runs=2, repeats=1)
    assert measured == [jax.default_backend()] and "kept in" in r.peak_note
    assert "29–31 GB/s" in r.peak_bytes_spread  # the spread travels with it


def test_machine_peak_measures_in_each_session_though_the_file_holds_one(peak_file):
    """``%bench --peak`` and a fresh process's ``machine_peak()`` (bench_peak_spread.py)
    measure; only ``%bench`` reads the file."""
    _, measured = peak_file
    peak.machine_peak()
    peak.forget_peak()
    assert peak.machine_peak().kept == "" and len(measured) == 2
    assert peak.machine_peak(refresh=True) is not None and len(measured) == 3


@pytest.mark.parametrize(
    "spoil",
    [
        "eight days old",
        "another machine",
        "measured under load",
        "not JSON",
        "another version's fields",
    ],
)
def test_a_kept_peak_that_no_longer_stands_is_measured_again(peak_file, monkeypatch, spoil):
    path, measured = peak_file
    peak.known_peak()
    data = json.loads(path.read_text())
    key = peak.machine_key(jax.default_backend())
    entry = data["peaks"][key]
    if spoil == "eight days old":
        entry["measured_at"] -= 8 * 86400
    elif spoil == "another machine":
        data["peaks"] = {key.replace(key.split()[0], "elsewhere", 1): entry}
    elif spoil == "measured under load":
        entry["load"] = 9.0  # today's 0.5 on two cores: a quieter machine measures again
        monkeypatch.setattr(peak.os, "cpu_count", lambda: 2)
    elif spoil == "another version's fields":
        entry["colour"] = "blue"
    text = "{not json" if spoil == "not JSON" else json.dumps(data)
    path.write_text(text)
    peak.forget_peak()
    again = peak.known_peak()
    assert len(measured) == 2 and again.kept == ""
    assert peak.read_kept(jax.default_backend()) is not None  # written back, good again


def test_a_peak_kept_under_a_load_like_todays_stands():
    now = time.time()
    kept = peak.Peak("cpu", 1.0, 1.0, 1, 1, now - 3600, 9.0)
    assert peak.usable(kept, now, load=8.0, cores=2)  # as busy as it was: stands
    assert not peak.usable(kept, now, load=0.5, cores=2)
    assert peak.usable(kept, now, load=0.5, cores=32)  # 9 of 32 cores: not a busy machine
    assert not peak.usable(kept, now + 8 * 86400, load=9.0, cores=2)
    assert not peak.usable(kept, now - 7200, load=9.0, cores=2)  # from the future


def test_no_file_is_written_when_the_peak_file_is_off(peak_file, monkeypatch, tmp_path):
    monkeypatch.setenv("JAXLAB_PEAK_FILE", "off")
    assert peak.peak_file() is None
    peak.known_peak()
    peak.forget_peak()
    peak.known_peak()
    _, measured = peak_file
    assert len(measured) == 2 and not list(tmp_path.rglob("*.json"))


def test_a_peak_of_another_day_says_its_date():
    yesterday = time.time() - 86400
    old = peak.Peak("cpu", 1.0, 1.0, 1, 1, yesterday, 1.0, kept="~/.cache/jaxlab/peak.json")
    day = time.strftime("%Y-%m-%d", time.localtime(yesterday))
    assert old.when.startswith(f"measured on {day} at ")
    assert old.when.endswith("load average 1.00, kept in ~/.cache/jaxlab/peak.json")
    today = peak.Peak("cpu", 1.0, 1.0, 1, 1, time.time(), None)
    assert today.when.startswith("measured at ") and "on " not in today.when


def test_the_real_peak_is_a_power_of_two_matmul_and_a_stream_past_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_PEAK_FILE", str(tmp_path / "peak.json"))
    p = peak.measure_peak(jax.default_backend())
    assert p.matmul_n >= 256 and p.matmul_n & (p.matmul_n - 1) == 0
    assert p.stream_bytes >= 2 * 4 * peak.stream_elements(p.cache_bytes)  # read and written
    low, high = p.bytes_range
    assert 0 < low <= p.bytes_s <= high and p.flops_range[0] <= p.flops_s <= p.flops_range[1]
    assert p.measure_s > 0


def test_a_measurement_that_may_stop_early_says_up_to_how_many_rounds(capsys):
    from jaxlab.timing.bench_progress import Progress

    with Progress(rounds=6, seconds=3.0, name="f(x)", most=True) as p:
        p.advance()
    err = capsys.readouterr().err
    assert "measuring up to 6 rounds, about 3 s at most" in err and err.count("\n") == 1
