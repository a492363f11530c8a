"""Big programs at projector size (issue 34): each first view's size and smallest text.

For every program a tutorial or the issue names (tutorial 06's ``run`` opened as its
``%jaxpr --open scan,hamiltonian`` line asks, tutorial 09's ``train_step``, a 20-layer
MLP's gradient, a 2-scan integrator, an optax training step, an RNN's gradient), prints
the GraphExplorer's first view (width × height in px at scale 1), the smallest text it
draws when shown whole in a 1100 × 700 pane (12 px × the scale "fit" must use to show all
of it: below 12 the view did not fit), what it left closed; and ``%grad --split``'s three
programs' sizes for ``sin(x)·x²`` and a 2-layer MLP at their smallest readable size (12 px
text). PASS when every view fits 1100 × 700 at scale 1 (text 12 px: the pane
``graph_layout`` lays first views out for, JupyterLab's output at 1280 × 720) and every
split program is at most 700 px tall and fits a 1100 px output::

    .venv/bin/python benchmarks/fit_screen.py
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp

import jaxlab
from jaxlab.graph.explore import Views
from jaxlab.widgets import GraphExplorer
from jaxlab.widgets.graph_layout import PANE_H, PANE_W  # the pane a first view must fit

OUTPUT_W, SPLIT_H = PANE_W, 700  # a split program: at most this wide and tall


DT = 0.005


def hamiltonian(theta, p):
    return p**2 / 2.0 + 9.81 * (1 - jnp.cos(theta))


dH_dtheta = jax.grad(hamiltonian, argnums=0)
dH_dp = jax.grad(hamiltonian, argnums=1)


# Tutorial 06's steps, at the top level as in the notebook (their boxes' names read so).
def euler_step(state, _):
    theta, p = state
    theta_new = theta + DT * dH_dp(theta, p)
    p_new = p - DT * dH_dtheta(theta, p)
    return (theta_new, p_new), (theta_new, p_new)


def verlet_step(state, _):
    theta, p = state
    p_half = p - 0.5 * DT * dH_dtheta(theta, p)
    theta_new = theta + DT * dH_dp(theta, p_half)
    p_new = p_half - 0.5 * DT * dH_dtheta(theta_new, p_half)
    return (theta_new, p_new), (theta_new, p_new)


@jax.jit
def run(theta0, p0):
    _, euler = jax.lax.scan(euler_step, (theta0, p0), None, length=10_000)
    _, verlet = jax.lax.scan(verlet_step, (theta0, p0), None, length=10_000)
    return euler, verlet


def pendulum_run() -> tuple[Any, tuple[Any, ...], list[str]]:
    """Tutorial 06's ``run``: two scans of 10,000 steps, forces by jax.grad."""
    jax.config.update("jax_enable_x64", True)
    return run, (jnp.float64(1.0), jnp.float64(0.0)), ["scan", "hamiltonian"]


def train_step_09() -> tuple[Any, tuple[Any, ...], list[str]]:
    """Tutorial 09's ``train_step``: value_and_grad of a 3-layer MLP, an SGD update."""
    sizes = [64, 512, 512, 10]
    keys = jax.random.split(jax.random.key(0), len(sizes) - 1)
    params = {
        "layers": [
            {"W": jax.random.normal(k, (m, n)) / m**0.5, "b": jnp.zeros(n)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
        ]
    }

    def dense(layer, x):
        return x @ layer["W"] + layer["b"]

    def predict(params, x):
        for layer in params["layers"][:-1]:
            x = jnp.tanh(dense(layer, x))
        return dense(params["layers"][-1], x)

    def loss_fn(params, x, labels):
        logits = predict(params, x)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(labels)), labels])

    @jax.jit
    def train_step(params, x, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss

    x = jnp.ones((512, 64))
    return train_step, (params, x, jnp.zeros(512, jnp.int32)), []


def mlp20() -> tuple[Any, tuple[Any, ...], list[str]]:
    """A 20-layer MLP (a call per layer); its gradient is drawn."""

    def layer(p, x):
        return jnp.tanh(x @ p["W"] + p["b"])

    def mlp(params, x):
        for p in params:
            x = layer(p, x)
        return jnp.mean(x**2)

    params = [{"W": jnp.full((8, 8), 0.1), "b": jnp.zeros(8)} for _ in range(20)]
    return jax.grad(mlp), (params, jnp.ones((4, 8))), []


def rnn_grad() -> tuple[Any, tuple[Any, ...], list[str]]:
    """An RNN over 50 steps (a scan), its gradient."""

    def cell(h, x, p):
        return jnp.tanh(h @ p["Wh"] + x @ p["Wx"] + p["b"])

    def loss(p, xs):
        h, _ = jax.lax.scan(lambda h, x: (cell(h, x, p), None), jnp.zeros(16), xs)
        return jnp.sum(h @ p["Wo"])

    p = {
        "Wh": jnp.eye(16) * 0.5,
        "Wx": jnp.ones((4, 16)) * 0.1,
        "b": jnp.zeros(16),
        "Wo": jnp.ones((16, 2)),
    }
    return jax.grad(loss), (p, jnp.ones((50, 4))), []


def optax_step() -> tuple[Any, tuple[Any, ...], list[str]]:
    """An optax (Adam) training step of a 2-layer MLP."""
    import optax

    opt = optax.adam(1e-3)

    def loss(p, x, y):
        h = jnp.tanh(x @ p["W1"] + p["b1"])
        return jnp.mean((h @ p["W2"] - y) ** 2)

    def step(p, state, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        updates, state = opt.update(grads, state, p)
        return optax.apply_updates(p, updates), state, value

    p = {"W1": jnp.ones((3, 8)), "b1": jnp.zeros(8), "W2": jnp.ones((8, 1))}
    return step, (p, opt.init(p), jnp.ones((5, 3)), jnp.ones((5, 1))), []


PROGRAMS = {
    "06 run --open scan,hamiltonian": pendulum_run,
    "09 train_step": train_step_09,
    "20-layer MLP gradient": mlp20,
    "RNN gradient (scan of 50)": rnn_grad,
    "optax Adam step": optax_step,
}


def first_view(name: str) -> tuple[float, float, float, str]:
    """The explorer's first view of a program: width, height, the text "fit" shows all of
    it at in the pane (px), and what it says it left closed."""
    fun, args, words = PROGRAMS[name]()
    graph = jaxlab.jaxpr_graph(fun, *args, explore=True)
    opened: list[str] = []
    if words and isinstance(graph.rebuild, Views):
        opened = graph.rebuild.explorer.boxes_to_open(words)
    widget = GraphExplorer(graph, opened=opened)
    w, h = float(widget.view["width"]) + 32, float(widget.view["height"]) + 32
    smallest = 12 * min(1.0, PANE_W / w, PANE_H / h)
    said = " ".join(n for n in widget.model.get("notes", []) if "closed" in n)
    widget.close()
    return w, h, smallest, said


def split_sizes(which: str) -> list[tuple[float, float]]:
    """``%grad --split``'s programs as drawn (px at their smallest readable size)."""
    from jaxlab.autodiff.split import grad_split

    if which == "sin(x)·x²":
        split = grad_split(lambda x: jnp.sin(x) * x**2, jnp.float32(1.0))
    else:

        def mlp_loss(params, x, y):
            h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
            return jnp.mean((h @ params[1]["W"] - y) ** 2)

        params = [{"W": jnp.full((3, 4), 0.3), "b": jnp.zeros(4)}, {"W": jnp.full((4, 1), 0.2)}]
        split = grad_split(mlp_loss, params, jnp.ones((5, 3)), jnp.ones((5, 1)))
    page = split._html()
    # Graphviz's points drawn as px (3/4 of their size): its 12 pt text at 12 px.
    return [
        (float(w), float(h))
        for w, h in re.findall(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', page)
    ]


def main() -> int:
    ok = True
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"{'first view':34} {'width':>7} {'height':>7} {'text at fit':>11}  left closed")
    for name in PROGRAMS:
        w, h, smallest, said = first_view(name)
        fits = w <= PANE_W and h <= PANE_H
        ok &= fits
        print(f"{name:34} {w:7.0f} {h:7.0f} {smallest:9.1f}px  {said or '-'}")
    print(f"{'%grad --split program':34} {'width':>7} {'height':>7}")
    for which in ("sin(x)·x²", "2-layer MLP"):
        for k, (w, h) in enumerate(split_sizes(which)):
            ok &= w <= OUTPUT_W and h <= SPLIT_H
            print(f"{which + ' ' + ('primal', 'linearized', 'transposed')[k]:34} {w:7.0f} {h:7.0f}")
    print(
        "PASS" if ok else "FAIL",
        f"every first view fits {PANE_W:.0f}x{PANE_H:.0f} at 12 px; "
        f"every split program ≤ {SPLIT_H} px tall and ≤ {OUTPUT_W:.0f} px wide at 12 px",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
