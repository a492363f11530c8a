"""What ``%bench`` costs: its wall time beside a manual ``timeit`` of the same accuracy, for
every kind of call, measured side by side in one process (issue 37).

For each kind (a 1×1 add, 256² and 2048² matmuls, a 1M-element elementwise chain, a
1,000-step scan, a host callback, an un-jitted function) both sides start from a fresh
function (so both pay its first call, compile included) and alternate: manual, ``%bench``,
manual, ``%bench``, manual. Each ``%bench`` is compared with the geometric mean of the
manual runs just before and after it, so drift and load hit both sides alike.

* ``%bench``: ``%bench f(x)`` in a real IPython shell with jaxlab loaded, its result
  displayed (text and HTML drawn), after the session's first ``%bench`` (the peak is a
  once-per-session cost, measured on its own below).
* Manual, of the same accuracy: what a user types to get the same figure as precisely,
  ``timeit`` of ``f(x).block_until_ready()``: its autorange (1, 2, 5, ... calls, the first
  of which compiles) up to the calls per round ``%bench`` chose, then as many rounds of
  that many calls as ``%bench`` took: the same calls per round and the same number of
  rounds give the median the same precision. (Its own autorange would land on the same
  count but for noise; under load it often does not, and the two sides would then do
  different work.) The first manual run, before any ``%bench`` of the kind, uses its own
  autorange; each later one the count of the ``%bench`` just before it. The manual side
  always runs ``MAX_ROUNDS`` and notes the time after each round, so the wall time of any
  number of rounds is read off one run. ``timeit -r7`` (``%timeit``'s default) is printed
  beside it.
* The peak: ``machine_peak()`` measured in a fresh process (JAX imported, nothing
  compiled), its wall time against 1 s, with its spread; and read back from the
  per-machine file where jaxlab keeps it.

Targets: ``%bench`` ≤ 1.3× the manual wall time for every kind; the peak ≤ 1 s. The load
average is printed with every figure: the machine is shared, and only side-by-side ratios
mean anything under load::

    .venv/bin/python benchmarks/bench_cost.py
    .venv/bin/python benchmarks/bench_cost.py --only scan --pairs 5   # 3 by default
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from _targets import Targets
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

WALL_TARGET = 1.3
PEAK_TARGET_S = 1.0
MAX_ROUNDS = 7  # the manual side's rounds (%timeit's default); %bench never takes more


def _scan(c: jax.Array, w: jax.Array) -> jax.Array:
    return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), c, None, length=1000)[0]


def kinds() -> dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]]:
    """Each kind: a maker of a fresh function (never called before) and its arguments."""
    tiny = jnp.ones((1, 1), jnp.float32)
    m256 = jnp.ones((256, 256), jnp.float32)
    m2048 = jnp.ones((2048, 2048), jnp.float32)
    million = jnp.linspace(0.0, 1.0, 1_000_000, dtype=jnp.float32)
    c, w = jnp.ones(64, jnp.float32), jnp.full((64, 64), 0.01, jnp.float32)
    host = jnp.linspace(0.0, 1.0, 1000, dtype=jnp.float32)
    xs, ws = jnp.ones((128, 256), jnp.float32), jnp.full((256, 64), 0.01, jnp.float32)

    def callback() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        def f(v: jax.Array) -> jax.Array:
            out = jax.ShapeDtypeStruct(v.shape, v.dtype)
            return jax.pure_callback(lambda a: np.sin(a).astype(a.dtype), out, v)

        return jax.jit(f), (host,)

    def unjitted() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        def loss(w: jax.Array, x: jax.Array) -> jax.Array:
            return jnp.mean(jnp.tanh(x @ w) ** 2)

        return loss, (ws, xs)

    return {
        "1×1 add": lambda: (jax.jit(lambda a, b: a + b), (tiny, tiny)),
        "256² matmul": lambda: (jax.jit(lambda a, b: a @ b), (m256, m256)),
        "2048² matmul": lambda: (jax.jit(lambda a, b: a @ b), (m2048, m2048)),
        "1M elementwise chain": lambda: (
            jax.jit(lambda v: jnp.tanh(v) * 2.0 + jnp.sin(v) * v - 1.0),
            (million,),
        ),
        "1,000-step scan": lambda: (jax.jit(lambda c, w: _scan(c, w)), (c, w)),
        "host callback": callback,
        "un-jitted loss": unjitted,
    }


def load() -> float:
    return os.getloadavg()[0]


def _namespace(fun: Callable[..., Any], args: tuple[Any, ...]) -> tuple[dict[str, Any], str]:
    names = [f"a{k}" for k in range(len(args))]
    space = {"f": fun, "jax": jax, **dict(zip(names, args, strict=True))}
    return space, f"f({', '.join(names)})"


def _steps() -> Any:
    for exponent in range(10):
        for base in (1, 2, 5):
            yield base * 10**exponent


def manual(
    make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]], number: int | None = None
) -> dict[str, Any]:
    """timeit as a user writes it, on a fresh function: autorange (its first call compiles)
    up to ``number`` calls (its own choice when None), then MAX_ROUNDS rounds, the wall
    time noted after each."""
    fun, args = make()
    space, call = _namespace(fun, args)
    timer = timeit.Timer(f"{call}.block_until_ready()", globals=space)
    t0 = time.perf_counter()
    if number is None:
        number, _ = timer.autorange()
    else:  # timeit's autorange, landing where %bench's did: 1, 2, 5, ... up to number
        for n in _steps():
            timer.timeit(min(n, number))
            if n >= number:
                break
    stamps, rounds = [], []
    for _ in range(MAX_ROUNDS):
        rounds.append(timer.timeit(number) / number)
        stamps.append(time.perf_counter() - t0)
    return {"stamps": stamps, "per_call_s": statistics.median(rounds), "number": number}


def bench(
    shell: InteractiveShell, make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]
) -> dict[str, Any]:
    """``%bench f(x)`` on a fresh function, its result displayed as the magic displays it."""
    fun, args = make()
    space, call = _namespace(fun, args)
    shell.user_ns.update(space)
    t0 = time.perf_counter()
    with capture_output():
        r = shell.run_line_magic("bench", f"-o {call}")
        display(r)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "rounds": r.repeats, "runs": r.runs, "ready_s": r.ready_s}


def measure_kind(shell: InteractiveShell, name: str, make: Any, pairs: int) -> dict[str, Any]:
    """manual, %bench, manual, ... : each %bench against its two neighbours."""
    manuals, benches = [manual(make)], []
    for _ in range(pairs):
        benches.append(bench(shell, make))
        manuals.append(manual(make, benches[-1]["runs"]))
    ratios, refs, r7 = [], [], []
    for i, b in enumerate(benches):
        k = min(b["rounds"], MAX_ROUNDS) - 1
        before, after = manuals[i]["stamps"][k], manuals[i + 1]["stamps"][k]
        ref = (before * after) ** 0.5
        refs.append(ref)
        ratios.append(b["wall_s"] / ref)
        r7.append((manuals[i]["stamps"][-1] * manuals[i + 1]["stamps"][-1]) ** 0.5)
    return {
        "bench_wall_s": statistics.median(b["wall_s"] for b in benches),
        "manual_wall_s": statistics.median(refs),
        "timeit_r7_wall_s": statistics.median(r7),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "rounds": [b["rounds"] for b in benches],
        "runs": benches[-1]["runs"],
        "bench_ready_s": statistics.median(b["ready_s"] for b in benches),
        "manual_per_call_s": statistics.median(m["per_call_s"] for m in manuals),
        "load": load(),
    }


_PEAK_CHILD = """
import json, os, time
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax, jax.numpy as jnp
jax.block_until_ready(jnp.ones(3) + 1)  # JAX started: the backend is up
from jaxlab.timing import peak
t0 = time.perf_counter()
p = peak.machine_peak()
took = time.perf_counter() - t0
read = getattr(peak, "known_peak", None)  # the next session's: from the machine's file
if read is not None:
    peak.forget_peak()
t1 = time.perf_counter()
kept = read() if read is not None else None
read_s = time.perf_counter() - t1 if read is not None else None
print(json.dumps({"peak_s": took, "flops_s": p.flops_s, "bytes_s": p.bytes_s,
                  "flops_range": p.flops_range, "bytes_range": p.bytes_range,
                  "matmul_n": p.matmul_n, "stream_bytes": p.stream_bytes,
                  "read_s": read_s, "conditions": p.conditions,
                  "kept": getattr(kept, "kept", None)}))
"""


def peak_in_fresh_process() -> dict[str, Any]:
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(here),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jaxlab")
    return ip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="the kinds whose name holds this text")
    parser.add_argument(
        "--pairs", type=int, default=3, help="%%bench runs per kind (odd: a true median)"
    )
    parser.add_argument("--no-peak", action="store_true", help="skip the peak's own figure")
    options = parser.parse_args()
    targets = Targets()
    start_load = load()
    ip = shell()
    chosen = {k: v for k, v in kinds().items() if options.only is None or options.only in k}
    # the session's first %bench (its peak, its imports) and each kind's shared compiles
    with capture_output():
        ip.user_ns.update({"f": jax.jit(lambda a: a + 1), "a0": jnp.ones(3)})
        ip.run_line_magic("bench", "-o -n 2 -r 1 f(a0)")
    for make in chosen.values():
        fun, args = make()
        jax.block_until_ready(fun(*args))
    results = {}
    head = f"{'kind':22} {'%bench':>8} {'manual':>8} {'ratio':>6} {'timeit -r7':>10}"
    print(f"{head} {'rounds':>8} {'runs':>6} {'per call':>10} {'load':>5}", flush=True)
    for name, make in chosen.items():
        c = measure_kind(ip, name, make, options.pairs)
        results[name] = c
        print(
            f"{name:22} {c['bench_wall_s']:7.2f}s {c['manual_wall_s']:7.2f}s {c['ratio']:6.2f} "
            f"{c['timeit_r7_wall_s']:9.2f}s {','.join(map(str, c['rounds'])):>8} "
            f"{c['runs']:>6} {c['bench_ready_s'] * 1e3:8.3f}ms {c['load']:5.2f}",
            flush=True,
        )
    print(
        "(%bench: wall time of `%bench f(x)` on a fresh function, displayed; manual: timeit "
        "autorange + as many rounds of as many calls as %bench took, fresh function; ratio: "
        "median over runs of %bench / the geometric mean of the manual runs around it; "
        "timeit -r7: the manual side's 7 rounds, %timeit's default; load: 1-minute average)"
    )
    for name, c in results.items():
        targets.at_most(
            f"%bench wall / timeit of equal accuracy, {name} (load {c['load']:.1f})",
            c["ratio"],
            WALL_TARGET,
            figure=c["bench_wall_s"],
            reference=c["manual_wall_s"],
            unit="s",
        )
    figures: dict[str, Any] = {"kinds": results}
    if not options.no_peak:
        p = peak_in_fresh_process()
        figures["peak"] = p
        read = (
            f"; the next session reads it from {p['kept']} in {p['read_s'] * 1e3:.1f} ms"
            if p["read_s"] is not None
            else ""
        )
        print(
            f"peak in a fresh process: {p['peak_s']:.2f} s ({p['matmul_n']}² matmul, "
            f"{p['stream_bytes'] >> 20} MiB stream; {p['conditions']}){read}; "
            f"load {load():.2f}",
            flush=True,
        )
        targets.at_most(
            f"peak measured in a fresh session, s (load {load():.1f})",
            p["peak_s"],
            PEAK_TARGET_S,
        )
    targets.print_clocks()
    print(
        f"load average {start_load:.2f} at the start, {load():.2f} at the end; "
        f"JAX {jax.__version__}, Python {sys.version.split()[0]}"
    )
    print(json.dumps({"benchmark": "bench_cost", "jax": jax.__version__, **figures,
                      **targets.figures()}))  # fmt: skip
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
