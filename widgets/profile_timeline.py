"""``ProfileTimeline``: a ``%%profile`` trace drawn in the browser, zoomable.

::

    from jaxlab.widgets import ProfileTimeline
    ProfileTimeline(p.result)      # p from `with jaxlab.profile() as p: ...`

Lanes for host calls, JAX's own tracing, lowering and compiling (named for the function),
device modules and device ops, with the implicit syncs marked across them; an axis in one
unit and a key of the colours. The wheel zooms around the pointer, dragging pans, hovering
names a span and its duration. Below: what JAX compiled, the costliest XLA modules and ops
with their share of the cell, and the lines that synced with the host.
"""

from __future__ import annotations

from typing import Any

import traitlets

from jaxlab.timing.profile_result import ProfileResult
from jaxlab.timing.profile_svg import span_words
from jaxlab.timing.profile_view import (
    compiled_name,
    cost_columns,
    kept_text,
    profile_html,
    profile_text,
    sync_advice,
    title,
)

from ._base import JaxlabWidget


def _cost(c: Any) -> dict[str, Any]:
    return {
        "name": c.name,
        "module": c.module,
        "calls": c.calls,
        "total_s": c.total_s,
        "share": c.share,
    }


class ProfileTimeline(JaxlabWidget, static="profile_timeline"):
    """The timeline, costs and syncs of one :class:`~jaxlab.ProfileResult`."""

    title = traitlets.Unicode().tag(sync=True)
    duration_s = traitlets.Float().tag(sync=True)
    spans = traitlets.List(traitlets.Dict()).tag(sync=True)
    kept = traitlets.Unicode().tag(sync=True)  # what was drawn of a long trace, or ""
    compilations = traitlets.List(traitlets.Dict()).tag(sync=True)
    modules = traitlets.List(traitlets.Dict()).tag(sync=True)
    module_columns = traitlets.List(traitlets.Unicode()).tag(sync=True)
    op_columns = traitlets.List(traitlets.Unicode()).tag(sync=True)
    ops = traitlets.List(traitlets.Dict()).tag(sync=True)
    syncs = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, result: ProfileResult, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._result = result
        with self.hold_sync():
            self.title = title(result)
            self.duration_s = result.duration_s
            self.kept = kept_text(result)
            self.spans = [
                {
                    "lane": s.lane,
                    "kind": s.kind,
                    "name": s.name,
                    "start_s": s.start_s,
                    "duration_s": s.duration_s,
                    "module": s.module,
                    "words": span_words(s),
                }
                for s in result.spans
            ]
            self.compilations = [
                {
                    "function": compiled_name(c),
                    "start_s": c.start_s,
                    "total_s": c.total_s,
                    "trace_s": c.trace_s,
                    "lower_s": c.lower_s,
                    "compile_s": c.compile_s,
                }
                for c in result.compilations
            ]
            self.modules = [_cost(c) for c in result.modules]
            self.ops = [_cost(c) for c in result.ops]
            self.module_columns = list(cost_columns(result.modules))
            self.op_columns = list(cost_columns(result.ops))
            self.syncs = [
                {
                    "where": s.where,
                    "code": s.code,
                    "kind": s.kind,
                    "count": s.count,
                    "seconds": s.seconds,
                    "advice": sync_advice(s),
                }
                for s in result.syncs
            ]

    @property
    def result(self) -> ProfileResult:
        return self._result

    def _static_html(self) -> str:
        return profile_html(self._result)

    def _static_text(self) -> str:
        return profile_text(self._result)
