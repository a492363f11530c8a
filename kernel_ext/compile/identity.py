"""Which function a compilation belongs to, when its name does not say.

JAX names a compilation after its function's ``__name__``: every lambda is ``<lambda>``,
so ``small_f = jax.jit(lambda v: v * 2)`` and ``big_f = jax.jit(lambda a: a @ a)`` would
be one function that "recompiled" with arguments "absent → f32[1200,1200]". A function
without a name of its own (``<lambda>``, ``<genexpr>``) is therefore told apart by its
code and where it was written: the line in its cell or file, and its code's bytes and
constants. A cell run again makes the same lambda again (same line, same code), which
stays one function, so the log can still say "new function object (cell re-run)".

The first such function of a name keeps the plain name; another one is named with the
place it was defined::

    names = AnonymousNames()
    names.name("<lambda>", code_identity(f))       # "<lambda>"
    names.name("<lambda>", code_identity(g), "In[4], line 3")  # "<lambda> (In[4], line 3)"
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

MAX_NAMED = 1_000  # anonymous functions remembered; beyond, the rest share their plain name
_CELL_LINE = re.compile(r"^In\[\d+\], (line \d+)$")


def anonymous(name: str) -> bool:
    """Whether ``name`` is not one the user gave (``<lambda>``, ``<genexpr>``)."""
    return name.startswith("<")


def code_identity(fun: Any, defined_at: str) -> str:
    """What makes two anonymous functions the same one: the line they were written on (in
    a cell, without the cell's number: a re-run cell writes it again) and their code."""
    # A wrapper that says what it wraps (functools.wraps, %keys on's traced function) is
    # the wrapped function's: every tracked jax.jit shares the wrapper's own code.
    for _ in range(8):
        inner = getattr(fun, "__wrapped__", None)
        if inner is None or inner is fun:
            break
        fun = inner
    code = getattr(fun, "__code__", None)
    if code is None:
        return ""
    cell = _CELL_LINE.match(defined_at)
    where = cell.group(1) if cell else defined_at
    digest = hashlib.sha1(code.co_code)
    digest.update(repr((code.co_consts, code.co_names, code.co_varnames)).encode())
    return f"{where}|{digest.hexdigest()[:16]}"


class AnonymousNames:
    """The log's name of each anonymous function, by its identity (module docstring)."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}
        self._taken: set[str] = set()

    def name(self, base: str, identity: str, defined_at: str = "") -> str:
        if not anonymous(base) or not identity:
            return base
        key = (base, identity)
        found = self._names.get(key)
        if found is not None:
            return found
        found = base if base not in self._taken else f"{base} ({defined_at or identity})"
        n = 1
        while found in self._taken:  # another function written there (two on one line)
            n += 1
            found = f"{base} ({defined_at or identity}, {n})"
        if len(self._names) < MAX_NAMED:
            self._names[key] = found
        self._taken.add(found)
        return found

    def clear(self) -> None:
        self._names.clear()
        self._taken.clear()
