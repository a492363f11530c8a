"""Planted derivative rules: checks must be able to fail, so tests feed them a wrong rule.

``planted_sin(2.0)`` is ``jnp.sin`` whose ``custom_vjp`` rule doubles the derivative;
``planted_sin(1.0)`` is the right rule, for the same program with nothing planted::

    f = planted_sin(2.0)
    jax.grad(f)(0.3) == 2 * jnp.cos(0.3)
"""

import jax
import jax.numpy as jnp


def planted_sin(factor: float):
    """``sin`` with a custom VJP rule ``factor`` times the true derivative."""

    @jax.custom_vjp
    def s(a):
        return jnp.sin(a)

    s.defvjp(lambda a: (jnp.sin(a), jnp.cos(a)), lambda cos, g: (factor * cos * g,))
    return s
