"""jaxlab.explore on programs jaxlab did not write (issue 35): a diffrax ODE solve, an
equinox model against one scalar hyper-parameter, jax-md's Lennard-Jones lattice energy
against the lattice constant, and a numpyro model's log density against its parameters.
Each derivative is checked against central differences of the same program in float64,
or against a closed form."""

from __future__ import annotations

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpyro
import pytest
from numpyro import distributions as dist
from numpyro.infer.util import log_density

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


@pytest.mark.slow  # a diffrax solve: 17-30 s under load; once per `make test` (Python 3.12)
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
    """jax-md's Lennard-Jones energy per atom of a simple cubic lattice of side ``cells``
    with lattice constant ``a``, periodic: ``space.periodic`` over the box ``a * cells``
    and ``energy.lennard_jones_pair`` (its smooth cutoff moved past the lattice's farthest
    minimum image, a sqrt 3 <= 2.8 sigma, so that the closed form below is exact). (jax-md
    is imported here: at import it compiles about 200 programs, 7 s of every collection.)"""
    from jax_md import energy, space

    side = a * cells
    displacement, _ = space.periodic(side)
    grid = jnp.arange(cells) * a
    positions = jnp.stack(jnp.meshgrid(grid, grid, grid, indexing="ij"), -1).reshape(-1, 3)
    pair_energy = energy.lennard_jones_pair(
        displacement, sigma=sigma, epsilon=epsilon, r_onset=3.0, r_cutoff=3.5
    )
    return pair_energy(positions) / positions.shape[0]


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


DATA = jnp.array([1.3, 0.2, 2.1, 0.9, 1.7, 1.1])


def normal_model(data):
    """A numpyro model: a Normal(mu, sigma) likelihood of the data."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
    with numpyro.plate("n", data.shape[0]):
        numpyro.sample("obs", dist.Normal(mu, sigma), obs=data)


def log_joint(mu=1.0, sigma=0.8):
    """numpyro's own log density of the model at (mu, sigma): priors plus likelihood."""
    density, _ = log_density(normal_model, (DATA,), {}, {"mu": mu, "sigma": sigma})
    return density


def test_numpyro_log_density_against_its_parameters():
    view = explore(log_joint, mu=(-1.0, 3.0), sigma=(0.2, 3.0))
    view.set(mu=1.4, sigma=0.7)
    n, resid = DATA.shape[0], DATA - 1.4
    # d/dmu: the likelihood's sum(x - mu) / sigma^2 and the Normal(0, 10) prior's -mu / 100
    dmu = float(jnp.sum(resid)) / 0.7**2 - 1.4 / 100
    # d/dsigma: -n / sigma + sum((x - mu)^2) / sigma^3 and the HalfNormal(5) prior's
    # -sigma / 25
    dsigma = -n / 0.7 + float(jnp.sum(resid**2)) / 0.7**3 - 0.7 / 25
    assert float(view.sensitivity["mu"]) == pytest.approx(dmu, rel=1e-4)
    assert float(view.sensitivity["sigma"]) == pytest.approx(dsigma, rel=1e-4)
    assert float(view.sensitivity["sigma"]) == pytest.approx(
        central(lambda s: log_joint(1.4, s), 0.7), rel=1e-4
    )
    assert view.compiles_by["evaluate"] == 1
