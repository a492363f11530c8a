"""A ``%%jit`` cell's input value → its part of the compile key.

The cell compiles again exactly when the key changes, so each input's part says how it
reaches the compiled function: an array by shape, dtype and weak type (traced); a
pytree of arrays and numbers by its structure and leaf types (traced, as JAX takes it);
a model mixing arrays and other leaves as a :class:`~jaxlab.compile.cell_inputs.SplitPart`
(arrays traced, the rest static); anything else by its value, ``("static", type,
value)``, which must be hashable::

    input_key("x", jnp.ones(3), forced=False, container_writes=(), fast=set())
    # ((3,), dtype('float32'), False)
    input_key("n", 3, forced=False, container_writes=(), fast=set())   # ("static", int, 3)
    part_kind(("static", int, 3))                                        # "static"
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ..program import ProgramError
from ..program.guard import OutsideWrite
from ..program.leaves import NUMBERS, is_array, jax_accepts
from .cell_inputs import SplitPart, array_key, nnx_of, nnx_part, split_part

_SCALARS = (*NUMBERS, str, bytes, type(None))
_STATIC_TYPES = (*_SCALARS, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)
STATIC_FAST = frozenset(_STATIC_TYPES)  # exact types the hot path takes as static


def short(value: Any) -> str:
    """An input for a message: ``f32[3]`` for arrays, ``3`` for scalars."""
    from .capture import short_type

    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return short_type(value)
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{type(value).__name__} {value.__qualname__}"
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def input_key(
    name: str,
    value: Any,
    *,
    forced: bool,
    container_writes: tuple[OutsideWrite, ...],
    fast: set[type],
) -> Any:
    """The key part of one input value that is not a plain jax.Array (the hot path's).

    ``forced``: the user made the name static (``--static``). ``container_writes``: the
    cell's method calls that mutate an input, refused when ``value`` is a list, dict or
    set. ``fast``: concrete jax.Array types seen, added to here for the hot path.
    Raises :class:`ProgramError` when the value can be neither traced nor hashed.
    """
    import jax

    for write in container_writes:
        if write.name == name and isinstance(value, list | dict | set):
            raise ProgramError(write.message())
    if not forced:
        if isinstance(value, jax.Array):
            if hasattr(value, "weak_type"):
                fast.add(type(value))
                return (value.shape, value.dtype, value.weak_type)
            return array_key(value)  # a typed PRNG key array (dtype key<fry>)
        if is_array(value):
            return (tuple(np.shape(value)), np.asarray(value).dtype, False)
        if not isinstance(value, _STATIC_TYPES):  # callable too: an equinox model
            if nnx_of(value) is not None:
                # A flax nnx module goes through nnx.split and nnx.merge, as nnx.jit takes
                # it, even where it is a pytree of arrays (flax >= 0.11): its state, which
                # the cell may change, is then written back after the call.
                return nnx_part(value, name)
            leaves, tree = jax.tree_util.tree_flatten(value)
            if leaves and any(is_array(v) for v in leaves):
                if all(jax_accepts(v) for v in leaves):
                    # As JAX takes it: a number is traced, so its type is the key.
                    kinds = (short(v) if is_array(v) else type(v).__name__ for v in leaves)
                    return (tree, tuple(kinds))
                # An equinox model, a dict of arrays and settings: arrays traced, the
                # rest (numbers too) static, as eqx.filter_jit and %jit do.
                return split_part(value, leaves, tree, name)
    try:
        hash(value)
    except TypeError:
        raise ProgramError(
            f"input `{name}` is a {type(value).__name__}, {_unhashable_hint(name, value, forced)}"
        ) from None
    return ("static", type(value), value)


def is_static_part(part: Any) -> bool:
    """Whether ``part`` is a static input's ``("static", type, value)``."""
    return isinstance(part, tuple) and len(part) == 3 and isinstance(part[0], str)


def part_kind(part: Any) -> str:
    """How an input reaches the compiled cell: "static", "traced", "split" or "nnx" (split,
    and its state written back after the call)."""
    if isinstance(part, SplitPart):
        return "nnx" if part.nnx else "split"
    return "static" if is_static_part(part) else "traced"


def _unhashable_hint(name: str, value: Any, forced: bool) -> str:
    """The fix for an input that is neither traceable nor hashable."""
    if forced:
        return "marked --static, so it must be hashable: use a tuple"
    if isinstance(value, list | tuple):
        return (
            "neither an array (or pytree of arrays) nor a hashable static value: "
            f"convert it (`{name} = jnp.asarray({name})`) or make it a tuple"
        )
    return (
        "which holds no array the cell could trace and is not hashable, so it cannot be "
        f"a static value either: read what the cell needs from it into names in a normal "
        f"cell (`k = {name}.k`, `k = {name}['k']`), or pass arrays"
    )
