"""Which leaves of a pytree JAX traces as arrays, and a pytree's leaves split by it.

One idea of "an array leaf" for every magic: :mod:`~jaxlab.program.static_leaves`
(a call's arguments, as ``%jit``, ``%jaxpr`` and ``%grad`` take them) and
:mod:`~jaxlab.compile.cell_inputs` (a ``%%jit`` cell's inputs) both partition a pytree's
leaves into the arrays JAX traces and the rest, held static, and put them back inside the
trace, as ``eqx.partition`` / ``eqx.combine`` do::

    leaves = [w, jax.nn.relu, b, 3]
    arrays, statics = partition(leaves)   # ((0, w), (2, b)), ((1, jax.nn.relu), (3, 3))
    combine([w, b], statics) == leaves    # True

:func:`is_array` is a value that can run (what a cell reads from the namespace);
:func:`is_array_input` also takes a stand-in JAX can lower against (``ShapeDtypeStruct``)
or convert (``__jax_array__``), as a call's arguments may be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

NUMBERS = (bool, int, float, complex)

_ARRAY_TYPES: tuple[type, ...] | None = None


def array_types() -> tuple[type, ...]:
    """The concrete array types (``jax.Array``, NumPy arrays and scalars), for isinstance
    on a hot path; imports JAX on first use, so importing this module stays light."""
    global _ARRAY_TYPES
    if _ARRAY_TYPES is None:
        import jax
        import numpy as np

        _ARRAY_TYPES = (jax.Array, np.ndarray, np.generic)
    return _ARRAY_TYPES


def is_array(leaf: Any) -> bool:
    """Whether ``leaf`` is an array JAX traces: a jax or NumPy array or NumPy scalar.

    >>> is_array(jnp.ones(3)), is_array(np.float32(1)), is_array(1.0), is_array(jnp.sin)
    (True, True, False, False)
    """
    return isinstance(leaf, array_types())


def is_array_input(leaf: Any) -> bool:
    """:func:`is_array`, or a stand-in for one that a call may be given: a
    ``jax.ShapeDtypeStruct`` (lowering against shapes) or an object with ``__jax_array__``."""
    import jax

    return (
        is_array(leaf) or isinstance(leaf, jax.ShapeDtypeStruct) or hasattr(leaf, "__jax_array__")
    )


def jax_accepts(leaf: Any, arrays: Callable[[Any], bool] = is_array) -> bool:
    """Whether JAX takes ``leaf`` as it is: an array (by ``arrays``) or a Python number."""
    return isinstance(leaf, NUMBERS) or arrays(leaf)


def partition(
    leaves: Iterable[Any], arrays: Callable[[Any], bool] = is_array
) -> tuple[tuple[tuple[int, Any], ...], tuple[tuple[int, Any], ...]]:
    """The array leaves (by ``arrays``) and every other leaf, each with its position."""
    traced: list[tuple[int, Any]] = []
    statics: list[tuple[int, Any]] = []
    for i, leaf in enumerate(leaves):
        (traced if arrays(leaf) else statics).append((i, leaf))
    return tuple(traced), tuple(statics)


def combine(arrays: Iterable[Any], statics: Sequence[tuple[int, Any]]) -> list[Any]:
    """The leaves :func:`partition` split, put back: each static at its position, the
    arrays (traced values inside a trace) in order in the places between."""
    traced = list(arrays)
    placed = dict(statics)
    fill = iter(traced)
    return [placed[i] if i in placed else next(fill) for i in range(len(traced) + len(placed))]
