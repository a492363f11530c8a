"""Calls of compiled functions: what a function does with keys, traced once, and the keys
each call was given, kept until someone looks.

While tracking is on, ``jax.jit`` makes functions that note, on every call, the key
leaves of the arguments and of the result (references, no copy to the host); while the
function is traced, the ``jax.random`` wrappers write its :class:`Template` (the key
operations in order, where each key came from, the user's lines). Nothing runs inside
the compiled program, so a jitted loop costs what it did. When the lineage is read, each
call is replayed on its template: the keys it was given (their data, read then), one
node per key the function derived (without data: it lived inside the program), one
event per draw, and the keys it returned, children of the key it was given.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from .._jax_compat import key_base_now, key_bases_of, key_data_now
from .site import Site

_ARRAYS = (jax.Array, np.ndarray)  # only arrays (and tracers) can be keys
Ref = tuple[str, int]  # ("arg", leaf index) | ("op", template op) | ("loose", first use)


@dataclass(frozen=True)
class TemplateOp:
    op: str
    kind: str  # create, derive, consume
    source: Ref | None  # the key it takes (None: create)
    site: Site
    shape: tuple[int, ...]
    dtype: str
    in_loop: bool


@dataclass
class Template:
    """What one compiled function does with keys (from its traces)."""

    name: str
    ops: list[TemplateOp] = field(default_factory=list)
    outputs: dict[int, Ref] = field(default_factory=dict)  # result leaf -> where it came from
    derives: bool = False  # whether it makes keys (then uint32 results may be legacy keys)
    # reuse inside the function, from the static flow of its jaxpr (slices of a split are
    # invisible to the wrappers); reported with the first call replayed after each trace
    reuses: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Call:
    template: Template
    site: Site
    args: tuple[tuple[int, Any], ...]  # (leaf index, key array) for each key argument
    outs: tuple[tuple[int, Any], ...]


class _Tracing(threading.local):
    """The template being written by the function traced now (innermost first)."""

    def __init__(self) -> None:
        self.stack: list[tuple[Template, dict[int, tuple[Any, Ref]]]] = []


TRACING = _Tracing()


def is_key_like(x: Any, legacy: bool) -> bool:
    """A typed key array, or (``legacy``) a uint32 array whose last axis could be key data."""
    if not isinstance(x, _ARRAYS):  # a module, a function, a dataclass: never a key
        return False
    dtype = x.dtype
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return True
    shape: tuple[int, ...] = x.shape
    return legacy and dtype == np.uint32 and len(shape) >= 1 and shape[-1] in (2, 4)


def key_leaves(tree: Any, legacy: bool) -> tuple[tuple[int, Any], ...]:
    leaves = jax.tree_util.tree_leaves(tree)
    return tuple((i, x) for i, x in enumerate(leaves) if is_key_like(x, legacy))


_TYPED: dict[type, bool] = {}  # type of a key array -> a typed key?


def is_typed(key: Any) -> bool:
    """Whether a concrete key array is a typed key (asked per call: cached by type; a
    typed key is always a PRNGKeyArray, and hashing its dtype costs 3 µs)."""
    kind = type(key)
    typed = _TYPED.get(kind)
    if typed is None:
        typed = _TYPED[kind] = bool(jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key))
    return typed


DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``str(dtype)``, cached: NumPy builds the name in Python (3 µs a call here)."""
    name = DTYPE_NAMES.get(dtype)
    if name is None:
        name = DTYPE_NAMES[dtype] = str(dtype)
    return name


def data_bytes(keys: Sequence[Any]) -> list[bytes]:
    """The data of every key in each concrete key array, copied to the host as bytes
    (holds nothing of the arrays; a CPU array gives its buffer to ``memoryview``, no NumPy
    array made first)."""
    bases = key_bases_of(keys)
    try:  # typed keys on the host (an eager loop's): one comprehension
        return [memoryview(base).tobytes() for base in bases]
    except (TypeError, BufferError, ValueError):  # a legacy key, or no host buffer here
        pass
    found = []
    for key, base in zip(keys, bases, strict=True):
        if base is None:  # a legacy key, or a JAX whose keys hold no array
            base = key_base_now(key) if is_typed(key) else key
        try:
            found.append(memoryview(base).tobytes())
        except (TypeError, BufferError, ValueError):  # no host buffer here (a GPU's array)
            found.append(np.asarray(base).tobytes())
    return found


def rows_of(key: Any) -> np.ndarray:
    """Key data as rows of words, one row per key."""
    data = key_data_now(key) if is_typed(key) else np.asarray(key)
    return data.reshape(-1, data.shape[-1]) if data.ndim else data.reshape(1, 1)
