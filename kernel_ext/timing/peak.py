"""This machine's peak: FLOP/s of a large matmul and bytes/s of a large elementwise op.

Measured once per session and backend (the first ``%bench`` that knows its FLOPs pays
about half a second on a CPU), then cached::

    p = machine_peak()
    p.flops_s, p.bytes_s          # e.g. 9.1e10, 1.2e10 on a two-core CPU

The figures are what JAX reaches here, not a datasheet's: a fraction of 1.0 means "as
fast as a well-shaped matmul (or a streaming copy) runs on this device".
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..compile.capture import jaxlab_work

# Sizes per platform: big enough to saturate the device, small enough to stay quick.
_MATMUL_N = {"cpu": 1024, "gpu": 8192, "tpu": 8192}
_STREAM_ELEMENTS = {"cpu": 1 << 24, "gpu": 1 << 28, "tpu": 1 << 28}
_TRIES = 5


@dataclass(frozen=True)
class Peak:
    """The best FLOP/s and bytes/s measured on the default device."""

    platform: str
    flops_s: float
    bytes_s: float
    matmul_n: int
    stream_bytes: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _best_seconds(fun: object, *args: jax.Array) -> float:
    best = float("inf")
    for _ in range(_TRIES):
        t0 = time.perf_counter()
        jax.block_until_ready(fun(*args))  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best


@functools.cache
def _measure(platform: str) -> Peak:
    n = _MATMUL_N.get(platform, 4096)
    size = _STREAM_ELEMENTS.get(platform, 1 << 26)
    with jaxlab_work():
        a = jnp.ones((n, n), jnp.float32)
        matmul = jax.jit(jnp.matmul).lower(a, a).compile()
        x = jnp.ones((size,), jnp.float32)
        stream = jax.jit(lambda v: v * 2.0 + 1.0).lower(x).compile()
        jax.block_until_ready((matmul(a, a), stream(x)))  # first runs: page in, warm caches
        matmul_s = _best_seconds(matmul, a, a)
        stream_s = _best_seconds(stream, x)
    moved = 2 * 4 * size  # read once, written once
    return Peak(platform, 2.0 * n**3 / matmul_s, moved / stream_s, n, moved)


def machine_peak() -> Peak:
    """The cached peak of the default backend (measured on the first call)."""
    return _measure(jax.default_backend())
