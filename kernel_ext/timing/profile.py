"""``jaxlab.profile()``: a block of code under ``jax.profiler.trace``, read back in-process.

::

    with jaxlab.profile() as p:
        for _ in range(10):
            loss = float(step(x))       # found: an implicit sync per step
    r = p.result                         # a ProfileResult
    r.functions()                        # ["step"]: the jitted functions called
    r.modules[0].name, r.modules[0].share
    r.syncs[0].where, r.syncs[0].count   # ("In[4], line 3", 10)

The trace goes to a temporary folder that is removed when the block ends, whether or
not it raised. The block's own exception propagates unchanged (and ``p.result`` stays
None).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import jax

from .profile_result import Cost, ProfileResult
from .syncs import SyncRecorder
from .trace import Span, read_spans

MAX_SPANS = 5000  # kept for the timeline; the costs are totalled over all
TOP = 10  # modules and ops in the tables


class ProfileError(RuntimeError):
    """The trace could not be taken (another trace is running); the message says why."""


@dataclass
class Profile:
    """What ``jaxlab.profile()`` yields: its ``result`` is set when the block ends."""

    result: ProfileResult | None = None
    folder: str = ""  # the temporary trace folder (gone after the block)
    _recorder: SyncRecorder = field(default_factory=SyncRecorder)


def _costs(spans: list[Span], kind: str, total_s: float) -> tuple[Cost, ...]:
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
    return tuple(sorted(costs, key=lambda c: -c.total_s)[:TOP])


def _result(folder: str, duration_s: float, recorder: SyncRecorder) -> ProfileResult:
    files = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    spans = read_spans(files[0]) if files else []
    # The cell's span is its wall time or the trace's extent, whichever is longer.
    total = max([duration_s] + [s.end_s for s in spans])
    return ProfileResult(
        platform=jax.default_backend(),
        duration_s=total,
        spans=tuple(spans[:MAX_SPANS]),
        dropped_spans=max(0, len(spans) - MAX_SPANS),
        modules=_costs(spans, "module", total),
        ops=_costs(spans, "op", total),
        syncs=recorder.sites(),
        dropped_syncs=recorder.dropped,
        syncs_observed=recorder.supported,
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
    folder = tempfile.mkdtemp(prefix="jaxlab-profile-")
    session = Profile(folder=folder)
    try:
        try:
            jax.profiler.start_trace(folder)
        except RuntimeError as e:  # one trace at a time, per process
            raise ProfileError(
                f"jax.profiler could not start a trace ({e}); stop the other trace first "
                "(jax.profiler.stop_trace())"
            ) from e
        t0 = time.perf_counter()
        try:
            with session._recorder.recording():
                yield session
        finally:
            duration = time.perf_counter() - t0
            jax.profiler.stop_trace()
        session.result = _result(folder, duration, session._recorder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
