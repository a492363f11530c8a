"""Why a function compiled again, in the user's terms: two calls' signatures compared.

Pure functions, no listening (that is :mod:`jaxlab.compile.capture`). A
:class:`CallSignature` is what one compilation was asked for: the function object, its
traced arguments' types, its static arguments' values and the config settings that reach
JAX's cache keys. :func:`explain` compares a new signature with the same function's few
earlier ones (never with every key JAX ever saw, as ``jax_explain_cache_misses`` does)::

    explain([before], now)
    # ("x: f32[3] → f32[4]", (ArgChange("x", "f32[3]", "f32[4]"),))
    base_name("jit(f)")                                     # "f"
    short_type(jax.ShapeDtypeStruct((3, 3), jnp.float32))   # "f32[3,3]"
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_WRAPPED = re.compile(r"^[A-Za-z_]\w*\((.*)\)$")  # "jit(f)" -> "f", "pmap(g)" -> "g"

# Config settings that are part of JAX's tracing cache key and that a user changes by
# name; read through the public ``jax.config`` each time a function compiles.
CONFIG_NAMES = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_default_device",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_disable_jit",
)
MAX_VALUE_CHARS = 48  # a static value's repr is cut to this many characters

FIRST = "first compilation"
UNKNOWN = "compiled again: JAX did not say which call it traced"
SAME = (
    "same function, argument types and static values as before: JAX does not say why "
    "(a closed-over value changed, or its caches were cleared)"
)
# What an eager operation's compilation means, and what to do about it (issue 18):
# JAX compiles each operation run outside jit on its own, once per shape and dtype.
EAGER_HINT = (
    "JAX ran these operations one at a time, outside jax.jit, and compiled each on its "
    "own, once per shape and dtype; jax.jit(f) compiles a whole function once"
)
WEAK = "{weak}"
WEAK_NOTE = (
    "{weak}: a weakly typed value, from a Python scalar (2.0, 3): it takes the dtype "
    "of the array it meets"
)


def base_name(fun_name: str) -> str:
    """``"jit(f)" -> "f"``: JAX names a lowering after the transform that asked for it."""
    m = _WRAPPED.match(fun_name)
    return m.group(1) if m else fun_name


_DTYPE = re.compile(r"^(?P<kind>bfloat|float|int|uint|complex)(?P<bits>\d+)")
_SHORT_KIND = {"bfloat": "bf", "float": "f", "int": "i", "uint": "u", "complex": "c"}


def short_type(aval: Any) -> str:
    """``ShapedArray(float32[3,3])`` → ``"f32[3,3]"`` (JAX's own short notation)."""
    try:
        name = str(aval.dtype)
        m = _DTYPE.match(name)
        dtype = f"{_SHORT_KIND[m.group('kind')]}{m.group('bits')}" if m else name
        shape = ",".join(str(d) for d in aval.shape)
        weak = "{weak}" if getattr(aval, "weak_type", False) else ""
        return f"{dtype}[{shape}]{weak}"
    except (AttributeError, TypeError):
        return str(aval)


def eager_reason(name: str, types: Sequence[str]) -> str:
    """Why an eager operation compiled: it ran outside ``jax.jit`` on these types.

    >>> eager_reason("tanh", ["f32[2,8]"])
    'eager operation: tanh ran outside jax.jit on (f32[2,8]), compiled on its own'
    """
    return (
        f"eager operation: {name} ran outside jax.jit on ({', '.join(types)}), compiled on its own"
    )


def weak_note(texts: Sequence[str]) -> str | None:
    """:data:`WEAK_NOTE` when any of ``texts`` shows ``{weak}``, else None: the words
    go where the notation appears."""
    return WEAK_NOTE if any(WEAK in t for t in texts) else None


def short_value(value: Any) -> str:
    """A static argument's value as the user would write it, cut to a readable length."""
    try:
        text = repr(value)
    except Exception:  # a user's __repr__ that raises: name the type instead
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


@dataclass(frozen=True)
class ArgChange:
    """One argument, static value or setting that changed between two compilations."""

    name: str  # "x", "params['w']", "n (static)", "config jax_enable_x64"
    before: str  # "f32[3]"
    after: str  # "f32[4]"

    def __str__(self) -> str:
        return f"{self.name}: {self.before} → {self.after}"


# --------------------------------------------------------------------------- signatures
@dataclass(frozen=True, eq=False)
class CallSignature:
    """What one compilation was asked for; holds the function only weakly."""

    fun_ref: Any  # weakref.ref to the function object, or None when it takes none
    fun_id: int
    defined_at: str  # "In[3], line 2", "model.py:12" or ""
    user_code: bool  # defined in the user's code, not in JAX or an installed library
    args: tuple[tuple[str, str], ...] = ()  # (name, type) per traced argument
    statics: tuple[tuple[str, str], ...] = ()  # (name, value) per static argument
    config: tuple[tuple[str, str], ...] = field(default=())
    # one of JAX's own operations (``jnp.tanh``, a primitive) compiled because it ran
    # outside jit: an eager operation, never a recompilation of the user's function
    eager: bool = False
    # an anonymous function's identity (compile/identity.py): two lambdas are two functions
    code: str = ""

    @staticmethod
    def of(
        fun: Any,
        *,
        defined_at: str,
        user_code: bool,
        args: tuple[tuple[str, str], ...] = (),
        statics: tuple[tuple[str, str], ...] = (),
        config: tuple[tuple[str, str], ...] = (),
        eager: bool = False,
        code: str = "",
    ) -> CallSignature:
        if fun is None:  # read from the lowering: the function object is not known
            return CallSignature(None, 0, defined_at, user_code, args, statics, config, eager, code)
        try:
            ref: Any = weakref.ref(fun)
        except TypeError:  # builtins and some callables take no weak references
            ref = None
        return CallSignature(
            ref, id(fun), defined_at, user_code, args, statics, config, eager, code
        )

    def same_function(self, other: CallSignature) -> bool:
        """The same function object (assumed when either side does not know it)."""
        if not self.fun_id or not other.fun_id:
            return True
        if self.fun_ref is not None and other.fun_ref is not None:
            mine = self.fun_ref()
            return mine is not None and mine is other.fun_ref()
        return self.fun_id == other.fun_id

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.args)


def _changes(
    pairs_before: tuple[tuple[str, str], ...],
    pairs_now: tuple[tuple[str, str], ...],
    suffix: str = "",
    prefix: str = "",
) -> list[ArgChange]:
    before, now = dict(pairs_before), dict(pairs_now)
    names = [n for n, _ in pairs_now] + [n for n, _ in pairs_before if n not in now]
    return [
        ArgChange(f"{prefix}{n}{suffix}", before.get(n, "absent"), now.get(n, "absent"))
        for n in names
        if before.get(n) != now.get(n)
    ]


def _difference(before: CallSignature, now: CallSignature) -> tuple[bool, list[ArgChange]]:
    changes = (
        _changes(before.args, now.args)
        + _changes(before.statics, now.statics, suffix=" (static)")
        + _changes(before.config, now.config, prefix="config ")
    )
    return not now.same_function(before), changes


def explain(
    history: Sequence[CallSignature], now: CallSignature | None
) -> tuple[str, tuple[ArgChange, ...]]:
    """Why ``now`` compiled, given the same function name's earlier signatures (newest
    last): the closest earlier one is named, old → new, as the user wrote it."""
    if not history:
        return FIRST, ()
    if now is None:
        return UNKNOWN, ()
    best: tuple[int, bool, list[ArgChange]] | None = None
    for before in reversed(history):  # newest first: it wins a tie
        new_function, changes = _difference(before, now)
        score = len(changes) + new_function
        if best is None or score < best[0]:
            best = (score, new_function, changes)
            closest = before
    assert best is not None
    _, new_function, changes = best
    parts = []
    if new_function:
        if now.user_code:
            where = f" at {now.defined_at}" if now.defined_at else ""
            was = (
                f"; the last one at {closest.defined_at}"
                if closest.defined_at and closest.defined_at != now.defined_at
                else ""
            )
            parts.append(f"new function object{where} (cell re-run or function re-created{was})")
        else:
            parts.append("new function object made by JAX or a library (new parameters)")
    parts.extend(map(str, changes))
    return ("; ".join(parts) if parts else SAME), tuple(changes)
