"""Programs the finite-difference check is calibrated on (issue 33): small versions of what
users differentiate, in float32 as they call them, from the libraries they use. Each
builder returns ``(f, args)`` for ``grad_report(f, *args, check=True)``.

``CORRECT`` holds programs whose derivative is JAX's own (right, or at a kink JAX's
convention): the check must pass them or say why it cannot decide, never FAIL.
``planted(rule)`` puts a wrong derivative rule (:func:`wrong_rule`) into each family, and
the check must FAIL every one. The relu, batch-norm, spline, graph and flow programs are
built like those that were called FAILED in issue 33 (steps crossing relu kinks and knots);
the solver one raised ``CpuCallback error`` (the solve does not converge a step away).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Program = tuple[Callable[..., Any], tuple[Any, ...]]


def wrong_rule(kind: str) -> Callable[[Any], Any]:
    """``y ↦ y`` whose custom rule is off: ``"1%"``/``"10%"`` too large, ``"sign"`` flipped,
    ``"missing term"`` (the rule of ``y + y²/2`` written as if it were ``y``'s), or
    ``"right"`` (a custom rule that is correct, for the unplanted twin)."""
    if kind == "missing term":

        @jax.custom_jvp
        def half_square(y):
            return y + 0.5 * y**2

        half_square.defjvp(lambda p, t: (half_square(p[0]), t[0]))  # y·t left out
        return half_square
    factor = {"1%": 1.01, "10%": 1.1, "sign": -1.0, "right": 1.0}[kind]

    @jax.custom_vjp
    def planted(y):
        return y

    planted.defvjp(lambda y: (y, None), lambda _, g: (factor * g,))
    return planted


# --------------------------------------------------------------------------- networks


def conv_batchnorm_relu() -> Program:
    """A flax linen CNN: two 3×3 convolutions, each with BatchNorm (batch statistics, as in
    training) and relu, mean-pooled into 3 classes; cross-entropy of 4 images. The check
    called this FAILED (0.024 here; 0.37 in issue 33) with steps across relu kinks."""
    import flax.linen as nn

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(2):
                x = nn.relu(nn.BatchNorm(use_running_average=False)(nn.Conv(8, (3, 3))(x)))
            return nn.Dense(3)(x.mean((1, 2)))

    model, x = CNN(), jax.random.normal(jax.random.key(0), (4, 8, 8, 3))
    labels = jnp.array([0, 1, 2, 1])
    variables = jax.jit(model.init)(jax.random.key(1), x)  # one compile, not one per op

    def loss(params, x):
        out, _ = model.apply(
            {"params": params, "batch_stats": variables["batch_stats"]},
            x,
            mutable=["batch_stats"],
        )
        return -jnp.mean(jax.nn.log_softmax(out)[jnp.arange(4), labels])

    return loss, (variables["params"], x)


def equinox_relu_mlp() -> Program:
    """An equinox MLP (relu) regressing 16 points; the model is the argument."""
    import equinox as eqx

    model = eqx.nn.MLP(2, 1, 16, 2, activation=jax.nn.relu, key=jax.random.key(2))
    x = jax.random.normal(jax.random.key(3), (16, 2))
    y = jnp.sin(x[:, :1])

    def loss(model, x):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    return loss, (model, x)


def graph_network() -> Program:
    """Message passing with ``segment_sum``: three rounds of relu messages (hidden width
    32) on 32 nodes and 96 edges, node states through relu, squared error to a target.
    The check called this FAILED (3.2e-3 here; 0.020 in issue 33)."""
    rng = np.random.default_rng(2)
    senders, receivers = (jnp.asarray(rng.integers(0, 32, 96)) for _ in range(2))
    params = {
        "W1": jnp.asarray(rng.normal(size=(4, 32)) / 2, jnp.float32),
        "b1": jnp.asarray(rng.normal(size=(32,)) * 0.1, jnp.float32),
        "W2": jnp.asarray(rng.normal(size=(32, 4)) / np.sqrt(32), jnp.float32),
    }
    nodes = jnp.asarray(rng.normal(size=(32, 4)), jnp.float32)
    target = jnp.asarray(rng.normal(size=(32, 4)), jnp.float32)

    def loss(params, h):
        for _ in range(3):
            messages = jax.nn.relu(h[senders] @ params["W1"] + params["b1"]) @ params["W2"]
            h = jax.nn.relu(h + jax.ops.segment_sum(messages, receivers, 32))
        return jnp.mean((h - target) ** 2)

    return loss, (params, nodes)


# --------------------------------------------------------------------------- splines, flows


def linear_spline_trajectory() -> Program:
    """A piecewise-linear 2-D trajectory through 12 control points (``jnp.interp``), read
    at 200 times that are differentiated too (``argnums=(0, 1)``, :data:`OPTIONS`): kinks
    at every knot along the times. The check called this FAILED (7.5e-3 here; 0.0071 in
    issue 33) with steps of 0.16 across knots."""
    rng = np.random.default_rng(0)
    knots = jnp.linspace(0.0, 1.0, 12)
    control = jnp.asarray(rng.normal(size=(12, 2)), jnp.float32)
    times = jnp.asarray(np.sort(rng.uniform(0.0, 1.0, 200)), jnp.float32)

    def path_cost(control, times):
        x = jnp.interp(times, knots, control[:, 0])
        y = jnp.interp(times, knots, control[:, 1])
        return jnp.sum(jnp.diff(x) ** 2 + jnp.diff(y) ** 2) * 200 + jnp.mean(x * y)

    return path_cost, (control, times)


def cubic_spline_trajectory() -> Program:
    """A hand-written uniform cubic B-spline (knots at integers) through 6 control points
    in 2-D, its length-like energy at 30 parameter values that are differentiated too."""
    rng = np.random.default_rng(2)
    control = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
    ts = jnp.asarray(np.sort(rng.uniform(0.05, 2.95, 30)), jnp.float32)

    def point(control, t):
        i = jnp.clip(jnp.floor(t).astype(jnp.int32), 0, 2)
        u = t - i
        basis = (
            jnp.stack(
                [(1 - u) ** 3, 3 * u**3 - 6 * u**2 + 4, -3 * u**3 + 3 * u**2 + 3 * u + 1, u**3]
            )
            / 6
        )
        return basis @ jax.lax.dynamic_slice_in_dim(control, i, 4)

    def energy(control, ts):
        p = jax.vmap(point, (None, 0))(control, ts)
        return jnp.sum(jnp.diff(p, axis=0) ** 2) * 10 + jnp.sum(p[:, 0] * jnp.sin(p[:, 1]))

    return energy, (control, ts)


def coupling_flow_reverse_kl() -> Program:
    """A 2-D normalising flow of six affine coupling layers (width 32, scales through
    ``tanh``), its reverse KL to a narrow banana-shaped target from 256 fixed base
    samples. The check called this FAILED (0.11 here; 0.0024 in issue 33)."""
    rng = np.random.default_rng(0)
    params = [
        {k: jnp.asarray(rng.normal(size=s) * 1.5, jnp.float32) for k, s in
         (("W", (1, 32)), ("b", (32,)), ("Vs", (32, 1)), ("Vt", (32, 1)))}
        for _ in range(6)
    ]  # fmt: skip
    z = jnp.asarray(rng.normal(size=(256, 2)), jnp.float32)

    def reverse_kl(params):
        x, logdet = z, jnp.zeros(z.shape[0])
        for i, layer in enumerate(params):
            a, b = (0, 1) if i % 2 == 0 else (1, 0)
            h = jnp.tanh(x[:, a : a + 1] @ layer["W"] + layer["b"])
            s, t = jnp.tanh(h @ layer["Vs"])[:, 0], (h @ layer["Vt"])[:, 0]
            x = x.at[:, b].set(x[:, b] * jnp.exp(s) + t)
            logdet = logdet + s
        target = -0.5 * x[:, 0] ** 2 - 0.5 * (x[:, 1] - x[:, 0] ** 2) ** 2 / 0.1
        return jnp.mean(-0.5 * jnp.sum(z**2, axis=1) - logdet - target)

    return reverse_kl, (params,)


# --------------------------------------------------------------------------- solvers


def newton_root() -> Program:
    """optimistix Newton: the roots of ``tanh(y) + a y = 1``, a sum of their squares."""
    import optimistix as optx

    def loss(a):
        solver = optx.Newton(rtol=1e-6, atol=1e-6)
        sol = optx.root_find(lambda y, a: jnp.tanh(y) + a * y - 1.0, solver, jnp.zeros(3), a)
        return jnp.sum(sol.value**2)

    return loss, (jnp.array([0.5, 1.0, 2.0]),)


def newton_sqrt_near_zero() -> Program:
    """optimistix Newton for ``y² = a`` at ``a = 0.001``: a step of the check's first
    length (1e-2) makes ``a`` negative, where the solve cannot converge and equinox's
    error callback raises (``CpuCallback error``)."""
    import optimistix as optx

    def root(a):
        solver = optx.Newton(rtol=1e-6, atol=1e-6)
        sol = optx.root_find(lambda y, a: y**2 - a, solver, jnp.ones_like(a), a, max_steps=30)
        return jnp.sum(sol.value)

    return root, (jnp.array(0.001),)


def diffrax_decay() -> Program:
    """A short diffrax solve (Tsit5, fixed steps) of a damped oscillator; the final
    position as a function of the damping and the frequency."""
    import diffrax

    def final_position(theta):
        def field(t, y, theta):
            return jnp.stack([y[1], -(theta[1] ** 2) * y[0] - theta[0] * y[1]])

        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 2.0, 0.1, jnp.array([1.0, 0.0]),
            args=theta,
        )  # fmt: skip
        return sol.ys[-1, 0]

    return final_position, (jnp.array([0.3, 2.0]),)


# --------------------------------------------------------------------------- physics


def lennard_jones_cluster() -> Program:
    """16 particles on a jittered cubic lattice, their Lennard-Jones energy (σ = ε = 1)."""
    rng = np.random.default_rng(4)
    cells = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3)[:16]
    pos = jnp.asarray(cells * 1.12 + 0.03 * rng.standard_normal(cells.shape), jnp.float32)
    i, j = np.triu_indices(16, 1)

    def energy(pos):
        r2 = jnp.sum((pos[i] - pos[j]) ** 2, axis=-1)
        inv6 = (1.0 / r2) ** 3
        return jnp.sum(4.0 * (inv6**2 - inv6))

    return energy, (pos,)


def ising_cancelled_sum() -> Program:
    """The Ising energy of a 16×16 lattice of ±1 spins (relaxed to floats): a sum of 512
    terms of size 1 that cancels to a few units."""
    s = np.random.default_rng(5).choice([-1.0, 1.0], size=(16, 16))

    def energy(s):
        return -jnp.sum(s * (jnp.roll(s, 1, 0) + jnp.roll(s, 1, 1)))

    return energy, (jnp.asarray(s, jnp.float32),)


CORRECT: dict[str, Callable[[], Program]] = {
    "conv_batchnorm_relu": conv_batchnorm_relu,
    "equinox_relu_mlp": equinox_relu_mlp,
    "graph_network": graph_network,
    "linear_spline": linear_spline_trajectory,
    "cubic_spline": cubic_spline_trajectory,
    "coupling_flow": coupling_flow_reverse_kl,
    "newton_root": newton_root,
    "newton_sqrt_near_zero": newton_sqrt_near_zero,
    "diffrax_decay": diffrax_decay,
    "lennard_jones": lennard_jones_cluster,
    "ising": ising_cancelled_sum,
}


# grad_report's options per program (the spline's times are differentiated too).
OPTIONS: dict[str, dict[str, Any]] = {"linear_spline": {"argnums": (0, 1)}}


def planted(name: str, kind: str) -> Program:
    """Program ``name`` with the wrong rule ``kind`` applied to its output."""
    f, args = CORRECT[name]()
    rule = wrong_rule(kind)

    def with_rule(*a: Any) -> Any:
        return rule(f(*a))

    with_rule.__name__ = f"{name}_{kind.replace(' ', '_').replace('%', 'pc')}"
    return with_rule, args
