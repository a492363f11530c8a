"""Run a ``scan``'s body per iteration inside the equation-by-equation interpreter.

:mod:`jaxlab.graph.interpret` binds loops whole; with ``Policy(scan=True)`` it hands a
top-level ``scan`` here instead. The body is run as one ``lax.scan`` of the interpreter
itself, emitting every intermediate as an extra output, so each body value gets one slot
holding it for every iteration, stacked (shape ``(length, *shape)``, row t from
iteration t). A perturbation on a body slot goes in as an extra ``xs`` input, so one
reverse pass gives d output / d v_t for every t.

A body is first *laid out* (slots and signatures, nothing evaluated): a carry
parameter's signature says what fixes it (the initial values, the length and direction,
the structure of the body's carry results), so a program's scan and the forward scan of
its gradient program, which compute the same carries, match.

>>> ev = evaluate(jax.make_jaxpr(f)(xs), [xs], policy=Policy(scan=True))  # doctest: +SKIP
>>> ev.iterations[ev.node_slots["e0/e1"]]                                 # doctest: +SKIP
50
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import numpy as np

from .._jax_compat import scan_counts
from .evaluation import Evaluation, Policy
from .signatures import Interner

# Why a scan's body was not run per iteration (Evaluation.loops_skipped).
NESTED_LOOP = "nested"  # inside another loop's body
LOOP_TOO_LARGE = "large"  # every iteration's values would take the run past LOOP_BYTES
LOOP_NOT_ARRAYS = "not arrays"  # a body value (a token) cannot be stacked

# Most bytes the stacked body values of one run's scans may take together (the adjoint
# pass holds about three times this: values, perturbations, adjoints).
LOOP_BYTES = 64 * 2**20


@dataclass(frozen=True)
class ScanLayout:
    """A scan body's slots, laid out without evaluating: what running it would make."""

    carry_sigs: tuple[int, ...]  # signatures of the body's carry parameters
    result_sigs: tuple[int, ...]  # of the scan's results (final carry, stacked ys)
    n_slots: int  # slots the body run creates (parameters, equations, literals)
    nbytes: int  # what they hold, every iteration together
    skip: str | None  # why not to run it per iteration (LOOP_NOT_ARRAYS), or None


class _Run(Protocol):
    """What a scan body's run asks of the interpreter's run (``interpret._Run``), which
    hands itself in: this module sits below the interpreter and never imports it."""

    policy: Policy
    evaluate: bool  # values computed (False: slots laid out only)
    perturb: dict[int, Any]  # slot -> what to add to its value where created
    sig: Interner
    depth: int  # loop bodies this run is inside
    loop_bytes: int  # held by the scan bodies run so far
    ev: Evaluation

    def planner(self, depth: int) -> _Run: ...

    def new_slot(self, value: Any, aval: Any, signature: int, producer: int | None) -> int: ...

    def block(
        self, jaxpr: Any, prefix: str, const_slots: list[int], in_slots: list[int]
    ) -> list[int]: ...

    def consts(self, consts: Sequence[Any], avals: Sequence[Any]) -> list[int]: ...

    def args(self, atoms: Sequence[Any], in_slots: Sequence[int | None]) -> list[int]: ...

    def record_step(
        self, eqn: Any, node_id: str, ins: list[int | None], outs: list[int], summarised: bool
    ) -> None: ...

    def set_results(
        self, eqn: Any, node_id: str, outs: list[int], env: dict[Any, int], prefix: str
    ) -> None: ...


def _is_array(aval: Any) -> bool:
    """An array aval lax.scan can stack (not a token or a reference)."""
    return hasattr(aval, "shape") and hasattr(aval, "dtype") and hasattr(aval, "update")


def _nbytes(aval: Any) -> int:
    try:
        itemsize = np.dtype(aval.dtype).itemsize
    except TypeError:  # an extended dtype (PRNG keys): count it as 8 bytes
        itemsize = 8
    return int(np.prod(aval.shape, dtype=np.int64)) * itemsize


def layout(run: _Run, eqn: Any, in_sigs: list[int]) -> ScanLayout | None:
    """Signatures and slot count of a scan body run, without evaluating (cached).

    A carry parameter's signature says what fixes it: the initial values, the
    length and direction, and the structure of the body's carry results (laid out
    once with placeholder carries). Equal for a program's scan and the forward
    scan of its gradient program, which computes the same carries.
    """
    p = eqn.params
    try:
        closed, (nc, nk) = p["jaxpr"], scan_counts(p)
    except (KeyError, NotImplementedError):
        return None  # a scan this JAX writes differently: bound whole, as any loop
    key = (id(closed.jaxpr), tuple(in_sigs), run.policy)
    cached = run.sig.layouts.get(key)
    if cached is not None:
        return cached[0]
    length, reverse = int(p["length"]), bool(p["reverse"])
    consts, inits, xs = in_sigs[:nc], in_sigs[nc : nc + nk], in_sigs[nc + nk :]

    def lay_out(carry_sigs: Sequence[int]) -> tuple[_Run, list[int], int]:
        sub = run.planner(depth=1)
        body_consts = sub.consts(closed.consts, [v.aval for v in closed.jaxpr.constvars])
        params = [
            sub.new_slot(None, v.aval, sig, None)
            for v, sig in zip(closed.jaxpr.invars[:nc], consts, strict=True)
        ]
        start = len(sub.ev.values)
        outs = _body(sub, eqn, "", body_consts, params, carry_sigs, xs, None, None)
        return sub, outs, start

    sub, outs, _ = lay_out([run.sig(("scan carry placeholder", k)) for k in range(nk)])
    fingerprint = tuple(sub.ev.signatures[s] for s in outs[:nk])
    carry_sigs = tuple(
        run.sig(("scan carry", k, tuple(inits), tuple(xs), length, reverse, fingerprint))
        for k in range(nk)
    )
    sub, outs, start = lay_out(carry_sigs)
    body_out = [sub.ev.signatures[s] for s in outs]
    results = tuple(run.sig(("scan last", s)) for s in body_out[:nk]) + tuple(
        run.sig(("scan stacked", s)) for s in body_out[nk:]
    )
    avals = sub.ev.avals[start:]
    arrays = all(_is_array(a) for a in avals)
    nbytes = sum(length * _nbytes(a) for a in avals) if arrays else 0
    found = ScanLayout(carry_sigs, results, len(avals), nbytes, None if arrays else LOOP_NOT_ARRAYS)
    run.sig.layouts[key] = (found, closed.jaxpr)  # the body kept: its id stays its own
    return found


def run_per_iteration(
    run: _Run,
    eqn: Any,
    node_id: str,
    env: dict[Any, int],
    prefix: str,
    in_slots: list[int | None],
    found: ScanLayout,
) -> bool:
    """Run the scan's body per iteration if the policy and the budget allow (True), else
    record why not (``Evaluation.loops_skipped``) and leave it to be bound whole."""
    skip = found.skip
    if skip is None and run.loop_bytes + found.nbytes > LOOP_BYTES:
        skip = LOOP_TOO_LARGE
    if not run.policy.scan:
        return False
    if run.depth == 0 and skip is None:
        run.loop_bytes += found.nbytes
        _scan(run, eqn, node_id, env, prefix, in_slots, found)
        return True
    run.ev.loops_skipped[node_id] = skip if skip and not run.depth else NESTED_LOOP
    return False


def _body(
    run: _Run,
    eqn: Any,
    prefix: str,
    body_consts: list[int],
    const_params: list[int],
    carry_sigs: Sequence[int],
    xs_sigs: Sequence[int],
    carry: Sequence[Any] | None,
    rows: Sequence[Any] | None,
) -> list[int]:
    """One run of a scan body: slots for its carry and row parameters (in that
    order), then its equations. Values are one iteration's (tracers inside lax.scan),
    or None when only laying out."""
    p = eqn.params
    jaxpr, (nc, nk) = p["jaxpr"].jaxpr, scan_counts(p)
    params = list(const_params)
    for k, v in enumerate(jaxpr.invars[nc : nc + nk]):
        value = carry[k] if carry is not None else None
        params.append(run.new_slot(value, v.aval, carry_sigs[k], None))
    for j, v in enumerate(jaxpr.invars[nc + nk :]):
        value = rows[j] if rows is not None else None
        params.append(run.new_slot(value, v.aval, run.sig(("scan row", xs_sigs[j])), None))
    return run.block(jaxpr, prefix, body_consts, params)


def _scan(
    run: _Run,
    eqn: Any,
    node_id: str,
    env: dict[Any, int],
    prefix: str,
    in_slots: list[int | None],
    found: ScanLayout,
) -> None:
    """Run a scan with its body interpreted: every body slot stacked over iterations."""
    p = eqn.params
    closed, (nc, nk) = p["jaxpr"], scan_counts(p)
    length, reverse = int(p["length"]), bool(p["reverse"])
    args = run.args(eqn.invars, in_slots)
    body_consts = run.consts(closed.consts, [v.aval for v in closed.jaxpr.constvars])
    base = len(run.ev.values)
    body_prefix = f"{node_id}/"
    vals = run.ev.values
    xs_sigs = [run.ev.signatures[s] for s in args[nc + nk :]]
    carry_sigs = found.carry_sigs
    if not run.evaluate:
        run.depth += 1
        try:
            outs = _body(
                run, eqn, body_prefix, body_consts, args[:nc], carry_sigs, xs_sigs, None, None
            )
        finally:
            run.depth -= 1
        finals: list[Any] = [None] * len(eqn.outvars)
    else:
        mark = (len(run.ev.steps), len(run.ev.summarised))
        keys = [s for s in range(base, base + found.n_slots) if s in run.perturb]
        outer = run.perturb
        outs = []

        def step(carry: list[Any], x: tuple[list[Any], list[Any]]) -> Any:
            rows, perturbations = x
            _rewind(run, base, mark)  # lax.scan may trace the body twice (weak types)
            run.perturb = dict(zip(keys, perturbations, strict=True))
            run.depth += 1
            try:
                outs[:] = _body(
                    run, eqn, body_prefix, body_consts, args[:nc], carry_sigs, xs_sigs, carry, rows
                )
            finally:
                run.depth -= 1
                run.perturb = outer
            if len(vals) - base != found.n_slots:
                raise RuntimeError("scan body run does not match its layout")
            results = [vals[s] for s in outs]
            return results[:nk], (results[nk:], vals[base:])

        init = [vals[s] for s in args[nc : nc + nk]]
        xs = [vals[s] for s in args[nc + nk :]]
        carry, (ys, stacked) = jax.lax.scan(
            step, init, (xs, [outer[s] for s in keys]), length=length, reverse=reverse
        )
        finals = [*carry, *ys]
        vals[base:] = stacked
    for s in range(base, len(vals)):
        aval = run.ev.avals[s]
        run.ev.avals[s] = aval.update(shape=(length, *aval.shape))
        run.ev.iterations[s] = length
    # The body's parameters come first: carries at base + k, rows after them.
    for k in range(nk):
        run.ev.links += [(args[nc + k], base + k), (outs[k], base + k)]
    for j, s in enumerate(args[nc + nk :]):
        run.ev.links.append((s, base + nk + j))
    step_index = len(run.ev.steps)
    results = [
        run.new_slot(value, var.aval, sig, step_index)
        for var, value, sig in zip(eqn.outvars, finals, found.result_sigs, strict=True)
    ]
    run.set_results(eqn, node_id, results, env, prefix)
    run.record_step(eqn, node_id, in_slots, results, summarised=False)


def _rewind(run: _Run, base: int, mark: tuple[int, int]) -> None:
    """Forget the slots and steps a body trace made (before tracing it again)."""
    ev = run.ev
    for lst in (ev.values, ev.avals, ev.signatures, ev.producer):
        del lst[base:]
    del ev.steps[mark[0] :]
    del ev.summarised[mark[1] :]
    ev.literals = {s for s in ev.literals if s < base}
