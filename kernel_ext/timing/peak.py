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
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp

from ..session.work import jaxlab_work

KERNEL_S = 0.02  # the matmul grows until one call lasts this long ...
_MAX_MATMUL_N = {"cpu": 4096}  # ... or reaches this size (default 16,384: 1 GiB)
TRIES = 5  # timed calls per kernel (after one warm-up); the median is kept
STREAM_CACHES = 2  # the stream's array is at least this many last-level caches ...
MIN_STREAM_BYTES = 256 << 20  # ... and at least this many bytes
_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


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

    @property
    def when(self) -> str:
        """``"measured at 10:52:45, load average 1.07"``."""
        when = time.strftime("%H:%M:%S", time.localtime(self.measured_at))
        load = f", load average {self.load:.2f}" if self.load is not None else ""
        return f"measured at {when}{load}"

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
    largest = _MAX_MATMUL_N.get(platform, 16384)
    n = 256
    while True:
        a = jnp.ones((n, n), jnp.float32)
        matmul = jax.jit(jnp.matmul).lower(a, a).compile()
        _timed(matmul, a, a)  # the first run pages memory in
        if _timed(matmul, a, a) >= KERNEL_S or 2 * n > largest:
            work = 2.0 * n**3
            return [work / _timed(matmul, a, a) for _ in range(TRIES)], n
        n *= 2


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
    )


_PEAKS: dict[str, Peak] = {}


def machine_peak(refresh: bool = False) -> Peak:
    """The default backend's peak: measured on first use (or ``refresh``), then kept for the
    session (measured calls never change it)."""
    platform = jax.default_backend()
    if refresh or platform not in _PEAKS:
        _PEAKS[platform] = measure_peak(platform)
    return _PEAKS[platform]


def forget_peak() -> None:
    """Drop the kept peaks (the next use measures again)."""
    _PEAKS.clear()
