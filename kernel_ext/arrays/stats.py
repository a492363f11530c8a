"""An array's figures (min, max, mean, std, NaN/Inf/zero counts), computed where it lives.

``device_stats`` runs jitted reductions on the array's own devices and copies back ten
numbers or fewer from each, never the array: the usual array's (every value finite) first,
then its zeros counted only where a value may be zero, or every figure again masked where
a NaN or an Inf is; ``host_stats`` reduces a copy the view already made (a small array
drawn as a table) with NumPy. Both return the same ``ArrayStats``.

::

    device_stats(jnp.array([1.0, jnp.nan, 3.0])).words()
    # 'min 1, max 3, mean 2, std 1; 1 NaN, 0 zero'
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .record import ArrayStats


def _count(mask: Any) -> Any:
    """How many elements of a boolean array are True, as an int32, counted in rows of 128
    (a uint8 each) then summed: exact, and about 2.5x faster on XLA's CPU backend than
    ``jnp.sum(mask)``, whose conversion to a wide integer per element does not vectorise."""
    import jax.numpy as jnp

    flat = mask.reshape(-1)
    whole = flat.size - flat.size % 128
    rows = flat[:whole].reshape(-1, 128).astype(jnp.uint8)
    bulk = jnp.sum(jnp.sum(rows, axis=1, dtype=jnp.uint8).astype(jnp.int32))
    return bulk + jnp.sum(flat[whole:], dtype=jnp.int32)


def _prepared(x: Any) -> tuple[Any, Any]:
    """``(x as reduced, x widened)``: complex as magnitudes, booleans as int32, the
    widened copy float32 (float64 under x64), fused into each reduction."""
    import jax.numpy as jnp

    if jnp.iscomplexobj(x):
        x = jnp.abs(x)
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.int32)
    return x, x.astype(jnp.result_type(float))


def _extremes(x: Any, lo: Any, hi: Any, wide: Any) -> tuple[Any, Any]:
    import jax.numpy as jnp

    if x.dtype.kind in "iub":  # exact extremes for integers (a float32 loses them past 2**24)
        return jnp.min(x).astype(wide), jnp.max(x).astype(wide)
    return lo, hi


def _finite_figures(x: Any) -> Any:
    """The reduction of the usual array, every value finite, traced by JAX: its counts
    (zeros not counted), its figures (float32, or float64 under x64), whether its sum is
    finite and whether a value may be zero.

    A finite sum means every value is finite (a NaN or an Inf makes the sum one), and
    then these figures are the array's; else ``_masked_figures`` reduces it again. The
    zeros are counted (``_zeros``) only where the least magnitude is not above zero.
    Each of those is a separate function, compiled only for an array that needs it:
    XLA's CPU backend runs a masked or counting reduction several times slower than a
    plain one, and compiles it slower too (a 10^8-element float32 field: this one 0.07 s
    of CPU, with the count 0.15 s, with the masked reduction behind a ``lax.cond`` 0.47 s),
    paid by every array of a new shape. A sum that overflows takes the masked path, which
    is exact either way.
    """
    import jax.numpy as jnp

    x, v = _prepared(x)
    total = jnp.sum(v)
    mean = total / v.size
    # two passes, as NumPy does: a one-pass sum of squares loses the std of offset data
    var = jnp.sum((v - mean) ** 2) / v.size
    lo, hi = _extremes(x, jnp.min(v), jnp.max(v), v.dtype)
    counts = jnp.stack([0, 0, 0, v.size]).astype(jnp.int32)
    # no value is zero when the least magnitude is above zero; taken in x's own dtype,
    # which ``x == 0`` compares in (XLA's CPU backend reads a subnormal float as zero;
    # an integer's magnitude that overflows is negative: counted)
    may_be_zero = ~(jnp.min(jnp.abs(x)) > 0)
    figures = jnp.stack([lo, hi, mean, jnp.sqrt(var)]).astype(v.dtype)
    return counts, figures, jnp.isfinite(total), may_be_zero


def _zeros(x: Any) -> Any:
    """How many values of ``x`` are zero (traced by JAX)."""
    return _count(x == 0)


def _masked_figures(x: Any) -> Any:
    """The reduction of an array holding a NaN or an Inf (or whose sum overflows): the
    figures of its finite values, and how many of each kind there are."""
    import jax.numpy as jnp

    zero = _count(x == 0)
    x, v = _prepared(x)
    nan = _count(jnp.isnan(v))
    inf = _count(jnp.isinf(v))
    finite = jnp.isfinite(v)
    count = _count(finite)
    lo, hi = _extremes(
        x,
        jnp.min(jnp.where(finite, v, jnp.inf)),
        jnp.max(jnp.where(finite, v, -jnp.inf)),
        v.dtype,
    )
    mean = jnp.sum(jnp.where(finite, v, 0)) / jnp.maximum(count, 1)
    var = jnp.sum(jnp.where(finite, (v - mean) ** 2, 0)) / jnp.maximum(count, 1)
    # counts stay integers (a float32 count is exact only up to 2**24)
    counts = jnp.stack([nan, inf, zero, count]).astype(jnp.int32)
    return counts, jnp.stack([lo, hi, mean, jnp.sqrt(var)]).astype(v.dtype)


_REDUCTIONS = {"finite": _finite_figures, "masked": _masked_figures, "zeros": _zeros}


@functools.cache
def _jitted(kind: str = "finite") -> Any:
    import jax

    return jax.jit(_REDUCTIONS[kind])


def device_stats(x: Any) -> ArrayStats:
    """The figures of a live ``jax.Array``, reduced on its devices (eight numbers copied)."""
    import jax

    from ..session.work import jaxlab_work

    if x.size == 0:
        return _empty("device")
    with jaxlab_work():
        counts, floats, finite, may_be_zero = jax.device_get(_jitted()(x))
        if not finite:  # a NaN or an Inf (or an overflow): reduced again, masked
            counts, floats = jax.device_get(_jitted("masked")(x))
        elif may_be_zero:
            counts = np.array(counts)
            counts[2] = int(jax.device_get(_jitted("zeros")(x)))
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


def host_stats_many(arrays: list[np.ndarray]) -> list[ArrayStats]:
    """``host_stats`` of each array, arrays of one shape and dtype reduced together (a
    714-layer tree's 1,428 leaves are two stacks: two sets of NumPy calls, not 1,428)."""
    groups: dict[tuple[tuple[int, ...], str], list[int]] = {}
    for i, a in enumerate(arrays):
        groups.setdefault((a.shape, a.dtype.str), []).append(i)
    out: list[ArrayStats | None] = [None] * len(arrays)
    for members in groups.values():
        first = arrays[members[0]]
        # one array alone is a stack of one: the same figures, without host_stats' masks
        if first.size == 0 or first.dtype.kind not in "biuf":
            for i in members:
                out[i] = host_stats(arrays[i])
            continue
        # one copy into a (leaves, size) block: a concatenate costs less than a stack
        stack = np.concatenate([arrays[i].reshape(-1) for i in members]).reshape(len(members), -1)
        for i, stats in zip(members, _stacked_stats(stack), strict=True):
            out[i] = stats
    return [s for s in out if s is not None]


def _stacked_stats(a: np.ndarray) -> list[ArrayStats]:
    """``host_stats`` of each row of ``a`` (rows: arrays of one real dtype).

    Sums, deviations and the std are taken in float64, as ``host_stats`` takes them; the
    extremes and the zero count on ``a`` itself (exact in any dtype), and a finite sum of
    every row says no row holds a NaN or an Inf, so the usual case makes no mask (a
    714-layer tree's weights: half the time of masking them)."""
    rows, size = a.shape
    kind = a.dtype.kind
    total = a.sum(axis=1, dtype=np.float64)
    every = kind in "iub" or bool(np.isfinite(total).all())
    if every:
        count = np.full(rows, size)
        nan = inf = np.zeros(rows, dtype=np.int64)
        lo, hi = a.min(axis=1).astype(np.float64), a.max(axis=1).astype(np.float64)
        mean = total / size
        dev = a.astype(np.float64)
        dev -= mean[:, None]
    else:
        v = a.astype(np.float64)
        finite = np.isfinite(v)
        count = finite.sum(axis=1)
        nan, inf = np.isnan(v).sum(axis=1), np.isinf(v).sum(axis=1)
        lo = np.where(finite, v, np.inf).min(axis=1)
        hi = np.where(finite, v, -np.inf).max(axis=1)
        mean = np.where(finite, v, 0.0).sum(axis=1) / np.maximum(count, 1)
        dev = np.where(finite, v - mean[:, None], 0.0)
    std = np.sqrt(np.einsum("ij,ij->i", dev, dev) / np.maximum(count, 1))
    zero = _zeros_per_row(a)
    figures = zip(*(c.tolist() for c in (nan, inf, zero, count, lo, hi, mean, std)), strict=True)
    return [
        ArrayStats(
            size=size,
            nan=int(n),
            inf=int(i),
            zero=int(z),
            finite=int(c),
            min=float(mn) if c else None,
            max=float(mx) if c else None,
            mean=float(m) if c else None,
            std=float(sd) if c else None,
            computed_on="host copy",
        )
        for n, i, z, c, mn, mx, m, sd in figures
    ]


def _zeros_per_row(a: np.ndarray) -> np.ndarray:
    """How many zeros each row holds; one count of the whole stack first, since weights
    seldom hold any (a count per row costs as much again)."""
    is_zero = a == 0
    if not is_zero.any():
        return np.zeros(a.shape[0], dtype=np.int64)
    return np.count_nonzero(is_zero, axis=1)
