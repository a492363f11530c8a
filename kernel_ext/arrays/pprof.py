"""Read a pprof profile (``jax.profiler.device_memory_profile()``) without a protobuf
dependency: a minimal wire-format decoder for the few messages of ``profile.proto``.

::

    profile = read_profile(jax.profiler.device_memory_profile())
    profile.sample_types          # (('allocations', 'count'), ('space', 'bytes'))
    s = profile.samples[0]
    s.values, s.labels            # (1, 100000000), {'kind': 'buffer', 'device': ...}
    profile.stack(s)              # [Frame('f', 'model.py', 12), ...], innermost first

The messages read (field numbers from pprof's ``profile.proto``): Profile (sample_type 1,
sample 2, location 4, function 5, string_table 6), ValueType (type 1, unit 2), Sample
(location_id 1, value 2, label 3), Label (key 1, str 2, num 3), Location (id 1, line 4),
Line (function_id 1, line 2), Function (id 1, name 2, filename 4). Everything else is
skipped by its wire type.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass, field

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class ProfileError(ValueError):
    """The bytes are not a profile this decoder can read."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ProfileError("a varint runs past the end of the message")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProfileError("a varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` for each field of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ProfileError("a field runs past the end of the message")
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire == _I64:
            yield number, wire, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == _I32:
            yield number, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ProfileError(f"wire type {wire} (groups) is not used by profile.proto")


def _ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field: packed (one length-delimited run) or one varint."""
    if wire == _VARINT:
        assert isinstance(value, int)
        return [value]
    assert isinstance(value, bytes)
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v)
    return out


def _signed(v: int) -> int:
    """An int64 read as a varint (two's complement over 64 bits)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _message(value: int | bytes) -> dict[int, list[tuple[int, int | bytes]]]:
    if not isinstance(value, bytes):
        raise ProfileError("a message field is not length-delimited")
    out: dict[int, list[tuple[int, int | bytes]]] = {}
    for number, wire, v in _fields(value):
        out.setdefault(number, []).append((wire, v))
    return out


def _int(msg: dict[int, list[tuple[int, int | bytes]]], number: int) -> int:
    entries = msg.get(number)
    if not entries:
        return 0
    _, v = entries[-1]
    return _signed(v) if isinstance(v, int) else 0


@dataclass(frozen=True)
class Frame:
    """One line of a stack: the function, its file and the line number."""

    function: str
    filename: str
    line: int


@dataclass(frozen=True)
class Sample:
    locations: tuple[int, ...]  # location ids, innermost first
    values: tuple[int, ...]  # one per sample type
    labels: dict[str, str | int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Profile:
    sample_types: tuple[tuple[str, str], ...]
    samples: tuple[Sample, ...]
    locations: dict[int, tuple[Frame, ...]]  # id -> its lines, innermost (inlined) first

    def stack(self, sample: Sample) -> list[Frame]:
        """The sample's frames, innermost first."""
        return [frame for loc in sample.locations for frame in self.locations.get(loc, ())]

    def value(self, sample: Sample, kind: str) -> int:
        """The sample's value of the type named ``kind`` (``'space'``), 0 if none."""
        for (name, _), v in zip(self.sample_types, sample.values, strict=False):
            if name == kind:
                return v
        return 0


def read_profile(data: bytes) -> Profile:
    """Decode a (possibly gzipped) pprof ``Profile``."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ProfileError(f"not a gzip stream: {e}") from e
    top = _message(data)
    strings = [v.decode("utf-8", "replace") for _, v in top.get(6, []) if isinstance(v, bytes)]

    def text(i: int) -> str:
        return strings[i] if 0 <= i < len(strings) else ""

    functions: dict[int, tuple[str, str]] = {}
    for _, v in top.get(5, []):
        f = _message(v)
        functions[_int(f, 1)] = (text(_int(f, 2)), text(_int(f, 4)))
    locations: dict[int, tuple[Frame, ...]] = {}
    for _, v in top.get(4, []):
        loc = _message(v)
        lines = []
        for _, lv in loc.get(4, []):
            line = _message(lv)
            name, filename = functions.get(_int(line, 1), ("", ""))
            lines.append(Frame(name, filename, _int(line, 2)))
        # pprof lists a location's inlined lines caller last
        locations[_int(loc, 1)] = tuple(lines)
    types = []
    for _, v in top.get(1, []):
        t = _message(v)
        types.append((text(_int(t, 1)), text(_int(t, 2))))
    samples = []
    for _, v in top.get(2, []):
        s = _message(v)
        locs = [i for wire, x in s.get(1, []) for i in _ints(wire, x)]
        values = [_signed(i) for wire, x in s.get(2, []) for i in _ints(wire, x)]
        labels: dict[str, str | int] = {}
        for _, lv in s.get(3, []):
            label = _message(lv)
            key = text(_int(label, 1))
            labels[key] = text(_int(label, 2)) if _int(label, 2) else _int(label, 3)
        samples.append(Sample(tuple(locs), tuple(values), labels))
    return Profile(tuple(types), tuple(samples), locations)
