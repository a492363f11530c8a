"""What key tracking (``%keys on`` / ``jaxlab.track_keys()``) costs, on against off.

Two comparisons, each measured side by side (interleaved rounds, medians):

1. eager: 10,000 split-and-sample calls (``key, sub = split(key); normal(sub, (8,))``),
   each result blocked on (target: ratio <= 1.5);
2. jitted: a Monte-Carlo estimate drawing 10^6 samples in 1,000 steps (a ``scan`` over
   keys split at the top, 1,000 normals a step), called repeatedly (target: ratio <= 1.2).

Each round with tracking on starts from an empty lineage; the jitted function is made
and traced once with tracking on and once with it off (two functions), so each side runs
its own compiled program; each round's lineage is read (replayed) inside the timing.
Prints a table, then one JSON line of figures::

    .venv/bin/python benchmarks/key_tracking.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

from jaxlab import key_lineage, track_keys

QUICK = "--quick" in sys.argv
EAGER_CALLS = 1_000 if QUICK else 10_000
EAGER_ROUNDS = 3 if QUICK else 5
JIT_ROUNDS = 11 if QUICK else 31
JIT_CALLS = 10  # calls per round (each 10^6 samples)
STEPS, PER_STEP = 1_000, 1_000


def eager_loop(n: int) -> float:
    key = jax.random.key(0)
    t0 = time.perf_counter()
    for _ in range(n):
        key, sub = jax.random.split(key)
        jax.block_until_ready(jax.random.normal(sub, (8,)))
    return time.perf_counter() - t0


def monte_carlo() -> Callable[[jax.Array], jax.Array]:
    """A new jitted function (each side traces its own)."""

    def estimate(key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, STEPS)

        def step(total: jax.Array, k: jax.Array) -> tuple[jax.Array, None]:
            x = jax.random.normal(k, (PER_STEP,))
            return total + jnp.mean(x**2), None

        total, _ = jax.lax.scan(step, 0.0, keys)
        return total / STEPS

    return jax.jit(estimate)


def timed_calls(fn: Callable[[jax.Array], jax.Array], start: int) -> float:
    t0 = time.perf_counter()
    for i in range(JIT_CALLS):
        jax.block_until_ready(fn(jax.random.key(start + i)))
    jax.effects_barrier()  # any callbacks have run
    assert key_lineage().nodes is not None  # someone looks: the calls are replayed (timed)
    return (time.perf_counter() - t0) / JIT_CALLS


def main() -> None:
    warnings.simplefilter("error")  # a reuse warning would mean the benchmark is wrong
    eager_off, eager_on = [], []
    eager_loop(50)
    for _ in range(EAGER_ROUNDS):
        eager_off.append(eager_loop(EAGER_CALLS))
        key_lineage().clear()
        with track_keys():
            eager_on.append(eager_loop(EAGER_CALLS))
    keys_recorded = len(key_lineage().nodes)

    plain = monte_carlo()
    jax.block_until_ready(plain(jax.random.key(0)))
    with track_keys():  # as after `%keys on`: jitted and first called with tracking on
        tracked = monte_carlo()
        jax.block_until_ready(tracked(jax.random.key(0)))
    jit_off, jit_on = [], []
    for r in range(JIT_ROUNDS):
        jit_off.append(timed_calls(plain, 1000 + r * JIT_CALLS))
        key_lineage().clear()
        with track_keys():
            jit_on.append(timed_calls(tracked, 1000 + r * JIT_CALLS))
    lineage = key_lineage()
    splits = [e for e in lineage.events if e.op == "split"]
    assert len(splits) == JIT_CALLS, len(splits)  # every call of the last round recorded
    estimate_off = float(plain(jax.random.key(5)))
    with track_keys():
        estimate_on = float(tracked(jax.random.key(5)))
    assert estimate_off == estimate_on  # bit-identical

    e_off, e_on = statistics.median(eager_off), statistics.median(eager_on)
    j_off, j_on = statistics.median(jit_off), statistics.median(jit_on)
    rows = [
        (f"eager: {EAGER_CALLS} split+normal", e_off, e_on, 1.5),
        (f"jit: MC 10^6 samples / {STEPS} steps", j_off, j_on, 1.2),
    ]
    print(f"{'comparison':40} {'off':>12} {'on':>12} {'ratio':>7} {'target':>7}")
    for name, off, on, target in rows:
        flag = "" if on / off <= target else "  OVER"
        print(
            f"{name:40} {off * 1e3:9.2f} ms {on * 1e3:9.2f} ms {on / off:7.2f} {target:7.2f}{flag}"
        )
    print(f"eager keys recorded per round: {keys_recorded}; jitted E[x^2] = {estimate_on:.6f}")
    print(
        json.dumps(
            {
                "eager_off_s": e_off,
                "eager_on_s": e_on,
                "eager_ratio": e_on / e_off,
                "jit_off_s": j_off,
                "jit_on_s": j_on,
                "jit_ratio": j_on / j_off,
            }
        )
    )


if __name__ == "__main__":
    main()
