"""What ``%%profile`` costs against a bare ``jax.profiler.trace`` of the same cell.

The cell is a small training loop (an MLP's gradient step, jitted, with ``float(loss)``
every 10 steps: dispatches, device work and syncs, as a researcher writes it). Each round
runs it four ways in one IPython shell, interleaved so a busy machine's drift falls on all:

* ``plain``: the cell alone;
* ``bare trace``: ``with jax.profiler.trace(folder):`` around the cell, JAX's defaults
  (what a user would type; the trace is written, not read);
* ``%%profile``: ``%%profile -o`` (trace without JAX's Python tracer, read back in the
  kernel, syncs observed and marked, the result built; nothing displayed);
* ``%%profile, JAX's default options``: the same with the Python tracer and HLO protos
  on, to show what capturing only what the views use saves;
* ``%%profile, shown`` and ``%%profile --graph, shown``: the magic as a user runs it, its
  views made and displayed (the ProfileTimeline; with ``--graph`` the train step's
  program with its time per equation, a GraphExplorer, as well).

Process CPU time (``time.process_time()``, every thread of this process, plus the CPU of
its child processes: Graphviz's ``dot`` laying out the graph, run once per layout or kept
running; the latter read from ``/proc`` in clock ticks, coarse but unbiased) is the steady
figure on a shared machine and is the targets'; wall time is printed beside it. Targets,
for a 300-step and a 3,000-step loop (medians over the rounds):

* ``%%profile`` within 1.1x the CPU time of the bare trace. What %%profile adds is reading
  the trace in Python (every event, ~50 per step here) and building the result; the bare
  trace writes it instead.
* ``%%profile --graph`` within 1.3x the CPU time of ``%%profile``, both shown (issue 37):
  what --graph adds is the step's program, its compiled HLO read (once per module), the
  join of op times to equations, and the explorer's first view.

    .venv/bin/python benchmarks/profile_cost.py             # 5 rounds of 300, then 3,000 steps
    .venv/bin/python benchmarks/profile_cost.py --rounds 3 --steps 100
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
from _targets import Targets, print_clocks
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

DEFAULTS = "%%profile, JAX's default options"
SHOWN = "%%profile, shown"
GRAPH = "%%profile --graph, shown"
WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = """
import jax, jax.numpy as jnp

def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)

@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), loss

key = jax.random.key(0)
params = {"w1": jax.random.normal(key, (32, 64)) * 0.1, "b1": jnp.zeros(64),
          "w2": jax.random.normal(key, (64, 1)) * 0.1}
x = jax.random.normal(key, (128, 32)); y = jnp.sum(x, axis=1, keepdims=True)
_ = train_step(params, x, y)[1].block_until_ready()
"""

LOOP = """\
p = params
for step in range({steps}):
    p, loss = train_step(p, x, y)
    if step % 10 == 0:
        last = float(loss)
"""


_LIVE: list[int] = []  # child processes kept running (the explorer's dot), after warm-up
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _live_children() -> list[int]:
    """The processes this one started and keeps running (Linux's /proc; else none)."""
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        stat = _stat(name)
        if stat and int(stat[1]) == os.getpid():
            found.append(int(name))
    return found


def _stat(pid: int | str) -> list[str]:
    """``/proc/PID/stat``'s fields after the name (state, parent, ...), or []."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _cpu() -> float:
    """This process's CPU seconds, those of the children it waited for (a ``dot`` run for
    one layout) and of those it keeps running (a ``dot`` fed layout after layout)."""
    t = os.times()
    live = sum(int(f[11]) + int(f[12]) for f in map(_stat, _LIVE) if f) / _TICK
    return time.process_time() + t.children_user + t.children_system + live


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run (CPU: this process's and its children's)."""
    w0, c0 = time.perf_counter(), _cpu()
    run()
    return time.perf_counter() - w0, _cpu() - c0


def measure(ip: InteractiveShell, steps: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of the cell run each of the four ways, interleaved."""
    from jaxlab.timing import trace_session

    lean_options = trace_session.trace_options
    loop = LOOP.format(steps=steps)
    folder = tempfile.mkdtemp(prefix="profile-cost-")
    ip.user_ns["folder"] = folder
    bare = "with jax.profiler.trace(folder):\n" + "".join(
        f"    {line}\n" for line in loop.splitlines()
    )

    def run_cell(cell: str) -> Callable[[], None]:
        def run() -> None:
            result = ip.run_cell(cell)
            if not result.success:
                raise RuntimeError(f"the benchmark's cell failed: {result.error_in_exec!r}")

        return run

    def profiled(options: Callable[[], jax.profiler.ProfileOptions]) -> Callable[[], None]:
        def run() -> None:
            trace_session.trace_options = options  # type: ignore[assignment]
            try:
                result = ip.run_cell_magic("profile", "-o", loop)
            finally:
                trace_session.trace_options = lean_options  # type: ignore[assignment]
            assert result.called["train_step"] == steps, result.called  # every call counted
            assert sum(s.count for s in result.syncs) == len(range(0, steps, 10))

        return run

    def shown(line: str) -> Callable[[], None]:
        def run() -> None:
            with capture_output() as shown:  # (kept: as a front end keeps them)
                ip.run_cell_magic("profile", line, loop)
            views = [o for o in shown.outputs if WIDGET in o.data]
            # the views were made: the timeline, and with --graph the explorer too
            assert len(views) == (2 if "--graph" in line else 1), shown.outputs

        return run

    ways: dict[str, Callable[[], None]] = {
        "plain": run_cell(loop),
        "bare trace": run_cell(bare),
        "%%profile": profiled(lean_options),
        DEFAULTS: profiled(jax.profiler.ProfileOptions),
        SHOWN: shown(""),
        GRAPH: shown("--graph"),
    }
    for run in ways.values():  # warm every path once (first traces load the profiler)
        run()
    _LIVE[:] = _live_children()
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            figures[name].append(timed(ways[name]))
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder, exist_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in figures.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, nargs="+", default=[300, 3000])
    opts = parser.parse_args()
    targets = Targets()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jaxlab")
    ip.run_cell(SETUP)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for steps in opts.steps:
        medians = measure(ip, steps, opts.rounds)
        print(f"{steps} training steps, {opts.rounds} rounds interleaved; medians:")
        print(f"  (child processes kept running, their CPU counted: {len(_LIVE)})")
        for name, (wall, cpu) in medians.items():
            print_clocks(f"  {name:34s}", wall, cpu)
        bare_cpu = medians["bare trace"][1]
        ratio = medians["%%profile"][1] / bare_cpu
        print(
            f"  %%profile / bare trace: CPU {ratio:.2f}x, wall "
            f"{medians['%%profile'][0] / medians['bare trace'][0]:.2f}x; "
            f"JAX's default options / lean: CPU "
            f"{medians[DEFAULTS][1] / medians['%%profile'][1]:.2f}x; "
            f"bare trace / plain: CPU {bare_cpu / medians['plain'][1]:.2f}x"
        )
        targets.at_most(
            f"%%profile CPU time / bare jax.profiler.trace, {steps} steps",
            ratio,
            1.1,
            figure=medians["%%profile"][1],
            reference=bare_cpu,
            unit="s",
        )
        graph_cpu, shown_cpu = medians[GRAPH][1], medians[SHOWN][1]
        print(
            f"  %%profile --graph / %%profile, both shown: CPU {graph_cpu / shown_cpu:.2f}x, "
            f"wall {medians[GRAPH][0] / medians[SHOWN][0]:.2f}x"
        )
        targets.at_most(
            f"%%profile --graph CPU time / %%profile, {steps} steps",
            graph_cpu / shown_cpu,
            1.3,
            figure=graph_cpu,
            reference=shown_cpu,
            unit="s",
        )
        results[str(steps)] = {
            k: {"wall_s": round(w, 4), "cpu_s": round(c, 4)} for k, (w, c) in medians.items()
        }
    figures_out = {
        "benchmark": "profile_cost",
        "rounds": opts.rounds,
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "medians": results,
        **targets.figures(),
    }
    print(json.dumps(figures_out))
    raise SystemExit(targets.exit_code())


if __name__ == "__main__":
    main()
