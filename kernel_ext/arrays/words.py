"""Dtypes, counts and bytes in words, as a reader says them."""

from __future__ import annotations

import functools
from typing import Any

from ..devices import format_bytes as format_bytes

_KIND_WORDS = {
    "b": "boolean",
    "i": "integer",
    "u": "unsigned integer",
    "f": "float",
    "c": "complex",
    "V": "float",  # bfloat16 and float8 types register as void-kind extension dtypes
}


def dtype_kind(dtype: Any) -> str:
    """``float32 -> 'float'``, ``bfloat16 -> 'float'``, ``int8 -> 'integer'``, key data
    -> ``'key'``."""
    try:
        return _kind_of(dtype)
    except TypeError:  # an unhashable dtype-like
        return _kind_of.__wrapped__(dtype)


@functools.lru_cache(maxsize=256)  # asked once per leaf: a 714-layer tree asks 1,428 times
def _kind_of(dtype: Any) -> str:
    import numpy as np

    name = str(dtype)
    if name.startswith("key"):
        return "key"
    kind = np.dtype(dtype).kind if not name.startswith("key") else "V"
    return _KIND_WORDS.get(kind, "other")


def dtype_name(dtype: Any) -> str:
    """``str(dtype)``, remembered per dtype (NumPy builds the name anew on every call)."""
    try:
        return _name_of(dtype)
    except TypeError:
        return str(dtype)


@functools.lru_cache(maxsize=256)
def _name_of(dtype: Any) -> str:
    return str(dtype)


def dtype_words(dtype: Any, weak: bool) -> str:
    """``float32`` or, for a weakly typed array, ``float32, weakly typed (a Python scalar's
    type: it takes the other operand's precision)``."""
    name = str(dtype)
    if not weak:
        return name
    return f"{name}, weakly typed (from a Python scalar: it takes the other operand's dtype)"


def count_words(n: int) -> str:
    """``1234567 -> '1.2M'``; small counts as they are."""
    if n < 10_000:
        return str(n)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def shape_words(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
