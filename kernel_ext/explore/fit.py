"""Fit: an optax optimiser from the sliders' current values, through the simulation,
toward ``target=`` (with the user's ``loss=``, else the mean squared difference).

The optimiser is ``optax.adam`` where optax is installed; else :class:`Adam`, the same
update written here (optax is no dependency of jaxlab: Binder's environment has none), so
the "fit" button works in every kernel.

The optimiser works in each slider's own unit coordinates (0 at ``lo``, 1 at ``hi``; a
log slider on ``log``), so one learning rate suits sliders of any scale, and each step is
kept inside the sliders' ranges. The step is one compiled call (``jax.value_and_grad``
and the optax update), traced once per set of ranges::

    fitter = Fitter(compiled, loss, target, lo, hi, log, mask, learning_rate=0.05)
    u, state = fitter.start(p)
    u, state, loss = fitter.step(u, state, arrays, statics)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .compiled import Compiled, is_float
from .controls import ExploreError


def mean_squared(output: Any, target: Any) -> Any:
    """The default loss: the mean squared difference, summed over the output's float
    leaves (``target`` shaped like the output, or like its only leaf)."""
    outs = [leaf for leaf in jax.tree_util.tree_leaves(output) if is_float(leaf)]
    targets = jax.tree_util.tree_leaves(target)
    if len(outs) != len(targets):
        raise ExploreError(
            f"target= has {len(targets)} arrays but the output has {len(outs)} float "
            "arrays: give a target shaped like the output, or loss=(output, target) -> scalar"
        )
    return sum(jnp.mean((o - t) ** 2) for o, t in zip(outs, targets, strict=True))


class Adam:
    """``optax.adam(learning_rate)``'s update (b1 0.9, b2 0.999, eps 1e-8, bias-corrected
    moments), for a kernel without optax: ``init(u)``, ``update(grad, state)``."""

    def __init__(self, learning_rate: float, b1: float = 0.9, b2: float = 0.999) -> None:
        self.learning_rate, self.b1, self.b2, self.eps = learning_rate, b1, b2, 1e-8

    def init(self, u: Any) -> tuple[Any, Any, Any]:
        return jnp.zeros_like(u), jnp.zeros_like(u), jnp.zeros((), jnp.int32)

    def update(self, grad: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        mu, nu, count = state
        count = count + 1
        mu = self.b1 * mu + (1 - self.b1) * grad
        nu = self.b2 * nu + (1 - self.b2) * grad**2
        mu_hat = mu / (1 - self.b1**count)
        nu_hat = nu / (1 - self.b2**count)
        return -self.learning_rate * mu_hat / (jnp.sqrt(nu_hat) + self.eps), (mu, nu, count)


def adam(learning_rate: float) -> Any:
    """optax's Adam, else :class:`Adam` (the same update) where optax is not installed."""
    try:
        import optax
    except ImportError:
        return Adam(learning_rate)
    return optax.adam(learning_rate)


class Fitter:
    """One compiled optimiser step for the given ranges and free sliders."""

    def __init__(
        self,
        compiled: Compiled,
        loss: Callable[[Any, Any], Any] | None,
        target: Any,
        lo: Sequence[float],
        hi: Sequence[float],
        log: Sequence[bool],
        free: Sequence[bool],
        learning_rate: float,
    ) -> None:
        self.compiled = compiled
        self.loss = loss or mean_squared
        self.target = jax.tree_util.tree_map(jnp.asarray, target)
        dtype = jnp.result_type(float)
        self.log = jnp.asarray(log)
        self.lo = jnp.where(self.log, jnp.log(jnp.asarray(lo, dtype)), jnp.asarray(lo, dtype))
        self.hi = jnp.where(self.log, jnp.log(jnp.asarray(hi, dtype)), jnp.asarray(hi, dtype))
        self.free = jnp.asarray(free, dtype)
        self.optimiser = adam(learning_rate)
        self._step = jax.jit(self._traced, static_argnums=(3,))

    def to_p(self, u: Any) -> Any:
        t = self.lo + u * (self.hi - self.lo)
        return jnp.where(self.log, jnp.exp(t), t)

    def to_u(self, p: Any) -> Any:
        t = jnp.where(self.log, jnp.log(jnp.maximum(p, 1e-30)), p)
        return (t - self.lo) / (self.hi - self.lo)

    def start(self, p: Any) -> tuple[Any, Any]:
        u = self.to_u(jnp.asarray(p))
        return u, self.optimiser.init(u)

    def _traced(
        self, u: Any, state: Any, arrays: Sequence[Any], statics: tuple[Any, ...], target: Any
    ) -> tuple[Any, Any, Any]:
        self.compiled.compiles["fit"] += 1

        def objective(v: Any) -> Any:
            out = self.compiled.user(self.to_p(v), arrays, statics)
            return jnp.asarray(self.loss(out, target)).sum()

        value, grad = jax.value_and_grad(objective)(u)
        updates, state = self.optimiser.update(grad * self.free, state, u)
        u = jnp.clip(u + updates, 0.0, 1.0)
        return u, state, value

    def step(
        self, u: Any, state: Any, arrays: Sequence[Any], statics: tuple[Any, ...]
    ) -> tuple[Any, Any, float]:
        u, state, value = self._step(u, state, list(arrays), statics, self.target)
        return u, state, float(value)
