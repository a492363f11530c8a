"""What a drawing calls each value: the names the program gives, carried through nested
programs (:class:`Naming`, the part of the emitter that names; graph/emit.py draws).

A value is named by its argument's leaf path (``params[3]``), by the assignment that made
it (``h = jnp.tanh(...)``: the tanh, ``h``), by a nested program's parameter or result
(graph/names.py; where JAX kept none, graph/port_names.py), by the output the program
returns it as, or by its formula from named values (``-k``, ``1 - h²``). A port no name
reaches says its type (``· f32[4]``), never its position (``in3``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.extend.core as jcore

from .labels import friendly_label, literal_text, type_text
from .marks import scan_counts
from .names import WHOLE, program_names, result_name
from .port_names import (
    STACKED,
    assigned_names,
    assigned_value,
    def_scan_names,
    forward_scan,
    row_name,
    transposed_scan_names,
)
from .walk import Block, Item, name_stack


class Naming:
    """The emitter's names: ``var_name`` (Var -> name), filled as it emits."""

    var_name: dict[Any, str]
    producer: dict[Any, Any]  # Var -> the equation that made it
    # A scan equation (by id) -> its body's parameter names and its results' names.
    scan_names: dict[int, tuple[list[str | None], list[str | None]]]
    siblings: dict[str, tuple[Block, int]]  # item id -> its block, its index

    def _operand_name(self, v: Any) -> str | None:
        """What a reader calls an operand: an argument's name, a literal's value."""
        if isinstance(v, jcore.Literal):
            return literal_text(v)
        return self.var_name.get(v)

    def _index(self, block: Block) -> None:
        for k, item in enumerate(block.items):
            self.siblings[item.id] = (block, k)
            for sub in item.blocks:
                self._index(sub)

    def _assigned(self, item: Item) -> str | None:
        """The name an assignment gives the equation's result (``h = jnp.tanh(...)``),
        in the forward pass only (a backward equation is written at its primal's line), and
        only for the outermost operation of the expression (``x @ W @ V``: the second)."""
        if "transpose" in name_stack(item.eqn):
            return None
        name = assigned_value(item.eqn)
        if name is None:
            return None
        block, k = self.siblings.get(item.id, (None, 0))
        made = item.eqn.outvars[0]
        for later in block.items[k + 1 : k + 9] if block is not None else ():
            reads = any(v is made for v in later.eqn.invars)
            if reads and assigned_value(later.eqn) == name:
                return None  # an inner operation of the same expression
        return name

    # -- names carried into and out of nested programs (graph/names.py)
    def _parameter_names(self, sub: Block, item: Item | None = None) -> list[str | None]:
        """A nested program's parameters: its own names (``h``, ``x``), else the names of
        the outer values that feed them (a closed-over ``params['Wh']``, a row of
        ``stacked h``: ``h``); a gradient's scan, whose names JAX dropped, is named by its
        ``def`` and, in the backward pass, after the forward scan it reverses
        (graph/port_names.py: ``∂h``, ``∂params['W']``)."""
        own: Sequence[str | None] | None = program_names(sub.jaxpr).args
        scan = item is not None and item.primitive == "scan" and len(item.blocks) == 1
        counts = scan_counts(item.eqn.params) if item is not None and scan else None
        rows_from = sum(counts) if counts is not None else len(sub.feeds)
        if own is None and item is not None and counts is not None:
            forward = forward_scan(item.eqn, self.producer.get)
            if "transpose" in name_stack(item.eqn) and id(forward) in self.scan_names:
                ports, results = self.scan_names[id(forward)]
                own = transposed_scan_names(item.eqn, forward, ports, results, self._outer_name)
            else:
                own = def_scan_names(sub.jaxpr, *counts)
        found: list[str | None] = []
        for k, fed_by in enumerate(sub.feeds):
            name = own[k] if own is not None and k < len(own) and own[k] else None
            if name is None and fed_by is not None:
                name = self._outer_name(fed_by)
                name = row_name(name) if k >= rows_from else name
            found.append(name)
        return found

    def _formula(self, v: Any) -> str | None:
        """A value no one named, written as the formula that made it from named values
        (``1 - h²``, ``h @ W``): a residual named after the forward value it keeps."""
        made = self.producer.get(v)
        if made is None:
            return None
        operands = [self._operand_name(x) for x in made.invars]
        symbol = _ARITHMETIC.get(made.primitive.name)
        if symbol is not None and all(operands):  # written as the program writes it
            text = f"-{operands[0]}" if symbol == "-" and len(operands) == 1 else ""
            text = text or f" {symbol} ".join(str(o) for o in operands)
            return text if len(text) <= WHOLE else None
        if made.primitive.name not in _FORMULAS:
            return None
        formula = friendly_label(
            made.primitive.name,
            made.params,
            [x.aval for x in made.invars],
            [self._operand_name(x) for x in made.invars],
        )
        return formula if formula and "·" not in formula else None

    def _outer_name(self, v: Any) -> str | None:
        """An outer value's name: an argument's, a literal's value, the formula of a
        value computed from named ones (a hoisted ``-k``), or None."""
        if isinstance(v, jcore.Literal):
            return literal_text(v)
        return self.var_name.get(v) or self._formula(v)

    def _name_carry_results(self, item: Item, sub: Block, params: list[str | None]) -> None:
        """A loop body's carry results take the carry's name (the next ``h``), for the
        labels inside the body that read them (``1 - h²``)."""
        if item.primitive == "scan":
            counts = scan_counts(item.eqn.params)
            if counts is None or len(item.blocks) != 1:
                return
            consts, carries = counts
        elif item.primitive == "while" and sub.role == "body_jaxpr":
            consts = int(item.eqn.params.get("body_nconsts", 0))
            carries = len(sub.jaxpr.outvars)
        else:
            return
        inputs = set(sub.jaxpr.invars)
        for v, name in zip(sub.jaxpr.outvars, params[consts : consts + carries], strict=False):
            if name and not isinstance(v, jcore.Literal) and v not in inputs:
                self.var_name.setdefault(v, name)

    def _program_results(self, jaxpr: Any, function: str | None = None) -> list[str | None]:
        """A program's results named by its function and their pytree paths (``f``,
        ``inner['s']``, ``step[1]``)."""
        names = program_names(jaxpr)
        function = names.function or function or None
        paths = names.results or (None,) * len(jaxpr.outvars)
        single = len(jaxpr.outvars) == 1
        return [result_name(function, path, single=single) for path in paths]

    def _result_names(
        self, item: Item, port_names: dict[str, list[str | None]] | None = None
    ) -> list[str | None]:
        """Names for a nested program's results: a scan's or while's carries keep the
        carry's name and a scan's stacked outputs say what they stack; other programs'
        results are named by the function (``inner['s']``), a jit's single one by its name."""
        eqn = item.eqn
        n = len(eqn.outvars)
        port_names = port_names or {}
        if item.primitive == "scan" and len(item.blocks) == 1:
            body = item.blocks[0]
            counts = scan_counts(eqn.params)
            if counts is None:
                return [None] * n
            consts, carries = counts
            params = port_names.get(body.prefix) or self._parameter_names(body, item)
            found = params[consts : consts + carries]
            found += [None] * (carries - len(found))
            outs = body.jaxpr.outvars
            for k in range(carries, n):
                inner = outs[k] if k < len(outs) else None
                if isinstance(inner, jcore.Literal):  # the body returns a constant each step
                    found.append(f"{STACKED}{literal_text(inner)}")
                    continue
                what = self.var_name.get(inner) if inner is not None else None
                if what is None and inner is not None and inner in outs[:carries]:
                    what = found[list(outs[:carries]).index(inner)]
                if what is None and inner is not None:
                    what = self._formula(inner)
                found.append(f"{STACKED}{what}" if what else None)
            # What the call's assignment names them (h, ys = lax.scan(...)), where the
            # body does not: a gradient's forward scan has residuals after its own results.
            traced = program_names(body.jaxpr).args is not None
            assigned = (
                None  # a backward pass's scan returns cotangents, not what is assigned
                if "transpose" in name_stack(eqn)
                else assigned_names(eqn, carries, n - carries if traced else None)
            )
            if assigned is not None:
                found = [f or a for f, a in zip(found, assigned, strict=True)]
            return found
        if item.primitive == "while":
            bodies = [b for b in item.blocks if b.role == "body_jaxpr"]
            if not bodies:
                return [None] * n
            params = port_names.get(bodies[0].prefix) or self._parameter_names(bodies[0])
            skip = int(eqn.params.get("body_nconsts", 0))
            found = params[skip : skip + n]
            return found + [None] * (n - len(found))
        if not item.blocks:
            return [None] * n
        if item.primitive == "cond":
            return self._cond_results(item, port_names)
        name = eqn.params.get("name")
        found = self._program_results(item.blocks[0].jaxpr, name if isinstance(name, str) else None)
        return found if len(found) == n else [None] * n

    def _cond_results(
        self, item: Item, port_names: dict[str, list[str | None]]
    ) -> list[str | None]:
        """A cond's results: the name every branch gives them (never one branch's name
        for what either may return), else the assignment's (``y = lax.cond(...)``); a
        gradient's residual a branch passes through is its parameter's name (``w``)."""
        n = len(item.eqn.outvars)
        per_branch = [self._program_results(b.jaxpr) for b in item.blocks]
        found: list[str | None] = [
            names[0] if len(set(names)) == 1 else None for names in zip(*per_branch, strict=False)
        ]
        found = found if len(found) == n else [None] * n
        for k in range(n):
            if found[k] is None:
                found[k] = self._passed_through(item, port_names, k)
        assigned = self._assigned(item) if n == 1 else None
        return [assigned] if assigned and not found[0] else found

    def _passed_through(
        self, item: Item, port_names: dict[str, list[str | None]], k: int
    ) -> str | None:
        """The name of the parameter the branches return as result ``k`` unchanged, when
        they agree (a branch returning another branch's placeholder says nothing)."""
        names = set()
        for b in item.blocks:
            out = b.jaxpr.outvars[k] if k < len(b.jaxpr.outvars) else None
            params = list(b.jaxpr.invars)
            if out is not None and not isinstance(out, jcore.Literal) and out in params:
                known = port_names.get(b.prefix, [])
                at = params.index(out)
                names.add(known[at] if at < len(known) else None)
        return names.pop() if len(names) == 1 else None


# Arithmetic on named values, written with its operator (0.5 * k, -k).
_ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/", "neg": "-"}
# Primitives whose friendly label is a formula of its operands (the rest are descriptions).
_FORMULAS = frozenset({"one_minus_square", "integer_pow", "dot_general", "transpose"})


def unnamed(v: Any) -> str:
    """A port whose value the program never named: its type, not a position (``in3``)."""
    return f"· {type_text(v.aval)}"
