"""The maths of one step: an equation written with the names of its operands
(``ȳ · cos(x)``, ``ȳᵀ @ x``, ``sum of ȳ over axis 0``), one rule per primitive, and the
same with numbers substituted.

A backward step *is* an equation of the transposed program, so its rule is that
equation read with cotangent names: the transpose of ``y = sin(x)`` is JAX's
``mul ȳ cos(x)``, read ``x̄ = ȳ · cos(x)``. A primitive without a rule here reads as
its name applied (``erf_inv(x)``), and a backward one says which JVP it transposes.

>>> expression("mul", {}, ["ȳ", "cos(x)"], [])            # doctest: +SKIP
'ȳ · cos(x)'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..graph.labels import friendly_label

__all__ = ["expression", "is_simple", "wrapped"]

_INFIX = {
    "mul": "·",
    "add": "+",
    "add_any": "+",
    "sub": "−",
    "div": "/",
    "pow": "**",
    "atan2": "atan2",
    "rem": "mod",
    "and": "and",
    "or": "or",
    "gt": ">",
    "ge": "≥",
    "lt": "<",
    "le": "≤",
    "eq": "==",
    "ne": "≠",
}
_FUNCTIONS = {
    "logistic": "σ",
    "sqrt": "√",
    "abs": "|·|",
    "not": "not",
    "stop_gradient": "stop_gradient",
    "erf": "erf",
    "log1p": "log1p",
    "expm1": "expm1",
    "rsqrt": "1/√",
}
# Reductions read "sum of ȳ over axes 0,1".
_REDUCE = {
    "reduce_sum": "sum",
    "reduce_max": "max",
    "reduce_min": "min",
    "reduce_prod": "product",
    "argmax": "argmax",
    "argmin": "argmin",
}


def is_simple(name: str) -> bool:
    """A name that needs no brackets as an operand: ``x``, ``W1``, ``params['w']``, ``2.0``."""
    return all(ch.isalnum() or ch in "_.[]'\"̄̇∂₊" for ch in name) or (
        name.startswith("-") and name[1:].replace(".", "").isdigit()
    )


def _called(name: str) -> bool:
    """``cos(x · w)``, ``∂(x · w)``: a word applied, its brackets closing at the end."""
    head, _, rest = name.partition("(")
    if not rest or not name.endswith(")") or not (head.isidentifier() or head in ("∂", "d", "σ")):
        return False
    depth = 0
    for k, ch in enumerate(name[len(head) :]):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and k < len(name) - len(head) - 1:
            return False
    return True


def wrapped(name: str) -> str:
    return name if is_simple(name) or _called(name) else f"({name})"


def _shape(aval: Any) -> str:
    return ",".join(map(str, getattr(aval, "shape", ())))


def _dims(params: dict[str, Any], key: str) -> str:
    dims = tuple(int(d) for d in params.get(key, ()) or ())
    return ",".join(map(str, dims))


def _broadcast(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    kept = _dims(params, "broadcast_dimensions")
    shape = ",".join(map(str, params.get("shape", ())))
    where = f" (its axes as {kept})" if kept else ""
    return f"{names[0]} broadcast to [{shape}]{where}"


def _select(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    if len(names) == 3:
        return f"{names[2]} where {names[0]} else {names[1]}"
    return f"select_n({', '.join(names)})"


def _convert(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    dtype = params.get("new_dtype")
    return f"{names[0]} as {getattr(dtype, 'name', dtype)}"


def _reshape(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    shape = ",".join(map(str, params.get("new_sizes", ())))
    return f"{names[0]} reshaped to [{shape}]"


def _transpose(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    perm = tuple(int(d) for d in params.get("permutation", ()))
    if perm == (1, 0):
        return f"{wrapped(names[0])}ᵀ"
    return f"{names[0]} with axes permuted ({','.join(map(str, perm))})"


def _integer_pow(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    y = int(params.get("y", 0))
    sup = {2: "²", 3: "³", -1: "⁻¹", -2: "⁻²"}.get(y)
    return f"{wrapped(names[0])}{sup}" if sup else f"{wrapped(names[0])}^{y}"


def _one_minus_square(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"1 − {wrapped(names[0])}²"


def _square(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"{wrapped(names[0])}²"


def _neg(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"−{wrapped(names[0])}"


def _max(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"max({', '.join(names)})"


def _min(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"min({', '.join(names)})"


def _copy(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return names[0]


def _squeeze(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"{names[0]} without axes {_dims(params, 'dimensions')}"


def _expand(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"{names[0]} with new axes {_dims(params, 'dimensions')}"


def _cumsum(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    back = " backwards" if params.get("reverse") else ""
    return f"running sum of {names[0]} along axis {params.get('axis')}{back}"


def _pad(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"{names[0]} padded with {names[1] if len(names) > 1 else '0'}"


def _slice(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    start = ",".join(map(str, params.get("start_indices", ())))
    stop = ",".join(map(str, params.get("limit_indices", ())))
    return f"{names[0]}[{start} : {stop}]"


def _concat(params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]) -> str:
    return f"[{', '.join(names)}] joined along axis {params.get('dimension')}"


_Rule = Callable[[dict[str, Any], Sequence[str], Sequence[Any]], str]
_RULES: dict[str, _Rule] = {
    "broadcast_in_dim": _broadcast,
    "select_n": _select,
    "convert_element_type": _convert,
    "reshape": _reshape,
    "transpose": _transpose,
    "integer_pow": _integer_pow,
    "one_minus_square": _one_minus_square,
    "square": _square,
    "neg": _neg,
    "max": _max,
    "min": _min,
    "copy": _copy,
    "copy_p": _copy,
    "pjit_identity": _copy,
    "squeeze": _squeeze,
    "expand_dims": _expand,
    "cumsum": _cumsum,
    "pad": _pad,
    "slice": _slice,
    "concatenate": _concat,
}


def expression(
    primitive: str, params: dict[str, Any], names: Sequence[str], avals: Sequence[Any]
) -> str:
    """``primitive`` applied to operands called ``names``, as maths: ``ȳ · cos(x)``,
    ``xᵀ @ ȳ``, ``sum of ȳ over axis 0``; an unknown primitive as a call, ``erf_inv(x)``."""
    names = list(names)
    if primitive in _INFIX and len(names) == 2:
        op = _INFIX[primitive]
        if op.isalpha():
            return f"{op}({names[0]}, {names[1]})"
        return f"{wrapped(names[0])} {op} {wrapped(names[1])}"
    if primitive == "dot_general" and len(names) == 2:
        # Placeholders through the label (it shortens long names), the names put back.
        text = friendly_label(primitive, params, list(avals), ["\x00", "\x01"])
        if text:
            text = text.replace("·", " ⋅ ")
            return text.replace("\x00", wrapped(names[0])).replace("\x01", wrapped(names[1]))
    if primitive in _REDUCE and names:
        axes = _dims(params, "axes")
        word = "axis" if "," not in axes else "axes"
        return f"{_REDUCE[primitive]} of {names[0]} over {word} {axes}"
    if primitive in _RULES and names:
        return _RULES[primitive](params, names, avals)
    if primitive in _FUNCTIONS and len(names) == 1:
        fn = _FUNCTIONS[primitive]
        if fn == "|·|":
            return f"|{names[0]}|"
        return f"{fn}{wrapped(names[0])}" if fn in ("√", "1/√") else f"{fn}({names[0]})"
    return f"{primitive}({', '.join(names)})"
