"""What a drawing calls each value: the names the program gives, carried through nested
programs (:class:`Naming`, the part of the emitter that names; graph/emit.py draws).

A value is named by its argument's leaf path (``params[3]``), by the assignment that made
it (``h = jnp.tanh(...)``: the tanh, ``h``), by a nested program's parameter or result
(graph/names.py; where JAX kept none, graph/port_names.py), by the output the program
returns it as, or by its formula from named values (``-k``, ``1 - h²``). A port no name
reaches says its type (``· f32[4]``), never its position (``in3``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import jax.extend.core as jcore

from . import model as m
from .labels import friendly_label, literal_text, type_text
from .marks import scan_counts
from .names import WHOLE, program_names, result_name
from .port_names import (
    STACKED,
    assigned_names,
    assigned_value,
    cond_assigned,
    cond_cotangent_names,
    def_scan_names,
    forward_scan,
    paired_cond,
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
    title: str  # the program's function name (a gradient's: grad(f))
    output_names: list[str] | None  # a gradient's outputs ∂f/∂x

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
        if own is None and item is not None and item.primitive == "cond":
            own = self._cond_cotangents(item, len(sub.feeds))
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
            if found[k] is None and self._returned_unread(item, k):
                found[k] = self._function()
        assigned = self._assigned(item) if n == 1 else None
        primal = self._primal_results(item)
        if primal is not None:  # a gradient's forward cond: JAX's result paths say nothing
            found = [primal.get(k) or self._passed_through(item, port_names, k) for k in range(n)]
        return [assigned] if assigned and not found[0] else found

    def _primal_results(self, item: Item) -> dict[int, str] | None:
        """A gradient's forward cond's results that are the cond's own (not residuals the
        backward cond reads), named by the assignment receiving the cond (``y =
        lax.cond(...)``) or as the value the function returns; None for any other cond."""
        block, k = self.siblings.get(item.id, (None, 0))
        if block is None or "transpose" in name_stack(item.eqn):
            return None
        later = [i.eqn for i in block.items[k + 1 :] if i.primitive == "cond"]
        backward = next((e for e in later if paired_cond(e, [item.eqn]) is item.eqn), None)
        if backward is None or self._function() is None:
            return None
        reads = {id(v) for v in backward.invars}
        primals = [j for j, v in enumerate(item.eqn.outvars) if id(v) not in reads]
        found: dict[int, str] = {}
        for j, name in zip(primals, cond_assigned(item.eqn, len(primals)) or [], strict=False):
            found[j] = name
        for j in primals:
            if j not in found and self._returned_unread(item, j):
                found[j] = str(self._function())
        return found

    def _cond_cotangents(self, item: Item, n: int) -> list[str | None] | None:
        """A backward pass's cond's parameters: its cotangents named ``∂`` of the forward
        cond's results (``∂y``; ``∂f`` for the value the function returns), the rest None;
        None for any other cond."""
        if "transpose" not in name_stack(item.eqn):
            return None
        block, k = self.siblings.get(item.id, (None, 0))
        if block is None:
            return None
        forward = paired_cond(item.eqn, [i.eqn for i in block.items[:k]])
        if forward is None:
            return None
        at = next(j for j, i in enumerate(block.items) if i.eqn is forward)

        def primal_name(v: Any) -> str | None:
            if v in self.var_name:
                return self.var_name[v]
            j = forward.outvars.index(v)
            return self._function() if self._returned_unread(block.items[at], j) else None

        return cond_cotangent_names(item.eqn, forward, n, primal_name)

    def _returned_unread(self, item: Item, k: int) -> bool:
        """Whether a forward cond's result ``k`` in a gradient program is the value the
        function returns: nothing reads it (jax.grad drops the primal result) and a
        backward pass's cond transposes the cond."""
        if "transpose" in name_stack(item.eqn) or self._function() is None:
            return False
        block, at = self.siblings.get(item.id, (None, 0))
        if block is None:
            return False
        v = item.eqn.outvars[k]
        later = [i.eqn for i in block.items[at + 1 :]]
        if any(v is x for e in later for x in e.invars) or any(v is x for x in block.jaxpr.outvars):
            return False
        return any(e.primitive.name == "cond" and paired_cond(e, [item.eqn]) for e in later)

    def _function(self) -> str | None:
        """The function a gradient program differentiates (``f`` of ``grad(f)``, of its
        outputs ``∂f/∂x``), or None in any other program."""
        found = re.fullmatch(r"grad\((.+)\)", getattr(self, "title", "") or "")
        if found:
            return found.group(1).strip("<>") or "f"
        for name in getattr(self, "output_names", None) or ():
            found = re.match(r"∂(.+?)/∂", name or "")
            if found:
                return found.group(1)
        return None

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


def with_parameters(
    graph: m.Graph, names: Sequence[str], own: Sequence[str], function: str
) -> m.Graph:
    """``graph`` with each input the call line names otherwise than the function does
    told, in its tooltip, by the function's own name for it: the input ``X`` of
    ``loss(P, X)`` says ``parameter x of loss``; a group ``P (20 arrays)`` says
    ``parameter params of loss``. ``names`` and ``own`` name the program's inputs in
    order (the drawn names, the function's parameter paths); the input keeps its drawn
    name, the one every view of the call gives it."""
    if len(names) != len(own):
        return graph
    nodes = []
    for n in graph.nodes:
        k = int(n.id[2:]) if n.kind == m.INPUT and n.id[2:].isdigit() else -1
        said = ""
        if 0 <= k < len(own) and not n.source:
            if n.label == names[k]:
                said = own[k] if own[k] != names[k] else ""
            elif _root(own[k]) != _root(names[k]) and n.label.startswith(_root(names[k]) + " ("):
                said = _root(own[k])
        nodes.append(replace(n, source=f"parameter {said} of {function}") if said else n)
    return replace(graph, nodes=tuple(nodes))


def _root(name: str) -> str:
    """The argument a leaf's name belongs to: ``params[3]['W']`` -> ``params``."""
    return re.split(r"[\[.]", name, maxsplit=1)[0]
