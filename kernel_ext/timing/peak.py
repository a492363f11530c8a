"""This machine's peak: FLOP/s of a large matmul and bytes/s of a streaming kernel, measured
once per session, with its spread and the conditions it was measured under.

The bandwidth kernel must stream from memory, never from cache: its array is sized from the
machine's last-level cache (``stream_elements``: at least ``STREAM_CACHES`` times it, and at
least ``MIN_STREAM_BYTES``), and it writes into its own input (donated), so no call pays
for fresh pages (a kernel writing a new 600 MB output each call measured 3.7-6.8 GB/s here,
the same kernel in place 25 GB/s). Each kernel runs ``TRIES`` times after a warm-up; the
median is the peak, the slowest and fastest rounds its spread::

    p = machine_peak()                  # measured on first use, then kept for the session
    p.flops_s, p.bytes_s                # e.g. 9.1e10, 2.5e10 on a two-core CPU
    p.bytes_range                       # (2.4e10, 2.6e10): the slowest and fastest rounds
    p.measured_at, p.load               # "10:52:45", 1.07
    p = machine_peak(refresh=True)      # %bench --peak

A measured call never changes the peak: a call faster than the peak's stream runs from
cache (``BenchResult.above_peak``), and its share is not shown as memory bandwidth.

The measurement lasts well under a second on an idle machine: the matmul's size is predicted
from a small one's time (a jump to the power of two nearest ``KERNEL_S``, not a doubling
per compile), then ``TRIES`` calls. ``%bench`` asks ``known_peak()``: this session's peak,
else the one this machine kept in a small file (``peak_file()``: per machine, backend,
device kind and JAX version, with its date and load), else a measurement now, kept there::

    p = known_peak()                    # what %bench compares with
    p.kept                              # "~/.cache/jaxlab/peak.json" when read from the file
    p.when                              # "measured on 2026-12-05 at 10:52:45, load average
                                        #  1.07, kept in ~/.cache/jaxlab/peak.json"

A kept peak older than ``KEPT_DAYS``, from another machine or JAX, or measured under a load
more than twice today's (and above half the cores) is measured again. ``JAXLAB_PEAK_FILE``
names another file; ``off`` keeps none.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from ..session.work import jaxlab_work

KERNEL_S = 0.02  # the matmul is sized so one call lasts about this long ...
_MAX_MATMUL_N = {"cpu": 4096}  # ... or reaches this size (default 16,384: 1 GiB)
_FIRST_N = 256  # the size whose time predicts the next (a power of two)
TRIES = 5  # timed calls per kernel (after one warm-up); the median is kept
STREAM_CACHES = 2  # the stream's array is at least this many last-level caches ...
MIN_STREAM_BYTES = 256 << 20  # ... and at least this many bytes
_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
KEPT_DAYS = 7  # a kept peak older than this is measured again
PEAK_FILE_ENV = "JAXLAB_PEAK_FILE"  # another file, or "off"


@dataclass(frozen=True)
class Peak:
    """The FLOP/s and bytes/s measured on the default device, and under what conditions."""

    platform: str
    flops_s: float  # the median round
    bytes_s: float
    matmul_n: int
    stream_bytes: int  # bytes moved by one call of the stream (read once, written once)
    measured_at: float = 0.0  # time.time() when measured
    load: float | None = None  # the one-minute load average then (None: not known)
    flops_range: tuple[float, float] = (0.0, 0.0)  # the slowest and fastest rounds
    bytes_range: tuple[float, float] = (0.0, 0.0)
    cache_bytes: int | None = None  # the last-level cache the stream was sized from
    measure_s: float = 0.0  # how long the measurement took
    kept: str = ""  # the file it was read from ('' : measured in this session)

    @property
    def when(self) -> str:
        """``"measured at 10:52:45, load average 1.07"``; a peak of another day says its date,
        one read from the machine's file says so."""
        stamp = time.localtime(self.measured_at)
        day = "" if stamp[:3] == time.localtime()[:3] else time.strftime("on %Y-%m-%d ", stamp)
        load = f", load average {self.load:.2f}" if self.load is not None else ""
        kept = f", kept in {self.kept}" if self.kept else ""
        return f"measured {day}at {time.strftime('%H:%M:%S', stamp)}{load}{kept}"

    @property
    def conditions(self) -> str:
        """``when`` and both kernels' spread: ``"measured at 10:52:45, load average 1.07;
        rounds 80.1–95.3 GFLOP/s, 24.5–26 GB/s"``."""
        spreads = [s for s in (self.spread("flops"), self.spread("bytes")) if s]
        rounds = f"; rounds {', '.join(spreads)}" if spreads else ""
        return f"{self.when}{rounds}"

    def spread(self, kind: str) -> str:
        """The slowest and fastest rounds of one kernel (``"flops"``/``"bytes"``), e.g.
        ``"24.5–26 GB/s"``; '' when not known."""
        from .bench_view import rate

        low, high = self.flops_range if kind == "flops" else self.bytes_range
        if not high:
            return ""
        unit = "FLOP/s" if kind == "flops" else "B/s"
        slow, fast = rate(low, unit), rate(high, unit)
        if slow.split()[1] == fast.split()[1]:  # one prefix: "24.5–26 GB/s"
            return f"{slow.split()[0]}–{fast}"
        return f"{slow}–{fast}"

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peak:
        """The peak ``to_dict`` wrote (ranges back to tuples; unknown keys refused)."""
        fields = dict(data)
        for name in ("flops_range", "bytes_range"):
            low, high = fields[name]
            fields[name] = (float(low), float(high))
        return cls(**fields)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not on this system
        return None


def parse_size(text: str) -> int | None:
    """``"307200K"`` -> 314572800 (the kernel's cache ``size`` files); None if unreadable."""
    text = text.strip().upper()
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor if digits.isdigit() else None


def last_level_cache_bytes(cache_dir: Path = _CACHE_DIR) -> int | None:
    """The largest cache the system lists for CPU 0 (its last level), None if not listed."""
    sizes = []
    for index in cache_dir.glob("index*"):
        try:
            size = parse_size((index / "size").read_text())
        except OSError:
            continue
        if size:
            sizes.append(size)
    return max(sizes, default=None)


def stream_elements(cache_bytes: int | None) -> int:
    """Float32 elements of the stream's array: ``STREAM_CACHES`` last-level caches and at
    least ``MIN_STREAM_BYTES`` (no cache known: that much), so it cannot be held in cache."""
    size = max(MIN_STREAM_BYTES, STREAM_CACHES * (cache_bytes or 0))
    return -(-size // 4)


def _timed(fun: object, *args: jax.Array) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fun(*args))  # type: ignore[operator]
    return time.perf_counter() - t0


def _matmul_flops(platform: str) -> tuple[list[float], int]:
    """FLOP/s of ``TRIES`` calls of a square matmul sized to last about ``KERNEL_S``: each
    size's time predicts the next (n³ work), so two or three compiles reach it."""
    largest = _MAX_MATMUL_N.get(platform, 16384)
    n = min(_FIRST_N, largest)
    while True:
        a = jnp.ones((n, n), jnp.float32)
        matmul = jax.jit(jnp.matmul).lower(a, a).compile()
        _timed(matmul, a, a)  # the first run pages memory in
        took = _timed(matmul, a, a)
        if took >= KERNEL_S / 2 or n >= largest:
            work = 2.0 * n**3
            return [work / _timed(matmul, a, a) for _ in range(TRIES)], n
        # the power of two nearest the size predicted to last KERNEL_S, twice n at least:
        # the sizes of every session are the same few (256, 512, 1024, ...)
        grow = max(1.0, round(math.log2(KERNEL_S / max(took, 1e-9)) / 3))
        n = min(largest, n * 2 ** int(grow))


def _stream_bytes(cache_bytes: int | None) -> tuple[list[float], int]:
    size = stream_elements(cache_bytes)
    x = jnp.ones((size,), jnp.float32)
    # written into its own input: no fresh pages per call; 0.5·v + 1 stays finite
    stream = jax.jit(lambda v: v * 0.5 + 1.0, donate_argnums=0).lower(x).compile()
    moved = 2 * 4 * size  # read once, written once
    rates = []
    for i in range(TRIES + 1):
        t0 = time.perf_counter()
        x = jax.block_until_ready(stream(x))
        if i:  # the first call is the warm-up
            rates.append(moved / (time.perf_counter() - t0))
    del x
    return rates, moved


def _spread(rates: list[float]) -> tuple[float, float]:
    return min(rates), max(rates)


def measure_peak(platform: str) -> Peak:
    """Measure both kernels on the default device now."""
    load = load_average()
    cache = last_level_cache_bytes()
    t0 = time.perf_counter()
    with jaxlab_work():
        flops, n = _matmul_flops(platform)
        moves, moved = _stream_bytes(cache)
    return Peak(
        platform,
        statistics.median(flops),
        statistics.median(moves),
        n,
        moved,
        time.time(),
        load,
        _spread(flops),
        _spread(moves),
        cache,
        time.perf_counter() - t0,
    )


_PEAKS: dict[str, Peak] = {}  # measured in this session
_KEPT: dict[str, Peak | None] = {}  # read from the machine's file in this session


def machine_peak(refresh: bool = False) -> Peak:
    """The default backend's peak: measured on first use (or ``refresh``), then kept for the
    session (measured calls never change it) and in the machine's file."""
    platform = jax.default_backend()
    if refresh or platform not in _PEAKS:
        _PEAKS[platform] = measure_peak(platform)
        keep(_PEAKS[platform])
    return _PEAKS[platform]


def known_peak() -> Peak:
    """The peak ``%bench`` compares with: this session's, else the one this machine kept
    (read once a session, if still good: ``usable``), else measured now."""
    platform = jax.default_backend()
    if platform in _PEAKS:
        return _PEAKS[platform]
    if platform not in _KEPT:
        _KEPT[platform] = read_kept(platform)
    return _KEPT[platform] or machine_peak()


def forget_peak() -> None:
    """Drop the peaks kept in this session (the next use reads the file or measures)."""
    _PEAKS.clear()
    _KEPT.clear()


# ---------------------------------------------------------------- the machine's kept peak


def peak_file() -> Path | None:
    """Where this machine's peaks are kept: ``$JAXLAB_PEAK_FILE``, else
    ``$XDG_CACHE_HOME/jaxlab/peak.json`` (``~/.cache``); None for ``off``."""
    named = os.environ.get(PEAK_FILE_ENV)
    if named is not None:
        return None if named.strip().lower() in ("", "off", "0", "no") else Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxlab" / "peak.json"


def machine_key(platform: str) -> str:
    """What a kept peak belongs to: host, backend, device kind and count, JAX's version."""
    try:
        devices = jax.devices(platform)
        kind, count = devices[0].device_kind, len(devices)
    except Exception:  # the backend went away: nothing kept matches
        kind, count = "?", 0
    return f"{socket.gethostname()} {platform} {kind} x{count} jax {jax.__version__}"


def _shown(path: Path) -> str:
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("peaks"), dict) else {}


def usable(peak: Peak, now: float, load: float | None, cores: int) -> bool:
    """Whether a kept peak still stands: at most ``KEPT_DAYS`` old, and not measured under a
    load more than twice today's when that load was above half the cores (a quieter
    machine measures again, and keeps the better figure)."""
    if not 0 <= now - peak.measured_at <= KEPT_DAYS * 86400:
        return False
    if peak.load is None or load is None:
        return True
    return peak.load <= max(2 * load, cores / 2)


def read_kept(platform: str) -> Peak | None:
    """This machine's kept peak for ``platform``, if there is one and it still stands."""
    path = peak_file()
    if path is None:
        return None
    entry = _read(path).get("peaks", {}).get(machine_key(platform))
    try:
        peak = Peak.from_dict(entry) if isinstance(entry, dict) else None
    except (TypeError, ValueError, KeyError):  # written by another version: measured again
        return None
    if peak is None or not usable(peak, time.time(), load_average(), os.cpu_count() or 1):
        return None
    return replace(peak, kept=_shown(path))


def keep(peak: Peak) -> None:
    """Write ``peak`` as this machine's (replacing its earlier one); a file that cannot be
    written keeps nothing."""
    path = peak_file()
    if path is None:
        return
    data = _read(path) or {"peaks": {}}
    data["peaks"][machine_key(peak.platform)] = replace(peak, kept="").to_dict()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as out:
            json.dump(data, out, indent=1)
        os.replace(out.name, path)
