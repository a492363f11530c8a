"""A ``jax.profiler`` trace (the ``.xplane.pb`` file) → host and device spans, in-process.

``jax.profiler.ProfileData`` reads the file JAX wrote; the spans kept are

* host ``dispatch``: a jitted function called from Python (``PjitFunction(f)`` on the
  ``python`` thread), from the call until it returned;
* device ``module``: one run of a compiled XLA program (``jit_f``); on a CPU, where XLA
  emits no module events, the span from its first to its last op of one run;
* device ``op``: one XLA operation (a fusion, a dot, ``wrapped_tanh``) of a module.

::

    spans = read_spans(path)
    [s.name for s in spans if s.kind == "dispatch"]     # ["f", "f", "g"]
"""

from __future__ import annotations

import re
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

_DISPATCH = re.compile(r"^(?:PjitFunction|PmapFunction)\((.*)\)$")
_MODULE_RUN = re.compile(r"^(.*?)(?:\(\d+\))?$")  # GPU modules read "jit_f(12)"


@dataclass(frozen=True)
class Span:
    """One interval of the timeline, in seconds from the start of the trace."""

    lane: str  # "host" or "device"
    kind: str  # "dispatch", "module" or "op"
    name: str
    start_s: float
    duration_s: float
    module: str = ""  # for an op: the XLA module it belongs to

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def _stats(event: Any) -> dict[str, Any]:
    # Python 3.12 warns that jaxlib's stats type has no __module__: not the user's concern.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return {str(k): v for k, v in event.stats}
        except Exception:  # a stat of a type ProfileData cannot convert
            return {}


def _raw_spans(data: Any) -> list[tuple[str, str, str, float, float, str, Any]]:
    """(lane, kind, name, start_ns, duration_ns, module, run) for each event kept."""
    out: list[tuple[str, str, str, float, float, str, Any]] = []
    for plane in data.planes:
        for line in plane.lines:
            line_name = line.name
            for event in line.events:
                name = event.name
                if line_name == "python":
                    match = _DISPATCH.match(name)
                    if match:
                        out.append(
                            (
                                "host",
                                "dispatch",
                                match.group(1),
                                event.start_ns,
                                event.duration_ns,
                                "",
                                None,
                            )
                        )
                    continue
                if line_name == "XLA Modules":
                    run_name = _MODULE_RUN.match(name)
                    label = run_name.group(1) if run_name else name
                    out.append(
                        ("device", "module", label, event.start_ns, event.duration_ns, label, None)
                    )
                    continue
                stats = _stats(event)
                if "hlo_module" in stats or line_name == "XLA Ops":
                    module = str(stats.get("hlo_module", ""))
                    run = (module, stats.get("run_id"), plane.name)
                    out.append(
                        ("device", "op", name, event.start_ns, event.duration_ns, module, run)
                    )
    return out


def _drop_nested(spans: list[Span]) -> list[Span]:
    """JAX nests a second ``PjitFunction(f)`` event inside the first: keep the outer one."""
    kept: list[Span] = []
    for s in sorted(spans, key=lambda s: (s.start_s, -s.duration_s)):
        outer = kept[-1] if kept else None
        if outer is not None and outer.name == s.name and s.end_s <= outer.end_s + 1e-9:
            continue
        kept.append(s)
    return kept


def spans_from_profile(data: Any) -> list[Span]:
    """Every span of a ``jax.profiler.ProfileData``, sorted by start."""
    raw = _raw_spans(data)
    if not raw:
        return []
    origin = min(r[3] for r in raw)
    spans: list[Span] = []
    runs: dict[Any, list[Span]] = defaultdict(list)
    has_modules = any(r[1] == "module" for r in raw)
    for lane, kind, name, start, duration, module, run in raw:
        span = Span(lane, kind, name, (start - origin) * 1e-9, duration * 1e-9, module)
        spans.append(span)
        if kind == "op" and not has_modules and run is not None:
            runs[run].append(span)
    for (module, _, _), ops in runs.items():  # CPU: a module run spans its ops
        begin = min(o.start_s for o in ops)
        end = max(o.end_s for o in ops)
        spans.append(Span("device", "module", module, begin, end - begin, module))
    host = _drop_nested([s for s in spans if s.kind == "dispatch"])
    device = [s for s in spans if s.kind != "dispatch"]
    return sorted(host + device, key=lambda s: (s.start_s, s.lane, s.kind))


def read_spans(path: str) -> list[Span]:
    """The spans of the ``.xplane.pb`` file at ``path``."""
    from jax.profiler import ProfileData

    return spans_from_profile(ProfileData.from_file(path))
