"""What ``%show on`` adds to the display of values that are not JAX's: a list of 10^6
ints (issue 32 measured 78x IPython's own time), a list of 2,000 small dicts and a dict
of 10,000 strings, each formatted by IPython's ``display_formatter.format`` as a
notebook's kernel does (text/plain, text/html, SVG, PNG, widget), with the view off and
on, rounds interleaved (off, on, on, off, ...), medians of process CPU time (the steady
figure on a shared machine) beside wall time. The reference is IPython's own display of
the same value in the same shell, the view off. Once, for scale: JAX's flatten of the
list (``jax.tree_util.tree_leaves``), which the printer no longer runs.

Target: the list of 10^6 ints displays in at most 1.1x IPython's time with the view on.
The others are printed. Prints the verdict, then one JSON line of figures::

    .venv/bin/python benchmarks/show_on_display.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
from _targets import Targets
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

QUICK = "--quick" in sys.argv
ROUNDS = 11 if QUICK else 31
CALLS = 3  # format calls per timed block


def shell() -> Any:
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.display_formatter.active_types = [
        "text/plain",
        "text/html",
        "image/svg+xml",
        "image/png",
        "application/vnd.jupyter.widget-view+json",
    ]
    ip.run_line_magic("load_ext", "jaxlab")
    return ip


def block(ip: Any, value: Any) -> tuple[float, float]:
    """(process CPU s, wall s) of ``CALLS`` formats of ``value``, per call."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(CALLS):
        ip.display_formatter.format(value)
    return (time.process_time() - cpu) / CALLS, (time.perf_counter() - wall) / CALLS


def compare(ip: Any, value: Any) -> dict[str, float]:
    found: dict[str, list[float]] = {"off_cpu": [], "on_cpu": [], "off_wall": [], "on_wall": []}
    for side in ("off", "on"):  # each side's one-time costs paid
        ip.run_line_magic("show", side)
        block(ip, value)
    for r in range(ROUNDS):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for side in order:
            ip.run_line_magic("show", side)  # outside the timing: the printers swapped
            cpu, wall = block(ip, value)
            found[f"{side}_cpu"].append(cpu)
            found[f"{side}_wall"].append(wall)
    ip.run_line_magic("show", "off")
    med = {k: statistics.median(v) for k, v in found.items()}
    same = _bundles(ip, value)
    return {
        **{k: round(v, 6) for k, v in med.items()},
        "cpu_ratio": med["on_cpu"] / med["off_cpu"],
        "wall_ratio": med["on_wall"] / med["off_wall"],
        "same_bundle": same,
    }


def _bundles(ip: Any, value: Any) -> bool:
    off = ip.display_formatter.format(value)
    ip.run_line_magic("show", "on")
    on = ip.display_formatter.format(value)
    ip.run_line_magic("show", "off")
    return bool(on == off)


def main() -> None:
    targets = Targets()
    ip = shell()
    values = {
        "list of 10^6 ints": list(range(10**6)),
        "list of 2,000 dicts": [{"step": i, "loss": 0.5 / (i + 1)} for i in range(2000)],
        "dict of 10,000 strings": {f"k{i}": f"v{i}" for i in range(10_000)},
    }
    out = {name: compare(ip, v) for name, v in values.items()}
    print(f"{'display (IPython format)':26} {'off CPU':>9} {'on CPU':>9} {'ratio':>6} {'wall':>6}")
    for name, f in out.items():
        print(
            f"{name:26} {f['off_cpu'] * 1e3:7.2f}ms {f['on_cpu'] * 1e3:7.2f}ms "
            f"{f['cpu_ratio']:6.3f} {f['wall_ratio']:6.3f}  same bundle: {f['same_bundle']}"
        )
    cpu = time.process_time()
    jax.tree_util.tree_leaves(values["list of 10^6 ints"])
    flatten = time.process_time() - cpu
    print(f"JAX's flatten of the 10^6-int list (what the printer ran before): {flatten:.3f} s CPU")
    first = out["list of 10^6 ints"]
    targets.at_most("list of 10^6 ints, %show on / off (CPU)", first["cpu_ratio"], 1.1)
    targets.at_least("list of 10^6 ints, same bundle on and off (1 = yes)", first["same_bundle"], 1)
    targets.print_clocks()
    figures = {"displays": out, "flatten_cpu_s": round(flatten, 4), "rounds": ROUNDS}
    print(json.dumps({"benchmark": "show_on_display", **figures, **targets.figures()}))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
