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
from collections.abc import Callable, Mapping
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

    def attribution(
        self, fun_name: str, *, namespace: Mapping[str, Any] | None = None, cell: str = ""
    ) -> Any:
        """The time of ``fun_name``'s module per equation of its program (an
        ``Attribution``: ``share``, ``ranked()``, ``unattributed``, ``graph``): from the
        call of it in ``cell`` with its arguments read from ``namespace`` (what
        ``%%profile --graph`` passes: found whoever compiled it, jaxlab's own
        ``%jaxpr --cost`` too), else from the program the compile log kept of it (the
        extension loaded when it was compiled); else call
        ``jaxlab.profile_attribution(result, f, *args)``."""
        from .attribution import AttributionError, call_attribution
        from .profiled_call import attribution_from_program, called_as, profiled_call

        if namespace is not None and cell:
            found = profiled_call(cell, namespace, fun_name)
            if found is not None:
                return call_attribution(self, *found)
        keeper = kept_programs()
        closed = keeper.last_program(fun_name) if keeper is not None else None
        if closed is None:
            raise AttributionError(
                f"no traced program of {fun_name!r} is kept (the compile log keeps the user's "
                "jitted functions compiled while jaxlab is loaded) and the cell makes no call "
                f"of it with plain arguments; call jaxlab.profile_graph(result, {fun_name}, "
                "*args) with its arguments"
            )
        called = called_as(cell, namespace, fun_name) if namespace is not None else {}
        return attribution_from_program(
            self, fun_name, closed, module=self.module_of(fun_name), called=called
        )

    def graph(
        self, fun_name: str, *, namespace: Mapping[str, Any] | None = None, cell: str = ""
    ) -> Any:
        """The Graph of ``fun_name`` with its profiled time per equation drawn on it (see
        :meth:`attribution`)."""
        return self.attribution(fun_name, namespace=namespace, cell=cell).graph

    def module_of(self, fun_name: str) -> str | None:
        """The name of the XLA module of jitted function ``fun_name`` in the profile: XLA
        names ``f``'s ``jit_f`` and a lambda's ``jit__lambda`` (its name's other
        characters as ``_``, none at the end)."""
        wanted = _module_key("jit_" + fun_name)
        for cost in self.modules or self.op_times:
            if _module_key(cost.module) == wanted:
                return cost.module
        return None

    def costliest_function(self) -> str | None:
        """The jitted function called from Python whose module took the most time
        (``self.modules`` is costliest first)."""
        keys = {_module_key("jit_" + name): name for name in reversed(list(self.called))}
        for cost in self.modules:
            name = keys.get(_module_key(cost.name))
            if name is not None:
                return name
        return None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["spans"] = [s._asdict() for s in self.spans]  # named tuples, kept as records
        return data

    def __str__(self) -> str:
        return _above.text(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": _above.text(self), "text/html": _above.html(self)}


def _module_key(name: str) -> str:
    """A module's name as XLA writes it: ``jit_<lambda>`` and ``jit__lambda`` alike."""
    return re.sub(r"\W", "_", name).strip("_")


class Above(NamedTuple):
    """What a :class:`ProfileResult` takes from the module above it, which imports it:
    ``profile_view``'s text and HTML."""

    text: Callable[[ProfileResult], str]  # profile_view.profile_text
    html: Callable[[ProfileResult], str]  # profile_view.profile_html


_above: Above  # set by served_by when timing/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``timing/__init__`` (which any import of the package runs
    first): the drawings every ProfileResult uses."""
    global _above
    _above = above
