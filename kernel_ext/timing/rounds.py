"""The timed loops of ``%bench``: one round of each kind of figure, and how many calls.

Every loop holds at most the outputs it says (a call returning 512 MB must not be held
seven times), and runs with Python's garbage collector paused, as ``timeit`` runs::

    per_call = ready_round(call, 100)            # call, block, repeat: seconds per call
    per_call, returns = ready_round(call, 3, record=True)   # ... and each call's return
    pipeline_round(call, 100, depth=20)          # 20 independent calls queued, one block
    unblocked_round(call, 50)                    # %timeit's loop: nothing awaited inside
    known([2.01e-3, 2.0e-3, 2.02e-3])            # True: the median is known within ±2%

Rounds stop as soon as the median is known to ``PRECISION`` (``known``): the half-width of
its 95% interval, ``t · 1.2533 · s / √n`` (the median's standard error for normal rounds,
``s`` their standard deviation, ``t`` Student's for n - 1 degrees of freedom), over the
median, after at least ``MIN_ROUNDS``. An outlier round widens the interval, so the rounds
go on; a steady call stops at three.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax

# As timeit does: a collection in the middle of a round is not the call's time.
from ..session.collector import collector_paused

ROUND_S = 0.2  # a round of calls lasts at least this long (as %timeit's autorange)
MAX_RUNS = 100_000
PRECISION = 0.02  # rounds stop once the median is known within ±2% (95%) ...
MIN_ROUNDS = 3  # ... after at least this many
MAX_ROUNDS = 7  # ... or after this many (%timeit's default), known or not
# Student's t for a 95% interval, by degrees of freedom (n - 1 rounds); beyond: 1.96 + 2.5/df
_T95 = (12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def ready_round(call: Callable[[], Any], n: int, single: bool = False) -> float:
    """Seconds per call of ``n`` calls, each one's outputs awaited before the next call (what
    a loop that reads ``float(loss)`` pays). One output alive at a time.

    ``single``: the call returns one array, awaited by its own method, as the user's
    ``%timeit f(x).block_until_ready()`` awaits it: ``jax.block_until_ready`` walks its
    argument as a tree first, 0.6-2 µs a call, which read a 1×1 add 18-28% slower than
    that ``timeit`` (7.0 against 9.0 µs on an idle machine; benchmarks/bench_accuracy.py)."""
    clock = time.perf_counter
    with collector_paused():
        if single:
            t0 = clock()
            for _ in range(n):
                call().block_until_ready()
            return (clock() - t0) / n
        block = jax.block_until_ready
        t0 = clock()
        for _ in range(n):
            block(call())
        return (clock() - t0) / n


def recorded_round(
    call: Callable[[], Any], n: int, single: bool = False
) -> tuple[float, list[float]]:
    """``ready_round``, also timing each call until it returned (for slow calls, whose
    dispatch figures are read off the timed rounds instead of extra calls)."""
    clock = time.perf_counter
    block = _awaiter(single)
    returns = []
    with collector_paused():
        start = clock()
        for _ in range(n):
            t0 = clock()
            out = call()
            returns.append(clock() - t0)
            block(out)
            out = None  # not alive while the next call runs
        return (clock() - start) / n, returns


def _awaiter(single: bool) -> Callable[[Any], Any]:
    return _await_one if single else jax.block_until_ready


def _await_one(out: Any) -> Any:
    return out.block_until_ready()


def pipeline_round(call: Callable[[], Any], n: int, depth: int) -> float:
    """Seconds per call of ``n`` independent calls queued ``depth`` at a time, each group
    awaited once: what a pipeline of calls that do not wait on each other reaches."""
    clock = time.perf_counter
    times = []
    with collector_paused():
        for start in range(0, n, depth):
            size = min(depth, n - start)
            t0 = clock()
            outs = [call() for _ in range(size)]
            jax.block_until_ready(outs)
            times.append((clock() - t0) / size)
            outs = []
    return sorted(times)[len(times) // 2]


def unblocked_round(call: Callable[[], Any], n: int) -> float:
    """What ``%timeit -n {n}`` measures: ``n`` calls with nothing awaited, per call. Only the
    last output is kept (to wait for the queue to drain after the clock stopped)."""
    clock = time.perf_counter
    with collector_paused():
        t0 = clock()
        for _ in range(n - 1):
            call()
        last = call()
        elapsed = clock() - t0
    jax.block_until_ready(last)
    return elapsed / n


def single_unblocked(call: Callable[[], Any], calls: int) -> list[float]:
    """``%timeit -n1 -r{calls}``: back-to-back unblocked calls, each timed alone."""
    clock = time.perf_counter
    times = []
    last = None
    with collector_paused():
        for _ in range(calls):
            last = None
            t0 = clock()
            last = call()
            times.append(clock() - t0)
    jax.block_until_ready(last)
    return times


def steps() -> Iterator[int]:
    for exponent in range(6):
        for base in (1, 2, 5):
            yield base * 10**exponent


def autorange(per_call: Callable[[int], float], cap: int) -> tuple[int, float]:
    """The first n of 1, 2, 5, 10, ... (at most ``cap``) whose round lasts ROUND_S, with
    that round's seconds per call."""
    n, t = 1, 0.0
    for n in steps():
        n = min(n, cap)
        t = per_call(n)
        if n * t >= ROUND_S or n >= cap:
            break
    return n, t


def median_precision(per_call: Sequence[float]) -> float:
    """The half-width of the median's 95% interval over the median (0.01: known within
    ±1%); infinite with fewer than two rounds."""
    n = len(per_call)
    middle = statistics.median(per_call) if n else 0.0
    if n < 2 or middle <= 0:
        return math.inf
    df = n - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96 + 2.5 / df
    return t * 1.2533 * statistics.stdev(per_call) / math.sqrt(n) / middle


def known(per_call: Sequence[float], precision: float = PRECISION) -> bool:
    """Whether rounds may stop: ``MIN_ROUNDS`` at least, the median known to ``precision``."""
    return len(per_call) >= MIN_ROUNDS and median_precision(per_call) <= precision
