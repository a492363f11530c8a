"""``--check`` verdicts on physics (issue 22): energies that are nothing like a test
function. The Ising energy is a cancelled sum whose rounding is that of its terms, not of
its value; a Lennard-Jones energy with a nearly overlapping pair changes on a scale far
shorter than the argument's. Right derivatives must pass (or be inconclusive), never FAIL
and never be blamed on a kink; planted wrong rules in the same energies must still FAIL.
The Lennard-Jones energy is jax-md's own."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import grad_report
from jaxlab.autodiff import differences as fd
from jaxlab.autodiff.noise import ecnoise, evaluation_noise

BOX = (256 / 0.8) ** (1 / 3)  # 256 particles at number density 0.8, as jax-md's examples


def ising(s):
    return -jnp.sum(s * (jnp.roll(s, 1, 0) + jnp.roll(s, 1, 1)))


def ising_gradient(s):
    """∂E/∂s: minus the sum of the four neighbours, an integer on ±1 spins."""
    return -(jnp.roll(s, 1, 0) + jnp.roll(s, -1, 0) + jnp.roll(s, 1, 1) + jnp.roll(s, -1, 1))


def lennard_jones(pos, box=BOX, r_onset=2.0, r_cutoff=2.5):
    """jax-md's own ``energy.lennard_jones_pair`` (σ = ε = 1, its multiplicative isotropic
    cutoff from ``r_onset`` to ``r_cutoff``) over ``space.periodic(box)``. (jax-md is
    imported here: at import it compiles about 200 programs, 7 s of every collection.)"""
    from jax_md import energy, space

    displacement, _ = space.periodic(box)
    return energy.lennard_jones_pair(displacement, r_onset=r_onset, r_cutoff=r_cutoff)(pos)


def spins(n, seed):
    return jnp.asarray(np.random.default_rng(seed).choice([-1.0, 1.0], size=(n, n)), jnp.float32)


def random_particles(seed, overlap=0.0133):
    """256 particles placed at random, one pair nearly overlapping (E ≈ 1e23)."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0.0, BOX, (256, 3))
    pos[1] = pos[0] + rng.normal(size=3) * overlap / np.sqrt(3)
    return jnp.asarray(pos, jnp.float32)


def jittered_lattice(seed=0):
    rng = np.random.default_rng(seed)
    cells = np.stack(np.meshgrid(*[np.arange(7)] * 3, indexing="ij"), -1).reshape(-1, 3)[:256]
    return jnp.asarray(cells * (BOX / 7) + 0.02 * rng.standard_normal(cells.shape), jnp.float32)


def scaled_rule(factor):
    """The identity with a custom_jvp ``factor`` times too large: a planted wrong rule."""

    @jax.custom_jvp
    def planted(e):
        return e

    @planted.defjvp
    def _(primals, tangents):
        return planted(primals[0]), factor * tangents[0]

    return planted


# --------------------------------------------------------------------------- Ising


# Lattices whose energy is near 0 (a sum of 2·n² terms of size 1 that cancels): before
# the noise was measured, these FAILED with errors up to 2.3e-2 (32×32) and 3.5e-3 (8×8).
@pytest.mark.parametrize(("n", "seed"), [(8, 11), (8, 38), (32, 26), (32, 65), (32, 0)])
def test_ising_energy_exact_gradient_is_never_failed(n, seed):
    s = spins(n, seed)
    r = grad_report(ising, s, check=True)
    np.testing.assert_array_equal(r.grad, ising_gradient(s))  # exact, integer
    assert not r.check.failed and not r.check.kink
    assert r.check.passed or r.check.inconclusive
    assert "FAILED" not in r.check.text()


def test_a_wrong_rule_in_the_ising_energy_still_fails():
    s = spins(32, 26)
    r = grad_report(lambda s: scaled_rule(1.5)(ising(s)), s, check=True)
    np.testing.assert_array_equal(r.grad, 1.5 * ising_gradient(s))
    assert r.check.failed and not r.check.kink
    assert r.check.max_error == pytest.approx(1 / 3, abs=0.02)


def test_measured_noise_agrees_with_the_float32_rounding_against_float64():
    """The noise estimate against an independent reference: the spread of the float32
    energy minus the float64 energy at the same nearby points."""
    s = spins(32, 26)
    diff, rng = [[s]], np.random.default_rng(3)
    direction = fd.unit_direction(rng, diff, 0)
    f0 = fd.flat(ising(s))
    noise = evaluation_noise(lambda xs: ising(xs[0][0]), diff, direction, 1e-4, f0)
    assert noise.found
    points = [np.asarray(s) + 1e-3 * rng.standard_normal(s.shape) for _ in range(40)]
    points32 = [p.astype(np.float32) for p in points]
    errors = []
    with jax.enable_x64(True):
        for p in points32:
            exact = float(ising(jnp.asarray(p, jnp.float64)))
            errors.append(float(ising(jnp.asarray(p, jnp.float32))) - exact)
    spread = float(np.std(errors))
    assert spread / 4 < noise.sigma < 4 * spread
    # ... and it is the terms' rounding, far above the value's: |E| ε is 0 here.
    assert noise.sigma > 100 * abs(float(f0[0].real)) * 1.2e-7


def test_ecnoise_reads_a_known_noise_level_and_says_when_it_cannot():
    rng = np.random.default_rng(0)
    t = np.linspace(-4e-3, 4e-3, 9)[:, None]
    verdict, sigma = ecnoise(np.exp(t) + 1e-7 * rng.standard_normal((9, 1)))
    assert verdict == "found" and 3e-8 < sigma < 3e-7
    assert ecnoise(np.ones((9, 1)))[0] == "too small"  # below the resolution
    assert ecnoise(np.exp(100 * t))[0] == "too large"  # the smooth part still shows


# --------------------------------------------------------------------------- Lennard-Jones


# Seeds whose closest pair made the fixed step (4e-2) longer than the pair's distance:
# the check FAILED with errors 0.4-1.1 and blamed a kink.
@pytest.mark.parametrize("seed", [0, 1, 5])
def test_lennard_jones_with_a_nearly_overlapping_pair_passes_without_a_kink(seed):
    pos = random_particles(seed)
    r = grad_report(lennard_jones, pos, check=True)
    assert float(r.value) > 1e21  # the overlapping pair dominates
    assert r.check.passed and not r.check.kink
    assert "kink" not in r.check.text()
    # The gradient itself against float64 (an independent reference).
    with jax.enable_x64(True):
        exact = np.asarray(jax.grad(lennard_jones)(jnp.asarray(pos, jnp.float64)))
    np.testing.assert_allclose(r.grad, exact, rtol=1e-3, atol=1e-6 * np.abs(exact).max())


def test_lennard_jones_on_a_jittered_lattice_still_passes():
    r = grad_report(lennard_jones, jittered_lattice(), check=True)
    assert r.check.passed and r.check.max_error < 1e-3


def test_a_wrong_rule_in_the_overlapping_energy_still_fails():
    pos = random_particles(0)
    r = grad_report(lambda p: scaled_rule(1.5)(lennard_jones(p)), pos, check=True)
    assert r.check.failed and not r.check.kink
    assert r.check.max_error == pytest.approx(1 / 3, abs=0.02)


# --------------------------------------------------------------------------- planted rules


def test_a_wrong_rule_in_a_scan_body_still_fails():
    """A custom_jvp 1.5× too large inside a lax.scan body: each step's derivative is
    1.5× too large, so the whole gradient is 1.5ⁿ-fold off, and the check says FAILED;
    the same scan with the right rule passes."""

    def chain(factor):
        rule = scaled_rule(factor)

        def f(x):
            def body(c, _):
                return jnp.sin(rule(c)) * 0.9 + 0.1, None

            c, _ = jax.lax.scan(body, x, None, length=3)
            return jnp.sum(c)

        return f

    x = jnp.array([0.3, 1.1, -0.7])
    wrong = grad_report(chain(1.5), x, check=True)
    np.testing.assert_allclose(wrong.grad, 1.5**3 * jax.grad(chain(1.0))(x), rtol=1e-5)
    assert wrong.check.failed and not wrong.check.kink
    assert wrong.check.max_error == pytest.approx(1 - 1 / 1.5**3, abs=0.02)
    right = grad_report(chain(1.0), x, check=True)
    assert right.check.passed and right.check.max_error < 1e-3


def test_ising_hessian_check_is_never_failed_and_a_planted_hessian_still_fails():
    """Second differences of a cancelled sum: the measured rounding keeps a right Hessian
    from FAILING (16×16 lattices FAILED before); a wrong rule still fails."""
    s = spins(16, 3)
    r = grad_report(ising, s, hessian=True, check=True)
    assert r.check.order == 2 and not r.check.failed
    wrong = grad_report(
        lambda x: jnp.sum(jnp.sin(scaled_rule(1.5)(x))), s[0], hessian=True, check=True
    )
    assert wrong.check.failed
