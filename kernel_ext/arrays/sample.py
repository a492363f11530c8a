"""The bounded host copy a view draws: every k-th element, sliced on the device first.

A 10⁸-element vector is drawn from at most ``MAX_LINE`` of its values and a 2-D field
from at most ``MAX_SIDE`` x ``MAX_SIDE``; an array of 3 or more axes from one 2-D slice
(the leading indices chosen, the middle by default). The slice and the striding run on
the device, so what reaches the host is the picture, never the array; ``Sample.bytes``
says how much that was. (An array on one CPU device is already in host memory: NumPy
strides it in place, ``in_host_memory``.)

::

    s = take_sample(jnp.zeros((10**8,)))
    len(s.values), s.steps, s.bytes      # (2000, (50000,), 8000)
"""

from __future__ import annotations

import math
import threading
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
    values = _jsonable(part, kind)
    if isinstance(values, list):
        _hold(values, _as_read(part, kind))
    return Sample(
        values=values,
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
        if in_host_memory(x):  # its own buffer, read in place: only the part is copied
            return np.array(np.asarray(x)[index])
        part = x[index] if index else x
        return np.asarray(part)


def in_host_memory(x: Any) -> bool:
    """Whether ``x`` is one buffer of a CPU device, which NumPy reads in place (JAX's
    ``np.asarray`` of such an array is a view, no copy). Its sample is then strided by
    NumPy: the same values and bytes as slicing it with JAX, without compiling a slice
    for each new shape (30-60 ms each, most of a new array's first view after its
    figures)."""
    try:
        devices = x.devices()
        if len(devices) != 1:
            return False
        (device,) = devices
        return bool(device.platform == "cpu")
    except Exception:  # a deleted array, a tracer: read as before, which says why not
        return False


# The latest samples' values as the array ``draw.sample_values`` reads them back to, by
# the values list itself (a sample's values are never changed once made): a live view's
# redraw read one back two or three times (its drawing's buffer, its range words, its
# twin), ~0.3 ms each for 160 x 160.
_HELD: dict[int, tuple[list[Any], np.ndarray]] = {}
_HELD_MAX = 8
_held_lock = threading.Lock()


def _hold(values: list[Any], array: np.ndarray) -> None:
    array.flags.writeable = False  # shared by every reader
    with _held_lock:
        _HELD[id(values)] = (values, array)
        while len(_HELD) > _HELD_MAX:
            del _HELD[next(iter(_HELD))]


def held_array(values: Any) -> np.ndarray | None:
    """The array ``values`` (a sample's, made by ``take_sample``) reads back to (float64,
    complex128 for complex), if it is among the latest samples; else None."""
    with _held_lock:
        entry = _HELD.get(id(values))
    return entry[1] if entry is not None and entry[0] is values else None


def _as_read(a: np.ndarray, kind: str) -> np.ndarray:
    """What ``np.asarray(_jsonable(a, kind), float64)`` reads back (complex rebuilt from
    its pairs, as ``draw.sample_values`` does), without the lists."""
    if kind == "boolean":
        return a.astype(np.int8).astype(np.float64)
    if kind == "integer":
        return a.astype(np.int64).astype(np.float64)
    if kind == "complex":
        pair = np.stack([a.real, a.imag], axis=-1).astype(np.float64)
        with np.errstate(invalid="ignore"):  # 1j * inf is (nan+infj), as it is when read
            return pair[..., 0] + 1j * pair[..., 1]
    return a.astype(np.float64)


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
