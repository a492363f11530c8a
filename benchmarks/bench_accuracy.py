"""How close ``%bench``'s steady-state figure is to a plain reference, and what it adds.

For a jitted 1500×1500 matmul, a small elementwise function and a function of about
10 µs, measured side by side in alternating rounds:

* ``jaxlab.bench(f, x).ready_s`` (what ``%bench f(x)`` quotes), against
* the reference: twenty calls, one block on all their outputs, divided by twenty; the
  median of seven such measurements.

Target: within 10% of the reference. Also printed: what an unblocked single call claims
(``naive_s``, the ``%timeit -n1`` figure) and how far off it is, the per-call time
``%bench`` adds around the ~10 µs function, and how long one ``%bench`` takes. Prints a
table, then one JSON line of figures::

    .venv/bin/python benchmarks/bench_accuracy.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

import jaxlab

ROUNDS = 3
REFERENCE_REPEATS = 7
REFERENCE_CALLS = 20
REFERENCE_S = 0.5  # small functions: many repeats, as %bench's own rounds take
TARGET = 0.10


def reference(fn: Callable[..., Any], *args: Any) -> float:
    """Twenty calls, one block, divided by twenty: the median of at least REFERENCE_REPEATS
    repeats and of as many as fit in REFERENCE_S, after one untimed warm-up repeat (a cold
    first repeat is Python's and the allocator's warm-up, not the function's time)."""

    def once() -> float:
        t0 = time.perf_counter()
        outs = [fn(*args) for _ in range(REFERENCE_CALLS)]
        jax.block_until_ready(outs)
        return (time.perf_counter() - t0) / REFERENCE_CALLS

    once()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < REFERENCE_REPEATS or time.perf_counter() - start < REFERENCE_S:
        times.append(once())
    return statistics.median(times)


def case(fn: Callable[..., Any], *args: Any) -> dict[str, float]:
    jax.block_until_ready(fn(*args))  # compiled before either side measures
    refs, ours, naive, wall = [], [], [], []
    for _ in range(ROUNDS):  # alternate: a busy machine's drift hits both sides alike
        refs.append(reference(fn, *args))
        t0 = time.perf_counter()
        r = jaxlab.bench(fn, *args)
        wall.append(time.perf_counter() - t0)
        ours.append(r.ready_s)
        naive.append(r.naive_s)
    ratios = [o / f for o, f in zip(ours, refs, strict=True)]
    ref, our = statistics.median(refs), statistics.median(ours)
    return {
        "reference_s": ref,
        "bench_s": our,
        "ratio": statistics.median(ratios),
        # fastest against fastest: the least disturbed figure on a busy machine
        "min_ratio": min(ours) / min(refs),
        "added_s": statistics.median(o - f for o, f in zip(ours, refs, strict=True)),
        "naive_s": statistics.median(naive),
        "naive_ratio": our / statistics.median(naive),
        "bench_wall_s": statistics.median(wall),
    }


def main() -> None:
    big = jnp.ones((1500, 1500), jnp.float32)
    small = jnp.ones((100_000,), jnp.float32)
    tiny = jnp.ones((256,), jnp.float32)
    cases = {
        "matmul 1500×1500": case(jax.jit(jnp.matmul), big, big),
        "elementwise 100k": case(jax.jit(lambda v: jnp.tanh(v) * 2.0 + 1.0), small),
        "~10 µs function": case(jax.jit(lambda v: v * 2.0 + 1.0), tiny),
    }
    head = ("case", "reference", "%bench", "ratio", "min ratio", "added", "naive", "naive ×")
    print(
        f"{head[0]:18} {head[1]:>11} {head[2]:>11} {head[3]:>7} {head[4]:>9} {head[5]:>10} "
        f"{head[6]:>10} {head[7]:>8}  %bench wall"
    )
    for name, c in cases.items():
        print(
            f"{name:18} {c['reference_s'] * 1e3:9.3f}ms {c['bench_s'] * 1e3:9.3f}ms "
            f"{c['ratio']:7.3f} {c['min_ratio']:9.3f} {c['added_s'] * 1e6:8.2f}µs "
            f"{c['naive_s'] * 1e6:8.1f}µs {c['naive_ratio']:8.1f}  {c['bench_wall_s']:.2f}s"
        )
    print(
        f"(medians of {ROUNDS} alternating rounds; reference: {REFERENCE_CALLS} calls, one "
        f"block, /{REFERENCE_CALLS}, median of ≥{REFERENCE_REPEATS} repeats over "
        f"≥{REFERENCE_S} s; target: ratio within 1 ± {TARGET}; naive: what an unblocked "
        "single call claims)"
    )
    figures: dict[str, Any] = {"benchmark": "bench_accuracy", "python": sys.version.split()[0]}
    figures["jax"] = jax.__version__
    figures["platform"] = jax.default_backend()
    for key, c in zip(("matmul_1500", "elementwise_100k", "fn_10us"), cases.values(), strict=True):
        figures[key] = {k: round(v, 9) for k, v in c.items()}
    figures["within_target"] = all(abs(c["ratio"] - 1) <= TARGET for c in cases.values())
    figures["target"] = {"ratio_within": TARGET}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
