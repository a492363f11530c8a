"""The traced programs the compile log keeps, bounded: the last two of each of the user's
functions, so that a recompilation can be compared with the compilation before it
(``jaxlab.recompile_diff``) and ``%%profile --graph`` can join its time to one.

At most PROGRAM_EQUATIONS equations in all (a jaxpr holds about 600 bytes per equation on
JAX 0.12, so about 60 MB at most), none whose constants exceed PROGRAM_CONST_BYTES, and at
most PROGRAM_FUNCTIONS functions: a kept jaxpr also keeps what JAX cached under it in its
weakly keyed caches (its lowering and its executable, 60-200 KB for even a one-line
function), and each lambda is its own function, so a new ``jax.jit(lambda ...)`` in each
of 2,000 cells had kept 135 MB of executables alive. The least recently compiled
functions' programs are dropped first::

    kept = KeptPrograms()
    kept.keep("step", closed_jaxpr)     # the compile log, under its lock
    kept.pair("step")                   # (older, newer), or None
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

PROGRAM_EQUATIONS = 100_000
PROGRAM_FUNCTIONS = 32
PROGRAM_CONST_BYTES = 1 << 20


class KeptPrograms(OrderedDict[str, list[tuple[Any, int]]]):
    """Function name -> its last two traced programs (older first) and their sizes, the
    least recently compiled function first. Not locked: its owner locks."""

    def pair(self, name: str) -> tuple[Any, Any] | None:
        """The last two programs of ``name``, older first, or None when fewer are kept."""
        kept = self.get(name)
        if kept is None or len(kept) < 2:
            return None
        return kept[0][0], kept[1][0]

    def last(self, name: str) -> Any:
        """The last program of ``name`` kept, or None."""
        kept = self.get(name)
        return kept[-1][0] if kept else None

    def keep(self, name: str, program: Any) -> None:
        """``program`` kept as the newest of ``name``; the oldest functions' dropped while
        a bound is passed. One too large is not kept, and its function's older one goes
        (a pair would compare across a gap)."""
        size = _equations(program)
        if size > PROGRAM_EQUATIONS or _const_bytes(program) > PROGRAM_CONST_BYTES:
            self.pop(name, None)
            return
        kept = self.pop(name, [])
        self[name] = [*kept[-1:], (program, size)]
        while len(self) > PROGRAM_FUNCTIONS or (
            sum(n for pair in self.values() for _, n in pair) > PROGRAM_EQUATIONS
        ):
            self.popitem(last=False)


def _equations(program: Any) -> int:
    """Equations of a jaxpr, nested programs included."""
    from jax.extend import core as jcore

    jaxpr = getattr(program, "jaxpr", program)
    total = 0
    for eqn in jaxpr.eqns:
        total += 1 + sum(_equations(sub) for sub in jcore.jaxprs_in_params(eqn.params))
    return total


def _const_bytes(program: Any) -> int:
    return sum(int(getattr(c, "nbytes", 0)) for c in getattr(program, "consts", ()) or ())
