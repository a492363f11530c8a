"""What a slider move costs in the kernel (issue 35, point 7), without the page: a
1,000-step pendulum integrated with ``lax.scan`` (its trajectory and its period
estimate), ``view.move`` over 200 moves (the compiled call: output, ``jax.jvp`` tangent,
every slider's derivative; then the frame the page draws, built and made JSON), beside
what ``ipywidgets.interact`` would do per move with the same jitted function (call it and
read its output back, no derivative, no frame).

The page's paint and transfer are measured in Chromium by ``benchmarks/explore_latency.py``
(the widget's); this is the kernel's share of the 50 ms. Figures are wall-clock medians
and 95th percentiles of interleaved rounds; prints PASS/FAIL against 50 ms (with ``BENCH``
lines, ``_targets.py``), then JSON::

    .venv/bin/python benchmarks/explore_compute.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from _targets import Targets

from jaxlab.explore import explore

TARGET_MS = 50.0
MOVES = 200


def pendulum(theta0=0.5, g=9.81, length=1.0, damping=0.05):
    dt = 0.01

    def step(state, _):
        theta, omega = state
        omega = omega + dt * (-(g / length) * jnp.sin(theta) - damping * omega)
        theta = theta + dt * omega
        return (theta, omega), theta

    _, thetas = jax.lax.scan(step, (theta0, 0.0), None, length=1000)
    return {"theta": thetas, "energy": 0.5 * length**2 * jnp.mean(thetas**2) * g}


def main() -> None:
    targets = Targets()
    view = explore(pendulum, theta0=(0.05, 1.5), g=(1.0, 20.0), length=1.0, damping=0.05)
    plain = jax.jit(pendulum)
    jax.block_until_ready(plain(0.5, 9.81, 1.0, 0.05))
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(MOVES):
        g = 1.0 + 19.0 * ((i * 37) % MOVES) / MOVES
        start = time.perf_counter()
        frame = view.move("g", g, seq=i)
        json.dumps(frame)
        ours.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        out = plain(0.5, g, 1.0, 0.05)
        jax.tree_util.tree_map(lambda a: a.tolist(), out)  # interact reads the output back
        theirs.append((time.perf_counter() - start) * 1e3)

    def p95(xs: list[float]) -> float:
        return sorted(xs)[int(0.95 * len(xs)) - 1]

    figures = {
        "explore_move_median_ms": statistics.median(ours),
        "explore_move_p95_ms": p95(ours),
        "plain_call_median_ms": statistics.median(theirs),
        "plain_call_p95_ms": p95(theirs),
        "ratio_median": statistics.median(ours) / statistics.median(theirs),
        "compiles": view.compiles,
        "load": os.getloadavg()[0],
    }
    print(
        f"a move's kernel work {figures['explore_move_median_ms']:.2f} ms median, "
        f"{figures['explore_move_p95_ms']:.2f} ms p95, {figures['ratio_median']:.1f}x a plain "
        f"jitted call read back ({figures['plain_call_median_ms']:.2f} ms); "
        f"{view.compiles} compile(s); load {figures['load']:.2f}"
    )
    targets.at_most(
        f"p95 of a move's kernel work, ms ({MOVES} moves)",
        figures["explore_move_p95_ms"],
        TARGET_MS,
        figure=figures["explore_move_p95_ms"],
        reference=figures["plain_call_p95_ms"],
        unit="ms",
    )
    targets.at_most(f"compilations in {MOVES} moves", view.compiles, 1)
    targets.print_clocks()
    print(json.dumps(figures | targets.figures()))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
