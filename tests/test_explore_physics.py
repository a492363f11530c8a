"""jaxlab.explore on programs jaxlab did not write (issue 35): a diffrax ODE solve, an
equinox model against one scalar hyper-parameter, and a jax-md-style Lennard-Jones
lattice energy against the lattice constant. Each derivative is checked against central
differences of the same program in float64, or against a closed form."""

from __future__ import annotations

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from jaxlab.explore import explore


def central(fn, x, h=1e-5):
    with jax.enable_x64(True):
        return (float(fn(jnp.float64(x + h))) - float(fn(jnp.float64(x - h)))) / (2 * h)


def decay_at_one(rate=0.7, y0=2.0):
    """dy/dt = -rate y solved by diffrax (Tsit5, adaptive steps), read at t = 1."""
    term = diffrax.ODETerm(lambda t, y, args: -args * y)
    solution = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        t0=0.0,
        t1=1.0,
        dt0=0.05,
        y0=y0,
        args=rate,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-7),
    )
    return solution.ys[0]


def test_diffrax_solve_sensitivity_is_the_analytic_one():
    view = explore(decay_at_one, rate=(0.1, 3.0), y0=2.0)
    view.set(rate=1.3)
    # y(1) = y0 exp(-rate): d/d rate = -y0 exp(-rate), d/d y0 = exp(-rate)
    assert float(view.output) == pytest.approx(2.0 * math.exp(-1.3), rel=1e-5)
    assert float(view.sensitivity["rate"]) == pytest.approx(-2.0 * math.exp(-1.3), rel=1e-4)
    assert float(view.sensitivity["y0"]) == pytest.approx(math.exp(-1.3), rel=1e-4)
    # diffrax's default adjoint is a custom_vjp: forward mode refused, reverse mode said
    assert any("reverse mode" in n for n in view.frame()["notes"])
    assert view.frame()["derivative_words"].startswith("d decay_at_one / d rate = -0.545")
    for i in range(20):
        view.move("rate", 0.2 + 0.1 * i, seq=i)
    assert view.compiles == 1


class Smoother(eqx.Module):
    """A fixed random MLP whose input is scaled by a temperature."""

    mlp: eqx.nn.MLP

    def __call__(self, x, temperature):
        return jax.vmap(lambda xi: self.mlp(xi[None] / temperature)[0])(x)


def test_equinox_model_output_against_a_hyper_parameter():
    model = Smoother(eqx.nn.MLP(1, 1, 16, 2, activation=jnp.tanh, key=jax.random.key(0)))
    xs = jnp.linspace(-1.0, 1.0, 32)

    def mean_response(model, temperature=1.0):
        return jnp.mean(model(xs, temperature))

    view = explore(mean_response, model, temperature=(0.2, 5.0))
    kinds = {c.name: c.kind for c in view.layout.controls}
    assert kinds == {"model": "fixed", "temperature": "float"}
    assert any("held fixed: model (Smoother" in n for n in view.frame()["notes"])
    view.set(temperature=0.7)
    fd = central(lambda t: mean_response(model, t), 0.7)
    assert float(view.sensitivity["temperature"]) == pytest.approx(fd, rel=2e-3, abs=1e-5)
    view.set(temperature=2.0)
    assert view.compiles == 1


class Tempered(eqx.Module):
    w: jax.Array
    temperature: float

    def __call__(self, x):
        return jnp.sum(jnp.tanh(self.w * x / self.temperature))


def test_an_equinox_modules_float_field_is_a_slider_by_its_path():
    def response(model, x=1.0):
        return model(x)

    view = explore(response, Tempered(jnp.arange(3.0), 2.0), leaves=True)
    kinds = {c.name: c.kind for c in view.layout.controls}
    assert kinds == {"model.temperature": "float", "model.w": "fixed", "x": "float"}
    assert "held fixed: model.w (f32[3])" in view.frame()["notes"]
    view.set(**{"model.temperature": 1.5})
    fd = central(lambda t: response(Tempered(jnp.arange(3.0), t)), 1.5)
    assert float(view.sensitivity["model.temperature"]) == pytest.approx(fd, rel=2e-3)


def lattice_energy(a=1.12, epsilon=1.0, sigma=1.0, cells=3):
    """The Lennard-Jones energy per atom of a simple cubic lattice of side ``cells`` with
    lattice constant ``a``, periodic. jax-md is not installed here, so this is written in
    plain jax.numpy the way jax_md.energy.lennard_jones_pair does it: a periodic
    displacement (space.periodic: dR - side * round(dR / side)), all pairs' distances,
    the pair energy 4 eps ((s/r)^12 - (s/r)^6) summed over pairs with the self-pair masked
    out (smap.pair's mask), halved for double counting."""
    side = a * cells
    grid = jnp.arange(cells) * a
    positions = jnp.stack(jnp.meshgrid(grid, grid, grid, indexing="ij"), -1).reshape(-1, 3)
    dr = positions[:, None, :] - positions[None, :, :]
    dr = dr - side * jnp.round(dr / side)
    r2 = jnp.sum(dr**2, axis=-1)
    n = positions.shape[0]
    self_pair = jnp.eye(n, dtype=bool)
    safe = jnp.where(self_pair, 1.0, r2)  # the double-where: no 0 ** -6 on the diagonal
    s6 = (sigma**2 / safe) ** 3
    pair = jnp.where(self_pair, 0.0, 4 * epsilon * (s6**2 - s6))
    return 0.5 * jnp.sum(pair) / n


def test_lennard_jones_energy_against_the_lattice_constant():
    view = explore(lattice_energy, a=(0.95, 1.6), epsilon=1.0, sigma=1.0, cells=3)
    assert view.layout.control("cells").kind == "static"
    view.set(a=1.2)

    # nearest neighbours only in a 3-cell periodic box: 6 per atom at distance a,
    # 12 at a sqrt 2, 8 at a sqrt 3 (each seen once in the minimum image)
    def closed_form(a):
        total = 0.0
        for count, r in ((6, a), (12, a * math.sqrt(2)), (8, a * math.sqrt(3))):
            total += count * 4 * ((1 / r) ** 12 - (1 / r) ** 6)
        return total / 2

    assert float(view.output) == pytest.approx(closed_form(1.2), rel=1e-4)
    h = 1e-6
    slope = (closed_form(1.2 + h) - closed_form(1.2 - h)) / (2 * h)
    assert float(view.sensitivity["a"]) == pytest.approx(slope, rel=1e-3)
    # the minimum of the energy: where the sweep's slope changes sign
    s = view.sweep("a", n=64)
    crossing = [
        (float(s.values[i]), float(s.values[i + 1]))
        for i in range(63)
        if s.slopes[i] < 0 <= s.slopes[i + 1]
    ]
    assert len(crossing) == 1
    best = crossing[0][0]
    assert closed_form(best) <= closed_form(best - 0.05) and closed_form(best) <= closed_form(
        best + 0.1
    )
    view.set(cells=4)  # a static: compiles again, and says so
    assert view.compiles_by["evaluate"] == 2
    assert any("cells = 4 (was 3): compiled again" in n for n in view.frame()["notes"])
