"""What an overlay costs on a 10,000-equation program, beside the plain view's cost.

The program is the gradient of a 714-layer MLP whose layers are inner jits (10,002
equations, as benchmarks/graph_explorer.py builds it). Measured, wall and CPU time:

* the plain first view (``jaxpr_graph(..., explore=True)``), for comparison;
* ``graph.overlay(data)`` with a value for every equation (resolved over the whole
  program, applied to the first view), and one more view rebuilt with the overlay;
* time per equation after the profile is read: ``profile_attribution`` on a profile of
  the jitted gradient (the HLO read, the join, the overlay; its compile reported apart);
* the attributed share on an MLP training step and on tutorial 06's ``run`` (two
  10,000-step scans).

Target: the overlay ready in under 1 s after the profile is read (the join and overlay
on the 10,000-equation program, compile excluded)::

    .venv/bin/python benchmarks/overlay_cost.py
"""

from __future__ import annotations

import itertools
import json
import sys
import time

import jax
import jax.numpy as jnp
from _targets import Stopwatch, Targets

import jaxlab
from jaxlab.timing.attribution import attribute

LAYERS = 714


def layer(w, b, x):
    return jnp.tanh(x @ w + b)


def deep(params, x):
    for w, b in params:
        x = jax.jit(layer)(w, b, x)
    return jnp.mean(x**2)


def clocked(fn):
    watch = Stopwatch()
    value = fn()
    return value, watch.wall_s, watch.cpu_s


def profile_of(jitted, *args, calls=3):
    jax.block_until_ready(jitted(*args))
    with jaxlab.profile() as p:
        for _ in range(calls):
            jax.block_until_ready(jitted(*args))
    return p.result


def mlp_share() -> float:
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, d: p - 0.01 * d, params, g)

    key = jax.random.key(0)
    sizes = [64, 256, 256, 256, 10]
    params = [
        (jax.random.normal(key, (a, b)) * 0.1, jnp.zeros(b)) for a, b in itertools.pairwise(sizes)
    ]
    x, y = jnp.ones((128, 64)), jnp.ones((128, 10))
    result = profile_of(train_step, params, x, y)
    return jaxlab.profile_attribution(result, train_step, params, x, y).share


def tutorial_share() -> float:
    """notebooks/06's ``run``: Euler and Verlet over 10,000 steps (float32 here)."""
    dt, steps = 0.005, 10_000

    def hamiltonian(theta, p):
        return 0.5 * p**2 + 9.81 * (1 - jnp.cos(theta))

    dh_dtheta, dh_dp = jax.grad(hamiltonian, 0), jax.grad(hamiltonian, 1)

    def euler_step(state, _):
        theta, p = state
        new = (theta + dt * dh_dp(theta, p), p - dt * dh_dtheta(theta, p))
        return new, new

    def verlet_step(state, _):
        theta, p = state
        half = p - 0.5 * dt * dh_dtheta(theta, p)
        theta_new = theta + dt * dh_dp(theta, half)
        new = (theta_new, half - 0.5 * dt * dh_dtheta(theta_new, half))
        return new, new

    @jax.jit
    def run(theta0, p0):
        _, euler = jax.lax.scan(euler_step, (theta0, p0), None, length=steps)
        _, verlet = jax.lax.scan(verlet_step, (theta0, p0), None, length=steps)
        return euler, verlet

    args = (jnp.float32(1.0), jnp.float32(0.0))
    result = profile_of(run, *args)
    return jaxlab.profile_attribution(result, run, *args).share


def main() -> int:
    targets = Targets()
    params = [(jnp.full((8, 8), 0.1), jnp.zeros(8)) for _ in range(LAYERS)]
    x = jnp.ones((4, 8))
    grad = jax.jit(jax.grad(deep))

    plain, plain_wall, plain_cpu = clocked(
        lambda: jaxlab.jaxpr_graph(grad, params, x, explore=True)
    )
    items = plain.rebuild.explorer.where
    data = {k: float(i % 17) for i, k in enumerate(items)}
    shown, over_wall, over_cpu = clocked(lambda: plain.overlay(data, name="n", unit=""))
    opened = frozenset(plain.rebuild.explorer.holders(next(iter(items)))[:1])
    _, plain_view_wall, _ = clocked(lambda: plain.rebuild(opened))
    _, over_view_wall, _ = clocked(lambda: shown.rebuild(opened))

    result = profile_of(grad, params, x)
    traced, trace_wall, _ = clocked(lambda: grad.trace(params, x))
    text, compile_wall, _ = clocked(lambda: traced.lower().compile().as_text())

    def join():
        return attribute(
            result,
            traced.jaxpr,
            text,
            function="deep",
            graph_of=lambda c: jaxlab.graph.build.graph_from_jaxpr(c, title="grad", explore=True),
        )

    joined, join_wall, join_cpu = clocked(join)
    print(f"program: {plain.n_equations:,} equations")
    print(f"plain first view            {plain_wall:7.3f} s wall {plain_cpu:7.3f} s CPU")
    print(f"overlay of every equation   {over_wall:7.3f} s wall {over_cpu:7.3f} s CPU")
    print(f"a view opened, plain        {plain_view_wall:7.3f} s wall")
    print(f"a view opened, with overlay {over_view_wall:7.3f} s wall")
    print(
        f"profile -> time overlay     {join_wall:7.3f} s wall {join_cpu:7.3f} s CPU "
        f"(graph, HLO read, join, overlay; trace {trace_wall:.3f} s and XLA compile "
        f"{compile_wall:.3f} s apart)"
    )
    mlp, tutorial = mlp_share(), tutorial_share()
    print(
        f"attributed share: 714-layer gradient {joined.share:.1%}, MLP training step "
        f"{mlp:.1%}, notebooks/06 run {tutorial:.1%}"
    )
    targets.at_most("time overlay after the profile is read, 10,000 equations, s", join_wall, 1.0)
    targets.at_most("overlay of every equation, 10,000 equations, s", over_wall, 1.0)
    targets.at_least("attributed share, MLP training step", mlp, 0.9)
    targets.at_least("attributed share, notebooks/06 run", tutorial, 0.9)
    targets.print_clocks()
    figures = {
        "benchmark": "overlay_cost",
        "equations": plain.n_equations,
        "plain_first_view_s": plain_wall,
        "overlay_s": over_wall,
        "opened_view_plain_s": plain_view_wall,
        "opened_view_overlay_s": over_view_wall,
        "profile_to_overlay_s": join_wall,
        "profile_to_overlay_cpu_s": join_cpu,
        "compile_s": compile_wall,
        "share_deep": joined.share,
        "share_mlp": mlp,
        "share_tutorial": tutorial,
        **targets.figures(),
    }
    print(json.dumps(figures))
    return targets.exit_code()


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    sys.exit(code)
