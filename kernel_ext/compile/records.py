"""The compile log's records: one compilation, one function's totals, the eager operations.

Frozen and plain, made by :class:`~jaxlab.compile.log.CompileLog` and read by its views::

    e = jaxlab.compile_log().events[-1]
    e.fun_name, e.total_s, e.explanation, e.eager
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .messages import ArgChange

__all__ = ["CompileEvent", "EagerOperations", "FunctionStats"]


@dataclass(frozen=True)
class CompileEvent:
    """One compilation: its phases, where it was asked for, and why it happened.

    >>> e = jaxlab.compile_log().events[-1]
    >>> e.fun_name, e.total_s, e.explanation
    ('f', 0.031, 'x: f32[3] → f32[4]')
    """

    index: int  # position in the session (0, 1, ...), stable when older events drop
    fun_name: str  # "f", "<lambda>", "broadcast_in_dim" (JAX's own eager ops too)
    where: str  # "In[3], line 2", "train.py:41", or "" when unknown
    filename: str
    lineno: int
    trace_s: float  # 0.0 when the trace came from JAX's tracing cache
    lower_s: float
    compile_s: float
    persistent_cache: str  # "hit", "miss" or "off"
    signature: tuple[str, ...]  # argument types, e.g. ("f32[3,3]", "i32[]")
    explanation: str  # why it compiled: "first compilation", "x: f32[3] → f32[4]", ...
    changes: tuple[ArgChange, ...] = ()
    recompile: bool = False  # the same function compiled before in this session
    timestamp: float = 0.0  # time.time() when the compilation finished
    user_code: bool = True  # the function is the user's, not JAX's or a library's
    defined_at: str = ""  # where the function was defined: "In[3], line 1", "a.py:4"
    eager: bool = False  # one of JAX's operations run outside jit: never a recompile

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_s": self.total_s}


@dataclass(frozen=True)
class FunctionStats:
    """The compilations of one function name, summed over the whole session."""

    name: str
    count: int
    total_s: float
    last_s: float
    recompiles: int
    recent: tuple[CompileEvent, ...]  # the last few, oldest first
    user_code: bool = True  # one of the user's functions ("my functions only")
    last_index: int = 0  # the index of its newest compilation
    eager: bool = False  # an eager operation of JAX's: compiled once per shape, by design
    shapes: tuple[str, ...] = ()  # an eager operation's distinct argument types, oldest first


@dataclass(frozen=True)
class EagerOperations:
    """JAX's operations that ran outside jit, compiled one by one (``jnp.tanh`` on a new
    shape): how many, which, on which shapes. Not recompilations: JAX compiles each
    eager operation once per shape and dtype, and ``jax.jit(f)`` would compile ``f`` once.

    >>> ops = jaxlab.compile_log().eager_operations()
    >>> ops.count, [(r.name, r.count, r.shapes) for r in ops.rows]
    (3, [('tanh', 2, ('f32[2,8]', 'f32[2,1]')), ('matmul', 1, ('f32[2,4], f32[4,8]',))])
    """

    count: int  # compilations of eager operations in the session
    total_s: float
    rows: tuple[FunctionStats, ...]  # one per operation, newest first
