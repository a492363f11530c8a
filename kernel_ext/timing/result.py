"""``BenchResult``: what one call costs once compiled, measured the way JAX runs it.

A record (frozen, JSON-ready through ``to_dict``) that renders without a kernel::

    r = jaxlab.bench(f, x)
    r.ready_s          # per call: call, wait for every output, repeat (the figure to quote)
    r.pipeline_s       # per call when independent calls are queued back to back
    r.dispatch_s       # per call, until the call returned (the work may still be queued)
    r.naive_s          # what `%timeit -n1 f(x)` would claim; r.naive_ratio: how far off
    r.precision        # 0.004: the median is known within ±0.4% (95%)
    r.compile_s        # the first call: compile plus one run
    r.flops_fraction   # achieved FLOP/s over this machine's measured peak (None above it)
    r.above_peak       # "bytes": faster than memory streams, so it ran from cache
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

# An unblocked figure "agrees" with the awaited one within this factor (or within the
# spread of the rounds, whichever is wider): closer than that is noise, not a finding.
AGREES = 1.25
# Rounds this far apart are not noise around one figure: the call ran at two levels (a host
# callback measured here moved between 105 and 200 µs as the system placed its thread).
UNSTEADY = 1.5


@dataclass(frozen=True)
class CallSpan:
    """One call of the dispatch timeline (``--explain``), in seconds from the first call."""

    call: int
    start_s: float  # the call was made
    return_s: float  # the call returned to Python (dispatch done)
    ready_s: float  # its outputs were ready (observed by blocking on them in order)


@dataclass(frozen=True)
class BenchResult:
    """Compile, dispatch and ready times of one call, with its share of the machine's peak.

    >>> r = jaxlab.bench(f, x)
    >>> r.ready_s >= r.dispatch_s, r.runs, r.repeats
    (True, 10, 7)
    """

    name: str  # the call as written, e.g. "f(x)"
    platform: str
    output: str  # the output's types, e.g. "f32[300,300]"
    asynchronous: bool  # the call returned arrays (so its work could run behind it)
    compile_s: float  # the first call, outputs blocked: compile plus one run
    ready_s: float  # median over rounds of the time per call, each call awaited before the next
    ready_min_s: float  # the fastest round
    ready_max_s: float  # the slowest round
    dispatch_s: float  # median time until a call returns, the device idle before it
    naive_s: float  # median of back-to-back unblocked calls timed one by one (%timeit -n1)
    timeit_s: float  # what %timeit with its loop count (no blocking) reports, interleaved
    timeit_loops: int
    runs: int  # calls per round
    repeats: int  # rounds measured
    pipeline_s: float | None = None  # per call, independent calls queued back to back
    pipeline_calls: int = 0  # calls queued before one block (the pipeline's depth)
    derived: bool = False  # dispatch, naive and %timeit figures read off the timed rounds
    jitted: bool = True  # the call runs as one compiled program
    dispatches: int | None = None  # not jitted: operations dispatched one by one per call
    flops: float | None = None  # XLA's cost analysis, loop bodies times their trip counts
    bytes_accessed: float | None = None
    loops_note: str = ""  # what the trip counts changed, or which loops stay counted once
    peak_flops_s: float | None = None  # this machine's measured peak (jaxlab.timing.peak)
    peak_bytes_s: float | None = None
    peak_note: str = ""  # when and under what load the peak was measured
    peak_flops_spread: str = ""  # the peak's slowest and fastest rounds, "80–95 GFLOP/s"
    peak_bytes_spread: str = ""
    above_peak: str = ""  # "flops"/"bytes"/"flops and bytes": faster than the peak (cache)
    compiled: bool = True  # the first call compiled (in this measurement): its row is shown
    data_bytes: int = 0  # the call's array arguments and outputs
    cache_bytes: int | None = None  # this machine's last-level cache (None: not known)
    precision: float | None = None  # the median's 95% half-width over it (0.004: ±0.4%)
    precision_goal: float | None = None  # rounds stopped once within this (None: -r given)
    timeline: tuple[CallSpan, ...] = ()  # --explain: a few calls' dispatch and ready times
    compare: BenchResult | None = None  # --compare: the other call, measured interleaved

    # ------------------------------------------------------------------ derived figures
    @property
    def naive_ratio(self) -> float:
        """How many times too fast an unblocked single call makes the function look."""
        return self.ready_s / self.naive_s if self.naive_s > 0 else 1.0

    @property
    def spread(self) -> float:
        """The slowest round over the fastest (1.0: every round alike)."""
        return self.ready_max_s / self.ready_min_s if self.ready_min_s > 0 else 1.0

    @property
    def unsteady(self) -> bool:
        """Whether the rounds differ so much that the median is one of several levels."""
        return self.repeats >= 3 and self.spread >= UNSTEADY

    @property
    def timeit_agrees(self) -> bool:
        """Whether unblocked ``%timeit`` lands within noise of the awaited figure."""
        if self.ready_s <= 0 or self.timeit_s <= 0:
            return False
        return self.timeit_s * max(AGREES, self.spread) >= self.ready_s

    @property
    def flops_s(self) -> float | None:
        return self.flops / self.ready_s if self.flops and self.ready_s > 0 else None

    @property
    def bytes_s(self) -> float | None:
        if self.bytes_accessed and self.ready_s > 0:
            return self.bytes_accessed / self.ready_s
        return None

    @property
    def flops_fraction(self) -> float | None:
        """Achieved FLOP/s over the peak; None above it (no share of what it did not use)."""
        if self.flops_s is None or not self.peak_flops_s or "flops" in self.above_peak:
            return None
        return min(1.0, self.flops_s / self.peak_flops_s)

    @property
    def in_cache(self) -> bool:
        """Whether the call's arrays fit in the last-level cache: call after call, its
        traffic is served from cache, not memory."""
        return bool(self.cache_bytes and 0 < self.data_bytes <= self.cache_bytes)

    @property
    def bytes_fraction(self) -> float | None:
        """Achieved bytes/s over memory's; None for a call that runs from cache (faster than
        memory, or its arrays fit in the cache)."""
        if self.bytes_s is None or not self.peak_bytes_s or "bytes" in self.above_peak:
            return None
        if self.in_cache:
            return None
        return min(1.0, self.bytes_s / self.peak_bytes_s)

    @property
    def ratio(self) -> float | None:
        """``compare``'s ready time over this one's (2.0: the other call is twice as slow)."""
        if self.compare is None or self.ready_s <= 0:
            return None
        return self.compare.ready_s / self.ready_s

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (nested records as dicts)."""
        data = dataclasses.asdict(self)
        data["timeline"] = [dataclasses.asdict(s) for s in self.timeline]
        return data

    def __str__(self) -> str:
        return _above.text(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": _above.text(self), "text/html": _above.html(self)}


class Above(NamedTuple):
    """What a :class:`BenchResult` takes from the module above it, which imports it:
    ``bench_view``'s text and HTML."""

    text: Callable[[BenchResult], str]  # bench_view.bench_text
    html: Callable[[BenchResult], str]  # bench_view.bench_html


_above: Above  # set by served_by when timing/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``timing/__init__`` (which any import of the package runs
    first): the drawings every BenchResult uses."""
    global _above
    _above = above
