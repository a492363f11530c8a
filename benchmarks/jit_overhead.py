"""What ``%%jit`` and the loaded extension cost on top of a hand-written ``jax.jit`` call.

Three comparisons, each measured side by side (interleaved rounds, medians):

1. a ``%%jit`` cell's call path — namespace reads, cache lookup, the compiled call,
   assignments; IPython's own per-cell cost excluded — against the same code as a
   hand-written ``jax.jit`` function with the same reads and assignments, for a
   function of about 1 ms (target: ratio <= 1.05);
2. the same for a function of about 10 µs: the added microseconds (target < 20 µs);
3. a jitted call with the extension loaded against not loaded (target: ratio <= 1.02).

Every call's outputs are blocked on, so the times are what a user waits for. Prints a
table, then one JSON line of figures::

    .venv/bin/python benchmarks/jit_overhead.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

from jaxlab.compile.cell import CellJit
from jaxlab.compile.log import CompileLog

ROUNDS = 31
SOURCE = "y = jnp.tanh(x @ w) + b\ny.sum()"


def per_call(fn: Callable[[], Any], n: int) -> float:
    """Seconds per call of ``fn`` over ``n`` calls, each call's result blocked on."""
    t0 = time.perf_counter()
    for _ in range(n):
        jax.block_until_ready(fn())
    return (time.perf_counter() - t0) / n


@dataclass(frozen=True)
class Pair:
    """Two call paths timed in alternating rounds: medians of times and of per-round
    ratios and differences (pairing cancels most of a busy machine's drift)."""

    ours_s: float
    base_s: float
    ratio: float
    added_s: float
    min_ratio: float  # fastest round against fastest round: the least disturbed figure

    @classmethod
    def of(cls, rounds: list[tuple[float, float]]) -> Pair:
        return cls(
            ours_s=statistics.median(o for o, _ in rounds),
            base_s=statistics.median(b for _, b in rounds),
            ratio=statistics.median(o / b for o, b in rounds),
            added_s=statistics.median(o - b for o, b in rounds),
            min_ratio=min(o for o, _ in rounds) / min(b for _, b in rounds),
        )


def side_by_side(ours: Callable[[], Any], base: Callable[[], Any], n: int) -> Pair:
    for fn in (ours, base):  # warm: compile, fill the caches
        per_call(fn, max(3, n // 10))
    rounds = []
    for i in range(ROUNDS):
        if i % 2 == 0:  # alternate who goes first
            t_ours = per_call(ours, n)
            t_base = per_call(base, n)
        else:
            t_base = per_call(base, n)
            t_ours = per_call(ours, n)
        rounds.append((t_ours, t_base))
    return Pair.of(rounds)


def make_case(n: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The %%jit call path and the hand-written equivalent for n×n matrices."""
    key = jax.random.key(0)
    kx, kw = jax.random.split(key)
    base = {
        "jnp": jnp,
        "x": jax.random.normal(kx, (n, n)),
        "w": jax.random.normal(kw, (n, n)) / n,
        "b": jnp.ones(n),
    }
    cells = CellJit(CompileLog())
    cell_ns = dict(base)
    hand_ns = dict(base)

    @jax.jit
    def hand_fn(x: Any, w: Any, b: Any) -> tuple[Any, Any]:
        y = jnp.tanh(x @ w) + b
        return y, y.sum()

    def cell() -> Any:
        return cells.run(SOURCE, cell_ns)[0]

    def hand() -> Any:
        ns = hand_ns
        ns["y"], value = hand_fn(ns["x"], ns["w"], ns["b"])
        return value

    return cell, hand


def calibrate(target_s: float) -> int:
    """The matrix size whose hand-written call takes closest to ``target_s``."""
    best, best_gap = 8, float("inf")
    for n in (8, 16, 32, 64, 128, 192, 256, 320, 384, 512, 640, 768):
        _, hand = make_case(n)
        per_call(hand, 3)
        t = min(per_call(hand, 20 if target_s > 1e-4 else 200) for _ in range(3))
        gap = abs(t - target_s) / target_s
        if gap < best_gap:
            best, best_gap = n, gap
        if t > target_s:
            break
    return best


def extension_cost(n_calls: int) -> Pair:
    """A jitted call with jaxlab loaded in an IPython shell, against it unloaded."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    extensions = InteractiveShell.instance(config=config).extension_manager
    f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum())
    x, w = jnp.ones((32, 32)), jnp.ones((32, 32))

    def call() -> Any:
        return f(x, w)

    def loaded() -> Any:
        extensions.load_extension("jaxlab")
        return per_call(call, n_calls)

    def unloaded() -> Any:
        extensions.unload_extension("jaxlab")
        return per_call(call, n_calls)

    per_call(call, 100)
    rounds = []
    for i in range(ROUNDS):
        if i % 2 == 0:
            t_loaded, t_unloaded = loaded(), unloaded()
        else:
            t_unloaded, t_loaded = unloaded(), loaded()
        rounds.append((t_loaded, t_unloaded))
    extensions.unload_extension("jaxlab")
    return Pair.of(rounds)


def main() -> None:
    n_ms = calibrate(1e-3)
    n_us = calibrate(10e-6)
    ms = side_by_side(*make_case(n_ms), n=30)
    us = side_by_side(*make_case(n_us), n=1000)
    ext = extension_cost(1000)
    figures = {
        "benchmark": "jit_overhead",
        "jax": jax.__version__,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "ms_case_size": n_ms,
        "ms_cell_us": round(ms.ours_s * 1e6, 2),
        "ms_hand_us": round(ms.base_s * 1e6, 2),
        "ms_ratio": round(ms.ratio, 4),
        "ms_min_ratio": round(ms.min_ratio, 4),
        "us_case_size": n_us,
        "us_cell_us": round(us.ours_s * 1e6, 2),
        "us_hand_us": round(us.base_s * 1e6, 2),
        "us_added_us": round(us.added_s * 1e6, 2),
        "us_min_ratio": round(us.min_ratio, 4),
        "loaded_us": round(ext.ours_s * 1e6, 3),
        "unloaded_us": round(ext.base_s * 1e6, 3),
        "loaded_ratio": round(ext.ratio, 4),
        "loaded_min_ratio": round(ext.min_ratio, 4),
        "targets": {"ms_ratio": 1.05, "us_added_us": 20.0, "loaded_ratio": 1.02},
    }
    rows = [
        ("%%jit cell vs jax.jit, ~1 ms", f"{n_ms}×{n_ms}", ms, "ratio ≤ 1.05"),
        ("%%jit cell vs jax.jit, ~10 µs", f"{n_us}×{n_us}", us, "added < 20 µs"),
        ("jitted call, jaxlab loaded vs not", "32×32", ext, "ratio ≤ 1.02"),
    ]
    head = ("comparison", "size", "ours µs", "base µs", "ratio", "min ratio", "added µs")
    print(
        f"{head[0]:36} {head[1]:>9} {head[2]:>10} {head[3]:>10} {head[4]:>7} {head[5]:>9} "
        f"{head[6]:>9}  target"
    )
    for name, size, pair, target in rows:
        print(
            f"{name:36} {size:>9} {pair.ours_s * 1e6:10.2f} {pair.base_s * 1e6:10.2f} "
            f"{pair.ratio:7.3f} {pair.min_ratio:9.3f} {pair.added_s * 1e6:9.2f}  {target}"
        )
    print(
        f"(medians of {ROUNDS} alternating rounds; ratio and added are per-round medians, "
        "min ratio compares the fastest rounds)"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
