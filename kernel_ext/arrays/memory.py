"""``%memory``, ``jaxlab.memory()``: device memory in use and the live arrays grouped by
the line of your code that allocated them, largest first.

::

    r = jaxlab.memory()
    r.host                    # True on CPU: the figures are host memory
    r.live_bytes              # the live arrays' bytes (jax.live_arrays(), nbytes summed)
    r.sites[0].where          # 'In[3], line 2': the line that allocated the most
    r.sites[0].bytes          # 100000000

Where each buffer came from is JAX's device memory profile
(``jax.profiler.device_memory_profile()``: a pprof profile, read by ``pprof``), which
keeps the Python stack of every live buffer; the line named is the innermost frame of
user code (JAX's, jaxlab's and installed packages' frames skipped). A device's own
figures come from ``device.memory_stats()``, which the CPU backend does not keep.
"""

from __future__ import annotations

import html
import linecache
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .pprof import Frame, Profile, ProfileError, read_profile
from .words import format_bytes

MAX_SITES = 20  # lines listed; the rest summed into one count
_POOL_ENV = (
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
)


@dataclass(frozen=True)
class DeviceMemory:
    """One device's figures from ``memory_stats()``; None where the backend keeps none.
    ``arrays_bytes`` is what live arrays hold on it (their buffers' bytes, as JAX's memory
    profile lists them by device; the arrays' shards summed where it cannot), always known."""

    id: int
    kind: str
    bytes_in_use: int | None
    peak_bytes_in_use: int | None
    bytes_limit: int | None
    arrays_bytes: int


@dataclass(frozen=True)
class MemorySite:
    """Live buffers allocated at one line: ``where`` (``In[3], line 2``, ``model.py, line
    12``), its ``code``, the ``bytes`` and ``buffers`` (one per device shard) still alive,
    the devices they are on, and the arrays' ``shapes`` where they can be told (the live
    arrays whose buffers have exactly this size)."""

    where: str
    code: str
    function: str
    bytes: int
    buffers: int
    devices: tuple[str, ...]
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryReport:
    """What ``%memory`` shows: per-device figures, the live arrays, and by line of code."""

    platform: str
    host: bool  # True: the figures are host memory (the CPU backend)
    devices: tuple[DeviceMemory, ...]
    live_arrays: int
    live_bytes: int
    sites: tuple[MemorySite, ...]  # largest first, at most MAX_SITES
    more_sites: int  # lines not listed
    more_bytes: int  # their bytes
    pool: str  # how the figures are to be read (preallocated pool, host memory)
    pool_settings: tuple[tuple[str, str], ...]  # the XLA_PYTHON_CLIENT_* variables set
    notes: tuple[str, ...] = ()

    def site(self, where: str) -> MemorySite | None:
        """The site named ``where`` (``In[3], line 2``), or None."""
        return next((s for s in self.sites if s.where == where), None)

    def text(self) -> str:
        lines = [
            f"{self.platform} backend: {self.live_arrays} live array(s), "
            f"{format_bytes(self.live_bytes)} ({self.live_bytes:,} bytes)",
            self.pool,
        ]
        for d in self.devices:
            figures = (
                f"in use {format_bytes(d.bytes_in_use)}, peak {format_bytes(d.peak_bytes_in_use)}"
                f", limit {format_bytes(d.bytes_limit)}; "
                if d.bytes_in_use is not None
                else ""
            )
            lines.append(
                f"  device {d.id} ({d.kind}): {figures}arrays {format_bytes(d.arrays_bytes)}"
            )
        if self.sites:
            lines.append("live buffers by the line that allocated them, largest first:")
        for s in self.sites:
            shapes = f" [{', '.join(s.shapes)}]" if s.shapes else ""
            lines.append(
                f"  {format_bytes(s.bytes):>10}  {s.buffers:>4} buffer(s)  {s.where}: "
                f"{s.code}{shapes}"
            )
        if self.more_sites:
            lines.append(f"  … {self.more_sites} more line(s), {format_bytes(self.more_bytes)}")
        lines += list(self.notes)
        return "\n".join(lines)

    def html(self) -> str:
        e = html.escape
        head = (
            f"<div><b>{e(self.platform)}</b> backend: {self.live_arrays:,} live array(s), "
            f"{e(format_bytes(self.live_bytes))} ({self.live_bytes:,} bytes)</div>"
            f'<div class="dim">{e(self.pool)}</div>'
        )
        dev_rows = "".join(
            f"<tr><td>{d.id}</td><td>{e(d.kind)}</td><td>{e(format_bytes(d.bytes_in_use))}</td>"
            f"<td>{e(format_bytes(d.peak_bytes_in_use))}</td>"
            f"<td>{e(format_bytes(d.bytes_limit))}</td>"
            f"<td>{e(format_bytes(d.arrays_bytes))}</td></tr>"
            for d in self.devices
        )
        devices = (
            "<table><thead><tr><th>device</th><th>kind</th><th>in use</th><th>peak</th>"
            f"<th>limit</th><th>live arrays</th></tr></thead><tbody>{dev_rows}</tbody></table>"
        )
        site_rows = "".join(
            f"<tr><td>{e(format_bytes(s.bytes))}</td><td>{s.buffers:,}</td>"
            f"<td>{e(s.where)}</td><td><code>{e(s.code)}</code></td>"
            f"<td>{e(', '.join(s.shapes))}</td></tr>"
            for s in self.sites
        )
        more = (
            f'<div class="dim">… {self.more_sites:,} more line(s), '
            f"{e(format_bytes(self.more_bytes))}</div>"
            if self.more_sites
            else ""
        )
        sites = (
            "<div>live buffers by the line that allocated them, largest first</div>"
            "<table><thead><tr><th>bytes</th><th>buffers</th><th>where</th><th>code</th>"
            f"<th>shapes</th></tr></thead><tbody>{site_rows}</tbody></table>{more}"
            if self.sites
            else ""
        )
        notes = "".join(f'<div class="dim">{e(n)}</div>' for n in self.notes)
        return f'<div class="jaxlab-memory">{head}{devices}{sites}{notes}</div>'

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()


def pool_words(
    platform: str, env: dict[str, str] | None = None
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """How to read the figures on ``platform``, from the XLA client's pool settings."""
    env = dict(os.environ) if env is None else env
    settings = tuple((k, env[k]) for k in _POOL_ENV if k in env)
    if platform == "cpu":
        return (
            "CPU backend: these figures are host memory (RAM); no device pool, and "
            "memory_stats() is not kept, so 'in use' is the live arrays' bytes",
            settings,
        )
    if platform != "gpu":
        return (
            f"{platform} backend: figures from memory_stats() where the device keeps them",
            settings,
        )
    allocator = env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "").lower()
    prealloc = env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() not in ("false", "0")
    fraction = env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75")
    if allocator == "platform":
        return (
            "GPU, XLA_PYTHON_CLIENT_ALLOCATOR=platform: no pool; memory is allocated and "
            "freed on demand, so 'in use' is what the GPU holds for JAX (slow, exact)",
            settings,
        )
    if prealloc:
        return (
            f"GPU: XLA preallocated a pool of {fraction} of the GPU's memory at start "
            "(XLA_PYTHON_CLIENT_PREALLOCATE unset or true), so nvidia-smi shows the pool, "
            "not use; 'in use' and 'peak' are the arrays and temporaries inside it, "
            "'limit' the pool's size",
            settings,
        )
    return (
        "GPU, XLA_PYTHON_CLIENT_PREALLOCATE=false: the pool grows on demand and is not "
        f"given back (at most {fraction} of the GPU), so nvidia-smi shows the high-water "
        "mark; 'in use' is what arrays and temporaries hold now",
        settings,
    )


def settings_note(platform: str, settings: tuple[tuple[str, str], ...]) -> str:
    """The pool settings found in the environment; off a GPU, that they change nothing (on
    a TPU v5e both XLA_PYTHON_CLIENT_PREALLOCATE=true and false read 16.1 MiB in use)."""
    said = "set: " + ", ".join(f"{k}={v}" for k, v in settings)
    if platform != "gpu":
        said += f" (a GPU's pool settings: no effect on the {platform} backend)"
    return said


def memory(top: int = MAX_SITES) -> MemoryReport:
    """Device memory now and the live arrays by the line of your code that made them."""
    import jax

    from ..devices import _memory_stats
    from .live import device_bytes, live_arrays, shard_bytes

    arrays = jax.live_arrays()
    live = live_arrays(arrays)
    del arrays  # the report holds no array
    local = jax.local_devices()
    notes: list[str] = []
    profile: Profile | None
    try:
        profile = read_profile(jax.profiler.device_memory_profile())
    except (ProfileError, RuntimeError) as e:
        profile = None
        notes.append(f"JAX's memory profile could not be read ({e}): no lines to show")
    on_device = device_bytes(profile, local)
    if on_device is None:
        on_device = shard_bytes(live)
    devices = []
    for d in local:
        stats = _memory_stats(d)
        devices.append(
            DeviceMemory(
                id=int(d.id),
                kind=str(d.device_kind),
                bytes_in_use=None if stats is None else stats.get("bytes_in_use"),
                peak_bytes_in_use=None if stats is None else stats.get("peak_bytes_in_use"),
                bytes_limit=None if stats is None else stats.get("bytes_limit"),
                arrays_bytes=on_device.get(int(d.id), 0),
            )
        )
    platform = str(jax.devices()[0].platform)
    sites = _sites(profile, live.by_size) if profile is not None else []
    top = max(0, int(top))
    pool, settings = pool_words(platform)
    if settings:
        notes.append(settings_note(platform, settings))
    return MemoryReport(
        platform=platform,
        host=platform == "cpu",
        devices=tuple(devices),
        live_arrays=live.count,
        live_bytes=live.bytes,
        sites=tuple(sites[:top]),
        more_sites=max(0, len(sites) - top),
        more_bytes=sum(s.bytes for s in sites[top:]),
        pool=pool,
        pool_settings=settings,
        notes=tuple(notes),
    )


def _is_user(filename: str) -> bool:
    from ..explain.source import is_user_file

    return not filename.startswith("<jaxlab") and is_user_file(filename)


def user_frame(stack: list[Frame]) -> Frame | None:
    """The innermost frame of the user's code, or None (JAX's own allocation)."""
    return next((f for f in stack if f.filename and _is_user(f.filename)), None)


def _sites(profile: Profile, by_size: dict[int, Counter[str]]) -> list[MemorySite]:
    from ..explain.source import label

    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for sample in profile.samples:
        if sample.labels.get("kind") != "buffer":
            continue  # compiled executables: no bytes in this profile
        space = profile.value(sample, "space")
        count = profile.value(sample, "allocations")
        frame = user_frame(profile.stack(sample))
        key = (frame.filename, frame.function, frame.line) if frame else ("", "", 0)
        g = groups.setdefault(key, {"bytes": 0, "buffers": 0, "devices": set(), "sizes": []})
        g["bytes"] += space
        g["buffers"] += count
        g["devices"].add(str(sample.labels.get("device", "")))
        if count:
            g["sizes"].append(space // count)
    out = []
    for (filename, function, line), g in groups.items():
        if filename:
            where = label(filename, line)
            code = linecache.getline(filename, line).strip()
        else:
            where, code = "JAX's own (no line of yours on the stack)", ""
        shapes: Counter[str] = Counter()
        for size in set(g["sizes"]):
            known = by_size.get(size)
            if known is not None and len(known) == 1:  # only one kind of array has this size
                shapes.update(known)
        out.append(
            MemorySite(
                where=where,
                code=code,
                function=function,
                bytes=int(g["bytes"]),
                buffers=int(g["buffers"]),
                devices=tuple(sorted(d for d in g["devices"] if d)),
                shapes=tuple(sorted(shapes)),
            )
        )
    out.sort(key=lambda s: (-s.bytes, s.where))
    return out
