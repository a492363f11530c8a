"""The records of an equation-by-equation run (graph/interpret.py): where it may look
(:class:`Policy`), each equation evaluated (:class:`Step`), every slot's value and where
it came from (:class:`Evaluation`).

Below the interpreter and its scan-body runs (``scan_body``), which both fill them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DERIVATIVES", "VALUES", "Evaluation", "Policy", "Step"]


@dataclass(frozen=True)
class Policy:
    """Where the interpreter may look inside an equation.

    ``custom``: recurse into custom_jvp/custom_vjp calls (values only: a derivative
    taken through the insides would bypass the custom rule). ``cond``: recurse into the
    branch a ``cond`` took (not in a loop body; :func:`adjoints` takes the index from a
    value pass). ``scan``: run the body of each top-level ``scan`` (values and adjoints
    stacked over iterations).
    """

    custom: bool = True
    cond: bool = True
    scan: bool = False


VALUES = Policy()
DERIVATIVES = Policy(custom=False, cond=False)


@dataclass(frozen=True)
class Step:
    """One equation evaluated (bound whole, or a leaf of a program recursed into)."""

    eqn: Any  # jax.extend.core.JaxprEqn
    node_id: str  # e.g. "e3" or "e1/e0": the graph model's id scheme
    inputs: tuple[int | None, ...]  # slot of each input; None for a literal
    outputs: tuple[int, ...]
    summarised: bool  # holds nested programs the run did not look inside


@dataclass
class Evaluation:
    """Values of every slot of one run, and how slots map back to the jaxpr."""

    values: list[Any] = field(default_factory=list)
    avals: list[Any] = field(default_factory=list)
    signatures: list[int] = field(default_factory=list)
    producer: list[int | None] = field(default_factory=list)  # step index; None: input
    steps: list[Step] = field(default_factory=list)
    # (block prefix, Var) -> slot: "" is the top level, "e3/" the program inside e3.
    occurrences: dict[tuple[str, Any], int] = field(default_factory=dict)
    # Graph-model node id -> the slot it shows: "in0", "c1", "e3", "e3/in0", "e3/out1",
    # "e3/1/e0" (cond branch 1): the id scheme of jaxlab.graph.model, one entry per
    # call site even when two sites share a nested program (and its Var objects).
    node_slots: dict[str, int] = field(default_factory=dict)
    inputs: list[int] = field(default_factory=list)  # slots of the flat arguments
    outputs: list[int] = field(default_factory=list)  # slots of the results
    summarised: list[str] = field(default_factory=list)  # node ids bound whole
    literals: set[int] = field(default_factory=set)  # slots holding a literal constant
    # Slots inside a scan body run per iteration -> the scan's length (their values and
    # avals are stacked: shape (length, *shape)).
    iterations: dict[int, int] = field(default_factory=dict)
    # Where a value flows into a scan body without an equation: (init, carry parameter),
    # (carry result, carry parameter), (xs, row parameter). For dependency walks.
    links: list[tuple[int, int]] = field(default_factory=list)
    # Scans whose bodies a Policy(scan=True) run did not look inside: node id -> why
    # (scan_body.NESTED_LOOP, LOOP_TOO_LARGE, LOOP_NOT_ARRAYS).
    loops_skipped: dict[str, str] = field(default_factory=dict)
    # Conds whose taken branch the run looked inside: node id -> the branch's index.
    branches: dict[str, int] = field(default_factory=dict)

    def slots_of(self, var: Any) -> list[tuple[str, int]]:
        """Every (block prefix, slot) a Var took (a program called twice has two)."""
        return [(p, s) for (p, v), s in self.occurrences.items() if v is var]
