"""How long `%jaxpr --grad` takes to draw deep-MLP gradient programs.

For gradient programs of about 200, 2,000 and 10,000 equations: equations, drawn nodes,
seconds to trace, to build the Graph model and to lay it out as SVG with `dot`, wall
time beside CPU time (this process's, and `dot`'s as a child process). Targets on a
2-core machine, evaluated in the run, one PASS/FAIL line each: the 200-equation program
under 0.3 s end to end (model + SVG), the larger ones under 2 s each thanks to
collapsing. The targets are wall times (what the user waits for); under load, the CPU
columns say how much of it was this work. Prints a table, the verdicts, then one JSON
line; exits 1 when a target fails::

    .venv/bin/python benchmarks/graph_render.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
from _targets import Stopwatch, Targets

from jaxlab.graph.build import argument_names, graph_from_jaxpr


def mlp_loss(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


def params_for(layers: int, width: int = 8):
    keys = jax.random.split(jax.random.key(0), layers)
    return [(jax.random.normal(k, (width, width)) / width, jnp.zeros(width)) for k in keys]


def measure(layers: int) -> dict[str, float]:
    params, x = params_for(layers), jnp.ones((4, 8))
    t0 = time.perf_counter()
    closed = jax.make_jaxpr(jax.grad(mlp_loss))(params, x)
    t1 = time.perf_counter()
    watch = Stopwatch()
    graph = graph_from_jaxpr(
        closed,
        title="grad(mlp_loss)",
        grad=True,
        input_names=argument_names(mlp_loss, (params, x), {}),
    )
    t2 = time.perf_counter()
    svg = graph.to_svg()
    t3 = time.perf_counter()
    cpu, dot_cpu = watch.cpu_s, watch.child_cpu_s
    assert svg.startswith("<svg")
    return {
        "layers": layers,
        "equations": graph.n_equations,
        "drawn_nodes": len(graph.nodes),
        "trace_s": t1 - t0,
        "model_s": t2 - t1,
        "svg_s": t3 - t2,
        "model_plus_svg_s": t3 - t1,
        "model_plus_svg_cpu_s": cpu,  # this process (model, DOT text, parsing dot's SVG)
        "dot_cpu_s": dot_cpu,  # dot itself, a child process
    }


def naive_dot_seconds(layers: int, limit: float = 15.0) -> float | None:
    """Baseline: every equation drawn, default `dot` (no layout limits, no collapsing)."""
    params, x = params_for(layers), jnp.ones((4, 8))
    closed = jax.make_jaxpr(jax.grad(mlp_loss))(params, x)
    graph = graph_from_jaxpr(closed, title="naive", grad=True, budget=10**9)
    dot = graph.to_dot()
    t0 = time.perf_counter()
    try:
        subprocess.run(
            ["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=limit, check=True
        )
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - t0


def main() -> None:
    targets = Targets()
    rows = [measure(layers) for layers in (16, 160, 800)]
    naive = naive_dot_seconds(16)
    head = ("layers", "equations", "nodes", "trace s", "model s", "svg s", "model+svg s")
    head += ("CPU s", "dot CPU s")
    print(" ".join(f"{h:>11}" for h in head))
    for r in rows:
        print(
            f"{r['layers']:>11} {r['equations']:>11} {r['drawn_nodes']:>11} {r['trace_s']:>11.3f} "
            f"{r['model_s']:>11.3f} {r['svg_s']:>11.3f} {r['model_plus_svg_s']:>11.3f} "
            f"{r['model_plus_svg_cpu_s']:>11.3f} {r['dot_cpu_s']:>11.3f}"
        )
    ours = rows[0]["svg_s"]
    if naive is None:
        print("baseline, 16 layers fully drawn with default dot: over 15 s")
    else:
        print(
            f"baseline, 16 layers fully drawn with default dot: {naive:.3f} s "
            f"({naive / ours:.1f}x our layout time)"
        )
    small, *large = rows
    targets.at_most(
        f"{small['equations']}-equation gradient program, model + SVG, wall s",
        small["model_plus_svg_s"],
        0.3,
    )
    for r in large:
        targets.at_most(
            f"{r['equations']}-equation gradient program, model + SVG, wall s",
            r["model_plus_svg_s"],
            2.0,
        )
    targets.print_clocks()
    figures = {
        "benchmark": "graph_render",
        "rows": rows,
        "naive_default_dot_16_layers_s": naive,
        **targets.figures(),
    }
    print(json.dumps(figures))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
