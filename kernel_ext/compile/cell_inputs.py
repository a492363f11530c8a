"""``%%jit`` inputs that mix arrays and other values: traced leaves, static rest.

An equinox model, a flax nnx module or a dict of arrays and settings is one notebook
name, but only its array leaves can be traced. As ``eqx.filter_jit`` does, the cell
receives such an input split in two: the array leaves are traced arguments, and the tree
structure with every other leaf (activation functions, sizes, flags) is static, part of
the compile key, so changing a static leaf compiles again::

    part = split_part(model, leaves, tree)      # the input's signature part
    arg = to_split(model)                       # what the jitted function receives
    model_again = arg.merge()                   # inside the trace: the model rebuilt
    write_back(model, nnx_state_out(model_again))   # nnx: what the cell changed, kept

Flax nnx modules are not pytrees themselves; ``nnx.split`` turns them into a graph
definition and a state, and ``nnx.merge`` back (the same way ``nnx.jit`` does). Their
state is mutable (running statistics, counters): the compiled cell also returns the state
it left, which is written back into the user's module after the call returned.

This module's job is the cell's side: the input's compile-key part, the object the jitted
function receives, and what changed between two keys. Which leaves are arrays, and the
partition itself, are :mod:`jaxlab.program.leaves`, shared with a call's arguments
(:mod:`jaxlab.program.static_leaves`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ..program import ProgramError
from ..program.leaves import combine, partition
from .log import ArgChange
from .messages import short_type, short_value

_ArrayKey = tuple[tuple[int, ...], Any, bool]  # shape, dtype, weak type


@dataclass(frozen=True)
class SplitPart:
    """The compile-key part of a split input: what decides whether the cell recompiles."""

    type_name: str  # "MLP", "dict"
    tree: Any  # the pytree structure (a jax PyTreeDef), or an nnx GraphDef
    statics: tuple[tuple[int, Any], ...]  # (leaf position, value) of the non-array leaves
    arrays: tuple[tuple[int, _ArrayKey], ...]  # (leaf position, shape/dtype) of the arrays
    nnx: bool = False

    def describe(self) -> str:
        shown = ", ".join(_short(a) for _, a in self.arrays[:3])
        more = f", … {len(self.arrays) - 3} more" if len(self.arrays) > 3 else ""
        return f"{self.type_name}({shown}{more})"


def _short(key: _ArrayKey) -> str:
    shape, dtype, weak = key
    return short_type(_Aval(shape, dtype, weak))


@dataclass(frozen=True)
class _Aval:
    shape: tuple[int, ...]
    dtype: Any
    weak_type: bool


def nnx_of(value: Any) -> Any:
    """flax.nnx if ``value`` is one of its graph objects (without importing flax)."""
    nnx = sys.modules.get("flax.nnx")
    graph_type = getattr(nnx, "Pytree", None) or getattr(nnx, "Object", None)
    return nnx if graph_type is not None and isinstance(value, graph_type) else None


def array_key(value: Any) -> _ArrayKey:
    return (tuple(value.shape), value.dtype, bool(getattr(value, "weak_type", False)))


def split_part(value: Any, leaves: list[Any], tree: Any, name: str) -> SplitPart:
    """The key part of ``value`` (flattened into ``leaves`` and ``tree``).

    Raises :class:`ProgramError` when a non-array leaf cannot be part of a compile key.
    """
    traced, statics = partition(leaves)
    arrays = tuple((i, array_key(leaf)) for i, leaf in traced)
    part = SplitPart(type(value).__name__, tree, statics, arrays)
    try:
        hash(part)
    except TypeError:
        bad = next(v for _, v in statics if not _hashable(v))
        raise ProgramError(
            f"input `{name}` holds arrays, which the cell traces, and a "
            f"{type(bad).__name__}, which it would have to take as a static value, but "
            f"it is not hashable: keep arrays, numbers, strings and functions in `{name}`, "
            "or read what the cell needs into names in a normal cell"
        ) from None
    return part


def nnx_part(value: Any, name: str) -> SplitPart:
    """The key part of a flax nnx graph object: its graph definition and its state."""
    import jax

    nnx = nnx_of(value)
    graphdef, state = nnx.split(value)
    leaves, tree = jax.tree_util.tree_flatten(state)
    part = split_part(value, leaves, (graphdef, tree), name)
    return SplitPart(part.type_name, part.tree, part.statics, part.arrays, nnx=True)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class Split:
    """What the jitted cell receives for a split input: a pytree whose children are the
    array leaves and whose auxiliary data (static, hashed by JAX) is the rest."""

    def __init__(self, arrays: list[Any], part: SplitPart) -> None:
        self.arrays = arrays
        self.part = part

    def merge(self) -> Any:
        """The input rebuilt from traced arrays and static leaves."""
        import jax

        leaves = combine(self.arrays, self.part.statics)
        if self.part.nnx:
            graphdef, tree = self.part.tree
            nnx = sys.modules["flax.nnx"]
            return nnx.merge(graphdef, jax.tree_util.tree_unflatten(tree, leaves))
        return jax.tree_util.tree_unflatten(self.part.tree, leaves)


_REGISTERED = False


def to_split(value: Any, part: SplitPart) -> Split:
    """``value`` as the jitted cell receives it (``part`` from :func:`split_part`)."""
    import jax

    global _REGISTERED
    if not _REGISTERED:
        jax.tree_util.register_pytree_node(
            Split, lambda s: (s.arrays, s.part), lambda part, arrays: Split(list(arrays), part)
        )
        _REGISTERED = True
    if part.nnx:
        _, state = nnx_of(value).split(value)
        leaves = jax.tree_util.tree_leaves(state)
    else:
        leaves = jax.tree_util.tree_leaves(value)
    return Split([leaves[i] for i, _ in part.arrays], part)


def nnx_state_out(module: Any) -> Split:
    """Inside the trace, after the cell ran: ``module``'s state as the jitted cell returns
    it (its arrays are outputs, the rest rides in the tree), for :func:`write_back`."""
    return to_split(module, nnx_part(module, type(module).__name__))


def write_back(target: Any, out: Split) -> None:
    """The state a cell left in its copy of an nnx module (:func:`nnx_state_out`), put
    into the user's ``target`` in place, as plain execution would have changed it: a
    BatchNorm's running statistics, a counter ``nnx.Variable``, an ``nnx.Rngs`` count."""
    import jax

    _, tree = out.part.tree
    state = jax.tree_util.tree_unflatten(tree, combine(out.arrays, out.part.statics))
    nnx_of(target).update(target, state)


def merge_args(args: tuple[Any, ...]) -> list[Any]:
    """The cell's arguments with every split input rebuilt (inside the trace)."""
    return [a.merge() if isinstance(a, Split) else a for a in args]


def _static(value: Any) -> str:
    """A static leaf for a message: a function by its name, anything else by its repr."""
    name = getattr(value, "__name__", None)
    return name if callable(value) and isinstance(name, str) else short_value(value)


def _paths(part: SplitPart) -> list[str]:
    """Each leaf's path in the input, e.g. ``.layers[0].weight``."""
    import jax

    count = len(part.arrays) + len(part.statics)
    tree = part.tree[1] if part.nnx else part.tree
    try:
        skeleton = jax.tree_util.tree_unflatten(tree, list(range(count)))
        found = jax.tree_util.tree_flatten_with_path(skeleton)[0]
        return [jax.tree_util.keystr(path) for path, _ in found]
    except Exception:  # a pytree whose unflatten checks its leaves: number them instead
        return [f"[leaf {i}]" for i in range(count)]


def split_changes(name: str, before: SplitPart, after: SplitPart) -> tuple[ArgChange, ...]:
    """What changed between two key parts of the same input, leaf by leaf when the
    structure is the same (``model.layers[0].weight: f32[8,2] → f32[8,3]``)."""
    same_shape = len(before.arrays) == len(after.arrays) and len(before.statics) == len(
        after.statics
    )
    if before.tree != after.tree or not same_shape:
        return (ArgChange(name, before.describe(), after.describe()),)
    paths = _paths(after)
    changes = [
        ArgChange(f"{name}{paths[i]}", _short(old), _short(new))
        for (i, old), (_, new) in zip(before.arrays, after.arrays, strict=True)
        if old != new
    ]
    changes += [
        ArgChange(f"{name}{paths[i]}", f"{_static(old)} (static)", f"{_static(new)} (static)")
        for (i, old), (_, new) in zip(before.statics, after.statics, strict=True)
        if old != new
    ]
    return tuple(changes) or (ArgChange(name, before.describe(), after.describe()),)
