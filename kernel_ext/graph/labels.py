"""Short, readable text for the pieces of a jaxpr: types, literals, params, clusters.

Per-primitive display rules live in tables here, as JAX's pretty-printer keeps its
rules per primitive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.extend.core as jcore
import numpy as np

_SHORT_DTYPES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
    "complex64": "c64",
    "complex128": "c128",
}

# Parameters that say little to a reader and make labels long.
_QUIET_PARAMS = frozenset(
    {
        "out_sharding",
        "sharding",
        "accumulation_type",
        "precision",
        "preferred_element_type",
        "weak_type",
        "unroll",
        "ft_in",
        "ft_out",
        "compiler_options_kvs",
        "ctx_mesh",
        "donated_invars",
        "in_layouts",
        "out_layouts",
        "in_shardings",
        "out_shardings",
        "keep_unused",
        "inline",
        "symbolic_zeros",
        "num_consts",
        "algorithm",
        "transpose_algorithm",
    }
)
_MAX_PARAM = 36
_MAX_PARAMS = 72


def dtype_text(dtype: Any) -> str:
    name = str(getattr(dtype, "name", dtype))
    return _SHORT_DTYPES.get(name, name)


def type_text(aval: Any) -> str:
    """``f32[3,4]`` for an array type; the type's own text for anything else."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return str(aval)
    return f"{dtype_text(dtype)}[{','.join(str(d) for d in shape)}]"


def literal_text(lit: Any) -> str:
    """A literal operand as typed: ``2.0``, ``1.1``, ``3``, ``True``.

    A float32 constant prints at float32 precision (``1.1``, not ``1.100000023841858``).
    """
    value = getattr(lit, "val", lit)
    dtype = getattr(value, "dtype", None) or getattr(getattr(lit, "aval", None), "dtype", None)
    if np.ndim(value) == 0 and isinstance(value, bool | int | float | np.generic | np.ndarray):
        if dtype is not None and np.issubdtype(dtype, np.floating):
            return str(np.asarray(value).astype(dtype)[()])  # numpy's shortest repr per dtype
        value = np.asarray(value).item()
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) < 1e6 else f"{value:.6g}"
    text = str(value)
    return text if len(text) <= _MAX_PARAM else text[: _MAX_PARAM - 1] + "…"


def _value_text(value: Any) -> str | None:
    if value is None or isinstance(value, jcore.Jaxpr | jcore.ClosedJaxpr) or callable(value):
        return None
    if isinstance(value, tuple | list) and any(
        isinstance(v, jcore.Jaxpr | jcore.ClosedJaxpr) for v in value
    ):
        return None
    if hasattr(value, "name") and hasattr(value, "itemsize"):  # a dtype
        return dtype_text(value)
    text = str(value)
    return text if len(text) <= _MAX_PARAM else text[: _MAX_PARAM - 1] + "…"


def param_summary(params: dict[str, Any]) -> str:
    """``axes=(0,)``-style text for an equation's telling parameters, sorted by name."""
    parts: list[str] = []
    for name in sorted(params):
        if name in _QUIET_PARAMS:
            continue
        text = _value_text(params[name])
        if text is not None:
            parts.append(f"{name}={text}")
    joined = ", ".join(parts)
    return joined if len(joined) <= _MAX_PARAMS else joined[: _MAX_PARAMS - 1] + "…"


def _named(prefix: str) -> Callable[[dict[str, Any]], str]:
    def label(params: dict[str, Any]) -> str:
        name = params.get("name")
        return f"{prefix} {name}" if name else prefix

    return label


def _scan(params: dict[str, Any]) -> str:
    text = f"scan ×{params.get('length', '?')}"
    return text + " reversed" if params.get("reverse") else text


def _pmap(params: dict[str, Any]) -> str:
    return f"pmap {params.get('axis_name', '')} ×{params.get('axis_size', '?')}".replace("  ", " ")


def _shard_map(params: dict[str, Any]) -> str:
    mesh = params.get("mesh")
    shape = getattr(mesh, "shape", None)
    if shape:
        return "shard_map " + ", ".join(f"{k}={v}" for k, v in dict(shape).items())
    return "shard_map"


_CLUSTER_LABELS: dict[str, Callable[[dict[str, Any]], str]] = {
    "pjit": _named("jit"),
    "jit": _named("jit"),
    "closed_call": _named("call"),
    "core_call": _named("call"),
    "custom_jvp_call": _named("custom_jvp"),
    "custom_vjp_call": _named("custom_vjp"),
    "custom_vjp_call_jaxpr": _named("custom_vjp"),
    "remat": lambda p: "remat",
    "remat2": lambda p: "remat",
    "checkpoint": lambda p: "remat",
    "scan": _scan,
    "while": lambda p: "while",
    "cond": lambda p: f"cond ({len(p.get('branches', ()))} branches)",
    "xla_pmap": _pmap,
    "shard_map": _shard_map,
}


def cluster_label(primitive: str, params: dict[str, Any]) -> str:
    rule = _CLUSTER_LABELS.get(primitive)
    return rule(params) if rule else primitive


# --------------------------------------------------------------------------- friendly labels
# What a class reads on the node; the primitive and its parameters as JAX writes them stay
# on Node.raw, one hover away.

_REDUCTIONS = {
    "reduce_sum": "sum",
    "reduce_max": "max",
    "reduce_min": "min",
    "reduce_prod": "product",
    "reduce_and": "all",
    "reduce_or": "any",
    "argmax": "argmax",
    "argmin": "argmin",
}
_MAX_OPERAND = 14  # longer operand names read by their end (operand_text)
_MAX_TAIL = 18  # the most characters of that end, "…" included


def raw_label(primitive: str, params: dict[str, Any]) -> str:
    """The equation as JAX prints it: ``dot_general dimension_numbers=(((1,), (0,)), ...)``."""
    summary = param_summary(params)
    return f"{primitive} {summary}" if summary else primitive


def operand_text(name: str | None) -> str:
    """An operand as a label reads it: its name, or ``·`` where it has none (an anonymous
    temporary). A long path keeps its distinguishing end (``model.layers[0].weight`` reads
    ``…layers[0].weight``), from a ``.`` or ``[`` on, or ``·`` where no end fits."""
    if not name:
        return "·"
    if len(name) <= _MAX_OPERAND:
        return name
    head = ""
    if name.startswith("∂") and "/∂" in name:  # a gradient ∂f/∂path: ∂ and the path's end
        head, name = "∂", name.split("/∂", 1)[1]
        if len(name) + 1 <= _MAX_OPERAND:
            return head + name
    ends = [k for k, c in enumerate(name) if c in ".[" and k > 0]
    for k in ends:
        tail = name[k:].lstrip(".")
        if len(head + tail) + 1 <= _MAX_TAIL:
            return head + "…" + tail
    return "·"


_operand = operand_text


def _ndims(avals: list[Any]) -> list[int]:
    return [len(getattr(a, "shape", ())) for a in avals]


def _matmul(params: dict[str, Any], avals: list[Any], names: list[str | None]) -> str | None:
    """``x @ w``, ``xᵀ @ g``, ``g @ wᵀ`` for a dot_general that is a matrix product;
    ``a @ b per axis 0`` for one batched over leading axes (``jax.vmap(a @ b)``); any other
    contraction in words (``a·b over axes 2·1``), the raw form one hover away."""
    dims = params.get("dimension_numbers")
    if len(avals) != 2 or dims is None:
        return None
    try:
        (lc, rc), (lb, rb) = dims
        lc, rc, lb, rb = (tuple(int(d) for d in x) for x in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        return None
    ln, rn = _ndims(avals)
    a, b = _operand(names[0]), _operand(names[1])
    k = len(lb)
    if lb == rb == tuple(range(k)) and len(lc) == len(rc) == 1:
        product = _product(lc[0] - k, rc[0] - k, ln - k, rn - k, a, b)
        if product is not None:
            if not k:
                return product
            return f"{product} per {'axis' if k == 1 else 'axes'} {','.join(map(str, lb))}"
    if not lc and not rc:  # nothing contracted: every product of a pair, an outer product
        text = f"{a} ⊗ {b}"
        if k:
            text += f" per {'axis' if k == 1 else 'axes'} {_axes(lb)}"
        return text
    text = f"{a}·{b} over axes {_axes(lc)}·{_axes(rc)}"
    return text + (f", batch {_axes(lb)}·{_axes(rb)}" if k else "")


def _axes(dims: tuple[int, ...]) -> str:
    return ",".join(map(str, dims)) or "none"


def _product(lc: int, rc: int, ln: int, rn: int, a: str, b: str) -> str | None:
    """A 1- or 2-d operand pair contracted on one axis each, as ``a @ b`` (transposed
    where the contracted axis says so), or None."""
    if ln > 2 or rn > 2 or ln < 1 or rn < 1:
        return None
    left = {ln - 1: a, 0: a + "ᵀ"}.get(lc) if ln == 2 else (a if lc == 0 else None)
    right = {0: b, rn - 1: b + "ᵀ"}.get(rc) if rn == 2 else (b if rc == 0 else None)
    if left is None or right is None:
        return None
    return f"{left} @ {right}"


def _broadcast(params: dict[str, Any], avals: list[Any], names: list[str | None]) -> str:
    """``zeros f32[8,16]``, ``broadcast to f32[32,16]``: what a broadcast_in_dim makes."""
    shape = tuple(params.get("shape", ()))
    dtype = dtype_text(getattr(avals[0], "dtype", "")) if avals else ""
    target = f"{dtype}[{','.join(map(str, shape))}]"
    value = names[0] if names else None
    if value in ("0.0", "0", "-0.0", "False"):
        return f"zeros {target}"
    if value in ("1.0", "1", "True"):
        return f"ones {target}"
    if value is not None and len(value) <= _MAX_OPERAND:
        return f"{value} broadcast to {target}"
    return f"broadcast to {target}"


def friendly_label(
    primitive: str, params: dict[str, Any], avals: list[Any], names: list[str | None]
) -> str | None:
    """A label a class reads (``x @ w``, ``sum over axes 0,1``, ``· ** 2``), or None to
    keep the primitive's name. ``names`` are the operands' names where known (an argument,
    a literal), ``avals`` their types."""
    if primitive == "dot_general":
        return _matmul(params, avals, names)
    if primitive in _REDUCTIONS:
        axes = tuple(params.get("axes", ()))
        word = "axis" if len(axes) == 1 else "axes"
        return f"{_REDUCTIONS[primitive]} over {word} {','.join(map(str, axes))}"
    if primitive == "integer_pow":
        return f"{_operand(names[0] if names else None)} ** {params.get('y')}"
    operand = _operand(names[0] if names else None)
    if primitive == "transpose":
        axes = tuple(params.get("permutation", ()))
        return f"{operand}ᵀ" if axes == (1, 0) else f"transpose to ({_axes(axes)})"
    rule = _WORDS.get(primitive)
    return rule(params, avals, names) if rule else None


def _one_minus_square(params: dict[str, Any], avals: list[Any], names: list[str | None]) -> str:
    """tanh's derivative from its result t: ``1 - t²``."""
    return f"1 - {_operand(names[0] if names else None)}²"


def _mesh_axes(params: dict[str, Any]) -> str:
    """A collective's mesh axes as written: ``'x'``, ``'x', 'y'``."""
    axes = params.get("axis_name", params.get("axes", ()))
    axes = axes if isinstance(axes, tuple | list) else (axes,)
    return ", ".join(repr(a) if isinstance(a, str) else str(a) for a in axes)


def _collective(word: str) -> Callable[[dict[str, Any], list[Any], list[str | None]], str]:
    """``all_gather over 'x'``: a shard_map collective named with the mesh axes it crosses."""
    return lambda p, a, n: f"{word} over {_mesh_axes(p)}"


# The gradient program's own primitives, and shard_map's collectives, in words; the raw
# form stays on hover.
_WORDS: dict[str, Callable[[dict[str, Any], list[Any], list[str | None]], str]] = {
    "all_gather": _collective("all_gather"),
    "all_gather_invariant": _collective("all_gather"),
    "psum": _collective("psum"),
    "psum_invariant": _collective("psum"),
    "pmax": _collective("pmax"),
    "pmin": _collective("pmin"),
    "ppermute": _collective("ppermute"),
    "all_to_all": _collective("all_to_all"),
    "reduce_scatter": _collective("psum_scatter"),
    "axis_index": lambda p, a, n: f"axis_index {_mesh_axes(p)}",
    "add_any": lambda p, a, n: "adjoints summed",
    "convert_element_type": lambda p, a, n: f"as {dtype_text(p.get('new_dtype', '?'))}",
    "broadcast_in_dim": _broadcast,
    "one_minus_square": _one_minus_square,
    "zeros_like": lambda p, a, n: f"zeros {type_text(a[0])}" if a else "zeros",
}
