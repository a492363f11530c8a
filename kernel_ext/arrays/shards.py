"""Where a sharded array lives: which device (and process) holds which block.

::

    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    x = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    layout = shard_layout(x)
    layout.axis_mesh            # (('x',), ()): axis 0 split over x, axis 1 whole
    layout.replicated_over      # ('y',)
    layout.shards[0].index      # ((0, 2), (0, 8)) on device 0

Every device's block comes from ``sharding.devices_indices_map(shape)``, which a
process knows for the whole mesh; only ``x.addressable_shards`` are this process's, so
a block another process holds is listed (``here=False``) but never read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from .record import Shard, ShardLayout


def shard_layout(x: Any) -> ShardLayout | None:
    """The blocks of ``x`` by device, or None for an array on one device."""
    sharding = x.sharding
    if len(sharding.device_set) < 2:
        return None
    shape = tuple(int(d) for d in x.shape)
    itemsize = int(np.dtype(x.dtype).itemsize) if _has_itemsize(x.dtype) else 0
    here = {int(d.id) for d in sharding.addressable_devices}
    indices = sharding.devices_indices_map(shape)
    blocks = {d: _bounds(index, shape) for d, index in indices.items()}
    copies = Counter(blocks.values())
    shards = tuple(
        Shard(
            device=int(d.id),
            process=int(d.process_index),
            index=block,
            bytes=int(np.prod([b - a for a, b in block], dtype=np.int64)) * itemsize,
            here=int(d.id) in here,
            copies=copies[block],
        )
        for d, block in sorted(blocks.items(), key=lambda kv: kv[0].id)
    )
    split = tuple(i for i in range(len(shape)) if len({s.index[i] for s in shards}) > 1)
    mesh_shape, axis_mesh, replicated_over, mesh_devices = _mesh(sharding, len(shape))
    return ShardLayout(
        shape=shape,
        mesh_shape=mesh_shape,
        spec=str(getattr(sharding, "spec", "")) or type(sharding).__name__,
        replicated_axes=tuple(i for i in range(len(shape)) if i not in split),
        partitioned_axes=split,
        shards=shards,
        axis_mesh=axis_mesh,
        replicated_over=replicated_over,
        mesh_devices=mesh_devices,
        processes=len({s.process for s in shards}),
    )


def _has_itemsize(dtype: Any) -> bool:
    try:
        return bool(np.dtype(dtype).itemsize)
    except TypeError:  # key data and other extended dtypes
        return False


def _bounds(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """A shard's slices as (start, stop) per axis, ``slice(None)`` as the whole axis."""
    out = []
    for s, n in zip(index, shape, strict=False):
        start, stop, _ = s.indices(n)
        out.append((int(start), int(stop)))
    return tuple(out)


def _mesh(
    sharding: Any, ndim: int
) -> tuple[
    tuple[tuple[str, int], ...], tuple[tuple[str, ...], ...], tuple[str, ...], tuple[int, ...]
]:
    """A NamedSharding's mesh (names and sizes), which mesh axes split each array axis (from
    its ``spec``), the mesh axes nothing is split over, and the device ids in mesh order."""
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    if mesh is None or spec is None:
        return (), (), (), ()
    mesh_shape = tuple((str(k), int(v)) for k, v in dict(mesh.shape).items())
    per_axis: list[tuple[str, ...]] = []
    for i in range(ndim):
        entry = spec[i] if i < len(spec) else None
        if entry is None:
            per_axis.append(())
        elif isinstance(entry, tuple | list):
            per_axis.append(tuple(str(e) for e in entry))
        else:
            per_axis.append((str(entry),))
    used = {name for names in per_axis for name in names}
    over = tuple(n for n, size in mesh_shape if n not in used and size > 1)
    devices = getattr(mesh, "devices", None)
    ids = tuple(int(d.id) for d in np.asarray(devices).ravel()) if devices is not None else ()
    return mesh_shape, tuple(per_axis), over, ids
