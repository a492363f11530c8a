"""The bounded host copy a view draws: every k-th element, sliced on the device first.

A 10⁸-element vector is drawn from at most ``MAX_LINE`` of its values and a 2-D field
from at most ``MAX_SIDE`` x ``MAX_SIDE``; an array of 3 or more axes from one 2-D slice
(the leading indices chosen, the middle by default). The slice and the striding run on
the device, so what reaches the host is the picture, never the array; ``Sample.bytes``
says how much that was.

::

    s = take_sample(jnp.zeros((10**8,)))
    len(s.values), s.steps, s.bytes      # (2000, (50000,), 8000)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .record import Sample

MAX_LINE = 2000  # points of a drawn line
MAX_SIDE = 160  # rows and columns of a drawn heat map
MAX_CELLS = MAX_LINE + MAX_SIDE * MAX_SIDE  # the most numbers a sample holds


def plan_sample(
    shape: tuple[int, ...], slice_at: tuple[int, ...] | None = None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(slice_at, steps)`` for ``shape``: the fixed leading indices and the stride of each
    drawn axis, so no sample holds more than ``MAX_CELLS`` numbers, whatever the size."""
    if len(shape) == 0:
        return (), ()
    if len(shape) == 1:
        return (), (max(1, math.ceil(shape[0] / MAX_LINE)),)
    lead = shape[:-2]
    if slice_at is None or len(slice_at) != len(lead):
        slice_at = tuple(d // 2 for d in lead)
    # negative counts from the end, as NumPy indexes; what is still out of range (a page's
    # control, a tree's other arrays) is held to the axis (%show refuses it: slicing.py)
    slice_at = tuple(
        min(max(0, int(i) + d if int(i) < 0 else int(i)), max(d - 1, 0))
        for i, d in zip(slice_at, lead, strict=True)
    )
    steps = tuple(max(1, math.ceil(d / MAX_SIDE)) for d in shape[-2:])
    return slice_at, steps


FIRST_NOT_FINITE = 200  # NaN (and Inf) indices found per array, to mark and name


def take_sample(
    x: Any, kind: str, slice_at: tuple[int, ...] | None = None, flagged: bool = False
) -> Sample | None:
    """Copy the drawn part of ``x`` (a live ``jax.Array`` or NumPy array) to the host;
    ``flagged`` (its figures count a NaN or Inf): find the first ones too, on its device."""
    if kind in ("key", "other") or 0 in x.shape:
        return None
    at, steps = plan_sample(tuple(x.shape), slice_at)
    index = tuple(at) + tuple(slice(None, None, s) for s in steps)
    part = _on_host(x, index)
    bad = first_not_finite(x) if flagged and kind in ("float", "complex") and x.ndim else ()
    return Sample(
        values=_jsonable(part, kind),
        kind=kind,
        steps=steps,
        slice_at=at,
        bytes=int(part.nbytes) if not isinstance(x, np.ndarray) else 0,
        not_finite=bad,
    )


def first_not_finite(x: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The first ``FIRST_NOT_FINITE`` NaN and Inf of ``x`` in row-major order, each word's
    indices found where the array lives (``argwhere`` of a fixed size: one small copy)."""
    out: list[tuple[str, tuple[int, ...]]] = []
    if isinstance(x, np.ndarray):
        for word, hit in (("NaN", np.isnan(x)), ("Inf", np.isinf(x))):
            out += [(word, tuple(int(i) for i in r)) for r in np.argwhere(hit)[:FIRST_NOT_FINITE]]
        return tuple(out)
    import jax.numpy as jnp

    from ..session.work import jaxlab_work

    with jaxlab_work():
        for word, test in (("NaN", jnp.isnan), ("Inf", jnp.isinf)):
            rows = np.asarray(jnp.argwhere(test(x), size=FIRST_NOT_FINITE, fill_value=-1))
            out += [(word, tuple(int(i) for i in r)) for r in rows if r[0] >= 0]
    return tuple(out)


def _on_host(x: Any, index: tuple[Any, ...]) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x[index]
    from ..session.work import jaxlab_work

    with jaxlab_work():
        part = x[index] if index else x
        return np.asarray(part)


def _jsonable(a: np.ndarray, kind: str) -> Any:
    """Nested lists a widget can send as JSON: NaN and Inf as the strings ``"NaN"``,
    ``"Inf"``, ``"-Inf"`` (JSON has no such numbers); complex as ``[re, im]`` pairs."""
    if kind == "boolean":
        return a.astype(np.int8).tolist()
    if kind in ("integer",):
        return a.astype(np.int64).tolist()
    if kind == "complex":
        pair = np.stack([a.real, a.imag], axis=-1).astype(np.float64)
        return _finite_or_words(pair)
    return _finite_or_words(a.astype(np.float64))


def _finite_or_words(a: np.ndarray) -> Any:
    out = a.tolist()
    if np.isfinite(a).all():
        return out
    return _replace(out)


def _replace(v: Any) -> Any:
    if isinstance(v, list):
        return [_replace(i) for i in v]
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "Inf" if v > 0 else "-Inf"
    return v
