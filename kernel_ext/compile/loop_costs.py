"""XLA's cost analysis with loops counted whole: trip counts read from the jaxpr.

XLA's ``cost_analysis`` counts a loop's body once, however many times it runs: a
1,000-step ``lax.scan`` of 128 FLOPs a step reports 130 FLOPs. The jaxpr knows the trip
counts (a scan's ``length``; a ``fori_loop`` with static bounds is a scan), so each loop's
body is costed by XLA on its own and added for the steps XLA left out, nested loops
included::

    costs = cost_analysis(jitted.lower(x).compile())        # {"flops": 130.0, ...}
    whole = loops_counted_whole(jitted.trace(x).jaxpr, costs)
    whole.flops                                             # 128,002.0
    whole.note                                              # "a scan of 1,000 steps ..."

A ``while_loop``'s trip count is not in the program: its body stays counted once, and
``whole.unknown`` says how many such loops there are. Whether the backend's XLA counts a
body once is itself checked, once per backend, on a 10-step probe scan: where XLA already
counts every step, nothing is multiplied.

Why the body is costed by XLA rather than counted from the jaxpr: the figure must stay
XLA's (fusion, what it actually computes), only multiplied by what XLA does not know.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._jax_compat import cost_analysis

KEYS = ("flops", "transcendentals", "bytes accessed")
MAX_LOOPS = 64  # loop bodies costed at most (each is one small compilation)


@dataclass(frozen=True)
class LoopCount:
    """One loop of the program: its primitive, trip count (None: unknown) and nesting."""

    primitive: str  # "scan", "while"
    trips: int | None
    depth: int  # 0: at the top of the program; 1: inside another loop's body, ...


@dataclass(frozen=True)
class LoopCosts:
    """XLA's costs with every known trip count applied (``costs``: key → value)."""

    costs: dict[str, float]
    loops: tuple[LoopCount, ...] = ()
    uncosted: int = 0  # loops of known trips whose body XLA could not cost alone

    @property
    def flops(self) -> float:
        return self.costs.get("flops", 0.0)

    @property
    def bytes_accessed(self) -> float:
        return self.costs.get("bytes accessed", 0.0)

    @property
    def transcendentals(self) -> float:
        return self.costs.get("transcendentals", 0.0)

    @property
    def unknown(self) -> int:
        """Loops whose trip count the program does not say (``while_loop``)."""
        return sum(1 for loop in self.loops if loop.trips is None)

    @property
    def note(self) -> str:
        """What was multiplied, and what could not be (empty without loops)."""
        if not self.loops:
            return ""
        known = [loop for loop in self.loops if loop.trips is not None]
        parts = []
        if known:
            steps = ", ".join(f"{loop.trips:,}" for loop in known[:4])
            more = f" and {len(known) - 4} more" if len(known) > 4 else ""
            parts.append(
                f"loop bodies multiplied by their trip counts ({steps}{more} steps), "
                "which XLA's cost analysis counts once"
            )
        if self.unknown == 1:
            parts.append(
                "a while_loop body counted once (its number of steps is not known before it runs)"
            )
        elif self.unknown:
            parts.append(
                f"{self.unknown} while_loop bodies counted once (their numbers of steps are not "
                "known before they run)"
            )
        if self.uncosted:
            parts.append(
                f"{self.uncosted} loop bod{'y' if self.uncosted == 1 else 'ies'} "
                "counted once (XLA could not cost it alone)"
            )
        return "; ".join(parts)


def _body_copies(length: int, unroll: Any) -> int:
    """How many copies of a scan's body XLA's program holds: ``unroll`` in the loop, the
    remainder after it (JAX unrolls ``length % unroll`` steps outside the loop)."""
    if unroll is True or (isinstance(unroll, int) and unroll >= length):
        return length
    if not isinstance(unroll, int) or unroll <= 1:
        return 1
    return unroll + length % unroll


class _Coster:
    """Costs loop bodies with XLA, each alone, as the loop's program holds them."""

    def __init__(self) -> None:
        self.loops: list[LoopCount] = []
        self.uncosted = 0
        self.costed = 0
        # one body costed once: a jitted function called 64 times in a Python loop holds
        # 64 scans of the very same body object (the jaxpr keeps it alive meanwhile)
        self.known: dict[int, dict[str, float] | None] = {}

    def body_costs(self, body: Any) -> dict[str, float] | None:
        if id(body) not in self.known:
            self.known[id(body)] = self._compile_costs(body)
        return self.known[id(body)]

    def _compile_costs(self, body: Any) -> dict[str, float] | None:
        import jax
        from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

        if self.costed >= MAX_LOOPS:
            return None
        self.costed += 1
        closed = body
        if not isinstance(body, ClosedJaxpr):
            if getattr(body, "constvars", None):
                return None  # constants this open body would need are not at hand
            closed = ClosedJaxpr(body, [])
        specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
        try:
            compiled = jax.jit(jaxpr_as_fun(closed)).lower(*specs).compile()
        except Exception:  # an effect or a type XLA cannot compile alone: counted once
            return None
        return cost_analysis(compiled) or None

    def extra(self, jaxpr: Any, depth: int) -> dict[str, float]:
        """What XLA's count of ``jaxpr`` misses: the steps of its loops it counted once."""
        from jax.extend.core import jaxprs_in_params

        eqns = getattr(jaxpr, "eqns", None)
        if eqns is None:  # a ClosedJaxpr
            eqns = jaxpr.jaxpr.eqns
        missing = dict.fromkeys(KEYS, 0.0)
        for eqn in eqns:
            name = eqn.primitive.name
            if name == "scan":
                add = self.scan_extra(eqn, depth)
            elif name == "while":
                self.loops.append(LoopCount("while", None, depth))
                # the body runs an unknown number of times: its own loops counted whole once
                add = self.extra(eqn.params["body_jaxpr"], depth + 1)
            else:
                add = dict.fromkeys(KEYS, 0.0)
                for sub in jaxprs_in_params(eqn.params):
                    for k, v in self.extra(sub, depth).items():
                        add[k] += v
            for k in KEYS:
                missing[k] += add[k]
        return missing

    def scan_extra(self, eqn: Any, depth: int) -> dict[str, float]:
        length = int(eqn.params["length"])
        body = eqn.params["jaxpr"]
        self.loops.append(LoopCount("scan", length, depth))
        inner = self.extra(body, depth + 1)  # per step, what XLA's count of the body misses
        copies = _body_copies(length, eqn.params.get("unroll", 1))
        missing = {k: length * inner[k] for k in KEYS}
        if length > copies:
            costs = self.body_costs(body)
            if costs is None:
                self.uncosted += 1
            else:
                for k in KEYS:
                    missing[k] += (length - copies) * costs.get(k, 0.0)
        return missing


@functools.cache
def xla_counts_body_once(platform: str) -> bool:
    """Whether XLA's cost analysis on ``platform`` counts a 10-step scan's body once (as
    on CPU), rather than every step: measured on a probe, not assumed."""
    import jax
    import jax.numpy as jnp

    def probe(c: Any, w: Any) -> Any:
        return jax.lax.scan(lambda c, _: (c @ w, None), c, None, length=10)[0]

    c, w = jax.ShapeDtypeStruct((8,), jnp.float32), jax.ShapeDtypeStruct((8, 8), jnp.float32)
    flops = cost_analysis(jax.jit(probe).lower(c, w).compile()).get("flops", 0.0)
    return flops < 5 * 2 * 8 * 8  # one step is 128 FLOPs; ten would be 1,280


def loops_counted_whole(jaxpr: Any, costs: dict[str, float]) -> LoopCosts:
    """``costs`` (XLA's analysis of the compiled ``jaxpr``) with every loop body multiplied
    by its trip count; loops of unknown trip count stay counted once and are named."""
    import jax

    from .capture import jaxlab_work

    with jaxlab_work(), _quiet():
        if not xla_counts_body_once(jax.default_backend()):
            return LoopCosts(dict(costs))
    coster = _Coster()
    with jaxlab_work(), _quiet():
        missing = coster.extra(jaxpr, 0)
    whole = dict(costs)
    for k in KEYS:
        if k in whole:
            whole[k] = whole[k] + missing[k]
    return LoopCosts(whole, tuple(coster.loops), coster.uncosted)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Costing a body alone may warn about donated or unused inputs: not the user's news."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
