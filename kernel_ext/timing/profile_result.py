"""``ProfileResult``: where a cell's time went, host and device, and its hidden syncs.

::

    r = p.result                        # from jaxlab.profile() or %%profile -o
    r.duration_s                        # the cell's wall time
    r.functions()                       # jitted functions dispatched from Python, in order
    r.modules[0]                        # Cost("jit_step", "jit_step", 10, 0.41, 0.83)
    r.syncs[0].where, r.syncs[0].kind   # "In[4], line 3", "float(x)"
    r.to_dict()                         # JSON-ready
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .syncs import SyncSite
from .trace import Span


@dataclass(frozen=True)
class Cost:
    """The time one XLA module (or op) took over the cell, all its runs together."""

    name: str
    module: str  # for an op, its module; for a module, itself
    calls: int
    total_s: float
    share: float  # of the cell's wall time (ops on parallel threads may sum past 1)


@dataclass(frozen=True)
class ProfileResult:
    """A cell's trace: host dispatch and device spans, the costliest modules and ops, and
    the lines that made implicit device-to-host transfers."""

    platform: str
    duration_s: float
    spans: tuple[Span, ...]
    dropped_spans: int
    modules: tuple[Cost, ...]
    ops: tuple[Cost, ...]
    syncs: tuple[SyncSite, ...]
    dropped_syncs: int = 0
    syncs_observed: bool = True  # False: this JAX's arrays could not be watched

    def functions(self) -> list[str]:
        """The jitted functions the cell called, each once, in the order first called."""
        names = [s.name for s in self.spans if s.kind == "dispatch"]
        return list(dict.fromkeys(names))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        from .profile_view import profile_text

        return profile_text(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        from .profile_view import profile_html, profile_text

        return {"text/plain": profile_text(self), "text/html": profile_html(self)}
