"""What a ``ProfileResult`` keeps of a trace's spans: counts over all of them, the
compilations JAX did, and a bounded, representative set to draw.

A 3,000-step loop leaves tens of thousands of spans; every count and total is taken over
all of them, and the drawing gets at most ``MAX_DRAWN``: every compile phase and sync
mark (up to the cap), then the longest spans, then an even sample of the rest in time
order, so a long loop still reads as a loop and its slowest steps are all there::

    kept = keep_for_drawing(spans)
    kept.spans, kept.longest            # (spans to draw, how many were chosen as longest)
    count_kinds(spans)                  # {"dispatch": 3000, "module": 3000, "op": 9000, ...}
    compilations(spans)                 # (Compilation("step", 0.0, 0.003, 0.002, 0.031),)
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass

from .trace import PHASE_KINDS, Span

MAX_DRAWN = 5000  # spans sent to the drawing; counts and costs are over all


@dataclass(frozen=True)
class Compilation:
    """One function JAX traced, lowered and compiled during the cell (a first call, or a
    call with new argument types)."""

    function: str  # the jitted function called ("" when compiled without a call: .lower())
    start_s: float
    trace_s: float  # from the call until lowering began: tracing to a jaxpr, JAX's checks
    lower_s: float  # jaxpr → StableHLO
    compile_s: float  # XLA's compile
    during: str = ""  # compiled while this other function was traced (jnp on constants)

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s


@dataclass(frozen=True)
class Kept:
    """The spans chosen for drawing, and how many of them were chosen as the longest."""

    spans: tuple[Span, ...]
    longest: int


def count_kinds(spans: list[Span]) -> dict[str, int]:
    """How many spans of each kind the trace holds (all of them, drawn or not)."""
    return dict(Counter(s.kind for s in spans))


def compilations(spans: list[Span]) -> tuple[Compilation, ...]:
    """The trace's compile phases grouped by the call that caused them, in time order.

    A group is one function's phases inside one top-level call (its tracing, lowering and
    XLA compile), closed by its compile; a program compiled while another function was
    traced (``jnp`` on concrete values inside ``f``) is its own group, ``during`` ``f``."""
    calls = [s for s in spans if s.kind == "dispatch"]
    starts = [c.start_s for c in calls]
    groups: dict[tuple[str, float], list[Span]] = {}  # open groups by (name, call start)
    done: list[tuple[list[Span], str]] = []
    for phase in sorted((s for s in spans if s.kind in PHASE_KINDS), key=lambda s: s.start_s):
        i = bisect.bisect_right(starts, phase.start_s) - 1
        call = calls[i] if i >= 0 and phase.start_s < calls[i].end_s else None
        key = (phase.name, call.start_s if call is not None else phase.start_s)
        group = groups.get(key)
        if group is None:
            group = groups[key] = []
            during = call.name if call is not None and call.name != phase.name else ""
            done.append((group, during))
        group.append(phase)
        if phase.kind == "compile":
            del groups[key]
    ordered = sorted(done, key=lambda g: g[0][0].start_s)
    return tuple(_compilation(group, during) for group, during in ordered)


def _compilation(group: list[Span], during: str) -> Compilation:
    return Compilation(
        group[0].name,
        group[0].start_s,
        sum(p.duration_s for p in group if p.kind == "trace"),
        sum(p.duration_s for p in group if p.kind == "lower"),
        sum(p.duration_s for p in group if p.kind == "compile"),
        during,
    )


def keep_for_drawing(spans: list[Span], limit: int = MAX_DRAWN) -> Kept:
    """At most ``limit`` spans: compile phases and syncs first, then the longest half of
    what is left, then an even sample of the rest; returned in time order."""
    if len(spans) <= limit:
        return Kept(tuple(spans), 0)
    marks = [s for s in spans if s.lane == "jax" or s.kind == "sync"][: limit // 5]
    rest = [s for s in spans if not (s.lane == "jax" or s.kind == "sync")]
    room = limit - len(marks)
    by_length = sorted(range(len(rest)), key=lambda i: -rest[i].duration_s)
    longest = set(by_length[: room // 2])
    others = [i for i in range(len(rest)) if i not in longest]
    step = len(others) / (room - len(longest))
    sample = {others[int(k * step)] for k in range(room - len(longest))}
    chosen = marks + [rest[i] for i in sorted(longest | sample)]
    return Kept(tuple(sorted(chosen, key=lambda s: (s.start_s, s.lane, s.kind))), len(longest))
