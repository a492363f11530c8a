"""No placeholder name where the program has a name (issue 33, point 4).

Each real program below is drawn as the GraphExplorer draws it with every box opened
(``Graph.rebuild`` over ``Explorer.openable()``), and every label is read: the nodes', the
clusters' and what the explorer's view model sends to the page. None may read ``in3``,
``out1`` (a port's position where the program names the value), and ``·`` (an operand
the label cannot name) only where the operand is a temporary the program never named.

The ``·`` that remain, and why, are listed in :data:`ANONYMOUS`: each is an operand that
is a value computed inside one expression and never bound to a name (``jnp.tanh(h @ W +
x @ U + b)``: the sum inside tanh; ``1 - ·²``: tanh's derivative of that unnamed result).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.autodiff.split import grad_split
from jaxlab.graph import model as m
from jaxlab.widgets.graph_explorer import view_model
from jaxlab.widgets.graph_layout import visible

PLACEHOLDER = re.compile(r"\bin\d|\bout\d")

# Labels that keep a "·", each an operand the program never named, matched whole, per
# program. Why each remains:
PRE = "the cotangent of an unnamed temporary (the pre-activation inside jnp.tanh(...))"
_CT_PRE = {"·ᵀ"}  # that cotangent transposed
ANONYMOUS: dict[str, set[str]] = {
    # the pre-activation h @ W + x @ U + b inside jnp.tanh is never bound: PRE
    "rnn --grad": {"· @ params['W']ᵀ", "· ⊗ h", "· ⊗ xs", *_CT_PRE},
    # 0.05 * force(q): the call's result; 0.5 * jnp.sum(p**2): the sum, never bound
    "leapfrog": {"mul 0.05, ·", "mul 0.5, ·"},
    # the same, and 0.1 * p_half's cotangent (an unnamed cotangent of the product)
    "leapfrog --grad": {"mul 0.05, ·", "mul 0.1, ·", "mul 0.5, ·"},
    "cond": {"gt ·, 0.0"},  # x.sum() > 0: the sum is never bound
    # the cotangent of the unnamed sum v @ w (the cond's result, which the gradient
    # program drops, is cond_program, its cotangent ∂cond_program)
    "cond --grad": {"gt ·, 0.0", "· @ wᵀ"},
    # the cotangent of x @ W inside jnp.tanh (PRE), one per layer
    "20 params --grad": {f"· @ params[{k}]ᵀ" for k in range(1, 20)} | {"·ᵀ @ x", *_CT_PRE},
    # (h @ W - y) ** 2 and its derivative 2 * (...): the difference is never bound; the
    # cotangent of h @ W - y; inside optax.adam: its unnamed temporaries (1 - b1) * g,
    # g ** 2, 1 - b1 ** count, the step -lr * ..., eps added to a root
    "optax step": {
        "· ** 2",
        "mul 2.0, ·",
        "· @ params[1]['W']ᵀ",
        "·ᵀ @ h",
        "·ᵀ @ x",
        *_CT_PRE,
        "add ·, 1e-08",
        "add ·, 0.0",  # (JAX 0.10)
        "mul -0.01, ·",
        "mul 0.001, ·",
        "mul 0.1, ·",
        "sub 1.0, ·",
        "· ** 1",
    },
    "optax loss --grad": {
        "· ** 2",
        "mul 2.0, ·",
        "· @ params[1]['W']ᵀ",
        "·ᵀ @ h",
        "·ᵀ @ x",
        *_CT_PRE,
    },
    # nnx.merge(graphdef, state)(x) ** 2: the layer's output is never bound
    "flax nnx Linear --grad": {"· ** 2", "mul 2.0, ·", "·ᵀ @ x", *_CT_PRE},
    # (h @ W - y) ** 2: the difference is never bound
    "split primal": {"· ** 2"},
    # the tangent of the difference and its cotangent
    "split linearized": {"· @ params[1]['W']"},
    "split transposed": {"· @ params[1]['W']ᵀ", "·ᵀ @ tanh(add(…))", "·ᵀ @ x", *_CT_PRE},
}
# diffrax's solver runs inside equinox's while loops, which flatten their closures into
# parameters nothing in diffrax's code names, and compare step counters and flags that are
# temporaries; there a "·" is allowed, a position (in3, out1) never.
LIBRARY_INTERNALS = {"diffrax Tsit5"}


# --------------------------------------------------------------------------- programs


def rnn(params, xs):
    W, U, b = params["W"], params["U"], params["b"]

    def cell(h, x):
        h = jnp.tanh(h @ W + x @ U + b)
        return h, h.sum()

    h, ys = jax.lax.scan(cell, jnp.zeros(4), xs)
    return ys.sum() + h.sum()


def _rnn_args():
    params = {"W": jnp.eye(4) * 0.5, "U": jnp.ones((3, 4)) * 0.1, "b": jnp.zeros(4)}
    return params, jnp.ones((6, 3))


def leapfrog(q0, p0, k):
    """Two scans: an outer one over frames, an inner leapfrog integrator per frame."""

    def force(q):
        return -k * q

    def kick_drift(state, _):
        q, p = state
        p_half = p + 0.05 * force(q)
        q_new = q + 0.1 * p_half
        p_new = p_half + 0.05 * force(q_new)
        return (q_new, p_new), None

    def frame(state, _):
        state, _ = jax.lax.scan(kick_drift, state, None, length=4)
        q, p = state
        energy = 0.5 * jnp.sum(p**2) + 0.5 * k * jnp.sum(q**2)
        return state, energy

    (q, p), energies = jax.lax.scan(frame, (q0, p0), None, length=3)
    return jnp.sum(energies) + jnp.sum(q * p)


def while_program(x, scale):
    def cond(state):
        i, _ = state
        return i < 5

    def body(state):
        i, v = state
        return i + 1, jnp.sin(v) * scale

    _, v = jax.lax.while_loop(cond, body, (0, x))
    return jnp.sum(v)


def cond_program(x, w):
    def positive(v):
        return jnp.sum(v @ w)

    def negative(v):
        return -jnp.sum(v)

    return jax.lax.cond(x.sum() > 0, positive, negative, x)


def many_params(params, x):
    """A pytree of 20 parameters: the explorer groups them (``params (20 arrays)``)."""
    for W in params:
        x = jnp.tanh(x @ W)
    return jnp.sum(x)


def _many_args():
    rng = np.random.default_rng(0)
    params = [jnp.asarray(rng.normal(size=(3, 3)) * 0.3, jnp.float32) for _ in range(20)]
    return params, jnp.ones((2, 3))


def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
    return jnp.sum((h @ params[1]["W"] - y) ** 2)


def _mlp_args():
    rng = np.random.default_rng(1)
    params = [
        {"W": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32), "b": jnp.zeros(4)},
        {"W": jnp.asarray(rng.normal(size=(4, 1)), jnp.float32)},
    ]
    return params, jnp.ones((2, 3)), jnp.ones((2, 1))


def _optax_programs():
    optax = pytest.importorskip("optax")
    opt = optax.adam(1e-2)
    params, x, y = _mlp_args()
    state = opt.init(params)

    @jax.jit
    def train_step(params, state, x, y):
        grads = jax.grad(mlp_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    return [
        ("optax step", lambda: jaxlab.jaxpr_graph(train_step, params, state, x, y)),
        ("optax loss --grad", lambda: jaxlab.jaxpr_graph(mlp_loss, params, x, y, grad=True)),
    ]


def _equinox_programs():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.PRNGKey(0))
    x = jnp.ones(3)

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    return [("equinox MLP --grad", lambda: jaxlab.jaxpr_graph(loss, model, x, grad=True))]


def _flax_programs():
    nnx = pytest.importorskip("flax.nnx")
    layer = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(layer)
    x = jnp.ones((4, 3))

    def loss(state, x):
        return jnp.sum(nnx.merge(graphdef, state)(x) ** 2)

    return [("flax nnx Linear --grad", lambda: jaxlab.jaxpr_graph(loss, state, x, grad=True))]


def _diffrax_programs():
    diffrax = pytest.importorskip("diffrax")

    def solve(k, y0):
        term = diffrax.ODETerm(lambda t, y, args: -args * y)
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.25, y0, args=k, max_steps=8)
        return jnp.sum(sol.ys)

    k, y0 = jnp.float32(0.5), jnp.ones(2)
    return [("diffrax Tsit5", lambda: jaxlab.jaxpr_graph(solve, k, y0))]


def _split_programs():
    params, x, y = _mlp_args()
    split = grad_split(mlp_loss, params, x, y)
    titles = ("split primal", "split linearized", "split transposed")
    # %grad --split shows each program's drawing (with its residuals named), not an explorer.
    return [
        (t, lambda k=k: dataclasses.replace(split.graphs()[k], rebuild=None))
        for k, t in enumerate(titles)
    ]


def _programs() -> list[tuple[str, Callable[[], m.Graph]]]:
    rnn_args = _rnn_args()
    many = _many_args()
    q0, p0, k = jnp.ones(2), jnp.zeros(2), jnp.float32(2.0)
    x, w = jnp.ones((2, 3)), jnp.ones((3, 2))
    return [
        ("rnn", lambda: jaxlab.jaxpr_graph(rnn, *rnn_args)),
        ("rnn --grad", lambda: jaxlab.jaxpr_graph(rnn, *rnn_args, grad=True)),
        ("leapfrog", lambda: jaxlab.jaxpr_graph(leapfrog, q0, p0, k)),
        ("leapfrog --grad", lambda: jaxlab.jaxpr_graph(leapfrog, q0, p0, k, grad=True)),
        ("while", lambda: jaxlab.jaxpr_graph(while_program, jnp.ones(3), 0.9)),
        ("cond", lambda: jaxlab.jaxpr_graph(cond_program, x, w)),
        ("cond --grad", lambda: jaxlab.jaxpr_graph(cond_program, x, w, grad=True)),
        ("20 params", lambda: jaxlab.jaxpr_graph(many_params, *many)),
        ("20 params --grad", lambda: jaxlab.jaxpr_graph(many_params, *many, grad=True)),
        *_optax_programs(),
        *_equinox_programs(),
        *_flax_programs(),
        *_diffrax_programs(),
        *_split_programs(),
    ]


# --------------------------------------------------------------------------- labels


def _opened(graph: m.Graph) -> m.Graph:
    """The explorer's view with every box open (the graph itself where it has none)."""
    if graph.rebuild is None:
        return graph
    return graph.rebuild(frozenset(graph.rebuild.explorer.openable()))


def labels(graph: m.Graph) -> list[str]:
    """Every label of the drawing with every box open: nodes, clusters, and the records
    the view model sends to the page."""
    view = _opened(graph)
    found = [n.label for n in view.nodes] + [c.label for c in view.clusters]
    opened = [c.id for c in view.clusters]
    page = view_model(view, visible(view, opened))
    found += [r["label"] for r in page["nodes"]] + [r["label"] for r in page["clusters"]]
    return found


def placeholders(name: str, graph: m.Graph) -> list[str]:
    allowed = ANONYMOUS.get(name, set())
    return sorted(
        {
            label
            for label in labels(graph)
            if PLACEHOLDER.search(label)
            or ("·" in label and label not in allowed and name not in LIBRARY_INTERNALS)
        }
    )


PROGRAMS = _programs()


@pytest.mark.parametrize("name, draw", PROGRAMS, ids=[n for n, _ in PROGRAMS])
def test_every_label_names_what_the_program_names(name, draw):
    assert placeholders(name, draw()) == []


GROUP = re.compile(r"^(?P<root>.+) \((?P<n>\d+) arrays\)$")


def as_leaves(drawn: list[str], names: list[str]) -> list[str]:
    """Port labels with each port drawn for a whole argument read as the leaves it stands
    for: a row of ports wider than the screen draws one port per argument (emit's
    PORT_ROW_PX: the reversed scan's ``∂params (3 arrays)`` on JAX 0.10, whose extra
    residual row makes the row 1,083 px), which must be the next ``n`` of ``names``, every
    one a leaf of that argument (so a group hides no name but says whose leaves it holds)."""
    out: list[str] = []
    for label in drawn:
        group = GROUP.match(label)
        if group is None:
            out.append(label)
            continue
        leaves = names[len(out) : len(out) + int(group["n"])]
        root = re.escape(group["root"])
        assert len(leaves) == int(group["n"]), (label, leaves)
        assert all(re.match(rf"{root}[\[.]", leaf) for leaf in leaves), (label, leaves)
        out += leaves
    return out


def test_as_leaves_reads_a_group_only_as_its_own_arguments_leaves():
    names = ["x", "∂params['W']", "∂params['b']", "∂h"]
    assert as_leaves(["x", "∂params (2 arrays)", "∂h"], names) == names
    with pytest.raises(AssertionError):  # a group standing for another argument's leaves
        as_leaves(["x", "∂h (2 arrays)", "∂h"], names)
    with pytest.raises(AssertionError):  # more leaves than the row has
        as_leaves(["x", "∂params (4 arrays)"], names)
    assert as_leaves(["x", "in1", "∂h"], names) != names  # a placeholder stays one


def test_the_rnn_gradients_loops_are_named_after_the_program():
    """The reversed scan's ports: accumulators ∂W for the closed-over parameters, ∂h for
    the carry, ∂ys for the stacked output, residual rows named after the forward values
    they keep (h, 1 - h²); the forward scan's carry, stacked outputs and residuals."""
    params, xs = _rnn_args()
    view = _opened(jaxlab.jaxpr_graph(rnn, params, xs, grad=True))
    ports = {}
    for n in view.nodes:
        if n.kind == m.PORT and n.cluster is not None:
            ports.setdefault(n.cluster, []).append(n.label)
    forward, backward = (c.id for c in view.clusters if c.primitive == "scan")
    # JAX 0.12 keeps 1 - h² for tanh's derivative; 0.10 keeps h and 1.0 - h.
    residuals = (["stacked h", "stacked 1 - h²"], ["stacked h", "stacked h", "stacked 1.0 - h"])
    assert ports[forward][7:] in residuals
    rows = [r.removeprefix("stacked ") for r in ports[forward][7:]]
    fwd = ["params['W']", "params['U']", "params['b']", "h", "x", "h", "stacked ys"]
    assert as_leaves(ports[forward][:7], fwd) == fwd
    bwd = [
        "params['W']", "∂params['W']", "∂params['U']", "∂params['b']", "∂h", "∂ys",
        *rows[:1], "xs", *rows[1:],
        "∂params['W']", "∂params['U']", "∂params['b']", "∂h",
    ]  # fmt: skip
    assert as_leaves(ports[backward], bwd) == bwd
    inside = {n.label for n in view.nodes if n.cluster == forward and n.kind == m.EQUATION}
    assert "h @ params['W']" in inside  # (and 1 - h² where JAX 0.12 computes it)
    # A port drawn for a whole argument names its leaves in its hover, in order
    for n in view.nodes:
        group = GROUP.match(n.label) if n.kind == m.PORT else None
        if group is not None:
            hovered = re.findall(r"(\S+\['\w+'\]) f32", n.params)
            assert len(hovered) == int(group["n"]), (n.label, n.params)
            assert all(h.startswith(group["root"] + "[") for h in hovered), (n.label, n.params)


def test_a_grouped_pytree_operand_is_named_by_its_leaf_path():
    params, x = _many_args()
    view = _opened(jaxlab.jaxpr_graph(many_params, params, x))
    matmuls = [n.label for n in view.nodes if n.primitive == "dot_general"]
    assert matmuls == ["x @ params[0]"] + [f"x @ params[{k}]" for k in range(1, 20)]


def prog_assigned(x, w):
    y = jax.lax.cond(x.sum() > 0, lambda v: jnp.tanh(v * w), lambda v: v * 2.0, x)
    a, b = jax.lax.cond(y.sum() > 0, lambda v: (v * w, v.sum()), lambda v: (-v, v.mean()), y)
    return (a**2).sum() + b * 3.0


def _cond_ports(graph: m.Graph) -> dict[str, list[str]]:
    """Each cond's ports (its branches' parameters and its results) by the cond's id."""
    view = _opened(graph)
    conds = {c.id for c in view.clusters if c.primitive == "cond"}
    ports: dict[str, list[str]] = {}
    for n in view.nodes:
        owner = n.id.split("/")[0]
        if n.kind == m.PORT and owner in conds and not n.id.endswith("index"):
            ports.setdefault(owner, []).append(n.label)
    return ports


def test_a_cond_gradients_cotangent_ports_are_named():
    """The backward cond's cotangents are ∂ of the forward cond's results: the value the
    function returns (∂cond_program), or what the assignment receiving the cond names
    (∂y, ∂a, ∂b); the forward cond's results are named the same way. They read
    '· f32[]' before."""
    x, w = jnp.ones((3, 4)) * 0.5, jnp.ones((4,)) * 0.3
    forward, backward = _cond_ports(jaxlab.jaxpr_graph(cond_program, x, w, grad=True)).values()
    assert forward[-1] == "cond_program" or forward[-2:] == ["cond_program", "w"]  # 0.10: w
    assert backward == ["w", "∂cond_program", "w", "∂cond_program", "∂cond_program/∂x"]
    ports = _cond_ports(jaxlab.jaxpr_graph(prog_assigned, x, w, grad=True))
    first_fwd, second_fwd, second_bwd, first_bwd = ports.values()
    assert "y" in first_fwd and [p for p in second_fwd if p in ("a", "b")] == ["a", "b"]
    # each backward branch's last parameters are its cotangents
    assert first_bwd.count("∂y") == 2 and "∂y" not in first_bwd[:1]
    assert second_bwd.count("∂a") == 2 and second_bwd.count("∂b") == 2
    for labels in (second_bwd, first_bwd):
        assert not [p for p in labels if p.startswith("∂") and "f32" in p]
