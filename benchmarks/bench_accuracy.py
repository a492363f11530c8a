"""Is ``%bench``'s per-call figure what the call costs? Checked against an independent
reference, with its peak's repeatability and its own cost (issue 18).

Reference: ``timeit`` of the blocked call as a user writes it, ``f(x).block_until_ready()``
(``jax.block_until_ready(f(x))`` for a call returning several arrays), one call at a time
(the number of calls chosen by ``timeit``'s own autorange, the median of 7 repeats),
measured before and after each ``jaxlab.bench(f, x)``, over six kinds of call: a 1×1 add,
256² and 2048² matmuls, a 1M-element elementwise chain, a 1,000-step scan, a host callback.
(``jax.block_until_ready`` walks its argument as a tree: 0.6-2 µs a call more than the
array's own method, 18-28% of a 1×1 add, which %bench's rounds paid until they awaited one
array by its method; issue 33.)

Targets (one PASS/FAIL line each):

* per call: ``jaxlab.bench(f, x).ready_s`` within 1.1× of the reference, for all six
  (the median of the rounds' ratios);
* the peak measured in 5 fresh kernels (subprocesses): within 1.5× of each other;
* ``%bench`` of a call of about 1 s: its wall time within 1.3× of a manual measurement of
  equal accuracy (``timeit`` of the blocked call, as many calls and repeats as ``%bench``
  chose, after one untimed first call; both sides compile a fresh function).

Process CPU time (``time.process_time()``) is printed beside wall time: the machine is
shared, and CPU time is the steady figure. Prints a table, the PASS/FAIL lines, then one
JSON line of figures::

    .venv/bin/python benchmarks/bench_accuracy.py
    .venv/bin/python benchmarks/bench_accuracy.py --only "1×1 add"   # those cases alone
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

import jaxlab

ROUNDS = 5  # %bench runs this many times per case, a reference before and after each
PER_CALL_TARGET = 1.1
PEAK_KERNELS = 5
PEAK_TARGET = 1.5
WALL_TARGET = 1.3
SLOW_CALL_S = 1.0


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def reference(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """timeit of the blocked call as a user writes it, one call at a time: (median, fastest)
    of 7 repeats. The statement is ``f(a0, a1).block_until_ready()``, names looked up as
    %timeit looks up a notebook's (no wrapper frame, no unpacking of args)."""
    names = [f"a{k}" for k in range(len(args))]
    call = f"fn({', '.join(names)})"
    single = isinstance(fn(*args), jax.Array)
    statement = f"{call}.block_until_ready()" if single else f"jax.block_until_ready({call})"
    space = {"fn": fn, "jax": jax, **dict(zip(names, args, strict=True))}
    timer = timeit.Timer(statement, globals=space)
    number, _ = timer.autorange()
    repeats = timer.repeat(repeat=7, number=number)
    return statistics.median(repeats) / number, min(repeats) / number


def per_call_case(fn: Callable[..., Any], *args: Any) -> dict[str, float]:
    """Reference, %bench, reference, ... : each %bench round is compared with the geometric
    mean of the references just before and after it, so drift hits both sides alike."""
    jax.block_until_ready(fn(*args))  # compiled before either side measures
    refs, fastest, ours, our_fastest = [], [], [], []
    wall0, cpu0 = clocks()
    for i in range(2 * ROUNDS + 1):
        if i % 2 == 0:
            median, best = reference(fn, *args)
            refs.append(median)
            fastest.append(best)
        else:
            r = jaxlab.bench(fn, *args)
            ours.append(r.ready_s)
            our_fastest.append(r.ready_min_s)
    wall1, cpu1 = clocks()
    ratios = [o / (refs[i] * refs[i + 1]) ** 0.5 for i, o in enumerate(ours)]
    # the reference against itself: how far two of its measurements a round apart differ
    drift = [max(b / a, a / b) for a, b in itertools.pairwise(refs)]
    return {
        "reference_s": statistics.median(refs),
        "bench_s": statistics.median(ours),
        "ratio": statistics.median(ratios),
        # fastest against fastest: the least disturbed figures on a busy machine
        "min_ratio": min(our_fastest) / min(fastest),
        "ref_drift": statistics.median(drift),
        "wall_s": wall1 - wall0,
        "cpu_s": cpu1 - cpu0,
    }


def cases() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    tiny = jnp.ones((1, 1), jnp.float32)
    m256 = jnp.ones((256, 256), jnp.float32)
    m2048 = jnp.ones((2048, 2048), jnp.float32)
    million = jnp.linspace(0.0, 1.0, 1_000_000, dtype=jnp.float32)
    c, w = jnp.ones(64, jnp.float32), jnp.full((64, 64), 0.01, jnp.float32)
    host = jnp.linspace(0.0, 1.0, 1000, dtype=jnp.float32)

    def scan(c: jax.Array, w: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), c, None, length=1000)[0]

    def callback(v: jax.Array) -> jax.Array:
        out = jax.ShapeDtypeStruct(v.shape, v.dtype)
        return jax.pure_callback(lambda a: np.sin(a).astype(a.dtype), out, v)

    return {
        "1×1 add": (jax.jit(lambda a, b: a + b), (tiny, tiny)),
        "256² matmul": (jax.jit(jnp.matmul), (m256, m256)),
        "2048² matmul": (jax.jit(jnp.matmul), (m2048, m2048)),
        "1M elementwise chain": (
            jax.jit(lambda v: jnp.tanh(v) * 2.0 + jnp.sin(v) * v - 1.0),
            (million,),
        ),
        "1,000-step scan": (jax.jit(scan), (c, w)),
        "host callback": (jax.jit(callback), (host,)),
    }


_PEAK_SCRIPT = (
    "import os, json; os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
    "from jaxlab.timing.peak import machine_peak\n"
    "p = machine_peak(); print(json.dumps(p.to_dict()))"
)


def peaks_in_fresh_kernels() -> list[dict[str, Any]]:
    found = []
    for _ in range(PEAK_KERNELS):
        done = subprocess.run(
            [sys.executable, "-c", _PEAK_SCRIPT], capture_output=True, text=True, check=True
        )
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def slow_call_cost() -> dict[str, float]:
    """A matmul of about SLOW_CALL_S: %bench's wall time against timeit of equal accuracy."""
    probe = jnp.ones((2048, 2048), jnp.float32)
    mm = jax.jit(jnp.matmul)
    jax.block_until_ready(mm(probe, probe))
    t0 = time.perf_counter()
    jax.block_until_ready(mm(probe, probe))
    n = int(2048 * (SLOW_CALL_S / (time.perf_counter() - t0)) ** (1 / 3))
    a = jnp.ones((n, n), jnp.float32)

    wall0, cpu0 = clocks()
    r = jaxlab.bench(jax.jit(lambda x, y: x @ y), a, a)  # a fresh function: compiles
    wall1, cpu1 = clocks()
    fresh = jax.jit(lambda x, y: x @ y)
    jax.block_until_ready(fresh(a, a))  # the manual measurement's own first call
    timer = timeit.Timer(lambda: jax.block_until_ready(fresh(a, a)))
    manual = statistics.median(timer.repeat(repeat=r.repeats, number=r.runs)) / r.runs
    wall2, cpu2 = clocks()
    return {
        "n": n,
        "bench_ready_s": r.ready_s,
        "manual_s": manual,
        "bench_wall_s": wall1 - wall0,
        "bench_cpu_s": cpu1 - cpu0,
        "manual_wall_s": wall2 - wall1,
        "manual_cpu_s": cpu2 - cpu1,
        "wall_ratio": (wall1 - wall0) / (wall2 - wall1),
        "runs": r.runs,
        "repeats": r.repeats,
    }


def verdict(ok: bool, text: str) -> str:
    line = f"{'PASS' if ok else 'FAIL'}  {text}"
    print(line)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", help="run the per-call cases whose name holds this text, nothing else"
    )
    only = parser.parse_args().only
    start_wall, start_cpu = clocks()
    load = os.getloadavg()[0]
    chosen = {k: v for k, v in cases().items() if only is None or only in k}
    results = {name: per_call_case(fn, *args) for name, (fn, args) in chosen.items()}
    head = f"{'call':22} {'reference':>11} {'%bench':>11} {'ratio':>7} {'min ratio':>9}"
    print(f"{head} {'ref/ref':>7} {'wall':>7} {'cpu':>7}")
    for name, c in results.items():
        print(
            f"{name:22} {c['reference_s'] * 1e3:9.4f}ms {c['bench_s'] * 1e3:9.4f}ms "
            f"{c['ratio']:7.3f} {c['min_ratio']:9.3f} {c['ref_drift']:7.3f} "
            f"{c['wall_s']:6.1f}s {c['cpu_s']:6.1f}s"
        )
    print(
        f"(reference: timeit of f(x).block_until_ready(), median of 7 repeats, measured "
        f"before and after each of {ROUNDS} jaxlab.bench; ratio: the median of the rounds'; "
        "min ratio: fastest round against fastest repeat; ref/ref: the reference against "
        "itself one round later, the median factor: a ratio closer than that is noise)"
    )
    worst = max(max(c["ratio"], 1 / c["ratio"]) for c in results.values())
    per_call = verdict(
        worst <= PER_CALL_TARGET,
        f"per call within {PER_CALL_TARGET}× of the reference on "
        f"{'all six' if only is None else ', '.join(results)} (worst {worst:.3f}×)",
    )
    if only is not None:
        print(json.dumps({"benchmark": "bench_accuracy", "jax": jax.__version__,
                          "per_call": results, "verdicts": [per_call]}))  # fmt: skip
        return
    peaks = peaks_in_fresh_kernels()
    flops = [p["flops_s"] for p in peaks]
    moved = [p["bytes_s"] for p in peaks]
    print("peak in fresh kernels, GFLOP/s:", ", ".join(f"{f / 1e9:.1f}" for f in flops))
    print("peak in fresh kernels, GB/s:   ", ", ".join(f"{b / 1e9:.2f}" for b in moved))
    slow = slow_call_cost()
    print(
        f"{slow['n']}² matmul ({slow['bench_ready_s']:.2f} s a call, {slow['repeats']}×"
        f"{slow['runs']} calls): %bench {slow['bench_wall_s']:.1f} s wall "
        f"({slow['bench_cpu_s']:.1f} s CPU), manual {slow['manual_wall_s']:.1f} s wall "
        f"({slow['manual_cpu_s']:.1f} s CPU)"
    )
    flops_spread, bytes_spread = max(flops) / min(flops), max(moved) / min(moved)
    lines = [
        per_call,
        verdict(
            max(flops_spread, bytes_spread) <= PEAK_TARGET,
            f"peak in {PEAK_KERNELS} fresh kernels within {PEAK_TARGET}× "
            f"(FLOP/s {flops_spread:.2f}×, bytes/s {bytes_spread:.2f}×; load average "
            f"{os.getloadavg()[0]:.1f})",
        ),
        verdict(
            slow["wall_ratio"] <= WALL_TARGET,
            f"%bench of a ~{SLOW_CALL_S:g} s call within {WALL_TARGET}× the manual "
            f"measurement's wall time ({slow['wall_ratio']:.2f}×)",
        ),
    ]
    end_wall, end_cpu = clocks()
    print(
        f"benchmark: {end_wall - start_wall:.0f} s wall, {end_cpu - start_cpu:.0f} s CPU "
        f"(this process); load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    figures: dict[str, Any] = {
        "benchmark": "bench_accuracy",
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "platform": jax.default_backend(),
        "load_average": [load, os.getloadavg()[0]],
        "per_call": {k: {n: round(v, 9) for n, v in c.items()} for k, c in results.items()},
        "peak_flops_s": flops,
        "peak_bytes_s": moved,
        "slow_call": slow,
        "verdicts": lines,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
