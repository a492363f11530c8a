"""Fit: an optax optimiser from the sliders' current values, through the simulation,
toward ``target=`` (with the user's ``loss=``, else the mean squared difference).

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
import optax

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
        self.optimiser = optax.adam(learning_rate)
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
        u = jnp.clip(optax.apply_updates(u, updates), 0.0, 1.0)
        return u, state, value

    def step(
        self, u: Any, state: Any, arrays: Sequence[Any], statics: tuple[Any, ...]
    ) -> tuple[Any, Any, float]:
        u, state, value = self._step(u, state, list(arrays), statics, self.target)
        return u, state, float(value)
