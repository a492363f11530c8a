"""Measure a call as JAX runs it: compile once, then dispatch and ready times apart.

JAX dispatches asynchronously: ``f(x)`` returns as soon as the work is queued, so timing
the call alone measures the queueing. ``bench`` blocks on every output leaf
(``jax.block_until_ready``) for the figure it quotes, and measures the misleading
figures too, so the difference can be shown::

    r = jaxlab.bench(f, x)                        # a BenchResult
    r = jaxlab.bench(f, x, compare=(g, x))        # g measured interleaved; r.ratio
    r = jaxlab.bench(f, x, runs=10, repeats=5)    # instead of choosing like %timeit

Steady state: ``repeats`` rounds of ``runs`` calls (chosen as ``%timeit`` chooses its
loops: the first of 1, 2, 5, 10, 20, ... whose round takes 0.2 s). A round makes its
calls in bursts of at most 20 back to back, every output of a burst blocked at its end;
the figure quoted is the median over rounds of their median burst. Bursts keep the queue as
short as a user's loop keeps it and make the median robust to a busy machine (long
unbroken loops ran up to 4× slower per call on a shared two-core machine).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax

from .._jax_compat import cost_analysis
from ..compile.capture import jaxlab_work
from ..compile.messages import short_type
from .result import BenchResult, CallSpan

ROUND_S = 0.2  # a round of calls lasts at least this long (as %timeit's autorange)
BURST = 20  # calls back to back before blocking on their outputs
HELD_BYTES = 256 << 20  # outputs held unblocked at once, at most (bounds bursts, %timeit)
MAX_RUNS = 100_000
PROGRESS_AFTER_S = 1.0  # show a progress bar when the measurement takes longer
NAIVE_CALLS = 7  # %timeit -n1 -r7
DISPATCH_CALLS = 5
TIMELINE_CALLS = 4


class BenchError(ValueError):
    """Bad measurement settings (a run count below one, ...); the message says the fix."""


@dataclass
class _Target:
    fun: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    runs: int = 0
    rounds: list[float] = field(default_factory=list)  # per-call median of each round
    compile_s: float = 0.0
    estimate_s: float = 0.0  # per call, from choosing the number of runs
    out: Any = None

    def __call__(self) -> Any:
        return self.fun(*self.args, **self.kwargs)

    @property
    def arrays(self) -> list[jax.Array]:
        return [x for x in jax.tree_util.tree_leaves(self.out) if isinstance(x, jax.Array)]


def _name(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    def arg(a: Any) -> str:
        return short_type(a) if isinstance(a, jax.Array) else type(a).__name__

    parts = [arg(a) for a in args] + [f"{k}={arg(v)}" for k, v in kwargs.items()]
    return f"{getattr(fun, '__name__', type(fun).__name__)}({', '.join(parts)})"


def _check_counts(runs: int | None, repeats: int) -> None:
    if runs is not None and (not isinstance(runs, int) or runs < 1 or runs > MAX_RUNS):
        raise BenchError(f"runs must be a whole number from 1 to {MAX_RUNS:,}, not {runs!r}")
    if not isinstance(repeats, int) or repeats < 1 or repeats > 1000:
        raise BenchError(f"repeats must be a whole number from 1 to 1,000, not {repeats!r}")


def _round(target: _Target, n: int) -> list[float]:
    """Seconds per call of each burst of ``n`` calls, every output of a burst blocked."""
    burst = min(BURST, _cap(target))
    # The call itself, bound once: no wrapper frame per call (about 3 µs on a 10 µs function)
    call = functools.partial(target.fun, *target.args, **target.kwargs)
    times = []
    for start in range(0, n, burst):
        size = min(burst, n - start)
        t0 = time.perf_counter()
        outs = [call() for _ in range(size)]
        jax.block_until_ready(outs)
        times.append((time.perf_counter() - t0) / size)
    return times


def _round_mean(target: _Target, n: int) -> float:
    return statistics.fmean(_round(target, n))


def _unblocked_round(target: _Target, n: int) -> float:
    """What %timeit measures: ``n`` calls with nothing blocked, per call (blocked after)."""
    t0 = time.perf_counter()
    outs = [target() for _ in range(n)]
    elapsed = time.perf_counter() - t0
    jax.block_until_ready(outs)
    return elapsed / n


def _steps() -> Iterator[int]:
    for exponent in range(7):
        for base in (1, 2, 5):
            yield base * 10**exponent


def _autorange(per_call: Callable[[int], float], cap: int) -> tuple[int, float]:
    """The first n of 1, 2, 5, 10, ... (at most ``cap``) whose round lasts ROUND_S."""
    n, t = 1, 0.0
    for n in _steps():
        n = min(n, cap)
        t = per_call(n)
        if n * t >= ROUND_S or n >= cap:
            break
    return n, t


def _cap(target: _Target) -> int:
    held = sum(x.nbytes for x in target.arrays) or 1
    return max(1, min(MAX_RUNS, HELD_BYTES // held))


def _first_call(target: _Target) -> None:
    t0 = time.perf_counter()
    target.out = target()
    jax.block_until_ready(target.out)
    target.compile_s = time.perf_counter() - t0


def _dispatch(target: _Target, calls: int) -> float:
    """Median time until a call returns, each made with the device idle."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        out = target()
        times.append(time.perf_counter() - t0)
        jax.block_until_ready(out)
    return statistics.median(times)


def _naive(target: _Target) -> float:
    """``%timeit -n1 -r7 f(x)``: seven unblocked calls, each timed alone."""
    times, outs = [], []
    for _ in range(NAIVE_CALLS):
        t0 = time.perf_counter()
        outs.append(target())
        times.append(time.perf_counter() - t0)
    jax.block_until_ready(outs)
    return statistics.median(times)


def _timeline(target: _Target) -> tuple[CallSpan, ...]:
    """A few back-to-back calls: when each returned, and when its outputs were ready."""
    starts, returns, outs = [], [], []
    t0 = time.perf_counter()
    for _ in range(TIMELINE_CALLS):
        starts.append(time.perf_counter() - t0)
        outs.append(target())
        returns.append(time.perf_counter() - t0)
    ready = []
    for out in outs:  # calls finish in order, so blocking in order observes each finish
        jax.block_until_ready(out)
        ready.append(time.perf_counter() - t0)
    return tuple(
        CallSpan(i, s, r, d) for i, (s, r, d) in enumerate(zip(starts, returns, ready, strict=True))
    )


def _cost(target: _Target) -> tuple[float | None, float | None]:
    """XLA's FLOPs and bytes for the call, or (None, None) when it cannot be compiled alone."""
    lower = getattr(target.fun, "lower", None)
    try:
        with jaxlab_work():
            if not callable(lower):
                lower = jax.jit(target.fun).lower
            compiled = lower(*target.args, **target.kwargs).compile()
            analysis = cost_analysis(compiled)
            if not analysis:  # equinox's filter_jit wraps JAX's Compiled as `.compiled`
                analysis = cost_analysis(getattr(compiled, "compiled", None))
    except Exception:  # a function jax.jit cannot trace as a whole (Python control flow)
        return None, None
    flops = analysis.get("flops")
    moved = analysis.get("bytes accessed")
    return (flops if flops and flops > 0 else None), (moved if moved and moved > 0 else None)


def _progress(total: int, seconds: float, name: str) -> Any:
    if seconds < PROGRESS_AFTER_S:
        return None
    from tqdm.auto import tqdm  # only when a measurement is long enough to watch

    return tqdm(total=total, desc=f"%bench {name}", leave=False)


def measure(
    targets: Sequence[_Target], runs: int | None, repeats: int, explain: bool
) -> list[BenchResult]:
    """Measure ``targets`` side by side: their rounds alternate, so drift hits all alike."""
    _check_counts(runs, repeats)
    for t in targets:
        _first_call(t)
    for t in targets:
        if runs is not None:
            t.runs, t.estimate_s = runs, t.compile_s  # an upper bound: compiling is slower
        else:
            t.runs, t.estimate_s = _autorange(functools.partial(_round_mean, t), MAX_RUNS)
    estimate = sum(t.runs * t.estimate_s for t in targets) * repeats
    bar = _progress(repeats * len(targets), estimate, targets[0].name)
    try:
        for _ in range(repeats):
            for t in targets:
                bursts = _round(t, t.runs)
                t.rounds.append(statistics.median(bursts))
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return [_result(t, repeats, explain) for t in targets]


def _result(t: _Target, repeats: int, explain: bool) -> BenchResult:
    ready = statistics.median(t.rounds)  # each round: the median of its bursts
    asynchronous = bool(t.arrays)
    if asynchronous:
        dispatch = min(_dispatch(t, DISPATCH_CALLS), ready)
        naive = _naive(t)
        # %timeit's own autorange would queue calls until their dispatch alone took 0.2 s
        # (hours of work for a slow call): it is followed while the work stays small.
        cap = min(_cap(t), max(1, int(2 * ROUND_S / ready)))
        loops, timeit_s = _autorange(lambda n: _unblocked_round(t, n), cap)
        flops, moved = _cost(t)
    else:  # nothing was queued: the call's return is the end of its work
        dispatch = naive = timeit_s = ready
        loops, flops, moved = t.runs, None, None
    peak = None
    if flops or moved:
        from .peak import machine_peak

        peak = machine_peak()
    leaves = jax.tree_util.tree_leaves(t.out)
    output = ", ".join(short_type(x) for x in t.arrays[:4]) if asynchronous else ""
    if len(t.arrays) > 4:
        output += f", … ({len(t.arrays)} arrays)"
    if not asynchronous:
        output = type(t.out).__name__ if not leaves else f"{len(leaves)} non-array leaves"
    return BenchResult(
        name=t.name,
        platform=jax.default_backend(),
        output=output,
        asynchronous=asynchronous,
        compile_s=t.compile_s,
        ready_s=ready,
        ready_min_s=min(t.rounds),
        ready_max_s=max(t.rounds),
        dispatch_s=dispatch,
        naive_s=naive,
        timeit_s=timeit_s,
        timeit_loops=loops,
        runs=t.runs,
        repeats=repeats,
        flops=flops,
        bytes_accessed=moved,
        peak_flops_s=peak.flops_s if peak is not None and flops else None,
        peak_bytes_s=peak.bytes_s if peak is not None and moved else None,
        timeline=_timeline(t) if explain and asynchronous else (),
    )


def target(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str = ""
) -> _Target:
    """A call to measure (``name``: how to show it; by default ``f(f32[3], int)``)."""
    if not callable(fun):
        raise BenchError(f"{fun!r} is not callable: pass the function, then its arguments")
    return _Target(fun, args, dict(kwargs), name or _name(fun, args, kwargs))


def bench_targets(
    main: _Target,
    other: _Target | None = None,
    *,
    runs: int | None = None,
    repeats: int = 7,
    explain: bool = False,
) -> BenchResult:
    """``main`` measured (with ``other`` interleaved, attached as ``compare``)."""
    results = measure([main] if other is None else [main, other], runs, repeats, explain)
    if other is None:
        return results[0]
    return _with_compare(results[0], results[1])


def _with_compare(first: BenchResult, second: BenchResult) -> BenchResult:
    return dataclasses.replace(first, compare=second)


def bench(
    fun: Callable[..., Any],
    *args: Any,
    runs: int | None = None,
    repeats: int = 7,
    compare: tuple[Any, ...] | Callable[[], Any] | None = None,
    explain: bool = False,
    **kwargs: Any,
) -> BenchResult:
    """Measure ``fun(*args, **kwargs)``: first call, steady state, and what naive timing says.

    ``compare``: ``(g, *g_args)`` (or a function of no arguments) measured interleaved;
    ``explain``: keep a timeline of a few calls (dispatch returning, work finishing).

    >>> r = jaxlab.bench(jnp.matmul, a, b)
    >>> r.ready_s > r.naive_s
    True
    """
    other = None
    if compare is not None:
        if callable(compare):
            other = target(compare, (), {}, getattr(compare, "__name__", "compare") + "()")
        elif isinstance(compare, tuple) and compare and callable(compare[0]):
            other = target(compare[0], tuple(compare[1:]), {})
        else:
            raise BenchError("compare takes (g, *args) or a function of no arguments")
    return bench_targets(
        target(fun, args, kwargs), other, runs=runs, repeats=repeats, explain=explain
    )
