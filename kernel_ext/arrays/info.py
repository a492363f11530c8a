"""An array leaf -> ``ArrayInfo``: what it is, where it lives, its figures, its sample.

Figures of a small array (at most ``SMALL`` elements, while the walk's host budget lasts)
come from one batched copy of all of them, reduced with NumPy: a 714-layer parameter tree
would otherwise cost one compiled reduction per distinct shape. Anything larger is reduced
on its device (``stats.device_stats``) and only its drawn sample is copied.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .record import ArrayInfo, ArrayStats
from .sample import take_sample
from .shards import shard_layout
from .stats import device_stats, host_stats, host_stats_many
from .words import dtype_kind, dtype_name

SMALL = 65_536  # elements: reduced on a host copy
HOST_BUDGET = 64 * 2**20  # bytes the walk may copy for figures, all leaves together


@dataclass
class ArrayLeaf:
    value: Any
    copied: int = 0  # bytes copied to the host for its figures


def is_array_like(x: Any) -> bool:
    return isinstance(x, _array_types())


@functools.cache
def _array_types() -> tuple[type, ...]:
    """What an array leaf is, made once (asked of every node a walk makes; jax imported
    when first asked, not with this module)."""
    import jax

    return (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)


def _state(x: Any) -> str:
    import jax

    if isinstance(x, jax.core.Tracer | jax.ShapeDtypeStruct):
        return "abstract"
    if isinstance(x, jax.Array) and x.is_deleted():
        return "deleted"
    return "live"


def _placement(x: Any) -> tuple[tuple[str, ...], str]:
    """A ``jax.Array``'s devices (by id) and its sharding as words, made once per sharding:
    a model's leaves share one or two, and their words cost more than the rest of a leaf."""
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return (), ""
    try:
        return _placement_of(sharding)
    except TypeError:  # an unhashable sharding: its words made anew
        return _placement_of.__wrapped__(sharding)


@functools.lru_cache(maxsize=256)
def _placement_of(sharding: Any) -> tuple[tuple[str, ...], str]:
    try:
        devices = tuple(str(d) for d in sorted(sharding.device_set, key=lambda d: d.id))
    except Exception:  # a sharding whose devices are gone may no longer say
        devices = ()
    return devices, str(sharding)


def array_infos(
    leaves: list[ArrayLeaf], slice_at: tuple[int, ...] | None = None, draw: int = 4
) -> list[ArrayInfo]:
    """The ``ArrayInfo`` of every leaf, small ones' figures from one batched host copy."""
    import jax

    from ..session.work import jaxlab_work

    small: list[int] = []
    states: list[str] = []
    budget = HOST_BUDGET
    for i, leaf in enumerate(leaves):
        x = leaf.value
        on_device = isinstance(x, jax.Array)
        on_host = isinstance(x, np.ndarray | np.generic)
        states.append("live" if on_host else _state(x))  # asked once per leaf
        if (
            on_device
            and states[-1] == "live"
            and x.size <= SMALL
            and dtype_kind(x.dtype) not in ("key", "other")
            and x.is_fully_addressable
        ):
            nbytes = x.size * x.dtype.itemsize
            if nbytes <= budget:
                small.append(i)
                budget -= nbytes
    with jaxlab_work():
        copies = _host_copies([leaves[i].value for i in small])
    host = dict(zip(small, copies, strict=True))
    figures = dict(zip(small, host_stats_many(copies), strict=True))
    out = []
    drawn = 0
    for i, leaf in enumerate(leaves):
        copy = host.get(i)
        if copy is not None:
            leaf.copied = int(copy.nbytes)
        wants_sample = drawn < draw
        at = slice_at if wants_sample else None
        info = _info(leaf.value, states[i], copy, at, wants_sample, figures.get(i))
        drawn += info.sample is not None
        out.append(info)
    return out


def _host_copies(arrays: list[Any]) -> list[np.ndarray]:
    """Every array on the host, as ``jax.device_get`` copies them (every transfer started,
    then each awaited) without its pytree map and per-leaf wrapper: half its time for a
    714-layer tree's 1,428 leaves."""
    for x in arrays:
        x.copy_to_host_async()
    return [np.asarray(x) for x in arrays]


def _info(
    x: Any,
    state: str,
    copy: Any,
    slice_at: tuple[int, ...] | None,
    wants_sample: bool,
    figures: ArrayStats | None = None,
) -> ArrayInfo:
    import jax

    shape = tuple(int(d) for d in x.shape)
    kind = dtype_kind(x.dtype)
    size = math.prod(shape)
    itemsize = int(getattr(x.dtype, "itemsize", 0) or 0)
    on_device = isinstance(x, jax.Array)
    devices, sharding = _placement(x) if on_device else ((), "host (NumPy)")
    # the fields as keywords, the record made once (a 714-layer tree makes 1,428)
    base: dict[str, Any] = dict(
        shape=shape,
        dtype=dtype_name(x.dtype),
        weak=bool(getattr(x, "weak_type", False)),
        kind=kind,
        size=size,
        nbytes=size * itemsize,
        devices=devices,
        sharding=sharding,
        state=state,
    )
    if state == "deleted":
        note = "deleted (donated to a jitted call, or freed with .delete()): its values are gone"
        return ArrayInfo(**base, note=note)
    if state == "abstract":
        return ArrayInfo(**base, note="abstract: a shape and dtype, no values")
    if kind in ("key", "other"):
        what = "PRNG key data" if kind == "key" else f"{x.dtype} values"
        return ArrayInfo(**base, note=f"{what}: no statistics or drawing")
    layout = shard_layout(x) if on_device and len(devices) > 1 else None
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        note = (
            "held partly by other processes: figures and drawing need every process "
            "(see the shard map for which blocks are here)"
        )
        return ArrayInfo(**base, layout=layout, note=note)
    try:
        stats = figures if figures is not None else _stats(x, copy)
        source = copy if copy is not None else x
        flagged = bool(stats.nan or stats.inf)  # its first NaN/Inf found to be marked
        sample = take_sample(source, kind, slice_at, flagged) if wants_sample else None
    except RuntimeError as e:  # a device released under the array, a failed copy
        return ArrayInfo(**base, layout=layout, note=f"its values could not be read: {e}")
    if sample is not None and copy is not None:  # drawn from the figures' copy
        sample = replace(sample, bytes=0)
    return ArrayInfo(**base, stats=stats, sample=sample, layout=layout)


def _stats(x: Any, copy: Any) -> ArrayStats:
    if copy is not None:
        return host_stats(np.asarray(copy))
    if isinstance(x, np.ndarray | np.generic):
        return host_stats(np.asarray(x))
    return device_stats(x)
