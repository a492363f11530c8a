"""What ``%show`` / ``jaxlab.show`` cost: first views beside treescope's, a 10^8-element
array's view, and a live view updated every step of a jitted simulation.

Three measurements, each timed by process CPU time (``time.process_time()``, the steady
figure on a shared machine) beside wall time, medians over rounds:

1. first view of an MLP's parameters (a list of ``{'W': (64, 64), 'b': (64,)}``) of 3, 20
   and 714 layers: what a live kernel's ``%show params`` makes (the ``ArrayView``: its
   rows, its drawing and the static twin's HTML) beside ``treescope.render_to_html(params)``
   (the HTML treescope's notebook display is), rounds interleaved (jaxlab, treescope,
   treescope, jaxlab, ...), a fresh tree of the same shapes each round so neither side
   reuses the other's arrays. The static ``%show --static`` HTML is printed beside.
   Targets: 714 layers at most 1/10 of treescope's CPU time; 3 and 20 layers no slower.
2. the view of a 10^8-element float32 array, its reduction compiled once before: ready
   in under 0.5 s (wall), the bytes copied to the host as the record states them.
3. a 2-D heat equation on 256 x 256, one jitted step per iteration, with
   ``view.update(state)`` every step (the view made and flushed inside the timing) against
   the same loop without it, rounds interleaved. Targets: at least 2 redraws/s, the
   loop's CPU time at most 5% more (its wall time printed beside).

Runs without a kernel: the widget is made as in a notebook, its comm has no front end,
and every redraw does all the kernel-side work (walk, figures, sample, rows, twin HTML).
Prints one PASS/FAIL line per target, then one JSON line of figures::

    .venv/bin/python benchmarks/array_view.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import treescope  # a benchmark dependency only: jaxlab never imports it
from _targets import Targets

import jaxlab
from jaxlab.arrays import show_record
from jaxlab.widgets.array_view import ArrayView

QUICK = "--quick" in sys.argv
LAYERS = (3, 20, 714)
ROUNDS = {3: 9, 20: 7, 714: 3 if QUICK else 5}  # interleaved pairs per size
BIG = 10**8
BIG_ROUNDS = 3
LOOP_ROUNDS = 3 if QUICK else 4
LOOP_WALL_S = 1.5  # a plain loop's wall time per round (steps calibrated to it)


def mlp_params(layers: int, seed: int) -> list[dict[str, jax.Array]]:
    keys = jax.random.split(jax.random.key(seed), layers)
    params = [
        {"W": jax.random.normal(k, (64, 64)) / 8.0, "b": jnp.full((64,), 0.01 * i)}
        for i, k in enumerate(keys)
    ]
    return jax.block_until_ready(params)


def clock(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """(process CPU s, wall s, result) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = run()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def jaxlab_view(params: Any) -> str:
    """What a live kernel's ``%show params`` makes: the widget and its twin's HTML."""
    view = ArrayView(params, name="params")
    html = view.static_bundle()["text/html"]
    view.close()
    return html


def first_views() -> dict[str, Any]:
    sides: dict[str, Callable[[Any], str]] = {
        "jaxlab": jaxlab_view,
        "treescope": treescope.render_to_html,
        "static": lambda p: show_record(p, "params").html(),
    }
    for run in sides.values():  # each side's one-time costs (imports, compiles) paid
        run(mlp_params(3, 0))
    out: dict[str, Any] = {}
    for layers in LAYERS:
        found: dict[str, list[float]] = {f"{s}_{c}": [] for s in sides for c in ("cpu", "wall")}
        sizes: dict[str, int] = {}
        for r in range(ROUNDS[layers]):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for side in order:
                params = mlp_params(layers, 100 * layers + r)
                cpu, wall, html = clock(lambda side=side, params=params: sides[side](params))
                found[f"{side}_cpu"].append(cpu)
                found[f"{side}_wall"].append(wall)
                sizes[side] = len(html)
        med = {k: statistics.median(v) for k, v in found.items()}
        out[layers] = {**{k: round(v, 4) for k, v in med.items()}, "html_chars": sizes}
        out[layers]["cpu_ratio"] = med["jaxlab_cpu"] / med["treescope_cpu"]
        out[layers]["wall_ratio"] = med["jaxlab_wall"] / med["treescope_wall"]
    return out


def big_view() -> dict[str, Any]:
    x = jax.block_until_ready(jax.random.normal(jax.random.key(1), (BIG,), jnp.float32))
    cold_cpu, cold_wall, _ = clock(lambda: jaxlab_view(x))  # compiles the reduction
    walls, cpus = [], []
    for _ in range(BIG_ROUNDS):
        cpu, wall, _ = clock(lambda: jaxlab_view(x))
        walls.append(wall)
        cpus.append(cpu)
    record = show_record(x, "x")
    info = record.root.array
    assert info is not None and info.sample is not None and info.stats is not None
    assert info.stats.computed_on == "device"  # reduced where it lives, never copied
    return {
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
        "cold_wall_s": cold_wall,
        "cold_cpu_s": cold_cpu,
        "copied_bytes": record.copied_bytes,
        "array_bytes": info.nbytes,
        "drawn_points": len(info.sample.values),
    }


@jax.jit
def heat_step(u: jax.Array) -> jax.Array:
    """One explicit step of the 2-D heat equation, periodic edges."""
    lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u
    return u + 0.2 * lap


def heat_start() -> jax.Array:
    return jnp.zeros((256, 256)).at[96:160, 96:160].set(100.0)


def loop_plain(steps: int) -> int:
    u = heat_start()
    for _ in range(steps):
        u = heat_step(u)
    jax.block_until_ready(u)
    return 0


def loop_viewed(steps: int) -> int:
    u = heat_start()
    view = jaxlab.show(u, name="u")  # rate 4/s, as the user gets it
    first = view.widget.updates
    for _ in range(steps):
        u = heat_step(u)
        view.update(u)
    view.flush()
    jax.block_until_ready(u)
    drawn = view.widget.updates - first
    view.widget.close()
    return drawn


def live_loop() -> dict[str, Any]:
    loop_plain(200)
    loop_viewed(200)
    _, wall, _ = clock(lambda: loop_plain(2000))
    steps = max(2000, int(2000 * LOOP_WALL_S / wall))
    found: dict[str, list[float]] = {"off_cpu": [], "on_cpu": [], "off_wall": [], "on_wall": []}
    rates = []
    for r in range(LOOP_ROUNDS):
        order = [("off", loop_plain), ("on", loop_viewed)]
        for side, run in order if r % 2 == 0 else order[::-1]:
            cpu, wall, drawn = clock(lambda run=run: run(steps))
            found[f"{side}_cpu"].append(cpu)
            found[f"{side}_wall"].append(wall)
            if side == "on":
                rates.append(drawn / wall)
    med = {k: statistics.median(v) for k, v in found.items()}
    return {
        "steps": steps,
        **{k: round(v, 4) for k, v in med.items()},
        "redraws_per_s": statistics.median(rates),
        "cpu_slowdown": med["on_cpu"] / med["off_cpu"] - 1,
        "wall_slowdown": med["on_wall"] / med["off_wall"] - 1,
    }


def main() -> None:
    targets = Targets()
    views = first_views()
    print(f"{'first view':22} {'jaxlab CPU':>11} {'treescope':>11} {'ratio':>7} "
          f"{'wall ratio':>10} {'static CPU':>11}")  # fmt: skip
    for layers, v in views.items():
        print(
            f"{layers:4} layers            {v['jaxlab_cpu'] * 1e3:9.1f}ms "
            f"{v['treescope_cpu'] * 1e3:9.1f}ms {v['cpu_ratio']:7.3f} {v['wall_ratio']:10.3f} "
            f"{v['static_cpu'] * 1e3:9.1f}ms"
        )
    big = big_view()
    print(
        f"10^8-element float32 view: wall {big['wall_s']:.3f} s, process CPU "
        f"{big['cpu_s']:.3f} s (first, compiling: wall {big['cold_wall_s']:.2f} s); "
        f"{big['copied_bytes']:,} bytes copied to the host of {big['array_bytes']:,}"
    )
    loop = live_loop()
    print(
        f"heat equation 256x256, {loop['steps']} steps: without the view wall "
        f"{loop['off_wall']:.3f} s, CPU {loop['off_cpu']:.3f} s; with it wall "
        f"{loop['on_wall']:.3f} s, CPU {loop['on_cpu']:.3f} s; "
        f"{loop['redraws_per_s']:.2f} redraws/s"
    )
    targets.at_most(
        "714-layer first view, jaxlab/treescope (CPU time)", views[714]["cpu_ratio"], 0.1
    )
    targets.at_most("20-layer first view, jaxlab/treescope (CPU time)", views[20]["cpu_ratio"], 1.0)
    targets.at_most("3-layer first view, jaxlab/treescope (CPU time)", views[3]["cpu_ratio"], 1.0)
    targets.at_most("10^8-element float32 view, s (wall)", big["wall_s"], 0.5)
    targets.at_least("live view redraws per second", loop["redraws_per_s"], 2.0)
    targets.at_most("loop slowdown with the live view (CPU time)", loop["cpu_slowdown"], 0.05)
    targets.print_clocks()
    figures = {
        "first_view": {str(k): v for k, v in views.items()},
        "big_view": big,
        "live_loop": loop,
    }
    print(json.dumps({"benchmark": "array_view", **figures, **targets.figures()}))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
