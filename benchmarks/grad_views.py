"""How long the gradient views take on a 20-layer MLP loss (about 150 gradient equations).

* ``%grad --check``: value, gradient and the float64 finite-difference check
  (``grad_report(..., check=True)``), first call (tracing included) and warm;
* the annotated gradient graph (``jaxpr_graph(..., grad=True, values=True)``): the model
  with every node's value and adjoint, first call and warm, and its SVG layout;
* the value/adjoint annotation alone, as a ratio to one plain ``jax.grad`` evaluation
  (eager, as a notebook runs it; warm).

Targets on a 2-core machine, evaluated in the run with one PASS/FAIL line each:
``%grad --check`` and the annotated graph under 1 s each, as a user first meets them
(first call, tracing included; the graph as drawn: model and SVG). Wall time is the
target, process CPU time is printed beside it (the steady figure on a shared machine;
``dot``'s CPU as a child process apart). Prints a table, the verdicts, then one JSON
line; exits 1 when a target fails::

    .venv/bin/python benchmarks/grad_views.py
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from _targets import Stopwatch, Targets

from jaxlab import grad_report, jaxpr_graph
from jaxlab.graph.annotate import annotate

LAYERS, WIDTH = 20, 16


def mlp_loss(params, x, y):
    for w in params[:-1]:
        x = jnp.tanh(x @ w)
    return jnp.mean((x @ params[-1] - y) ** 2)


def setup() -> tuple[Any, Any, Any]:
    keys = jax.random.split(jax.random.key(0), LAYERS)
    params = [jax.random.normal(k, (WIDTH, WIDTH)) / jnp.sqrt(WIDTH) for k in keys]
    x = jax.random.normal(jax.random.key(1), (8, WIDTH))
    return params, x, jnp.ones((8, WIDTH))


CPU: dict[str, float] = {}  # process CPU seconds of each measured first call and warm median


def seconds(fn: Callable[[], Any], repeat: int = 5, name: str = "") -> tuple[float, float]:
    """(first call, median of the warm calls), each blocked until ready; their process
    CPU seconds go to ``CPU[name + "_first"]`` and ``CPU[name + "_warm"]``."""
    watch = Stopwatch()
    jax.block_until_ready(fn())
    first, cpu_first = watch.wall_s, watch.cpu_s
    warm, warm_cpu = [], []
    for _ in range(repeat):
        watch.restart()
        jax.block_until_ready(fn())
        warm.append(watch.wall_s)
        warm_cpu.append(watch.cpu_s)
    if name:
        CPU[f"{name}_first"], CPU[f"{name}_warm"] = cpu_first, statistics.median(warm_cpu)
    return first, statistics.median(warm)


def main() -> None:
    targets = Targets()
    params, x, y = setup()
    grad_eqns = len(jax.make_jaxpr(jax.grad(mlp_loss))(params, x, y).eqns)

    def check() -> Any:
        return grad_report(mlp_loss, params, x, y, check=True).grad

    check_first, check_warm = seconds(check, name="check")
    report = grad_report(mlp_loss, params, x, y, check=True)
    assert report.check is not None and report.check.passed, report.check

    def graph() -> Any:
        return jaxpr_graph(mlp_loss, params, x, y, grad=True, values=True)

    graph_first, graph_warm = seconds(graph, name="graph")
    annotated = graph()
    n_adjoints = sum(n.adjoint is not None for n in annotated.nodes)
    watch = Stopwatch()
    annotated.to_svg()
    svg_s, svg_cpu, dot_cpu = watch.wall_s, watch.cpu_s, watch.child_cpu_s

    plain = jaxpr_graph(mlp_loss, params, x, y, grad=True)
    _, annotate_warm = seconds(
        lambda: annotate(plain, (params, x, y), {}, grad=True, fun=mlp_loss).nodes[0].value,
        name="annotate",
    )
    _, grad_warm = seconds(lambda: jax.grad(mlp_loss)(params, x, y), name="grad")
    ratio = annotate_warm / grad_warm

    def cpu(key: str) -> str:
        return f"(CPU {CPU[key]:.3f} s)"

    rows = [
        ("gradient equations", f"{grad_eqns}"),
        ("%grad --check, first call", f"{check_first:.3f} s {cpu('check_first')}"),
        ("%grad --check, warm", f"{check_warm:.3f} s {cpu('check_warm')}"),
        ("annotated gradient graph (model), first", f"{graph_first:.3f} s {cpu('graph_first')}"),
        ("annotated gradient graph (model), warm", f"{graph_warm:.3f} s {cpu('graph_warm')}"),
        ("  nodes with an adjoint", f"{n_adjoints} of {len(annotated.nodes)}"),
        ("  SVG layout (dot)", f"{svg_s:.3f} s (CPU {svg_cpu:.3f} s, dot {dot_cpu:.3f} s)"),
        ("annotation alone, warm", f"{annotate_warm * 1e3:.1f} ms {cpu('annotate_warm')}"),
        ("one eager jax.grad evaluation, warm", f"{grad_warm * 1e3:.1f} ms {cpu('grad_warm')}"),
        ("annotation / jax.grad", f"{ratio:.1f}×"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"grad views: {LAYERS}-layer MLP (width {WIDTH}), JAX {jax.__version__}")
    for name, value in rows:
        print(f"  {name.ljust(width)}  {value}")
    targets.at_most("%grad --check, first call, wall s", check_first, 1.0)
    targets.at_most(
        "annotated gradient graph, first call, model + SVG, wall s", graph_first + svg_s, 1.0
    )
    targets.print_clocks()
    figures = {
        "benchmark": "grad_views",
        "layers": LAYERS,
        "grad_equations": grad_eqns,
        "check_first_s": round(check_first, 4),
        "check_warm_s": round(check_warm, 4),
        "graph_first_s": round(graph_first, 4),
        "graph_warm_s": round(graph_warm, 4),
        "svg_s": round(svg_s, 4),
        "annotate_warm_s": round(annotate_warm, 4),
        "grad_eager_warm_s": round(grad_warm, 4),
        "annotate_over_grad": round(ratio, 2),
        "check_error": report.check.max_error,
        "svg_cpu_s": round(svg_cpu, 4),
        "svg_dot_cpu_s": round(dot_cpu, 4),
        "cpu_by_step_s": {k: round(v, 4) for k, v in CPU.items()},
        **targets.figures(),
    }
    print(json.dumps(figures))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
