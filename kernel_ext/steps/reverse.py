"""Reverse mode, one equation at a time: the steps of the gradient program
(``%jaxpr --grad``'s: the forward equations, then the transposed ones, in JAX's order),
each with its numbers from the interpreter's run of that program (graph/interpret) and
its rule read with cotangent names (steps/naming).

A forward step shows the value it computes (``y = sin(x) = 0.5646``); a backward step
the cotangent arriving, the rule, the numbers and the cotangent leaving
(``x̄ = ȳ · cos(x) = 0.5 · 0.8253 = 0.4127``); where a cotangent's second contribution
is added (``add_any``, a value used twice), the step says so in ``fanout``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..graph.port_names import position
from .naming import Names, bar, is_float_slot
from .record import BACKWARD, FORWARD, Step, short
from .rules import expression

__all__ = ["Walk", "downstream", "value_at"]


def downstream(ev: Any, sources: Sequence[int]) -> set[int]:
    """Slots computed (at any remove) from ``sources``, loops' links followed."""
    found = set(sources)
    size = -1
    while size != len(found):
        size = len(found)
        for src, dst in ev.links:
            if src in found:
                found.add(dst)
        for step in ev.steps:
            if any(s is not None and s in found for s in step.inputs):
                found.update(step.outputs)
    return found


# Equations whose transpose JAX writes no equation for: the cotangent passes through.
_PASS = frozenset({"add", "add_any", "sub", "convert_element_type", "copy", "copy_p"})


def value_at(ev: Any, slot: int | None, atom: Any, iteration: int | None = None) -> Any:
    """A slot's value; inside a scan body, its row at ``iteration``."""
    if slot is None:
        return atom.val
    value = ev.values[slot]
    if iteration is not None and slot in ev.iterations:
        return value[iteration]
    return value


def _equal(ev: Any, a: int, b: int) -> bool:
    """Two slots of one type holding the same numbers (a cond's result and its branch's)."""
    if ev.avals[a] != ev.avals[b]:
        return False
    try:
        return bool(np.array_equal(np.asarray(ev.values[a]), np.asarray(ev.values[b])))
    except Exception:
        return False


def _shape(ev: Any, slot: int | None) -> tuple[int, ...]:
    return tuple(getattr(ev.avals[slot], "shape", ())) if slot is not None else ()


class Walk:
    """The reverse walk over one evaluation of a gradient program.

    ``seed``: the slot of ``∂f/∂f = 1``; ``output``: the forward slot it differentiates;
    ``given``: names of inputs and constants by slot.
    """

    def __init__(
        self,
        ev: Any,
        seed: int | None,
        output: int | None,
        given: dict[int, str],
        custom: Collection[Any] = (),
    ):
        self.ev = ev
        self.names = Names(ev, given)
        self.back = downstream(ev, [seed]) if seed is not None else set()
        self.ct_of: dict[int, int] = {}  # cotangent slot -> the forward slot it is of
        self.temp_of: dict[int, int] = {}  # a rule's temporary -> the forward step (index)
        self.contributions: dict[int, list[int]] = {}  # forward slot -> cotangent slots
        if seed is not None and output is not None:
            self._cotangent(seed, output)
        first = next(
            (i for i, st in enumerate(ev.steps) if any(s in self.back for s in st.inputs)),
            len(ev.steps),
        )
        self.first_backward = first
        self.custom_origin: int | None = None
        self.hidden: set[int] = set()  # steps not shown: a cond whose branch was stepped
        self.feeds: dict[int, list[int]] = {}
        for src, dst in ev.links:
            self.feeds.setdefault(dst, []).append(src)
        for k, st in enumerate(ev.steps):  # every name first: contributions are counted
            self._name_fed(st)
            if st.node_id in ev.branches and self._alias_branch(k, st):
                self.hidden.add(k)
            elif k < first:
                self.names.name_forward(st)
            elif custom and position(st.eqn) in custom:
                self._name_custom(k, st, custom)
            else:
                self._name_backward(k, st)
        self._number_contributions()

    # ------------------------------------------------------------------ names
    def _cotangent(self, slot: int, of: int) -> None:
        self.ct_of[slot] = of
        self.contributions.setdefault(of, []).append(slot)
        self.names.name[slot] = bar(self.names.of(of))

    def _origin(self, slot: int, reads: set[int] | None = None) -> int | None:
        """The forward step whose rule a cotangent (or a rule's temporary) feeds: the
        producer of the value it is the cotangent of or, where that value passed through
        an equation whose transpose JAX writes no equation for (``+``, a same-type
        ``convert``), the producer behind it that fits what the backward step reads."""
        if slot in self.temp_of:
            return self.temp_of[slot]
        fwd = self.ct_of.get(slot)
        if fwd is None:
            return None
        found = [p for p in (self.ev.producer[s] for s in self._through(fwd)) if p is not None]
        if not found:
            return None
        return max(found, key=lambda p: self._fits(p, reads or set()))

    def _through(self, fwd: int) -> list[int]:
        """``fwd`` and the values it passed through unchanged in the cotangent's eyes."""
        ev, seen, todo = self.ev, [fwd], [fwd]
        while todo and len(seen) < 8:
            p = ev.producer[todo.pop(0)]
            st = ev.steps[p] if p is not None else None
            if st is None or st.eqn.primitive.name not in _PASS:
                continue
            for s in st.inputs:
                if is_float_slot(ev, s) and s not in seen and _shape(ev, s) == _shape(ev, fwd):
                    seen.append(s)
                    todo.append(s)
        return seen

    def _fits(self, p: int, reads: set[int]) -> int:
        """How well a backward step reading ``reads`` fits the rule of forward step ``p``:
        it reads an operand (a product's rule), or a value made from the same operands
        or from the result (``cos(x)``, ``1 − tanh(x)²``)."""
        st = self.ev.steps[p]
        near = {s for s in (*st.inputs, *st.outputs) if s is not None}
        if reads & {s for s in st.inputs if s is not None}:
            return 2
        for r in reads:
            q = self.ev.producer[r]
            if q is not None and near & {s for s in self.ev.steps[q].inputs if s is not None}:
                return 1
        return 0

    def _name_backward(self, k: int, step: Any) -> None:
        cts = [s for s in step.inputs if s is not None and s in self.back]
        reads = {s for s in step.inputs if s is not None and s not in self.back}
        outs = [s for s in step.outputs if s not in self.names.name]
        if not outs:
            return
        if step.eqn.primitive.name == "add_any":
            ofs = {self.ct_of[c] for c in cts if c in self.ct_of}
            temps = {self.temp_of[c] for c in cts if c in self.temp_of}
            if len(ofs) == 1 and len(outs) == 1:
                self._cotangent(outs[0], ofs.pop())
                return
            if len(temps) == 1 and not ofs and len(outs) == 1:
                self.temp_of[outs[0]] = temps.pop()
                self.names.name[outs[0]] = self.names.temporary()
                return
        origins = [o for o in (self._origin(c, reads) for c in cts) if o is not None]
        origin = origins[0] if origins else None
        inside = origin is not None and self._inside_branch_of(k, origin)
        for out in outs:
            target = self._target(origin, reads, out) if origin is not None else None
            if inside:  # a cond branch's transpose: its operand's cotangent is its last
                target = None
            if target is not None:
                self._cotangent(out, target)
            else:
                if origin is not None:
                    self.temp_of[out] = origin
                self.names.name[out] = self.names.temporary()

    def _inside_branch_of(self, k: int, origin: int) -> bool:
        """Whether backward step ``k`` runs inside the transposed branch of the cond that
        forward step ``origin`` is, before that branch's last step (whose results are the
        cotangents of the cond's operands; the steps before make temporaries)."""
        ev = self.ev
        if ev.steps[origin].eqn.primitive.name != "cond":
            return False
        parts = ev.steps[k].node_id.split("/")
        if len(parts) < 3 or not parts[1].isdigit():
            return False
        branch = "/".join(parts[:2]) + "/"
        return k + 1 < len(ev.steps) and ev.steps[k + 1].node_id.startswith(branch)

    def _target(self, origin: int, reads: set[int], out: int) -> int | None:
        """Which operand of the forward step ``origin`` the cotangent ``out`` is of."""
        ev = self.ev
        fwd = ev.steps[origin]
        floats = [s for s in dict.fromkeys(fwd.inputs) if is_float_slot(ev, s)]
        same = [s for s in floats if s is not None and _shape(ev, s) == _shape(ev, out)]
        unread = [s for s in same if s not in reads]
        for pick in (unread, same if not unread else []):
            if len(pick) == 1:
                return pick[0]
        return None

    def _name_custom(self, k: int, st: Any, custom: Collection[Any]) -> None:
        """A custom_vjp's backward rule (inlined where the user called the function): its
        equations make temporaries; its last result is the cotangent of the operand of
        the forward equation whose result's cotangent it read."""
        ev = self.ev
        cts = [s for s in st.inputs if s is not None and s in self.back]
        reads = {s for s in st.inputs if s is not None and s not in self.back}
        found = [o for o in (self._origin(c, reads) for c in cts) if o is not None]
        origin = found[0] if found else self.custom_origin
        self.custom_origin = origin
        for out in st.outputs:
            if origin is not None:
                self.temp_of[out] = origin
            self.names.name[out] = self.names.temporary()
        nxt = ev.steps[k + 1] if k + 1 < len(ev.steps) else None
        if nxt is not None and position(nxt.eqn) == position(st.eqn):
            return
        self.custom_origin = None
        if origin is None:
            return
        inputs = list(ev.steps[origin].inputs)
        box = ev.steps[origin].node_id.split("/")[0]
        if f"{box}/in0" in ev.node_slots:  # a custom_jvp's call, its insides run: its operands
            inputs = [
                ev.node_slots[f"{box}/in{j}"]
                for j in range(len(inputs) + 8)
                if f"{box}/in{j}" in ev.node_slots
            ]
        floats = [s for s in dict.fromkeys(inputs) if is_float_slot(ev, s)]
        for out in st.outputs:
            same = [s for s in floats if s is not None and _shape(ev, s) == _shape(ev, out)]
            if len(same) == 1:
                del self.temp_of[out]
                self._cotangent(out, same[0])

    def _name_fed(self, st: Any) -> None:
        """A loop body's parameter no name reached, by the value it is fed: a row of
        ``xs`` as ``v3[t]``, a carry by its first value (``∂v1`` flows into the carry)."""
        for dst in st.inputs:
            srcs = self.feeds.get(dst) if dst is not None else None
            if not srcs or dst in self.names.name or srcs[0] not in self.names.name:
                continue
            row = len(srcs) == 1  # a carry is fed twice: its first value, then the body's
            self.names.name[dst] = self.names.name[srcs[0]] + ("[t]" if row else "")

    def _alias_branch(self, k: int, st: Any) -> bool:
        """A cond whose taken branch was stepped: its results are the branch's, by name
        (and, for cotangents, by what they are the cotangent of). False where a result
        matches nothing the branch made or read."""
        ev = self.ev
        inside = f"{st.node_id}/{ev.branches[st.node_id]}/"
        made = [
            s
            for j in range(k)
            if ev.steps[j].node_id.startswith(inside)
            for s in ev.steps[j].outputs
        ]
        pool = made[::-1] + [s for s in st.inputs[1:] if s is not None]
        pairs = []
        for out in st.outputs:
            same = next((s for s in pool if _equal(ev, s, out)), None)
            if same is None:
                return False
            pairs.append((out, same))
        for out, same in pairs:
            if out in self.names.name and same not in self.ct_of and same not in self.back:
                self.names.name[same] = self.names.name[out]  # the function's value: f
            self.names.name[out] = self.names.of(same)
            if same in self.ct_of:
                self.ct_of[out] = self.ct_of[same]
            elif same in self.temp_of:
                self.temp_of[out] = self.temp_of[same]
        return True

    def _number_contributions(self) -> None:
        """A value used twice gets two cotangent contributions: ``x̄₁``, ``x̄₂``, summed
        into ``x̄`` (the sums between, ``x̄₁₊₂``). A same-type ``convert`` of a
        contribution (a weak type made strong) is that contribution, by its name."""
        ev = self.ev
        made_by = {s: st for st in ev.steps for s in st.outputs}
        sums = {s for s, st in made_by.items() if st.eqn.primitive.name == "add_any"}
        relabel = {
            s: st.inputs[0]
            for s, st in made_by.items()
            if st.eqn.primitive.name == "convert_element_type"
            and st.inputs[0] in self.back
            and getattr(ev.avals[s], "dtype", None) == getattr(ev.avals[st.inputs[0]], "dtype", 0)
        }
        by_name: dict[str, list[int]] = {}
        for fwd, slots in self.contributions.items():
            by_name.setdefault(bar(self.names.of(fwd)), []).extend(slots)
        for base, slots in by_name.items():
            slots.sort()
            parts = [s for s in slots if s not in sums and s not in relabel]
            if len(parts) < 2:
                continue
            for k, slot in enumerate(parts):
                self.names.name[slot] = base + _sub(k + 1)
            done = 0
            for slot in slots:
                if slot in relabel:
                    self.names.name[slot] = self.names.of(relabel[slot])
                elif slot in sums:
                    last = slot == slots[-1] or all(
                        t in relabel for t in slots[slots.index(slot) + 1 :]
                    )
                    upto = "₊".join(_sub(k + 1) for k in range(done))
                    if done > 3:
                        upto = f"₁₊…₊{_sub(done)}"
                    self.names.name[slot] = base if last else base + upto
                else:
                    done += 1

    # ------------------------------------------------------------------ steps
    def step(
        self, k: int, label: str, node: str, box: list[str], iteration: int | None = None
    ) -> Step:
        """The record of evaluation step ``k`` (a scan body's at ``iteration``)."""
        ev, st = self.ev, self.ev.steps[k]
        backward = k >= self.first_backward
        eqn = st.eqn
        prim = eqn.primitive.name
        in_names = self.names.operands(st)
        out_names = [self.names.of(s) for s in st.outputs]
        values = [value_at(ev, s, a, iteration) for s, a in zip(st.inputs, eqn.invars, strict=True)]
        outs = [value_at(ev, s, None, iteration) for s in st.outputs]
        avals = [getattr(a, "aval", None) for a in eqn.invars]
        params = dict(eqn.params)
        formula = expression(prim, params, in_names, avals)
        lhs = ", ".join(out_names)
        numbers = expression(prim, params, [short(v) for v in values], avals)
        result = ", ".join(short(v) for v in outs)
        shown = [lhs] if lhs == formula else [lhs, formula]
        rule = " = ".join(shown)
        if formula != numbers and all(np.size(v) == 1 for v in values):
            shown.append(numbers)
        text = " = ".join([*shown, result])
        record = Step(
            index=0,
            kind=BACKWARD if backward else FORWARD,
            equation=label,
            rule=rule,
            text=text,
            node=node,
            box=box,
            primitive=prim,
            names_in=in_names,
            names_out=out_names,
            operands=values,
            iteration=iteration,
        )
        if backward:
            is_ct = [s is not None and s in self.back for s in st.inputs]
            record.cotangent_in = [v for v, c in zip(values, is_ct, strict=True) if c]
            record.values_in = [v for v, c in zip(values, is_ct, strict=True) if not c]
            record.cotangent_out = outs
            reads = {s for s in st.inputs if s is not None and s not in self.back}
            origin = next((self._origin(s, reads) for s in st.inputs if s in self.back), None)
            if origin is not None:
                fwd = ev.steps[origin]
                f_names = self.names.operands(fwd)
                f_avals = [getattr(a, "aval", None) for a in fwd.eqn.invars]
                f_out = ", ".join(self.names.of(s) for s in fwd.outputs)
                f_expr = expression(fwd.eqn.primitive.name, dict(fwd.eqn.params), f_names, f_avals)
                record.of = f_expr if f_out == f_expr else f"{f_out} = {f_expr}"
            if prim == "add_any" and len(values) == 2:
                used = self.ct_of.get(st.outputs[0])
                why = f": {self.names.of(used)} is used twice" if used is not None else ""
                record.fanout = (
                    f"{lhs} = {short(values[0])} + {short(values[1])} = {result}"
                    f" ({in_names[0]} and {in_names[1]} added{why})"
                )
        else:
            record.values_in = values
            record.values_out = outs
        return record


def _sub(k: int) -> str:
    return "".join("₀₁₂₃₄₅₆₇₈₉"[int(d)] for d in str(k))
