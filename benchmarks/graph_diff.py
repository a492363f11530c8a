"""How long ``jaxlab.diff`` takes on two 2,000-equation programs, beside the plain view.

Two gradient programs of a 166-layer MLP (2,000 equations each), the second with
one layer (the middle one) 12 wide instead of 8, so the change runs through that layer's
forward and backward equations. Figures, wall time beside process CPU time: tracing one
program; the plain view's cost (``jaxpr_graph`` of one program, as ``%jaxpr`` builds it:
the GraphExplorer's first view, and the budgeted static drawing); matching the two
(``diff``); the diff's first explorer view and its static drawing (both programs, marked,
side by side). Targets, one PASS/FAIL line each: the match under 2 s, the match with its
first view under 2 s. Prints the verdicts, then one JSON line; exits 1 when one fails::

    .venv/bin/python benchmarks/graph_diff.py
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
from _targets import Stopwatch, Targets

from jaxlab import diff, jaxpr_graph
from jaxlab.graph.build import graph_from_jaxpr

LAYERS, WIDTH, WIDE = 166, 8, 12  # 166 layers: 2,000 equations per gradient program


def mlp_loss(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


def params_for(wide_layer: int | None = None):
    keys = jax.random.split(jax.random.key(0), LAYERS)
    widths = [WIDTH] * (LAYERS + 1)
    if wide_layer is not None:
        widths[wide_layer + 1] = WIDE  # that layer's output, and the next one's input
    return [
        (jax.random.normal(k, (widths[i], widths[i + 1])), jnp.zeros(widths[i + 1]))
        for i, k in enumerate(keys)
    ]


def timed(run):
    watch = Stopwatch()
    value = run()
    return value, round(watch.wall_s, 3), round(watch.cpu_s, 3)


def main() -> int:
    targets = Targets()
    x = jnp.ones((4, WIDTH))
    plain, changed = params_for(), params_for(LAYERS // 2)
    loss = jax.grad(mlp_loss)
    (a, trace_s, trace_cpu) = timed(lambda: jaxpr_graph(loss, plain, x, explore=True))
    b = jaxpr_graph(loss, changed, x, explore=True)
    _, view_s, view_cpu = timed(lambda: jaxpr_graph(loss, plain, x, explore=True))
    _, drawing_s, drawing_cpu = timed(lambda: graph_from_jaxpr(a.jaxpr, title="loss"))
    d, diff_s, diff_cpu = timed(lambda: diff(a, b))
    _, first_s, first_cpu = timed(lambda: d.graph(explore=True))
    _, static_s, static_cpu = timed(lambda: d.graph())
    same, same_s, same_cpu = timed(lambda: diff(a, a))
    assert same.same and not d.same
    figures = {
        "equations": [d.n_before, d.n_after],
        "changed": len(d.changed),
        "added": len(d.added),
        "removed": len(d.removed),
        "trace_and_first_view_s": [trace_s, trace_cpu],
        "plain_first_view_s": [view_s, view_cpu],
        "plain_static_drawing_s": [drawing_s, drawing_cpu],
        "diff_s": [diff_s, diff_cpu],
        "diff_first_view_s": [first_s, first_cpu],
        "diff_static_drawing_s": [static_s, static_cpu],
        "diff_against_itself_s": [same_s, same_cpu],
    }
    print(f"{d.n_before} and {d.n_after} equations; {d.summary.splitlines()[0]}")
    for name, value in figures.items():
        if name.endswith("_s"):
            print(f"{name:28} wall {value[0]:.3f} s   CPU {value[1]:.3f} s")
    targets.at_least("programs of about 2,000 equations", min(d.n_before, d.n_after), 1900)
    targets.at_most("diff of two 2,000-equation programs, wall s", diff_s, 2.0)
    targets.at_most("diff and its first explorer view, wall s", diff_s + first_s, 2.0)
    targets.print_clocks()
    print(json.dumps({"benchmark": "graph_diff", **figures, **targets.figures()}))
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
