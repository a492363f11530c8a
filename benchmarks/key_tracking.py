"""What key tracking (``%keys on`` / ``jaxlab.track_keys()``) costs, on against off.

Two comparisons, each measured side by side in one run, rounds interleaved (off, on,
on, off, ...), each block timed by process CPU time (``time.process_time()``, the steady
figure on a shared machine) and wall time, from a collected heap (a full collection of
what an earlier block left would otherwise land in whichever block came next: 65 ms, most
of an eager block). The ratio is the median of each round's on/off ratio: a round's two
blocks run back to back, so this machine's drift between rounds (the same plain loop
runs 55-105 µs a pair from one minute to the next) cancels; the ratio of the medians is
printed beside it:

1. eager: split-and-draw calls (``key, sub = split(key); normal(sub, (8,))``), each
   result blocked on. Target: CPU-time ratio at most 1.3.
2. jitted: a Monte-Carlo estimate drawing 10^6 samples in 1,000 steps (a ``scan`` over
   keys split at the top), called repeatedly; the lineage is read (its calls replayed)
   inside the timing. Target: CPU-time ratio at most 1.1.

The jitted function is made and traced with tracking on, as after ``%keys on``; its
program is checked identical to a plain ``jax.jit``'s, and both sides run that one
executable (off: JAX's own jitted function under jaxlab's), so what is compared is what
tracking does per call: a second compile of the same function, in the same process, ran
at 0.93-1.01 of the first here (three processes). Prints one PASS/FAIL line per target,
then one JSON line of figures::

    .venv/bin/python benchmarks/key_tracking.py [--quick]
"""

from __future__ import annotations

import gc
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
from _targets import Targets

from jaxlab import key_lineage, track_keys

QUICK = "--quick" in sys.argv
EAGER_CALLS = 500 if QUICK else 1_000
ROUNDS = 6 if QUICK else 20  # pairs of interleaved blocks
# the jitted blocks vary more (XLA's threads: the same executable twice reads 0.93-1.13
# between a round's two blocks, quartiles), so more of them
JIT_ROUNDS = 6 if QUICK else 40
JIT_CALLS = 10  # calls per block (each 10^6 samples)
STEPS, PER_STEP = 1_000, 1_000


def eager_loop(n: int) -> None:
    key = jax.random.key(0)
    for _ in range(n):
        key, sub = jax.random.split(key)
        jax.block_until_ready(jax.random.normal(sub, (8,)))


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


def jit_calls(fn: Callable[[jax.Array], jax.Array], start: int) -> None:
    for i in range(JIT_CALLS):
        jax.block_until_ready(fn(jax.random.key(start + i)))
    assert key_lineage().nodes is not None  # someone looks: the calls are replayed (timed)


def timed(run: Callable[[], None], on: bool) -> tuple[float, float]:
    """(process CPU s, wall s) of one block, tracking on or off; the lineage starts empty."""
    key_lineage().clear()
    gc.collect()  # from a collected heap: no block pays for garbage an earlier one left
    with track_keys(on):
        cpu, wall = time.process_time(), time.perf_counter()
        run()
        return time.process_time() - cpu, time.perf_counter() - wall


def interleaved(run_off, run_on, rounds: int = ROUNDS) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"off_cpu": [], "on_cpu": [], "off_wall": [], "on_wall": []}
    for r in range(rounds):
        order = (("off", run_off), ("on", run_on))
        for side, run in order if r % 2 == 0 else order[::-1]:
            cpu, wall = timed(lambda run=run, r=r: run(r), side == "on")
            found[f"{side}_cpu"].append(cpu)
            found[f"{side}_wall"].append(wall)
    return {k: v for k, v in found.items()}


def paired(found: dict[str, list[float]], clock: str) -> float:
    """The median of the rounds' on/off ratios by ``clock`` ("cpu" or "wall")."""
    on, off = found[f"on_{clock}"], found[f"off_{clock}"]
    return statistics.median(a / b for a, b in zip(on, off, strict=True))


def main() -> None:
    targets = Targets()
    warnings.simplefilter("error")  # a reuse warning would mean the benchmark is wrong
    eager_loop(50)
    with track_keys():
        eager_loop(50)
    eager = interleaved(lambda r: eager_loop(EAGER_CALLS), lambda r: eager_loop(EAGER_CALLS))

    plain = monte_carlo()
    jax.block_until_ready(plain(jax.random.key(0)))
    with track_keys():  # as after `%keys on`: jitted and first called with tracking on
        tracked = monte_carlo()
        jax.block_until_ready(tracked(jax.random.key(0)))
        program = tracked.lower(jax.random.key(0)).as_text()
    assert program == plain.lower(jax.random.key(0)).as_text()  # tracking adds nothing to it
    compiled = tracked._jitted  # JAX's own jitted function under jaxlab's: one executable
    jitted = interleaved(
        lambda r: jit_calls(compiled, 1000 + r * JIT_CALLS),
        lambda r: jit_calls(tracked, 1000 + r * JIT_CALLS),
        JIT_ROUNDS,
    )
    with track_keys():
        jit_calls(tracked, 0)
        splits = [e for e in key_lineage().events if e.op == "split"]
        assert len(splits) == JIT_CALLS, len(splits)  # every call recorded
        estimate_on = float(tracked(jax.random.key(5)))
    assert float(plain(jax.random.key(5))) == estimate_on  # bit-identical

    figures: dict[str, float] = {}
    for name, found, per in (("eager", eager, EAGER_CALLS), ("jit", jitted, JIT_CALLS)):
        for k, v in found.items():
            figures[f"{name}_{k}_per_call_us"] = round(statistics.median(v) / per * 1e6, 2)
    eager_ratio, jit_ratio = paired(eager, "cpu"), paired(jitted, "cpu")
    eager_wall, jit_wall = paired(eager, "wall"), paired(jitted, "wall")
    print(
        f"{'comparison':38} {'off CPU':>10} {'on CPU':>10} {'CPU ratio':>9} {'of medians':>10} "
        f"{'wall ratio':>10}"
    )
    for label, name, found, ratio, wall in (
        (f"eager split+normal, per pair ({EAGER_CALLS}/block)", "eager", eager, eager_ratio,
         eager_wall),
        (f"jit MC 10^6 samples, per call ({JIT_CALLS}/block)", "jit", jitted, jit_ratio, jit_wall),
    ):  # fmt: skip
        off, on = figures[f"{name}_off_cpu_per_call_us"], figures[f"{name}_on_cpu_per_call_us"]
        medians = statistics.median(found["on_cpu"]) / statistics.median(found["off_cpu"])
        print(f"{label:38} {off:8.1f}us {on:8.1f}us {ratio:9.2f} {medians:10.2f} {wall:10.2f}")
    targets.at_most("eager split-and-draw, tracking on/off (CPU time)", eager_ratio, 1.3)
    targets.at_most("jitted Monte-Carlo, tracking on/off (CPU time)", jit_ratio, 1.1)
    targets.print_clocks()
    figures.update(
        eager_cpu_ratio=eager_ratio, eager_wall_ratio=eager_wall,
        jit_cpu_ratio=jit_ratio, jit_wall_ratio=jit_wall,
    )  # fmt: skip
    print(json.dumps({"benchmark": "key_tracking", **figures, **targets.figures()}))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
