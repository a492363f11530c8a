"""Gradients on programs written with libraries we did not write (diffrax, equinox, optax,
flax nnx), built from the reproductions of issue 9: the numbers equal JAX's, the check
passes where the gradient is right, and nothing is blamed on the user that plain JAX
accepts."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.autodiff.report import grad_report
from jaxlab.autodiff.split import grad_split

eqx = pytest.importorskip("equinox")


# --------------------------------------------------------------------------- diffrax


@pytest.mark.slow
def test_diffrax_adaptive_solve_is_no_leak_and_equals_jax_grad():
    diffrax = pytest.importorskip("diffrax")

    def final(y0):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: -y),
            diffrax.Dopri5(),
            0.0,
            1.0,
            0.1,
            y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-5),
        )
        return solution.ys[-1].sum()

    y0 = jnp.array([1.0, 2.0])
    r = grad_report(final, y0, check=True)  # equinox's caching made this a "leak" once
    np.testing.assert_allclose(r.grad, jax.grad(final)(y0), rtol=1e-6)
    np.testing.assert_allclose(r.grad, [math.exp(-1.0)] * 2, rtol=1e-4)  # y(1) = y0 e^-1
    assert r.check.passed and r.check.dtype == "float32"


# --------------------------------------------------------------------------- equinox


class _CNN(eqx.Module):
    """The shape of equinox's MNIST CNN, small: conv, relu, max-pool (init = -inf), linear."""

    conv: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    linear: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 2, 3, key=k1)
        self.pool = eqx.nn.MaxPool2d(2, 2)
        self.linear = eqx.nn.Linear(2 * 3 * 3, 1, key=k2)

    def __call__(self, x):
        h = self.pool(jax.nn.relu(self.conv(x)))
        return self.linear(h.reshape(-1))[0]


def _cnn_loss(model, image):
    return model(image) ** 2


@pytest.fixture(scope="module")
def cnn():
    return _CNN(jax.random.key(1)), jax.random.normal(jax.random.key(2), (1, 8, 8))


def test_cnn_gradient_equals_filter_grad_and_holds_the_pool_init_fixed(cnn):
    model, image = cnn
    r = grad_report(_cnn_loss, model, image, check=True)
    want = eqx.filter_grad(_cnn_loss)(model, image)
    got_leaves = jax.tree.leaves(eqx.filter(r.grad, eqx.is_array))
    want_leaves = jax.tree.leaves(eqx.filter(want, eqx.is_array))
    assert len(got_leaves) == len(want_leaves) == 4  # conv and linear weight and bias
    for got, expected in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert r.grad.pool.init is None  # the Python float -inf: a setting, not a parameter
    assert "model.pool.init" in r.fixed
    assert any("held fixed" in n and "model.pool.init" in n for n in r.notes)
    assert r.check.passed and np.isfinite(r.check.max_error)


def test_cnn_check_with_the_float32_weights_held_fixed(cnn):
    # Differentiating the image: the conv's float32 weight is held fixed beside it (a
    # float64 check once met it with float64 inputs and raised a dtype TypeError).
    model, image = cnn
    r = grad_report(_cnn_loss, model, image, argnums=1, check=True)
    np.testing.assert_allclose(r.grad, jax.grad(_cnn_loss, argnums=1)(model, image), rtol=1e-5)
    assert r.check.passed and r.check.dtype == "float32"


def test_cnn_graph_and_split_skip_the_python_float(cnn):
    model, image = cnn
    r = grad_report(_cnn_loss, model, image, graph=True)
    assert r.graph is not None and r.graph.grad
    split = grad_split(_cnn_loss, model, image)
    flat = split.apply_transposed()
    assert len(flat) == 4  # one cotangent per float array, none for the pool's -inf
    want = jax.tree.leaves(eqx.filter(eqx.filter_grad(_cnn_loss)(model, image), eqx.is_array))
    for got, expected in zip(flat, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_dropout_module_with_a_fixed_key_passes_the_check():
    dropout = eqx.nn.Dropout(p=0.5)  # p: a Python float beside no array: not an argument
    key = jax.random.key(3)

    def loss(w, x):
        return jnp.sum(jnp.tanh(dropout(x * w, key=key)) ** 2)

    w, x = jnp.linspace(0.2, 1.0, 6), jnp.linspace(-1.0, 1.0, 6)
    r = grad_report(loss, w, x, check=True)
    np.testing.assert_allclose(r.grad, jax.grad(loss)(w, x), rtol=1e-6)
    assert r.check.passed and not jax.config.read("jax_enable_x64")


# --------------------------------------------------------------------------- optax, flax


def test_optax_loss_gradient_and_check():
    optax = pytest.importorskip("optax")
    logits = jnp.array([[0.3, -1.2, 2.0], [1.0, 0.1, -0.4]])
    labels = jnp.array([2, 0])

    def loss(z):
        return optax.softmax_cross_entropy_with_integer_labels(z, labels).mean()

    r = grad_report(loss, logits, check=True)
    np.testing.assert_allclose(r.grad, jax.grad(loss)(logits), rtol=1e-6)
    assert r.check.passed


def test_flax_nnx_linear_gradient_and_check():
    nnx = pytest.importorskip("flax.nnx")
    layer = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(layer, nnx.Param)
    x = jnp.array([[1.0, -2.0, 0.5]])

    def loss(params):
        return jnp.sum(nnx.merge(graphdef, params)(x) ** 2)

    r = grad_report(loss, params, check=True)
    want = jax.grad(loss)(params)
    for got, expected in zip(jax.tree.leaves(r.grad), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert r.check.passed
