"""Key tracking left on for a long session: N mixed random-number cells with ``%keys on``
and the KeyLineage widget live, against the same cells in plain JAX (issue 19).

Each side runs in a fresh process, in a real IPython shell that behaves as a notebook's
kernel (``shell.kernel`` set, so ``%keys`` shows the live widget; its comm goes nowhere;
display bundles are dropped after each cell, as ipykernel keeps none). Both sides load
jaxlab; the plain side never switches tracking on. The cells turn through: an eager
split-and-draw, a new ``jax.jit(lambda ...)`` each cell (the leak the issue measured), a
jitted step carrying a key, a jitted ``scan`` over split keys, and ``fold_in`` draws.

Measured: the RSS growth over the session after its first 100 cells, each side; the
mean wall and process CPU time of a cell over the last ``--window`` cells against the
first ``--window`` (after the first 100), each side; then, in the tracked process, the
widget's update (``refresh``) and its saved twin at 50,000 keys.

Targets: tracked RSS growth at most plain JAX's + 30 MB; tracked last window at most
1.2x its first (process CPU, the steady figure on a loaded machine; wall printed beside);
a widget update at 50,000 keys under 50 ms (process CPU). The issue's size is 10,000
cells; a shared 2-core machine affords less::

    .venv/bin/python benchmarks/key_session.py --cells 2000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from _targets import Targets, print_clocks

SETUP = """\
import jax, jax.numpy as jnp
@jax.jit
def step(key, x):
    key, sub = jax.random.split(key)
    return key, x + jax.random.normal(sub, x.shape)
@jax.jit
def scanned(key):
    keys = jax.random.split(key, 16)
    return jax.lax.scan(lambda c, k: (c + jax.random.uniform(k), None), 0.0, keys)[0]
key = jax.random.key(0)
x = jnp.zeros(8)
"""
SKIP = 100  # the first cells (imports, first compilations) are not part of the windows


def cell(k: int) -> str:
    """The k-th cell (the same on both sides)."""
    kind = k % 5
    if kind == 0:
        return "key, sub = jax.random.split(key)\ny = jax.random.normal(sub, (16,))"
    if kind == 1:
        return f"f = jax.jit(lambda v: v * {k % 997} + 1.0)\ny = f(x)"
    if kind == 2:
        return "key, x = step(key, x)"
    if kind == 3:
        return "key, sub = jax.random.split(key)\ny = scanned(sub)"
    return f"y = jax.random.uniform(jax.random.fold_in(key, {k}), (4,))"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def widget_at(keys: int) -> dict[str, float]:
    """Process CPU ms of the widget's update and of its saved twin at ``keys`` keys."""
    import jax

    from jaxlab import key_lineage, track_keys
    from jaxlab.widgets import KeyLineage

    key_lineage().clear()
    with track_keys():
        key = jax.random.key(1)
        for _ in range((keys - 2) // 2):  # the store holds 50,000 keys at most
            key, sub = jax.random.split(key)
            jax.random.normal(sub, (2,))
        widget = KeyLineage()
        assert key_lineage().size >= keys - 2
        update, twin = [], []
        for _ in range(5):
            c0 = time.process_time()
            widget.refresh()
            update.append(time.process_time() - c0)
            c0 = time.process_time()
            widget.static_bundle()
            twin.append(time.process_time() - c0)
        widget.close()
    return {
        "keys": key_lineage().size,
        "update_ms": statistics.median(update) * 1e3,
        "twin_ms": statistics.median(twin) * 1e3,
    }


def run_session(tracked: bool, cells: int) -> dict[str, Any]:
    import gc

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.kernel = object()  # a notebook's kernel: the widget is shown (its comm goes nowhere)
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        ip.run_line_magic("load_ext", "jaxlab")
        if tracked:
            ip.run_line_magic("keys", "on")
        assert ip.run_cell(SETUP).success
        if tracked:
            assert ip.run_cell("%keys").success  # the live widget, kept up to date
        wall, cpu = [], []
        rss_start = 0.0
        for k in range(cells):
            w0, c0 = time.perf_counter(), time.process_time()
            result = ip.run_cell(cell(k))
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
            if not result.success:
                raise RuntimeError(f"cell {k} failed: {result.error_in_exec!r}")
            getattr(ip.history_manager, "outputs", {}).clear()
            if k == SKIP - 1:
                gc.collect()
                rss_start = rss_mb()
        gc.collect()
        rss_end = rss_mb()
        from jaxlab import key_lineage

        keys = key_lineage().size
        widget = widget_at(50_000) if tracked else None
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_start_mb": rss_start,
        "rss_end_mb": rss_end,
        "keys": keys,
        "widget": widget,
    }


def windows(times: list[float], window: int) -> tuple[float, float]:
    steady = times[SKIP:]
    size = min(window, len(steady) // 2)
    return sum(steady[:size]) / size, sum(steady[-size:]) / size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=2000, help="cells in the session")
    parser.add_argument("--window", type=int, default=500, help="cells in each time window")
    parser.add_argument("--side", choices=["tracked", "plain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side is not None:  # a child: one side, its figures as JSON
        print(json.dumps(run_session(args.side == "tracked", args.cells)))
        return 0
    if args.cells < SKIP + 4:
        parser.error(f"--cells must be more than {SKIP + 4}")
    targets = Targets()
    sides: dict[str, dict[str, Any]] = {}
    for side in ("plain", "tracked"):
        w0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--side", side, "--cells", str(args.cells)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        sides[side] = json.loads(done.stdout.strip().splitlines()[-1])
        print_clocks(f"{side} session ({args.cells} cells)", time.perf_counter() - w0,
                     sum(sides[side]["cpu"]))  # fmt: skip
    growth = {s: f["rss_end_mb"] - f["rss_start_mb"] for s, f in sides.items()}
    for s, f in sides.items():
        first, last = windows(f["wall"], args.window)
        cfirst, clast = windows(f["cpu"], args.window)
        f.update(first_ms=first * 1e3, last_ms=last * 1e3, cpu_first_ms=cfirst * 1e3,
                 cpu_last_ms=clast * 1e3, ratio=last / first, cpu_ratio=clast / cfirst)  # fmt: skip
        print(
            f"{s:>7}: RSS {f['rss_start_mb']:.1f} -> {f['rss_end_mb']:.1f} MB "
            f"(+{growth[s]:.1f}); a cell, first/last window: wall {first * 1e3:.2f} / "
            f"{last * 1e3:.2f} ms ({last / first:.2f}x), process CPU {cfirst * 1e3:.2f} / "
            f"{clast * 1e3:.2f} ms ({clast / cfirst:.2f}x); keys held {f['keys']}"
        )
    widget = sides["tracked"]["widget"]
    print(
        f"widget at {widget['keys']} keys: update {widget['update_ms']:.1f} ms, saved twin "
        f"{widget['twin_ms']:.1f} ms (process CPU, median of 5)"
    )
    targets.at_most(
        "tracked RSS growth minus plain JAX's, MB", growth["tracked"] - growth["plain"], 30
    )
    targets.at_most(
        "tracked last window / first window, process CPU", sides["tracked"]["cpu_ratio"], 1.2
    )
    targets.at_most("widget update at 50,000 keys, ms (process CPU)", widget["update_ms"], 50)
    summary = {
        s: {k: v for k, v in f.items() if k not in ("wall", "cpu")} for s, f in sides.items()
    }
    print(json.dumps({"benchmark": "key_session", "cells": args.cells, **summary,
                      **targets.figures()}))  # fmt: skip
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
