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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..session.programs import kept_programs
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
    # Every op's time (ops holds the costliest): what time per equation joins to the
    # program (timing/attribution.py).
    op_times: tuple[Cost, ...] = field(default=(), repr=False)

    @property
    def calls(self) -> int:
        """Jitted calls made from Python, every one counted (drawn or not)."""
        return self.counts.get("dispatch", 0)

    def functions(self) -> list[str]:
        """The jitted functions the cell called, each once, in the order first called."""
        return list(self.called)

    def attribution(self, fun_name: str) -> Any:
        """The time of ``fun_name``'s module per equation of its program (an
        ``Attribution``: ``share``, ``ranked()``, ``unattributed``, ``graph``), from the
        program the compile log kept of it (the extension loaded when it was compiled);
        else call ``jaxlab.profile_attribution(result, f, *args)``."""
        from .attribution import AttributionError, attribution_from_program

        keeper = kept_programs()
        closed = keeper.last_program(fun_name) if keeper is not None else None
        if closed is None:
            raise AttributionError(
                f"no traced program of {fun_name!r} is kept (the compile log keeps the user's "
                "jitted functions compiled while jaxlab is loaded); call "
                f"jaxlab.profile_graph(result, {fun_name}, *args) with its arguments"
            )
        return attribution_from_program(self, fun_name, closed)

    def graph(self, fun_name: str) -> Any:
        """The Graph of ``fun_name`` with its profiled time per equation drawn on it."""
        return self.attribution(fun_name).graph

    def costliest_function(self) -> str | None:
        """The jitted function called from Python whose module took the most time."""
        for cost in self.modules:  # XLA names f's module jit_f (<lambda>: jit__lambda_)
            for name in self.called:
                if cost.name == "jit_" + re.sub(r"\W", "_", name):
                    return name
        return None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["spans"] = [s._asdict() for s in self.spans]  # named tuples, kept as records
        return data

    def __str__(self) -> str:
        return _served().text(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        above = _served()
        return {"text/plain": above.text(self), "text/html": above.html(self)}


class Above(NamedTuple):
    """What a :class:`ProfileResult` takes from the module above it, which imports it:
    ``profile_view``'s text and HTML."""

    text: Callable[[ProfileResult], str]  # profile_view.profile_text
    html: Callable[[ProfileResult], str]  # profile_view.profile_html


_above: Above | None = None


def served_by(above: Above) -> None:
    """Called once by ``timing/__init__``, which Python runs before any module of the
    package: the drawings every ProfileResult uses."""
    global _above
    _above = above


def _served() -> Above:
    if _above is None:  # only if timing/__init__ failed half-way
        raise RuntimeError("jaxlab.timing is not fully imported: import jaxlab.timing")
    return _above
