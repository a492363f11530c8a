"""What a slider move costs in the kernel (issue 35, point 7), without the page: a
1,000-step pendulum integrated with ``lax.scan`` (its trajectory and its period
estimate), ``view.move`` over 200 moves (the compiled call: output, ``jax.jvp`` tangent,
every slider's derivative; then the frame the page draws, built and made JSON), beside
what ``ipywidgets.interact`` would do per move with the same jitted function (call it and
read its output back, no derivative, no frame).

The page's paint and transfer are measured in Chromium by ``benchmarks/explore_latency.py``
(the widget's); this is the kernel's share of the 50 ms. Figures are wall-clock medians
and 95th percentiles of interleaved rounds; prints PASS/FAIL against 50 ms, then JSON::

    .venv/bin/python benchmarks/explore_compute.py
"""

from __future__ import annotations

import json
import os
import statistics
import time

import jax
import jax.numpy as jnp

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
    ok = figures["explore_move_p95_ms"] <= TARGET_MS and view.compiles == 1
    print(
        f"{'PASS' if ok else 'FAIL'}: a move's kernel work {figures['explore_move_median_ms']:.2f} "
        f"ms median, {figures['explore_move_p95_ms']:.2f} ms p95 (target {TARGET_MS:.0f} ms), "
        f"{figures['ratio_median']:.1f}x a plain jitted call read back "
        f"({figures['plain_call_median_ms']:.2f} ms); {view.compiles} compile(s); "
        f"load {figures['load']:.2f}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
