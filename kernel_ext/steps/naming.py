"""What a step calls each value: the program's own names for values (an argument, an
assignment's target, else the formula that made it, ``cos(x)``), ``x̄`` for the cotangent
of ``x`` and ``ẋ`` for its tangent.

Which forward value a cotangent belongs to is read from the transposed program's
structure, as JAX built it: the seed is the output's cotangent; an equation that reads
the cotangent of ``y`` transposes the forward equation that made ``y``, and what it makes
is the cotangent of that equation's operand it does not read (``x̄ = ȳ · cos(x)`` for
``y = sin(x)``, ``ā = ȳ · b`` for ``y = a · b``); where a rule takes several equations, the
ones between are its temporaries (``δ3``), never given a wrong name.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import numpy as np

from ..graph.labels import literal_text
from ..graph.port_names import assigned_value
from .rules import expression, is_simple

__all__ = ["Names", "bar", "dot"]

_LONG = 18  # a formula longer than this is called by a short name (v3)


def _decorated(name: str, mark: str, word: str) -> str:
    if len(name) == 1 and name.isalpha():
        return unicodedata.normalize("NFC", name + mark)  # ȳ as one character where one exists
    return f"{word}{name}" if is_simple(name) else f"{word}({name})"


def bar(name: str) -> str:
    """The cotangent's name: ``x̄``; a longer name ``∂W1``, ``∂(x·w)``."""
    return _decorated(name, "\u0304", "∂")


def dot(name: str) -> str:
    """The tangent's name: ``ẋ``; a longer name ``d W1``, ``d(x·w)``."""
    return _decorated(name, "\u0307", "d")


def _float(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    try:
        return dtype is not None and bool(np.issubdtype(dtype, np.inexact))
    except TypeError:
        return False


class Names:
    """Slot -> name over one evaluation (graph/interpret's ``Evaluation``)."""

    def __init__(self, ev: Any, given: dict[int, str]) -> None:
        self.ev = ev
        self.name: dict[int, str] = dict(given)
        self.short = 0
        self.temps = 0

    def of(self, slot: int | None, atom: Any = None) -> str:
        if slot is None:
            return literal_text(atom) if atom is not None else "·"
        if slot not in self.name:
            self.name[slot] = self.new_short()
        return self.name[slot]

    def new_short(self) -> str:
        self.short += 1
        return f"v{self.short}"

    def temporary(self) -> str:
        self.temps += 1
        return f"δ{self.temps}"

    def operands(self, step: Any) -> list[str]:
        return [self.of(s, a) for s, a in zip(step.inputs, step.eqn.invars, strict=True)]

    def name_forward(self, step: Any) -> None:
        """Name a forward equation's results: the assignment's target, else its formula
        when short, else ``v3``."""
        eqn = step.eqn
        if len(step.outputs) != 1:
            for s in step.outputs:
                self.name.setdefault(s, self.new_short())
            return
        (out,) = step.outputs
        if out in self.name:
            return
        if eqn.primitive.name == "convert_element_type" and step.inputs[0] is not None:
            src = step.inputs[0]
            if getattr(self.ev.avals[src], "dtype", None) == getattr(
                self.ev.avals[out], "dtype", 0
            ):
                self.name[out] = self.of(src)  # a weak type made strong: the same value
                return
        given = assigned_value(eqn) if eqn.primitive.name not in ("pjit", "jit") else None
        if given:
            self.name[out] = given
            return
        avals = [getattr(a, "aval", None) for a in eqn.invars]
        formula = expression(eqn.primitive.name, dict(eqn.params), self.operands(step), avals)
        self.name[out] = formula if len(formula) <= _LONG else self.new_short()


def is_float_slot(ev: Any, slot: int | None) -> bool:
    return slot is not None and _float(ev.avals[slot])
