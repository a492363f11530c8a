"""The live arrays counted for ``%memory``: how many, their bytes, which shapes each
buffer size belongs to, and the bytes on each device, grouped without per-array Python
work where JAX allows it.

::

    live = live_arrays(jax.live_arrays())
    live.count, live.bytes            # 200001, 800012
    live.by_size[4]                   # Counter({'float32[]': 200000})
    device_bytes(profile, jax.local_devices())   # {0: 800012}: from JAX's memory profile

A session may hold 200,000 arrays. Asking each for its shards and their devices cost
10-43 s on a busy machine; here an array on one device (``SingleDeviceSharding``, what
eager operations and single-device ``jit`` return) is read only through C-level maps
over two attributes (its ``sharding``'s type, its ``aval``) and counted by its aval, one
representative asked for the group's bytes and shape. Only arrays sharded over devices
are read one by one. Each device's bytes come from JAX's device memory profile, which
lists every live buffer with its device: per-array work again only where that profile
cannot be read or names a device this process does not know.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_, is_not
from typing import Any

from .pprof import Profile

_SHARDING = attrgetter("sharding")
_AVAL = attrgetter("aval")


@dataclass
class LiveArrays:
    """What the live arrays hold: ``count`` arrays, ``bytes`` (their ``nbytes`` summed),
    ``by_size`` (a buffer's size -> the shapes of the arrays whose buffers have it, with
    how many buffers each), and the arrays sharded over devices (read one by one)."""

    count: int
    bytes: int
    by_size: dict[int, Counter[str]]
    single: list[Any] = field(repr=False)  # arrays on one device, kept for the fallback
    sharded: list[Any] = field(repr=False)


def live_arrays(arrays: list[Any]) -> LiveArrays:
    """Count ``arrays`` (``jax.live_arrays()``) by aval; see the module's note."""
    import jax

    single_type = jax.sharding.SingleDeviceSharding
    kinds = list(map(type, map(_SHARDING, arrays)))  # C-level loops: no Python per array
    if kinds.count(single_type) == len(kinds):  # the usual session: nothing sharded
        single, sharded = arrays, []
    else:
        single = list(compress(arrays, map(is_, kinds, repeat(single_type))))
        sharded = list(compress(arrays, map(is_not, kinds, repeat(single_type))))
    avals = list(map(_AVAL, single))
    counts = Counter(avals)
    some = dict(zip(avals, single, strict=True))  # an array of each aval (the last)
    total = 0
    by_size: dict[int, Counter[str]] = {}
    for aval, n in counts.items():
        rep = some[aval]
        nbytes = int(rep.nbytes)
        total += n * nbytes
        by_size.setdefault(nbytes, Counter())[_shape_words(rep)] += n
    for a in sharded:
        total += int(a.nbytes)
        for nbytes, _ in _shards(a):
            by_size.setdefault(nbytes, Counter())[_shape_words(a)] += 1
    return LiveArrays(len(arrays), total, by_size, single, sharded)


def device_bytes(profile: Profile | None, devices: list[Any]) -> dict[int, int] | None:
    """Bytes of live buffers on each of ``devices`` (by id) as JAX's memory profile lists
    them, or None when there is no profile or it names a device not among ``devices``."""
    if profile is None:
        return None
    ids = {str(d): int(d.id) for d in devices}
    out = dict.fromkeys(ids.values(), 0)
    for sample in profile.samples:
        if sample.labels.get("kind") != "buffer":
            continue
        device = ids.get(str(sample.labels.get("device", "")))
        if device is None:
            return None
        out[device] += profile.value(sample, "space")
    return out


def shard_bytes(live: LiveArrays) -> dict[int, int]:
    """Bytes on each device (by id), asking every array for its shards: the slow, exact
    count used when the profile cannot say."""
    out: Counter[int] = Counter()
    for a in (*live.single, *live.sharded):
        for nbytes, device in _shards(a):
            out[device] += nbytes
    return dict(out)


def _shards(a: Any) -> list[tuple[int, int]]:
    """``(bytes, device id)`` of each shard this process holds, from its sharding's index
    map (``addressable_shards`` would make, and keep, one more live array per shard)."""
    try:
        itemsize = int(a.nbytes) // max(int(a.size), 1)
        blocks = a.sharding.addressable_devices_indices_map(tuple(a.shape))
        return [
            (_index_size(index, a.shape) * itemsize, int(device.id))
            for device, index in blocks.items()
        ]
    except Exception:  # a sharding that cannot say: its array counted without shards
        return []


def _index_size(index: tuple[Any, ...], shape: tuple[int, ...]) -> int:
    size = 1
    for part, dim in zip(index, shape, strict=False):
        size *= len(range(*part.indices(dim))) if isinstance(part, slice) else 1
    for dim in shape[len(index) :]:
        size *= dim
    return size


def _shape_words(a: Any) -> str:
    return f"{a.dtype}[{','.join(str(d) for d in a.shape)}]"
