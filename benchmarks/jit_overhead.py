"""What ``%%jit`` and the loaded extension cost on top of a hand-written ``jax.jit`` call.

Four comparisons, each measured side by side (interleaved rounds, medians):

1. a ``%%jit`` cell's call path — namespace reads, cache lookup, the compiled call,
   assignments; IPython's own per-cell cost excluded — against the same code as a
   hand-written ``jax.jit`` function with the same reads and assignments, for a
   function of about 1 ms (target: ratio <= 1.05);
2. the same for a function of about 10 µs: the added microseconds (target < 20 µs);
3. a jitted call with the extension loaded against not loaded, each side timed settled
   (collected and warmed after the load or unload; target: ratio <= 1.02);
4. a whole ``%%jit`` cell as IPython runs it (its ``%%jit`` line read, the cell magic
   called, the value displayed) against the hand-written cell ``y, s = f(x, w, b)`` then
   ``s``, for the ~1 ms function (target: ratio <= 1.05): what a user measures from
   outside, IPython's own cost of a cell magic included.

Every call's outputs are blocked on, so the times are what a user waits for. Both
``%%jit`` ratios (1 and 4) are judged on process CPU time per call (all of this process's
threads, XLA's too), paired per round: the steady figure on a shared machine, where the
wall ratio of a 1 ms call read 1.005 to 1.14 in runs of the same code at load 4-8 on 2
cores (its CPU ratio 1.00 to 1.05); wall time is printed beside it. The added µs (2) and
the loaded / not loaded ratio (3) are judged on wall time.
Prints a table, one PASS/FAIL line per target, then one JSON line of figures; exits 1
when a target fails::

    .venv/bin/python benchmarks/jit_overhead.py
"""

from __future__ import annotations

import contextlib
import gc
import io
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
from _targets import Targets

from jaxlab.compile.cell import CellJit
from jaxlab.compile.log import CompileLog

ROUNDS = 31
SOURCE = "y = jnp.tanh(x @ w) + b\ny.sum()"
HAND_CELL = "y, s = hand_fn(x, w, b)\ns"  # SOURCE as its author would jit it by hand


def per_call(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """Wall and process CPU seconds per call of ``fn`` over ``n`` calls, each call's
    result blocked on."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        jax.block_until_ready(fn())
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


@dataclass(frozen=True)
class Pair:
    """Two call paths timed in alternating rounds: medians of times and of per-round
    ratios and differences (pairing cancels most of a busy machine's drift)."""

    ours_s: float
    base_s: float
    ratio: float
    added_s: float
    min_ratio: float  # fastest round against fastest round: the least disturbed figure
    ours_cpu_s: float  # process CPU per call, median of the rounds
    base_cpu_s: float
    cpu_ratio: float  # median of the per-round CPU ratios

    @classmethod
    def of(cls, rounds: list[tuple[tuple[float, float], tuple[float, float]]]) -> Pair:
        wall = [(o[0], b[0]) for o, b in rounds]
        cpu = [(o[1], b[1]) for o, b in rounds]
        return cls(
            ours_s=statistics.median(o for o, _ in wall),
            base_s=statistics.median(b for _, b in wall),
            ratio=statistics.median(o / b for o, b in wall),
            added_s=statistics.median(o - b for o, b in wall),
            min_ratio=min(o for o, _ in wall) / min(b for _, b in wall),
            ours_cpu_s=statistics.median(o for o, _ in cpu),
            base_cpu_s=statistics.median(b for _, b in cpu),
            cpu_ratio=statistics.median(o / b for o, b in cpu if b > 0),
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
        t = min(per_call(hand, 20 if target_s > 1e-4 else 200)[0] for _ in range(3))
        gap = abs(t - target_s) / target_s
        if gap < best_gap:
            best, best_gap = n, gap
        if t > target_s:
            break
    return best


def _shell() -> Any:
    """The benchmark's IPython shell (no history database: its writes are not jaxlab's)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    return InteractiveShell.instance(config=config)


def whole_cells(n: int, n_calls: int) -> Pair:
    """A ``%%jit`` cell run by an IPython shell with jaxlab loaded, against the same code
    hand-jitted in a plain cell (each cell's value displayed, to a discarded stdout)."""
    ip = _shell()
    ip.extension_manager.load_extension("jaxlab")
    ip.run_cell(
        "import jax, jax.numpy as jnp\n"
        f"kx, kw = jax.random.split(jax.random.key(0))\n"
        f"x = jax.random.normal(kx, ({n}, {n})); w = jax.random.normal(kw, ({n}, {n})) / {n}\n"
        f"b = jnp.ones({n})\n"
        "@jax.jit\n"
        "def hand_fn(x, w, b):\n"
        "    y = jnp.tanh(x @ w) + b\n"
        "    return y, y.sum()\n"
    )

    def run(cell: str) -> Callable[[], Any]:
        def go() -> Any:
            result = ip.run_cell(cell)
            if not result.success:
                raise RuntimeError(f"the benchmark's cell failed: {result.error_in_exec!r}")
            return result.result

        return go

    with contextlib.redirect_stdout(io.StringIO()):  # the displayed values
        pair = side_by_side(run("%%jit\n" + SOURCE), run(HAND_CELL), n=n_calls)
    ip.extension_manager.unload_extension("jaxlab")
    return pair


def extension_cost(n_calls: int) -> Pair:
    """A jitted call with jaxlab loaded in an IPython shell, against it unloaded."""
    extensions = _shell().extension_manager
    f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum())
    x, w = jnp.ones((32, 32)), jnp.ones((32, 32))

    def call() -> Any:
        return f(x, w)

    # Loading or unloading makes garbage once (magics, listeners, the modules' state): the
    # collector's full pass it brings on landed inside the next timed calls and read as
    # 1.06-1.15x per call. Each side is timed settled (collected, then 200 calls) so the
    # figure is the steady per-call cost a session pays, not the one-off of a %load_ext.
    def settled(toggle: Callable[[str], Any]) -> tuple[float, float]:
        toggle("jaxlab")
        gc.collect()
        per_call(call, 200)
        return per_call(call, n_calls)

    def loaded() -> tuple[float, float]:
        return settled(extensions.load_extension)

    def unloaded() -> tuple[float, float]:
        return settled(extensions.unload_extension)

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
    targets = Targets()
    n_ms = calibrate(1e-3)
    n_us = calibrate(10e-6)
    ms = side_by_side(*make_case(n_ms), n=30)
    us = side_by_side(*make_case(n_us), n=1000)
    cells = whole_cells(n_ms, n_calls=30)
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
        "ms_cpu_ratio": round(ms.cpu_ratio, 4),
        "us_cpu_added_us": round((us.ours_cpu_s - us.base_cpu_s) * 1e6, 2),
        "loaded_cpu_ratio": round(ext.cpu_ratio, 4),
        "cell_us": round(cells.ours_s * 1e6, 2),
        "hand_cell_us": round(cells.base_s * 1e6, 2),
        "cell_ratio": round(cells.ratio, 4),
        "cell_added_us": round(cells.added_s * 1e6, 2),
        "cell_cpu_ratio": round(cells.cpu_ratio, 4),
    }
    rows = [
        ("%%jit cell vs jax.jit, ~1 ms", f"{n_ms}×{n_ms}", ms, "CPU ratio ≤ 1.05"),
        ("%%jit cell vs jax.jit, ~10 µs", f"{n_us}×{n_us}", us, "added < 20 µs"),
        ("jitted call, jaxlab loaded vs not", "32×32", ext, "ratio ≤ 1.02"),
        ("whole %%jit cell vs hand cell, ~1 ms", f"{n_ms}×{n_ms}", cells, "CPU ratio ≤ 1.05"),
    ]
    head = ("comparison", "size", "ours µs", "base µs", "ratio", "min ratio", "added µs")
    head += ("CPU ours µs", "CPU base µs", "CPU ratio")
    print(
        f"{head[0]:36} {head[1]:>9} {head[2]:>10} {head[3]:>10} {head[4]:>7} {head[5]:>9} "
        f"{head[6]:>9} {head[7]:>11} {head[8]:>11} {head[9]:>9}  target"
    )
    for name, size, pair, target in rows:
        print(
            f"{name:36} {size:>9} {pair.ours_s * 1e6:10.2f} {pair.base_s * 1e6:10.2f} "
            f"{pair.ratio:7.3f} {pair.min_ratio:9.3f} {pair.added_s * 1e6:9.2f} "
            f"{pair.ours_cpu_s * 1e6:11.2f} {pair.base_cpu_s * 1e6:11.2f} {pair.cpu_ratio:9.3f}"
            f"  {target}"
        )
    print(
        f"(medians of {ROUNDS} alternating rounds; ratio and added are per-round medians, "
        "min ratio compares the fastest rounds; CPU is this process's, per call)"
    )
    targets.at_most(
        f"%%jit cell / jax.jit CPU time, ~1 ms call ({n_ms}×{n_ms})",
        ms.cpu_ratio,
        1.05,
        figure=ms.ours_cpu_s,
        reference=ms.base_cpu_s,
        unit="s",
    )
    targets.at_most(f"%%jit cell added µs, ~10 µs call ({n_us}×{n_us})", us.added_s * 1e6, 20.0)
    targets.at_most("jitted call, jaxlab loaded / not loaded", ext.ratio, 1.02)
    targets.at_most(
        f"whole %%jit cell / hand-jitted cell in IPython, CPU time, ~1 ms call ({n_ms}×{n_ms})",
        cells.cpu_ratio,
        1.05,
        figure=cells.ours_cpu_s,
        reference=cells.base_cpu_s,
        unit="s",
    )
    targets.print_clocks()
    print(json.dumps(figures | targets.figures()))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
