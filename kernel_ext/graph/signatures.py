"""Structural signatures: small ints that say what a value computes, equal across programs.

A slot's signature is fixed by the primitive that made it, its parameters, and the
signatures of its inputs (an input by position, a constant by its bytes, a literal by
its value). Two programs that compute the same thing from the same inputs (a function
and the forward half of its gradient program) give equal signatures, which is how
:mod:`jaxlab.graph.annotate` carries adjoints from one to the other.

>>> table = Interner()
>>> x = table(("in", 0))
>>> table((("sin", ()), (x,))) == table((("sin", ()), (x,)))
True
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from jax.extend import core as jcore

# Whole-equation signatures ignore their nested programs: the gradient program's copy
# of a loop carries extra residual outputs but computes the same primal results.
_LOOPS = frozenset({"cond", "scan", "while"})


class Interner:
    """Signatures as small ints: structurally equal computations share one."""

    def __init__(self) -> None:
        self.table: dict[Any, int] = {}
        # (id of a scan body, input signatures, policy) -> (scan_body.ScanLayout, the
        # body): a layout is computed once per interner (the body is kept so its id stays
        # its own). Filled and read by scan_body, which sits above this module.
        self.layouts: dict[Any, tuple[Any, Any]] = {}

    def __call__(self, key: Any) -> int:
        return self.table.setdefault(key, len(self.table))


def is_jaxpr(value: Any) -> bool:
    return isinstance(value, jcore.ClosedJaxpr | jcore.Jaxpr)


def _param_text(value: Any) -> str:
    if is_jaxpr(value):
        return "<jaxpr>"
    if isinstance(value, tuple) and value and all(is_jaxpr(v) for v in value):
        return "<jaxprs>"
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__name__", type(value).__name__)
    return repr(value)


def param_key(eqn: Any) -> tuple[tuple[str, str], ...]:
    """An equation's parameters as text (nested programs as placeholders)."""
    params = eqn.params
    name = eqn.primitive.name
    keys = sorted(params)
    if name in _LOOPS:
        # Keep only what fixes the primal results; the gradient program's loops add
        # residual outputs (and their bookkeeping parameters) but compute the same.
        keys = [k for k in keys if k in ("length", "reverse", "num_consts", "num_carry")]
    return tuple((k, _param_text(params[k])) for k in keys)


def const_key(value: Any) -> Any:
    """A constant by its bytes (by identity when large or not an array)."""
    try:
        arr = np.asarray(value)
    except Exception:
        return ("obj", id(value))
    if arr.size > 100_000 or arr.dtype == object:
        return ("obj", id(value))
    digest = hashlib.blake2b(arr.tobytes(), digest_size=12).hexdigest()
    return ("const", str(arr.dtype), arr.shape, digest)


def literal_key(lit: Any) -> Any:
    return ("lit", str(lit.aval), repr(lit.val))
