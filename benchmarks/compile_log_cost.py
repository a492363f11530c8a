"""What the compile log costs while a function recompiles over and over.

1,500 recompilations of one jitted function, each call with a new shape, with the
extension loaded (jaxlab listens, compares each signature with the function's last few
and records it) against not loaded, measured side by side: batches alternate between
the two, so a busy machine's drift falls on both. Before this log compared signatures
itself, JAX's ``jax_explain_cache_misses`` (switched on by the extension) compared each
miss with every earlier key: 1,500 recompiles took 229 s against 94 s without, each
batch slower than the last. Targets, evaluated in the run with one PASS/FAIL line each:
loaded / not loaded <= 1.1 in process CPU time (the steady figure on a shared machine)
and in wall time, and flat from batch to batch (the median CPU ratio of the later half
of the batch pairs at most 1.1× that of the earlier half; at least two pairs are run).

Prints one line per batch pair, the totals, the ratio, the verdicts and one JSON line;
exits 1 when a target fails::

    .venv/bin/python benchmarks/compile_log_cost.py            # 1,500 each way
    .venv/bin/python benchmarks/compile_log_cost.py --count 150
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from _targets import Targets
from IPython.core.interactiveshell import InteractiveShell

import jaxlab


def step(x: jax.Array) -> jax.Array:
    return jnp.tanh(x * 2.0 + 1.0).sum()


def batch(f: jax.stages.Wrapped, sizes: itertools.count, n: int) -> tuple[float, float]:
    """Wall and CPU seconds for ``n`` calls of ``f``, each with a shape it has not seen
    (so each compiles). CPU time (all threads of this process) is the steadier figure on
    a shared machine, where other processes stretch the wall time."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        jax.block_until_ready(f(jnp.zeros(next(sizes), jnp.float32)))
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1500, help="recompiles each way")
    parser.add_argument("--batch", type=int, default=250, help="recompiles per batch")
    opts = parser.parse_args()
    targets = Targets()
    ip = InteractiveShell.instance()
    log = jaxlab.compile_log()
    f = jax.jit(step)
    sizes = itertools.count(1)  # every call a new shape: every call compiles
    batch(f, sizes, 5)  # warm JAX's own first-use costs for both sides
    on: list[tuple[float, float]] = []  # (wall, cpu) per batch
    off: list[tuple[float, float]] = []
    n_batches = max(2, opts.count // opts.batch)  # two at least: flatness compares them
    opts.batch = max(1, min(opts.batch, opts.count // n_batches))
    print(f"{n_batches} batches of {opts.batch} recompiles each way, alternating")
    print(
        f"{'batch':>5} {'wall: loaded s':>15} {'not s':>7} {'ratio':>6}   "
        f"{'CPU: loaded s':>14} {'not s':>7} {'ratio':>6}"
    )
    for i in range(n_batches):
        # alternate which side goes first so neither always follows the other
        for loaded in (True, False) if i % 2 == 0 else (False, True):
            if loaded:
                ip.run_line_magic("load_ext", "jaxlab")
                before = log.count
                on.append(batch(f, sizes, opts.batch))
                logged = log.count - before
                ip.run_line_magic("unload_ext", "jaxlab")
                assert logged >= opts.batch, f"only {logged} compilations logged"
            else:
                off.append(batch(f, sizes, opts.batch))
        (w1, c1), (w0, c0) = on[-1], off[-1]
        print(
            f"{i + 1:>5} {w1:>15.2f} {w0:>7.2f} {w1 / w0:>6.3f}   {c1:>14.2f} {c0:>7.2f} "
            f"{c1 / c0:>6.3f}"
        )
    last = log.for_function("step")[-1]
    figures = {"recompiles_each_way": n_batches * opts.batch}
    for k, kind in enumerate(("wall", "cpu")):
        loaded, bare = sum(b[k] for b in on), sum(b[k] for b in off)
        per_batch = [a[k] / b[k] for a, b in zip(on, off, strict=True)]
        print(
            f"{kind}: loaded {loaded:.1f} s, not loaded {bare:.1f} s: ratio "
            f"{loaded / bare:.3f} (median per batch {statistics.median(per_batch):.3f}; "
            "target <= 1.1)"
        )
        figures |= {
            f"{kind}_loaded_s": round(loaded, 3),
            f"{kind}_not_loaded_s": round(bare, 3),
            f"{kind}_ratio": round(loaded / bare, 4),
            f"{kind}_per_batch_ratio": [round(r, 4) for r in per_batch],
        }
    print(f"last reason logged: {last.explanation}")
    targets.at_most("loaded / not loaded, process CPU", figures["cpu_ratio"], 1.1)
    targets.at_most("loaded / not loaded, wall", figures["wall_ratio"], 1.1)
    per_batch = figures["cpu_per_batch_ratio"]
    half = len(per_batch) // 2
    growth = statistics.median(per_batch[-half:]) / statistics.median(per_batch[:half])
    targets.at_most("flat: later half's CPU ratio / earlier half's", growth, 1.1)
    targets.print_clocks()
    print(json.dumps(figures | targets.figures()))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
