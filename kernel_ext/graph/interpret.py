"""Evaluate a jaxpr equation by equation and keep every intermediate value.

JAX's own interpreter throws intermediates away; teaching views need them. This one
walks the public ``jax.extend.core`` structures and evaluates each equation with
``eqn.primitive.bind``. Every value it creates lives in a numbered *slot*:

* the program's inputs and constants, and each equation's results, get new slots;
* a nested program it recurses into (``jit``, ``closed_call``, ``remat``, and with the
  default policy ``custom_jvp_call`` / ``custom_vjp_call`` and the branch a ``cond``
  took) shares slots with its caller: its parameters *are* the caller's arguments and
  the caller's results *are* its results, so one value is never counted twice;
* with ``Policy(scan=True)`` it also runs a top-level ``scan``'s body, each value inside
  in one slot stacked over iterations (:mod:`jaxlab.graph.scan_body`);
* equations it does not recurse into (``while``, other ``scan``s, ...) are bound whole:
  their results get slots, their insides get none.

Each slot also gets a structural *signature* (:mod:`jaxlab.graph.signatures`): equal
for the same computation in two programs (a function and the forward half of its
gradient program), which is how :mod:`jaxlab.graph.annotate` carries adjoints across.

>>> ev = evaluate(jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(1.0), [1.0])  # doctest: +SKIP
>>> [float(v) for v in ev.values]                                           # doctest: +SKIP
[1.0, 0.841..., 1.68...]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from .._jax_compat import bind_equation
from ..session.work import jaxlab_work
from . import scan_body
from .evaluation import DERIVATIVES, VALUES, Evaluation, Policy, Step
from .signatures import Interner, const_key, is_jaxpr, literal_key, param_key

# Programs whose insides compute exactly what the call computes: recursing gives the
# same values (and, for all but the custom rules, the same derivatives).
CALL_PRIMITIVES = frozenset(
    {"pjit", "jit", "closed_call", "core_call", "remat", "remat2", "checkpoint"}
)
# Recursing gives the same values, but differentiating the insides would ignore the
# custom rule (a softplus or a safe norm would lose its careful derivative).
CUSTOM_PRIMITIVES = frozenset(
    {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin"}
)


def _sub_program(eqn: Any) -> tuple[Any, Sequence[Any]] | None:
    """The one program a call-like equation runs, as (open jaxpr, consts), if it has one."""
    found = [v for v in eqn.params.values() if is_jaxpr(v)]
    if len(found) != 1:
        return None
    program = found[0]
    consts: Sequence[Any] = ()
    if isinstance(program, jcore.ClosedJaxpr):
        jaxpr, consts = program.jaxpr, program.consts
    else:
        jaxpr = program
        if jaxpr.constvars:
            return None
    if len(jaxpr.invars) != len(eqn.invars) or len(jaxpr.outvars) != len(eqn.outvars):
        return None
    return jaxpr, consts


def _has_programs(eqn: Any) -> bool:
    return any(
        is_jaxpr(v) or (isinstance(v, tuple) and bool(v) and is_jaxpr(v[0]))
        for v in eqn.params.values()
    )


class _Run:
    def __init__(
        self,
        policy: Policy,
        evaluate: bool,
        perturb: dict[int, Any] | None,
        interner: Interner,
        depth: int = 0,
        branches: dict[str, int] | None = None,
    ) -> None:
        self.policy = policy
        self.branches = branches or {}  # cond node id -> the branch to take (if known)
        self.evaluate = evaluate
        self.perturb = perturb or {}  # slot -> what to add to its value where created
        self.sig = interner
        self.depth = depth  # loop bodies this run is inside
        self.loop_bytes = 0  # held by the scan bodies run so far (at most LOOP_BYTES)
        self.ev = Evaluation()

    def planner(self, depth: int) -> _Run:
        """A run that lays slots out (evaluates nothing) with this run's policy and table."""
        return _Run(self.policy, False, None, self.sig, depth=depth)

    def new_slot(self, value: Any, aval: Any, signature: int, producer: int | None) -> int:
        slot = len(self.ev.values)
        p = self.perturb.get(slot)
        if p is not None:
            # lax.add binds the primitive directly: jnp's `+` would dispatch through a
            # jitted ufunc, several times dearer per slot.
            value = jax.lax.add(value, p)
        self.ev.values.append(value)
        self.ev.avals.append(aval)
        self.ev.signatures.append(signature)
        self.ev.producer.append(producer)
        return slot

    def literal_slot(self, lit: Any) -> int:
        slot = self.new_slot(lit.val, lit.aval, self.sig(literal_key(lit)), None)
        self.ev.literals.add(slot)
        return slot

    # ------------------------------------------------------------------ blocks
    def block(
        self, jaxpr: Any, prefix: str, const_slots: list[int], in_slots: list[int]
    ) -> list[int]:
        env: dict[Any, int] = {}
        for k, (var, slot) in enumerate(zip(jaxpr.constvars, const_slots, strict=True)):
            env[var] = slot
            self.ev.occurrences[(prefix, var)] = slot
            self.ev.node_slots.setdefault(f"{prefix}c{k}", slot)
        for k, (var, slot) in enumerate(zip(jaxpr.invars, in_slots, strict=True)):
            env[var] = slot
            self.ev.occurrences[(prefix, var)] = slot
            self.ev.node_slots.setdefault(f"{prefix}in{k}", slot)
        for i, eqn in enumerate(jaxpr.eqns):
            self.equation(eqn, f"{prefix}e{i}", env, prefix)
        return [
            self.literal_slot(a) if isinstance(a, jcore.Literal) else env[a] for a in jaxpr.outvars
        ]

    def consts(self, consts: Sequence[Any], avals: Sequence[Any]) -> list[int]:
        return [
            self.new_slot(c if self.evaluate else None, aval, self.sig(const_key(c)), None)
            for c, aval in zip(consts, avals, strict=True)
        ]

    def args(self, atoms: Sequence[Any], in_slots: Sequence[int | None]) -> list[int]:
        """Slots to pass a nested program: a literal argument gets one of its own."""
        pairs = zip(atoms, in_slots, strict=True)
        return [s if s is not None else self.literal_slot(a) for a, s in pairs]

    def equation(self, eqn: Any, node_id: str, env: dict[Any, int], prefix: str) -> None:
        in_slots: list[int | None] = []
        in_sigs: list[int] = []
        for atom in eqn.invars:
            if isinstance(atom, jcore.Literal):
                in_slots.append(None)
                in_sigs.append(self.sig(literal_key(atom)))
            else:
                in_slots.append(env[atom])
                in_sigs.append(self.ev.signatures[env[atom]])
        name = eqn.primitive.name
        layout = scan_body.layout(self, eqn, in_sigs) if name == "scan" else None
        if layout is not None and scan_body.run_per_iteration(
            self, eqn, node_id, env, prefix, in_slots, layout
        ):
            return
        recurse = name in CALL_PRIMITIVES or (name in CUSTOM_PRIMITIVES and self.policy.custom)
        sub = _sub_program(eqn) if recurse or name in CUSTOM_PRIMITIVES else None
        if recurse and sub is not None:
            jaxpr, consts = sub
            const_slots = self.consts(consts, [v.aval for v in jaxpr.constvars])
            outs = self.block(jaxpr, f"{node_id}/", const_slots, self.args(eqn.invars, in_slots))
            self.set_results(eqn, node_id, outs, env, prefix)
            return
        # Bound whole. A custom call's results take the signature of its insides, so
        # the same call matches whether or not a run looked inside.
        if sub is not None:
            out_sigs = _structural_signatures(sub, in_sigs, self.sig)
        elif layout is not None:
            out_sigs = list(layout.result_sigs)
        else:
            key = (name, param_key(eqn), tuple(in_sigs))
            out_sigs = [self.sig((key, k)) for k in range(len(eqn.outvars))]
        invals = None
        if self.evaluate:
            invals = [
                atom.val if isinstance(atom, jcore.Literal) else self.ev.values[env[atom]]
                for atom in eqn.invars
            ]
        branch = self._taken_branch(eqn, node_id, invals)
        if branch is not None:
            outvals = self._run_branch(eqn, node_id, branch, in_slots)
        elif invals is not None:
            outvals = bind_equation(eqn, invals)
        else:
            outvals = [None] * len(eqn.outvars)
        step_index = len(self.ev.steps)  # (after the branch's own steps)
        outs = [
            self.new_slot(value, var.aval, sig, step_index)
            for var, value, sig in zip(eqn.outvars, outvals, out_sigs, strict=True)
        ]
        self.set_results(eqn, node_id, outs, env, prefix)
        summarised = _has_programs(eqn) and branch is None
        self.record_step(eqn, node_id, in_slots, outs, summarised)

    def record_step(
        self, eqn: Any, node_id: str, ins: list[int | None], outs: list[int], summarised: bool
    ) -> None:
        self.ev.steps.append(Step(eqn, node_id, tuple(ins), tuple(outs), summarised))
        if summarised:
            self.ev.summarised.append(node_id)

    def set_results(
        self, eqn: Any, node_id: str, outs: list[int], env: dict[Any, int], prefix: str
    ) -> None:
        for k, (var, slot) in enumerate(zip(eqn.outvars, outs, strict=True)):
            env[var] = slot
            self.ev.occurrences[(prefix, var)] = slot
            self.ev.node_slots.setdefault(f"{node_id}/out{k}", slot)
        if outs:
            self.ev.node_slots.setdefault(node_id, outs[0])

    # ------------------------------------------------------------------ cond
    def _taken_branch(self, eqn: Any, node_id: str, invals: Sequence[Any] | None) -> int | None:
        """The branch a cond takes: given (an adjoint pass takes its value pass's), else
        read from the index's value; None where it is not known (traced, laid out)."""
        # Not inside a loop body: a branch taken in one iteration need not be taken in
        # the others (and a layout could not know which).
        if eqn.primitive.name != "cond" or not self.policy.cond or self.depth:
            return None
        branch = self.branches.get(node_id)
        if branch is None and invals is not None:
            try:
                index = int(np.asarray(invals[0]))
            except Exception:  # a tracer: no concrete branch to follow
                return None
            n = len(eqn.params["branches"])
            branch = min(max(index, 0), n - 1)  # cond clamps its index the same way
        if branch is not None:
            self.ev.branches[node_id] = branch
        return branch

    def _run_branch(
        self, eqn: Any, node_id: str, branch: int, in_slots: list[int | None]
    ) -> list[Any]:
        closed = eqn.params["branches"][branch]
        const_slots = self.consts(closed.consts, [v.aval for v in closed.jaxpr.constvars])
        args = self.args(eqn.invars[1:], in_slots[1:])  # (the index is not passed on)
        outs = self.block(closed.jaxpr, f"{node_id}/{branch}/", const_slots, args)
        return [self.ev.values[s] for s in outs]  # (None when laying out)


def _structural_signatures(
    sub: tuple[Any, Sequence[Any]], in_sigs: Sequence[int], interner: Interner
) -> list[int]:
    """Signatures of a nested program's results, without evaluating anything."""
    jaxpr, consts = sub
    run = _Run(VALUES, evaluate=False, perturb=None, interner=interner)
    const_slots = run.consts(consts, [v.aval for v in jaxpr.constvars])
    params = zip(jaxpr.invars, in_sigs, strict=True)
    out = run.block(
        jaxpr, "", const_slots, [run.new_slot(None, v.aval, s, None) for v, s in params]
    )
    return [run.ev.signatures[s] for s in out]


def new_interner() -> Interner:
    """A signature table; share one between evaluations whose signatures you compare."""
    return Interner()


@jaxlab_work()
def evaluate(
    closed: Any,
    flat_args: Sequence[Any],
    *,
    policy: Policy = VALUES,
    perturb: dict[int, Any] | None = None,
    interner: Interner | None = None,
    compute: bool = True,
    branches: dict[str, int] | None = None,
) -> Evaluation:
    """Run ``closed`` (a ClosedJaxpr) on ``flat_args``, keeping every value in a slot.

    ``perturb[slot]`` is added to that slot's value where it is created (the adjoint
    pass adds a zero perturbation there; a slot inside a scan body takes one stacked
    over iterations, row t added at iteration t). With ``compute=False`` nothing is
    evaluated: only the slots, their avals and signatures are laid out (values None).
    ``branches`` (cond node id -> index) fixes the branch each cond takes, where its
    index is not concrete (a layout, a traced run); ``Evaluation.branches`` records them.
    """
    run = _Run(policy, compute, perturb, interner or Interner(), branches=branches)
    jaxpr = closed.jaxpr
    const_slots = run.consts(closed.consts, [v.aval for v in jaxpr.constvars])
    in_slots = []
    for k, (var, value) in enumerate(zip(jaxpr.invars, flat_args, strict=True)):
        in_slots.append(
            run.new_slot(value if compute else None, var.aval, run.sig(("in", k)), None)
        )
    run.ev.inputs = in_slots
    run.ev.outputs = run.block(jaxpr, "", const_slots, in_slots)
    for k, slot in enumerate(run.ev.outputs):
        run.ev.node_slots[f"out{k}"] = slot
    return run.ev


def _has_cond(jaxpr: Any) -> bool:
    return any(
        eqn.primitive.name == "cond"
        or any(_has_cond(j) for j in jcore.jaxprs_in_params(eqn.params))
        for eqn in jaxpr.eqns
    )


def _differentiable(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.inexact)


@dataclass
class Adjoints:
    """Values and adjoints (d output / d slot) of one run of a scalar-output program."""

    evaluation: Evaluation  # values are concrete
    adjoints: list[Any]  # per slot; None where the slot is not a float
    output: Any  # the scalar output


def _downstream(plan: Evaluation, sources: Sequence[int]) -> set[int]:
    """Slots computed (at any remove) from the slots ``sources``."""
    found = set(sources)
    size = -1
    while size != len(found):  # a loop's carry feeds its own parameter: to a fixed point
        size = len(found)
        for src, dst in plan.links:
            if src in found:
                found.add(dst)
        for step in plan.steps:
            if any(s is not None and s in found for s in step.inputs):
                found.update(step.outputs)
    return found


@jaxlab_work()
def adjoints(
    closed: Any,
    flat_args: Sequence[Any],
    *,
    interner: Interner | None = None,
    policy: Policy = DERIVATIVES,
    only_from: Sequence[int] | None = None,
) -> Adjoints:
    """The adjoint of every intermediate of a scalar program, with one reverse pass.

    Each float slot gets a zero perturbation added where it is created; the VJP with
    respect to the perturbations is, slot by slot, d output / d slot: the value
    backpropagation accumulates there (micrograd's ``.grad``). Custom-rule calls and
    loops are bound whole, so JAX differentiates them with their own rules; with
    ``Policy(scan=True)`` a scan body's slots get stacked perturbations (an extra
    ``xs`` of the scan), so their adjoints are d output / d v_t for every iteration t.
    With ``Policy(cond=True)`` the branch each cond took runs inside the reverse pass,
    its slots perturbed like any other.
    """
    interner = interner or Interner()
    branches = None
    if policy.cond and _has_cond(closed.jaxpr):
        # The reverse pass traces every value, so a cond's index is not concrete there:
        # take it from a value pass. Sound, as the index is an integer: a zero
        # perturbation of the floats it is computed from cannot change it.
        values_only = replace(policy, scan=False)
        branches = evaluate(closed, flat_args, policy=values_only, interner=interner).branches
    plan = evaluate(
        closed, flat_args, policy=policy, interner=interner, compute=False, branches=branches
    )
    perturbed = [
        i for i, aval in enumerate(plan.avals) if _differentiable(aval) and i not in plan.literals
    ]
    if only_from is not None:
        # Only what depends on these inputs gets a perturbation, as jax.grad gives tangents
        # only there: a custom_vjp that refuses tangents on its settings (equinox's
        # filter_custom_vjp, under every diffrax solve) then sees none.
        reach = _downstream(plan, [plan.inputs[k] for k in only_from])
        perturbed = [i for i in perturbed if i in reach]
    zeros = [jnp.zeros(plan.avals[s].shape, plan.avals[s].dtype) for s in perturbed]

    def run(perturbations: list[Any]) -> tuple[Any, list[Any]]:
        perturb = dict(zip(perturbed, perturbations, strict=True))
        ev = evaluate(
            closed, flat_args, policy=policy, perturb=perturb, interner=interner, branches=branches
        )
        (out,) = [ev.values[s] for s in ev.outputs]
        return out, ev.values

    out, vjp, values = jax.vjp(run, zeros, has_aux=True)
    (cts,) = vjp(jnp.ones_like(out))
    adj: list[Any] = [None] * len(plan.avals)
    for slot, ct in zip(perturbed, cts, strict=True):
        adj[slot] = ct
    plan.values = list(values)
    return Adjoints(plan, adj, out)
