"""An array's figures (min, max, mean, std, NaN/Inf/zero counts), computed where it lives.

``device_stats`` runs one jitted reduction on the array's own devices and copies back eight
numbers, never the array; ``host_stats`` reduces a copy the view already made (a small
array drawn as a table) with NumPy. Both return the same ``ArrayStats``.

::

    device_stats(jnp.array([1.0, jnp.nan, 3.0])).words()
    # 'min 1, max 3, mean 2, std 1; 1 NaN, 0 zero'
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .record import ArrayStats


def _figures(x: Any) -> Any:
    """The reduction, traced by JAX: one vector of figures (float32, or float64 under x64)."""
    import jax.numpy as jnp

    kind = x.dtype.kind if hasattr(x.dtype, "kind") else "f"
    zero = jnp.sum(x == 0)
    if jnp.iscomplexobj(x):
        x = jnp.abs(x)
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.int32)
    wide = jnp.result_type(float)  # float64 when x64 is on
    v = x.astype(wide)
    nan = jnp.sum(jnp.isnan(v))
    inf = jnp.sum(jnp.isinf(v))
    finite = jnp.isfinite(v)
    count = jnp.sum(finite)
    lo = jnp.min(jnp.where(finite, v, jnp.inf))
    hi = jnp.max(jnp.where(finite, v, -jnp.inf))
    if kind in "iub":  # exact extremes for integers (a float32 loses them past 2**24)
        lo = jnp.min(x).astype(wide) if x.size else lo
        hi = jnp.max(x).astype(wide) if x.size else hi
    mean = jnp.sum(jnp.where(finite, v, 0)) / jnp.maximum(count, 1)
    # two passes, as NumPy does: a one-pass sum of squares loses the std of offset data
    var = jnp.sum(jnp.where(finite, (v - mean) ** 2, 0)) / jnp.maximum(count, 1)
    # counts stay integers (a float32 count is exact only up to 2**24)
    counts = jnp.stack([nan, inf, zero, count]).astype(jnp.int32)
    return counts, jnp.stack([lo, hi, mean, jnp.sqrt(var)])


@functools.cache
def _jitted() -> Any:
    import jax

    return jax.jit(_figures)


def device_stats(x: Any) -> ArrayStats:
    """The figures of a live ``jax.Array``, reduced on its devices (eight numbers copied)."""
    import jax

    from ..compile.capture import jaxlab_work

    if x.size == 0:
        return _empty("device")
    with jaxlab_work():
        counts, floats = jax.device_get(_jitted()(x))
    return _from_figures(int(x.size), np.asarray(counts), np.asarray(floats), "device")


def host_stats(values: np.ndarray) -> ArrayStats:
    """The same figures over a host copy, with NumPy."""
    a = np.asarray(values)
    if a.size == 0:
        return _empty("host copy")
    zero = int(np.count_nonzero(a == 0))
    if np.iscomplexobj(a):
        a = np.abs(a)
    kind = a.dtype.kind
    v = a.astype(np.float64)
    finite = np.isfinite(v)
    count = int(finite.sum())
    fv = v[finite]
    if kind in "iub":
        lo, hi = float(a.min()), float(a.max())
    else:
        lo = float(np.min(fv)) if count else float("inf")
        hi = float(np.max(fv)) if count else float("-inf")
    mean = float(fv.mean()) if count else 0.0
    std = float(fv.std()) if count else 0.0
    counts = np.array([np.isnan(v).sum(), np.isinf(v).sum(), zero, count])
    return _from_figures(int(a.size), counts, np.array([lo, hi, mean, std]), "host copy")


def _empty(where: str) -> ArrayStats:
    return ArrayStats(0, 0, 0, 0, 0, None, None, None, None, where)


def _from_figures(size: int, c: np.ndarray, f: np.ndarray, where: str) -> ArrayStats:
    nan, inf, zero, count = (int(v) for v in c)
    some = count > 0
    return ArrayStats(
        size=size,
        nan=nan,
        inf=inf,
        zero=zero,
        finite=count,
        min=float(f[0]) if some else None,
        max=float(f[1]) if some else None,
        mean=float(f[2]) if some else None,
        std=float(f[3]) if some else None,
        computed_on=where,
    )
