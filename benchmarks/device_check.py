"""A prepared device check: jaxlab's device-facing magics, run through a real IPython shell.

Run it as is on any machine (CPU here; a GPU or TPU where one is lent)::

    python benchmarks/device_check.py

It prints, cell by cell, what a notebook would show:

1. ``%jax_devices``: the backend, its devices, their memory;
2. ``%bench --peak``: this machine's peak (FLOP/s, bytes/s, measured how long and under
   what load), then ``%bench`` of a matmul and its share of that peak;
3. ``%%profile`` of a few jitted steps: the spans on each lane (host, JAX, device modules
   and ops), the costliest modules and the implicit syncs;
4. ``%memory`` in two fresh processes, with XLA's preallocation on and off
   (``XLA_PYTHON_CLIENT_PREALLOCATE``; on CPU both read host memory);
5. ``%show`` of an array sharded over every device (on CPU, two simulated devices).

Ends with one ``PASS``/``FAIL`` line: PASS when every cell ran without an error and each
part found what it must (a device, a peak, a share between 0 and 1, device spans, a memory
report naming the array's line, one shard per device). Exit status 1 on FAIL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

# Before JAX starts: on CPU, two simulated devices, so that the sharded %show has shards.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "2")

SETUP = """\
import jax, jax.numpy as jnp
import numpy as np
platform = jax.default_backend()
"""

MATMUL = """\
n = 2048 if platform != "cpu" else 1024
a = jnp.ones((n, n), jnp.float32)
matmul = jax.jit(lambda a, b: a @ b)
r = %bench -o matmul(a, a)
print(r)
share = r.flops_fraction
print(f"matmul {n}x{n}: {r.flops_s:.3g} FLOP/s, share of the peak:",
      "above the peak (cache)" if share is None else f"{share:.1%}")
"""

PROFILE = """\
%%profile -o
w = jnp.ones((512, 512), jnp.float32)
step = jax.jit(lambda w: jnp.tanh(w @ w) * 0.5)
for _ in range(5):
    w = step(w)
loss = float(w.sum())
"""

SHARDED = """\
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
devs = np.array(jax.devices())
mesh = Mesh(devs, ("d",))
xs = jax.device_put(jnp.arange(8 * len(devs) * 4, dtype=jnp.float32).reshape(8 * len(devs), 4),
                    NamedSharding(mesh, P("d", None)))
rec = %show -o xs
%show --static xs
"""

MEMORY = """\
import jax, jax.numpy as jnp
big = jnp.ones((2048, 2048), jnp.float32)  # 16 MiB, allocated on this line
report = %memory -o
%memory --top 5
"""


def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "jaxlab")
    return shell


def _run(shell, title: str, source: str, problems: list[str]) -> object:
    print(f"\n--- {title} " + "-" * max(0, 70 - len(title)), flush=True)
    for line in source.rstrip().splitlines():
        print(f">>> {line}")
    t0 = time.perf_counter()
    result = shell.run_cell(source, store_history=False)
    print(f"[{title}: {time.perf_counter() - t0:.2f} s]", flush=True)
    if not result.success:
        problems.append(f"{title}: {result.error_in_exec or result.error_before_exec!r}")
    return result.result  # the cell's displayed value


def _check(problems: list[str], ok: bool, what: str) -> None:
    print(("ok: " if ok else "MISSING: ") + what, flush=True)
    if not ok:
        problems.append(what)


def main_part() -> list[str]:
    problems: list[str] = []
    shell = _shell()
    ns = shell.user_ns
    _run(shell, "setup", SETUP, problems)
    _run(shell, "%jax_devices", "%jax_devices\ndevs_report = %jax_devices -o", problems)
    report = ns.get("devs_report")
    _check(problems, report is not None, "%jax_devices -o returns its report")

    _run(shell, "%bench --peak", "peak = %bench --peak -o\nprint(peak)", problems)
    peak = ns.get("peak")
    if peak is not None:
        print(
            f"peak: {peak.flops_s:.3g} FLOP/s (matmul {peak.matmul_n}), {peak.bytes_s:.3g} B/s "
            f"(stream {peak.stream_bytes / 2**20:.0f} MiB); {peak.conditions}"
        )
    _check(problems, peak is not None and peak.flops_s > 0, "a measured FLOP/s peak")

    _run(shell, "%bench of a matmul", MATMUL, problems)
    r = ns.get("r")
    share = getattr(r, "flops_fraction", None)
    _check(
        problems,
        r is not None and ((share is None and bool(r.above_peak)) or 0 < (share or 0) <= 1),
        "the matmul's share of the peak (or 'above the peak')",
    )

    prof = _run(shell, "%%profile with device lanes", PROFILE, problems)
    if prof is not None and hasattr(prof, "spans"):
        from collections import Counter

        lanes = Counter(s.lane for s in prof.spans)
        print(f"platform {prof.platform}: spans per lane {dict(lanes)}; counts {prof.counts}")
        print(f"called: {prof.called}")
        for cost in prof.modules[:5]:
            print(f"  module {cost}")
        print(f"syncs: {[str(s) for s in prof.syncs]}")
        _check(problems, len(lanes) >= 2, "spans on at least two lanes (host and device)")
    else:
        _check(problems, False, "%%profile -o returns its ProfileResult")

    _run(shell, "%show of a sharded array", SHARDED, problems)
    rec = ns.get("rec")
    xs = ns.get("xs")
    if xs is not None:
        n_shards = len(xs.addressable_shards)
        print(f"{n_shards} shards over {len(xs.sharding.device_set)} devices: {xs.sharding}")
        _check(problems, n_shards == len(ns["devs"]), "one shard per device")
    _check(problems, rec is not None, "%show -o returns its record")
    shell.run_line_magic("unload_ext", "jaxlab")
    return problems


def memory_part() -> list[str]:
    problems: list[str] = []
    shell = _shell()
    _run(shell, "%memory", MEMORY, problems)
    report = shell.user_ns.get("report")
    if report is not None:
        print(f"pool: {report.pool}")
    _check(problems, report is not None, "%memory -o returns its report")
    return problems


def _report(problems: list[str]) -> int:
    for p in problems:
        print(f"problem: {p}")
    return 1 if problems else 0


def main() -> int:
    """Each part in a process of its own, one after the other: an accelerator is held by
    one process at a time (a TPU's second process fails to open the chip), and %memory
    must see a fresh process's allocations."""
    if sys.argv[1:] == ["--memory"]:
        return _report(memory_part())
    if sys.argv[1:] == ["--main"]:
        return _report(main_part())
    t0 = time.perf_counter()
    problems: list[str] = []
    parts = [("the magics (a fresh process)", "--main", {})] + [
        (
            f"%memory, XLA_PYTHON_CLIENT_PREALLOCATE={prealloc} (a fresh process)",
            "--memory",
            {"XLA_PYTHON_CLIENT_PREALLOCATE": prealloc},
        )
        for prealloc in ("true", "false")
    ]
    for title, flag, extra in parts:
        print(f"\n=== {title}", flush=True)
        env = {**os.environ, **extra}
        done = subprocess.run([sys.executable, __file__, flag], env=env, check=False)
        if done.returncode:
            problems.append(f"{title}: exit status {done.returncode}")
    print(
        f"\nload average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"whole check {time.perf_counter() - t0:.1f} s"
    )
    _report(problems)
    word = "FAIL" if problems else "PASS"
    print(f"{word} device check: every cell ran and found what it must ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
