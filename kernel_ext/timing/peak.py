"""This machine's peak: FLOP/s of a large matmul and bytes/s of a streaming kernel, measured
with the conditions they were measured under.

A peak measured once under a passing load is wrong for the whole session (four kernels on
a shared two-core machine measured 15.6 to 208 GFLOP/s), so each kernel is sized to the
machine (grown until one call lasts ``KERNEL_S``), run ``TRIES`` times, and the median
kept, with when it was measured and the load average then::

    p = machine_peak()                  # measured on first use, then cached
    p.flops_s, p.bytes_s                # e.g. 9.1e10, 1.2e10 on a two-core CPU
    p.measured_at, p.load               # "10:52:45", 1.07
    p = machine_peak(refresh=True)      # %bench --peak

``peak_for`` is the peak a figure is divided by: a share that would pass 150% (the peak was
measured while the machine was busier) or a load average that changed since a measurement
a minute old makes it measure again; a call faster than the peak (by less, or still after
the new measurement) raises the peak to its own rate, so no share is ever above 100%.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp

from ..session.work import jaxlab_work

KERNEL_S = 0.05  # a peak kernel grows until one call lasts this long ...
_MAX_MATMUL_N = {"cpu": 4096}  # ... or reaches this size (default 16,384: 1 GiB)
_MAX_STREAM = {"cpu": 1 << 25}  # elements (128 MiB of float32; default 1 << 28)
TRIES = 5  # calls per kernel; the median is kept
LOAD_CHANGE = 1.0  # a load average this much higher or lower makes the peak stale ...
STALE_AFTER_S = 60.0  # ... once the measurement is this old
# A call this many times over the peak says the peak was measured while the machine was
# busier: measure again. Closer, it is the call's kernel beating the peak's (a 4455² matmul
# ran 186 GFLOP/s against the 4096² peak kernel's 170 here): measuring again would find the
# same and cost 1.4-1.9 s, a fifth of %bench of a 1 s call; the call raises the peak.
DOUBT = 1.5


@dataclass(frozen=True)
class Peak:
    """The FLOP/s and bytes/s measured on the default device, and under what conditions."""

    platform: str
    flops_s: float
    bytes_s: float
    matmul_n: int
    stream_bytes: int
    measured_at: float = 0.0  # time.time() when measured
    load: float | None = None  # the one-minute load average then (None: not known)
    raised_by: str = ""  # "flops"/"bytes": a call measured faster raised it to its own rate

    @property
    def conditions(self) -> str:
        """``"measured at 10:52:45, load average 1.07"``."""
        when = time.strftime("%H:%M:%S", time.localtime(self.measured_at))
        load = f", load average {self.load:.2f}" if self.load is not None else ""
        return f"measured at {when}{load}"

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not on this system
        return None


def _seconds(fun: object, *args: jax.Array) -> float:
    """The median of ``TRIES`` calls, each blocked."""
    times = []
    for _ in range(TRIES):
        t0 = time.perf_counter()
        jax.block_until_ready(fun(*args))  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _once(fun: object, *args: jax.Array) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fun(*args))  # type: ignore[operator]
    return time.perf_counter() - t0


def _matmul_flops_s(platform: str) -> tuple[float, int]:
    largest = _MAX_MATMUL_N.get(platform, 16384)
    n = 256
    while True:
        a = jnp.ones((n, n), jnp.float32)
        matmul = jax.jit(jnp.matmul).lower(a, a).compile()
        _once(matmul, a, a)  # the first run pages memory in
        if _once(matmul, a, a) >= KERNEL_S or 2 * n > largest:
            return 2.0 * n**3 / _seconds(matmul, a, a), n
        n *= 2


def _stream_bytes_s(platform: str) -> tuple[float, int]:
    largest = _MAX_STREAM.get(platform, 1 << 28)
    # from 64 MiB moved: past a CPU's caches, which would stream a small array faster than
    # memory can (a loaded machine reaches KERNEL_S at small sizes: 11 GB/s from cache
    # against 0.8 GB/s from memory, measured here)
    size = 1 << 23
    while True:
        x = jnp.ones((size,), jnp.float32)
        stream = jax.jit(lambda v: v * 2.0 + 1.0).lower(x).compile()
        _once(stream, x)
        moved = 2 * 4 * size  # read once, written once
        if _once(stream, x) >= KERNEL_S or 2 * size > largest:
            return moved / _seconds(stream, x), moved
        size *= 2


def measure_peak(platform: str) -> Peak:
    """Measure both kernels on the default device now."""
    load = load_average()
    with jaxlab_work():
        flops_s, n = _matmul_flops_s(platform)
        bytes_s, moved = _stream_bytes_s(platform)
    return Peak(platform, flops_s, bytes_s, n, moved, time.time(), load)


_PEAKS: dict[str, Peak] = {}


def machine_peak(refresh: bool = False) -> Peak:
    """The default backend's peak: measured on first use (or ``refresh``), then kept."""
    platform = jax.default_backend()
    if refresh or platform not in _PEAKS:
        _PEAKS[platform] = measure_peak(platform)
    return _PEAKS[platform]


def forget_peak() -> None:
    """Drop the kept peaks (the next use measures again)."""
    _PEAKS.clear()


def _stale(peak: Peak) -> bool:
    """The load average moved by LOAD_CHANGE since a measurement at least STALE_AFTER_S old
    (a shared machine's load moves all the time: not a new measurement per %bench)."""
    now = load_average()
    if now is None or peak.load is None or time.time() - peak.measured_at < STALE_AFTER_S:
        return False
    return abs(now - peak.load) >= LOAD_CHANGE


def peak_for(flops_s: float | None, bytes_s: float | None) -> Peak:
    """The peak to divide these rates by: measured again when the load changed or a rate
    passes it by half again (DOUBT); raised to a rate still above it (never a share > 1)."""
    peak = machine_peak()
    doubt = (flops_s or 0) > DOUBT * peak.flops_s or (bytes_s or 0) > DOUBT * peak.bytes_s
    if doubt or _stale(peak):
        peak = machine_peak(refresh=True)
    raised: list[str] = []
    if flops_s and flops_s > peak.flops_s:
        peak, raised = replace(peak, flops_s=flops_s), [*raised, "flops"]
    if bytes_s and bytes_s > peak.bytes_s:
        peak, raised = replace(peak, bytes_s=bytes_s), [*raised, "bytes"]
    peak = replace(peak, raised_by=" and ".join(raised))  # this call's doing, not an earlier's
    if raised:
        _PEAKS[peak.platform] = peak
    return peak
