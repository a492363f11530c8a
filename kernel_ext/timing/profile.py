"""``jaxlab.profile()``: a block of code under ``jax.profiler.trace``, read back in-process.

::

    with jaxlab.profile() as p:
        for _ in range(10):
            loss = float(step(x))       # found: an implicit sync per step
    r = p.result                         # a ProfileResult
    r.functions()                        # ["step"]: the jitted functions called
    r.modules[0].name, r.modules[0].share
    r.syncs[0].where, r.syncs[0].count   # ("In[4], line 3", 10)

The trace is kept in memory (with JAX 0.10: a temporary folder, removed when the block
ends, whether or not it raised). The block's own exception propagates unchanged (and
``p.result`` stays None). Only what the views read is captured (``trace_session``).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import jax

from ..session.collector import collector_paused
from .profile_result import Cost, ProfileResult
from .profile_spans import compilations, count_kinds, keep_for_drawing
from .syncs import SyncRecorder
from .trace import Span
from .trace_session import TraceError, TraceSession

TOP = 10  # modules and ops in the tables
HOLDS_PROFILER = (
    "%%profile (or jaxlab.profile()) holds jax.profiler while its cell runs, and JAX runs "
    "one trace at a time"
)


class ProfileError(RuntimeError):
    """The trace could not be taken (another trace is running, no writable temporary
    folder); the message says why and what to do."""


@dataclass
class Profile:
    """What ``jaxlab.profile()`` yields: its ``result`` is set when the block ends."""

    result: ProfileResult | None = None
    folder: str = ""  # JAX 0.10: the temporary trace folder (gone after the block)
    _recorder: SyncRecorder = field(default_factory=lambda: SyncRecorder(annotate=True))


_active: list[Profile] = []  # the profile running now (one per process, as JAX's trace)


def _costs(
    spans: list[Span], kind: str, total_s: float, most: int | None = TOP
) -> tuple[Cost, ...]:
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for s in spans:
        if s.kind == kind:
            entry = totals[(s.name, s.module)]
            entry[0] += 1
            entry[1] += s.duration_s
    costs = [
        Cost(name, module, int(n), t, t / total_s if total_s > 0 else 0.0)
        for (name, module), (n, t) in totals.items()
    ]
    return tuple(sorted(costs, key=lambda c: -c.total_s)[:most])


def _named_syncs(spans: list[Span], recorder: SyncRecorder) -> list[Span]:
    """Sync marks named for their line (``In[4], line 3: float(loss)``); the conversions
    the recorder did not count (an explicit ``device_get``) are dropped."""
    named: list[Span] = []
    for s in spans:
        if s.kind == "sync":
            site = recorder.mark_site(int(s.name)) if s.name.isdigit() else None
            if site is None:
                continue
            s = s._replace(name=f"{site.where}: {site.code}")
        named.append(s)
    return named


def _result(traced: list[Span], duration_s: float, recorder: SyncRecorder) -> ProfileResult:
    spans = _named_syncs(traced, recorder)
    # The cell's span is its wall time or the trace's extent, whichever is longer.
    total = max([duration_s] + [s.end_s for s in spans])
    kept = keep_for_drawing(spans)
    return ProfileResult(
        platform=jax.default_backend(),
        duration_s=total,
        spans=kept.spans,
        dropped_spans=len(spans) - len(kept.spans),
        modules=_costs(spans, "module", total),
        ops=_costs(spans, "op", total),
        op_times=_costs(spans, "op", total, most=None),  # every op: time per equation
        syncs=recorder.sites(),
        dropped_syncs=recorder.dropped,
        syncs_observed=recorder.supported,
        counts=count_kinds(spans),
        called=dict(Counter(s.name for s in spans if s.kind == "dispatch")),
        compilations=compilations(spans),
        longest_drawn=kept.longest,
    )


@contextlib.contextmanager
def profile() -> Iterator[Profile]:
    """Trace the block with ``jax.profiler`` and find its implicit syncs.

    >>> with jaxlab.profile() as p:
    ...     y = f(x).block_until_ready()
    >>> p.result.functions()
    ['f']
    """
    __tracebackhide__ = True  # IPython leaves this frame out of the block's errors
    if _active:
        raise ProfileError(f"a profile is already running: {HOLDS_PROFILER}")
    try:
        trace = TraceSession.start()
    except TraceError as e:
        raise ProfileError(str(e)) from e
    session = Profile(folder=trace.folder)
    _active.append(session)
    finished = False
    t0 = time.perf_counter()
    try:
        with session._recorder.recording():
            yield session
        finished = True
    except RuntimeError as e:
        if "already been started" in str(e):  # the block started jax.profiler itself
            e.add_note(f"jaxlab: {HOLDS_PROFILER}; run this code without it.")
        raise
    finally:
        duration = time.perf_counter() - t0
        _active.remove(session)
        try:
            with collector_paused():
                spans = trace.stop(read=finished)
        except TraceError as e:
            raise ProfileError(str(e)) from e
    with collector_paused():
        session.result = _result(spans, duration, session._recorder)
