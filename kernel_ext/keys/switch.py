"""What key tracking wraps, and when it stands still: ``jax.random``'s functions by kind,
and :func:`paused` (what jaxlab itself traces or calls is not the user's).

Below ``track`` (the switch itself, which wraps these functions and reads the pause on
every call), ``flow`` (which names a sampler's own ``jit`` and traces the user's function
paused) and ``jit`` (which reads a traced jaxpr's flow paused).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

CREATORS = ("key", "PRNGKey", "wrap_key_data")
DERIVERS = ("split", "fold_in", "clone")
# Every public sampler of jax.random: each consumes the key it is given (its first argument).
SAMPLERS = (
    "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "dirichlet", "double_sided_maxwell", "exponential", "f", "gamma",
    "generalized_normal", "geometric", "gumbel", "laplace", "loggamma", "logistic",
    "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal",
    "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "t",
    "triangular", "truncated_normal", "uniform", "wald", "weibull_min",
)  # fmt: skip


class _Switch(threading.local):
    paused = 0  # jaxlab's own traces (key_flow) are not the user's


SWITCH = _Switch()


@contextmanager
def paused() -> Iterator[None]:
    """Nothing in this block is recorded (jaxlab tracing the user's function itself)."""
    SWITCH.paused += 1
    try:
        yield
    finally:
        SWITCH.paused -= 1
