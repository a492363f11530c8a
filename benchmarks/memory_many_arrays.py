"""What ``%memory`` (``jaxlab.memory()``) costs with 200,000 live arrays, beside what JAX
itself takes to list them and write their memory profile.

The session holds 150,000 float32 scalars made at one line, 50,000 float32[3] rows at
another, three 4 MB arrays at a third and one array split over the two CPU devices. Each
round times ``jaxlab.memory()`` and, interleaved with it, the independent reference:
``jax.live_arrays()`` and ``jax.profiler.device_memory_profile()`` alone, the two calls
the report is made from (everything past them is jaxlab's). Medians of process CPU time
(the steady figure on a shared machine) and wall time. Once, for scale: every array's
shards read one by one (``live.shard_bytes``, the fallback when the profile cannot say;
the report did that and more per array before issue 32, which measured 10-43 s).

Targets: ``jaxlab.memory()`` under 1 s of CPU time; at most 2x the reference. Prints the
verdicts, then one JSON line of figures::

    .venv/bin/python benchmarks/memory_many_arrays.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "2")

import jax
import jax.numpy as jnp
from _targets import Targets
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxlab
from jaxlab.arrays.live import live_arrays, shard_bytes

QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 7
SCALARS, ROWS = (37_500, 12_500) if QUICK else (150_000, 50_000)


def clock(run: Any) -> tuple[float, float, Any]:
    """(process CPU s, wall s, result) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = run()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def reference() -> int:
    """The two calls of JAX's that the report reads, and nothing of jaxlab's."""
    arrays = jax.live_arrays()
    profile = jax.profiler.device_memory_profile()
    return len(arrays) + len(profile)


def main() -> None:
    targets = Targets()
    start = time.perf_counter()
    scalars = list(jnp.arange(SCALARS, dtype=jnp.float32))  # one line, many arrays
    rows = list(jnp.ones((ROWS, 3), jnp.float32))
    big = [jnp.zeros((1000, 1000), jnp.float32) for _ in range(3)]
    mesh = jax.make_mesh((len(jax.devices()),), ("x",))
    split = jax.device_put(jnp.ones((8, 1000)), NamedSharding(mesh, P("x")))
    jax.block_until_ready([scalars, rows, big, split])
    made = time.perf_counter() - start
    count = len(jax.live_arrays())
    print(f"{count:,} live arrays made in {made:.1f} s (wall)")
    reference()  # each side's one-time costs paid
    report = jaxlab.memory()
    sides = ("ours_cpu", "ours_wall", "ref_cpu", "ref_wall")
    found: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(ROUNDS):
        order = [("ours", jaxlab.memory), ("ref", reference)]
        for side, run in order if r % 2 == 0 else order[::-1]:
            cpu, wall, out = clock(run)
            found[f"{side}_cpu"].append(cpu)
            found[f"{side}_wall"].append(wall)
            if side == "ours":
                report = out
    med = {k: statistics.median(v) for k, v in found.items()}
    # the report is right, not only fast: each line's buffers as made above
    by_code = {s.code.split(" = ")[0]: s for s in report.sites}
    assert by_code["scalars"].buffers == SCALARS, report.text()
    assert by_code["rows"].buffers == ROWS and by_code["big"].buffers == 3, report.text()
    assert report.live_arrays >= count - 10
    per_array = None
    if not QUICK:  # for scale: every array read one by one, as before issue 32
        per_array, _, _ = clock(lambda: shard_bytes(live_arrays(jax.live_arrays())))
    print(
        f"jaxlab.memory(): CPU {med['ours_cpu']:.3f} s, wall {med['ours_wall']:.3f} s; "
        f"reference (jax.live_arrays + device_memory_profile): CPU {med['ref_cpu']:.3f} s, "
        f"wall {med['ref_wall']:.3f} s; medians of {ROUNDS}, load {os.getloadavg()[0]:.1f}"
    )
    if per_array is not None:
        print(f"every array's shards read one by one (the fallback): CPU {per_array:.2f} s")
    targets.at_most(f"jaxlab.memory() with {count:,} live arrays, s (CPU)", med["ours_cpu"], 1.0)
    targets.at_most(
        "jaxlab.memory() / JAX's own listing and profile (CPU)",
        med["ours_cpu"] / med["ref_cpu"],
        2.0,
    )
    targets.print_clocks()
    figures = {
        "live_arrays": count,
        "made_wall_s": round(made, 2),
        **{k: round(v, 4) for k, v in med.items()},
        "per_array_cpu_s": per_array,
        "load": os.getloadavg()[0],
    }
    print(json.dumps({"benchmark": "memory_many_arrays", **figures, **targets.figures()}))
    del scalars, rows, big, split
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
