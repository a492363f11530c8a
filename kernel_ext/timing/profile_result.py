"""``ProfileResult``: where a cell's time went, host and device, and its hidden syncs.

::

    r = p.result                        # from jaxlab.profile() or %%profile -o
    r.duration_s                        # the cell's wall time
    r.functions()                       # jitted functions dispatched from Python, in order
    r.counts["dispatch"]                # calls from Python, every one counted (200 for 200)
    r.called["step"]                    # 200: the calls of one function
    r.compilations[0].function          # "step": traced, lowered and compiled in the cell
    r.modules[0]                        # Cost("jit_step", "jit_step", 10, 0.41, 0.83)
    r.syncs[0].where, r.syncs[0].kind   # "In[4], line 3", "float(x)"
    r.to_dict()                         # JSON-ready
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .profile_spans import Compilation
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
    """A cell's trace: host dispatch and device spans, JAX's compilations, the costliest
    modules and ops, and the lines that made implicit device-to-host transfers.

    ``counts``, ``functions()``, ``compilations`` and the costs are over the whole trace;
    ``spans`` is the bounded set drawn (``dropped_spans`` not drawn; of those drawn,
    ``longest_drawn`` were chosen as the longest and the rest as an even sample)."""

    platform: str
    duration_s: float
    spans: tuple[Span, ...]
    dropped_spans: int
    modules: tuple[Cost, ...]
    ops: tuple[Cost, ...]
    syncs: tuple[SyncSite, ...]
    dropped_syncs: int = 0
    syncs_observed: bool = True  # False: this JAX's arrays could not be watched
    counts: dict[str, int] = field(default_factory=dict)  # spans of each kind, all of them
    called: dict[str, int] = field(default_factory=dict)  # function → calls, in call order
    compilations: tuple[Compilation, ...] = ()
    longest_drawn: int = 0

    @property
    def calls(self) -> int:
        """Jitted calls made from Python, every one counted (drawn or not)."""
        return self.counts.get("dispatch", 0)

    def functions(self) -> list[str]:
        """The jitted functions the cell called, each once, in the order first called."""
        return list(self.called)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["spans"] = [s._asdict() for s in self.spans]  # named tuples, kept as records
        return data

    def __str__(self) -> str:
        from .profile_view import profile_text

        return profile_text(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        from .profile_view import profile_html, profile_text

        return {"text/plain": profile_text(self), "text/html": profile_html(self)}
