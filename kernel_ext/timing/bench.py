"""Measure a call as JAX runs it: compile once, then per-call, pipeline and dispatch times.

JAX dispatches asynchronously: ``f(x)`` returns as soon as the work is queued, so timing
the call alone measures the queueing. The figure ``bench`` quotes is the time of one call
until every output is ready, call after call (call, block, repeat: what a training loop
that reads ``float(loss)`` pays). Beside it: what a pipeline of independent calls reaches,
and the misleading figures, measured so the difference can be shown::

    r = jaxlab.bench(f, x)                        # a BenchResult
    r = jaxlab.bench(f, x, compare=(g, x))        # g measured interleaved; r.ratio
    r = jaxlab.bench(f, x, runs=10, repeats=5)    # instead of choosing like %timeit

Steady state: rounds of ``runs`` calls (chosen as ``%timeit`` chooses its loops: the first
of 1, 2, 5, 10, 20, ... whose round takes 0.2 s, that round counting as the first), until
the median is known within ``rounds.PRECISION`` (3 to 7 rounds; ``repeats`` rounds when
given); the median round is quoted. Each of the first ``SIDE_ROUNDS`` rounds is followed
by a short pipeline round and a short unblocked ``%timeit`` round (``SIDE_SHARE`` of its
calls), so all three see the same load at a tenth of the cost each. A slow call
(``SLOW_S`` and more) is not called again for those: its dispatch figures are read off
the timed rounds. At most two of the call's outputs are alive at a time, or up to
``PIPELINE_DEPTH`` small ones (``HELD_BYTES`` in all). XLA's cost of a call is kept per
function and argument types: a call measured again is not costed again (``bench_cost``),
and the machine's peak is measured once a session or read from the machine's file
(``peak.known_peak``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax

from ..compile.messages import short_type
from ..session.work import jaxlab_work, results_unseen
from . import rounds as timed
from .bench_cost import CallCost, call_cost
from .bench_progress import Progress
from .result import BenchResult, CallSpan

SLOW_S = 0.01  # a call this slow is not called again for the dispatch figures
PIPELINE_DEPTH = 20  # independent calls queued before one block ...
HELD_BYTES = 64 << 20  # ... as long as their outputs stay under this (and at least two)
SIDE_SHARE = 0.1  # a pipeline or %timeit round makes this share of a timed round's calls
SIDE_ROUNDS = 3  # ... and follows each of the first this many timed rounds
NAIVE_CALLS = 7  # %timeit -n1 -r7
DISPATCH_CALLS = 20
TIMELINE_CALLS = 4
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # JAX: XLA compiled a program


class BenchError(ValueError):
    """Bad measurement settings or a call that cannot be timed; the message says the fix."""


class CallFailed(Exception):
    """The user's call raised on its first call: ``error`` is the user's own exception,
    ``name`` the call as shown."""

    def __init__(self, error: BaseException, name: str) -> None:
        super().__init__(str(error))
        self.error, self.name = error, name


@dataclass
class _Target:
    fun: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    runs: int = 0
    runs_given: bool = False  # -n: the side rounds make as many calls as a timed round
    rounds: list[float] = field(default_factory=list)  # seconds per call of each round
    returns: list[float] = field(default_factory=list)  # slow calls: each call's return
    pipeline: list[float] = field(default_factory=list)
    unblocked: list[float] = field(default_factory=list)
    timeit_loops: int = 1
    compile_s: float = 0.0
    compiled: bool = False  # XLA compiled during the first call (not earlier in the session)
    single: bool = False  # the call returns one array: awaited by its own method (rounds.py)
    output: str = ""
    arrays: int = 0
    out_bytes: int = 0

    @functools.cached_property
    def call(self) -> Callable[[], Any]:
        # The call itself, bound once: no wrapper frame per call (about 3 µs on a 10 µs call)
        return functools.partial(self.fun, *self.args, **self.kwargs)

    @property
    def slow(self) -> bool:
        return bool(self.rounds) and self.rounds[0] >= SLOW_S

    @property
    def side_calls(self) -> int:
        """Calls of a pipeline or unblocked round: ``SIDE_SHARE`` of a timed round's (all of
        them with ``-n``), two at least."""
        if self.runs_given:
            return self.runs
        return max(2, math.ceil(self.runs * SIDE_SHARE)) if self.runs else PIPELINE_DEPTH

    @property
    def depth(self) -> int:
        """Calls queued at once in a pipeline round: bounded by their outputs' bytes, and by
        the calls of a side round (``-n 2`` asks for two calls at a time, not twenty)."""
        return max(1, min(PIPELINE_DEPTH, self.held, self.side_calls))

    @property
    def held(self) -> int:
        """Outputs that may be alive at once: two, or more small ones within HELD_BYTES."""
        return max(2, HELD_BYTES // max(1, self.out_bytes))

    def pipeline_round(self) -> None:
        """``side_calls`` calls, queued ``depth`` at a time."""
        self.pipeline.append(timed.pipeline_round(self.call, self.side_calls, self.depth))


def _name(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    def arg(a: Any) -> str:
        return short_type(a) if isinstance(a, jax.Array) else type(a).__name__

    parts = [arg(a) for a in args] + [f"{k}={arg(v)}" for k, v in kwargs.items()]
    return f"{getattr(fun, '__name__', type(fun).__name__)}({', '.join(parts)})"


def _check_counts(runs: int | None, repeats: int | None) -> None:
    most = timed.MAX_RUNS
    if runs is not None and (not isinstance(runs, int) or runs < 1 or runs > most):
        raise BenchError(f"runs must be a whole number from 1 to {most:,}, not {runs!r}")
    if repeats is None:  # until the median is known
        return
    if not isinstance(repeats, int) or repeats < 1 or repeats > 1000:
        raise BenchError(f"repeats must be a whole number from 1 to 1,000, not {repeats!r}")


def _refusal(fun: Callable[..., Any]) -> str:
    """Why calling ``fun`` would time something other than its work ('' when it would not)."""
    name = getattr(fun, "__name__", type(fun).__name__)
    plain = fun.func if isinstance(fun, functools.partial) else fun
    if inspect.isclass(plain):
        return (
            f"`{name}` is a class: timing it would time building an instance; "
            "bench a method or a function of the instance instead"
        )
    if inspect.isgeneratorfunction(plain) or inspect.isasyncgenfunction(plain):
        return (
            f"`{name}` is a generator function: calling it only creates a generator; "
            f"bench a call that consumes it, e.g. `list({name}(...))`"
        )
    if inspect.iscoroutinefunction(plain):
        return (
            f"`{name}` is an async function: calling it only creates a coroutine; "
            "bench the work it awaits as a plain function"
        )
    return ""


def _refuse_result(name: str, out: Any) -> None:
    """A call that returned a generator or coroutine made only that: refuse, and close it
    (an unawaited coroutine would warn in a later cell)."""
    kinds = (
        (inspect.iscoroutine, "a coroutine"),
        (inspect.isgenerator, "a generator"),
        (inspect.isasyncgen, "an async generator"),
    )
    for test, kind in kinds:
        if test(out):
            close = getattr(out, "close", None) or getattr(out, "aclose", None)
            if inspect.isasyncgen(out):
                close = None  # closing one needs an event loop; dropping it warns nothing
            if close is not None:
                close()
            raise BenchError(
                f"`{name}` returned {kind}: timing it would time creating it, not its work; "
                "bench a call that runs the work to the end"
            )


@contextlib.contextmanager
def _compiles_seen() -> Iterator[list[str]]:
    """XLA compilations this thread reports while the block runs (JAX's monitoring event;
    a function compiled cells earlier reports none)."""
    import jax.monitoring as monitoring

    seen: list[str] = []
    me = threading.get_ident()

    def listener(event: str, duration_secs: float, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE and threading.get_ident() == me:
            seen.append(event)

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        monitoring.unregister_event_duration_listener(listener)


def _first_call(t: _Target) -> None:
    with _compiles_seen() as compiles:
        t0 = time.perf_counter()
        try:
            out = t.call()
            jax.block_until_ready(out)
        except Exception as e:  # the user's own error (a bad static argument, a shape): theirs
            raise CallFailed(e, t.name) from e
        t.compile_s = time.perf_counter() - t0
    t.compiled = bool(compiles)
    _refuse_result(t.name, out)
    arrays = [x for x in jax.tree_util.tree_leaves(out) if isinstance(x, jax.Array)]
    t.arrays, t.out_bytes = len(arrays), sum(x.nbytes for x in arrays)
    t.single = isinstance(out, jax.Array)
    if arrays:
        t.output = ", ".join(short_type(x) for x in arrays[:4])
        if len(arrays) > 4:
            t.output += f", … ({len(arrays)} arrays)"
    else:
        leaves = jax.tree_util.tree_leaves(out)
        if not leaves or leaves == [out]:  # None, a float: named by its type
            t.output = type(out).__name__
        else:
            t.output = f"{len(leaves)} non-array leaf" + ("" if len(leaves) == 1 else "s")


def _ready_round(t: _Target, n: int) -> float:
    if t.slow or (not t.rounds and t.compile_s >= SLOW_S):
        per_call, returns = timed.recorded_round(t.call, n, t.single)
        t.returns += returns
        return per_call
    return timed.ready_round(t.call, n, t.single)


def _choose_runs(t: _Target, runs: int | None) -> None:
    """Runs per round, as %timeit chooses its loops; a slow call's count is predicted from
    one call (no rounds of 1, 2, ... calls of it), which counts as the first timed round."""
    if runs is not None:
        t.runs, t.runs_given = runs, True
        return
    first, returns = timed.recorded_round(t.call, 1, t.single)
    if first < SLOW_S:
        auto = functools.partial(timed.ready_round, t.call, single=t.single)
        t.runs, per_call = timed.autorange(auto, timed.MAX_RUNS)
        t.rounds.append(per_call)
        return
    t.runs = next(n for n in timed.steps() if n * first >= timed.ROUND_S)
    if t.runs == 1:  # one call is a round: the first one measured counts
        t.rounds.append(first)
        t.returns += returns
    else:  # its side rounds (if it turns out fast after all) follow in measure()
        t.rounds.append(_ready_round(t, t.runs))


def _choose_timeit_loops(t: _Target) -> None:
    """The unblocked round's loops (``%timeit -n``): the side rounds' calls, capped where
    the queued outputs would hold more bytes than the pipeline may."""
    t.timeit_loops = max(1, min(t.side_calls, HELD_BYTES // max(1, t.out_bytes)))


def _side_rounds(t: _Target) -> None:
    """A pipeline round and an unblocked round after one of the first ``SIDE_ROUNDS``
    timed rounds: the same load."""
    if t.slow or not t.arrays or len(t.pipeline) >= SIDE_ROUNDS:
        return
    t.pipeline_round()
    t.unblocked.append(timed.unblocked_round(t.call, t.timeit_loops))


def _measure_round(t: _Target) -> None:
    t.rounds.append(_ready_round(t, t.runs))
    _side_rounds(t)


def _done(targets: Sequence[_Target], repeats: int | None, precision: float) -> bool:
    """Every target has its ``repeats`` rounds; by default, its median known to
    ``precision`` (``rounds.known``) or ``rounds.MAX_ROUNDS`` rounds."""
    if repeats is not None:
        return all(len(t.rounds) >= repeats for t in targets)
    return all(
        len(t.rounds) >= timed.MAX_ROUNDS or timed.known(t.rounds, precision) for t in targets
    )


def measure(
    targets: Sequence[_Target],
    runs: int | None,
    repeats: int | None,
    explain: bool,
    precision: float = timed.PRECISION,
) -> list[BenchResult]:
    """Measure ``targets`` side by side: their rounds alternate, so drift hits all alike,
    until each median is known to ``precision`` (or ``repeats`` rounds, when given)."""
    _check_counts(runs, repeats)
    # The first call compiles the user's function (logged as theirs); its outputs are
    # only measured, so its random draws are not the user's (key tracking records none).
    # Every call after it is jaxlab's work (the compile log counts it as such).
    with results_unseen():
        for t in targets:
            _first_call(t)
    with jaxlab_work():
        return _measure_rounds(targets, runs, repeats, explain, precision)


def _measure_rounds(
    targets: Sequence[_Target],
    runs: int | None,
    repeats: int | None,
    explain: bool,
    precision: float,
) -> list[BenchResult]:
    for t in targets:
        _choose_runs(t, runs)
        _choose_timeit_loops(t)
        if t.rounds:  # the autorange's last round counts: its side rounds follow it
            _side_rounds(t)
    for t in targets:  # with the runs given, a first round tells how long the rest takes
        if not t.rounds:
            _measure_round(t)
    most = repeats if repeats is not None else timed.MAX_ROUNDS
    left = max(0, most - min(len(t.rounds) for t in targets))
    # a fast call's first rounds are followed by a pipeline round and a %timeit round
    share = 1 + 2 * (1.0 if any(t.runs_given for t in targets) else SIDE_SHARE)
    estimate = sum(left * t.runs * t.rounds[0] * (1 if t.slow else share) for t in targets)
    progress = Progress(left, estimate, targets[0].name, most=repeats is None)
    with progress:
        while not _done(targets, repeats, precision):
            for t in targets:
                if repeats is None or len(t.rounds) < repeats:
                    _measure_round(t)
            progress.advance()
    for t in targets:  # one round was all (-r 1): the pipeline is still measured once
        if not t.slow and t.arrays and not t.pipeline:
            t.pipeline_round()
    goal = precision if repeats is None else None
    return [_result(t, goal, explain) for t in targets]


def _timeline(t: _Target) -> tuple[CallSpan, ...]:
    """A few back-to-back calls: when each returned, and when its outputs were ready."""
    starts, returns, outs = [], [], []
    t0 = time.perf_counter()
    for _ in range(min(TIMELINE_CALLS, t.held if not t.slow else 2)):
        starts.append(time.perf_counter() - t0)
        outs.append(t.call())
        returns.append(time.perf_counter() - t0)
    ready = []
    for i, out in enumerate(outs):  # calls finish in order: blocking in order sees each end
        jax.block_until_ready(out)
        ready.append(time.perf_counter() - t0)
        outs[i] = None
    return tuple(
        CallSpan(i, s, r, d) for i, (s, r, d) in enumerate(zip(starts, returns, ready, strict=True))
    )


def _array_bytes(tree: Any) -> int:
    return sum(x.nbytes for x in jax.tree_util.tree_leaves(tree) if isinstance(x, jax.Array))


def _result(t: _Target, goal: float | None, explain: bool) -> BenchResult:
    ready = statistics.median(t.rounds)
    asynchronous = t.arrays > 0
    derived = t.slow or not asynchronous
    if not asynchronous:  # nothing was queued: the call's return is the end of its work
        dispatch = naive = unblocked = ready
    elif t.slow:
        if not t.returns:  # a single round with its count given: one call more tells it
            t.returns = timed.recorded_round(t.call, 1, t.single)[1]
        dispatch = naive = unblocked = statistics.median(t.returns)
    else:
        calls = max(3, min(DISPATCH_CALLS, t.side_calls))  # about a side round's calls
        dispatch = statistics.median(timed.recorded_round(t.call, calls, t.single)[1])
        naive = statistics.median(timed.single_unblocked(t.call, NAIVE_CALLS))
        unblocked = statistics.median(t.unblocked)
    cost = call_cost(t.fun, t.args, t.kwargs) if asynchronous else CallCost()
    flops, moved = cost.flops, cost.bytes_accessed
    peak, above = None, ""
    if flops or moved:
        from .peak import known_peak

        peak = known_peak()  # one per session (or the machine's kept one): never changed
        faster = [
            kind
            for kind, done, best in (("flops", flops, peak.flops_s), ("bytes", moved, peak.bytes_s))
            if done and done / ready > best
        ]
        above = " and ".join(faster)
    return BenchResult(
        name=t.name,
        platform=jax.default_backend(),
        output=t.output,
        asynchronous=asynchronous,
        compile_s=t.compile_s,
        ready_s=ready,
        ready_min_s=min(t.rounds),
        ready_max_s=max(t.rounds),
        dispatch_s=min(dispatch, ready),
        naive_s=naive,
        timeit_s=unblocked,
        timeit_loops=t.timeit_loops if not derived else 1,
        runs=t.runs,
        repeats=len(t.rounds),
        precision=timed.median_precision(t.rounds) if len(t.rounds) > 1 else None,
        precision_goal=goal,
        pipeline_s=statistics.median(t.pipeline) if t.pipeline else None,
        pipeline_calls=t.depth if t.pipeline else 0,
        derived=derived and asynchronous,
        jitted=cost.jitted,
        dispatches=cost.dispatches,
        flops=flops,
        bytes_accessed=moved,
        loops_note=cost.loops_note,
        peak_flops_s=peak.flops_s if peak is not None and flops else None,
        peak_bytes_s=peak.bytes_s if peak is not None and moved else None,
        peak_note=peak.when if peak is not None else "",
        peak_flops_spread=peak.spread("flops") if peak is not None and flops else "",
        peak_bytes_spread=peak.spread("bytes") if peak is not None and moved else "",
        above_peak=above,
        compiled=t.compiled,
        data_bytes=_array_bytes((t.args, t.kwargs)) + t.out_bytes,
        cache_bytes=peak.cache_bytes if peak is not None else None,
        timeline=_timeline(t) if explain and asynchronous else (),
    )


def target(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str = ""
) -> _Target:
    """A call to measure (``name``: how to show it; by default ``f(f32[3], int)``)."""
    if not callable(fun):
        raise BenchError(f"{fun!r} is not callable: pass the function, then its arguments")
    refusal = _refusal(fun)
    if refusal:
        raise BenchError(refusal)
    return _Target(fun, args, dict(kwargs), name or _name(fun, args, kwargs))


def bench_targets(
    main: _Target,
    other: _Target | None = None,
    *,
    runs: int | None = None,
    repeats: int | None = None,
    explain: bool = False,
) -> BenchResult:
    """``main`` measured (with ``other`` interleaved, attached as ``compare``); ``repeats``
    None: rounds until the median is known within ``rounds.PRECISION`` (3 to 7)."""
    results = measure([main] if other is None else [main, other], runs, repeats, explain)
    if other is None:
        return results[0]
    return dataclasses.replace(results[0], compare=results[1])


def bench(
    fun: Callable[..., Any],
    *args: Any,
    runs: int | None = None,
    repeats: int | None = None,
    compare: tuple[Any, ...] | Callable[[], Any] | None = None,
    explain: bool = False,
    **kwargs: Any,
) -> BenchResult:
    """Measure ``fun(*args, **kwargs)``: first call, per call until ready, and what naive
    timing says.

    ``repeats``: rounds (default: until the median is known within ±2%, 3 to 7 rounds);
    ``compare``: ``(g, *g_args)`` (or a function of no arguments) measured interleaved;
    ``explain``: keep a timeline of a few calls (dispatch returning, work finishing). An
    error of the call itself is raised as it is.

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
    try:
        return bench_targets(
            target(fun, args, kwargs), other, runs=runs, repeats=repeats, explain=explain
        )
    except CallFailed as failed:
        raise failed.error from None
