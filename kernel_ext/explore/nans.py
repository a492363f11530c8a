"""Where a NaN or Inf first appeared in the user's function, at the values that made it
(and :func:`failure_words`: where a move that raised passed through the user's code).

The function is traced once at those values (under ``jaxlab_work``) and its equations
run one by one; the first whose inputs are finite and whose result is not is where it
appeared, named by the user's line that wrote it (nested ``jit`` calls and custom rules
are opened; a loop is named by its own line)::

    site = first_non_finite(lambda p: jnp.sqrt(p[0] - 1.0), p)
    site.words    # "sqrt at In[3], line 2: `return jnp.sqrt(g - 1.0)`"
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .._jax_compat import bind_equation, equation_frames
from ..explain.source import is_user_file, label, user_frames, user_line
from ..explain.trace_failure import first_line
from ..session import jaxlab_work


@dataclass(frozen=True)
class NonFiniteSite:
    primitive: str
    line: str | None  # "In[3], line 2" / "sim.py, line 12"
    code: str | None  # the line's text

    @property
    def words(self) -> str:
        where = f" at {self.line}" if self.line else ""
        code = f": `{self.code}`" if self.code else ""
        return f"{self.primitive}{where}{code}"


def _finite(v: Any) -> bool:
    a = np.asarray(v)
    return not np.issubdtype(a.dtype, np.inexact) or bool(np.isfinite(a).all())


def _user_line(eqn: Any) -> tuple[str | None, str | None]:
    for frame in reversed(equation_frames(eqn.source_info)):  # innermost first
        if is_user_file(frame.file):
            text = linecache.getline(frame.file, frame.line).strip() or None
            return label(frame.file, frame.line), text
    return None, None


_OPENED = ("jaxpr", "call_jaxpr", "fun_jaxpr")  # pjit, closed_call, custom_jvp/vjp


def _inner(eqn: Any) -> Any:
    for key in _OPENED:
        inner = eqn.params.get(key)
        if inner is not None and hasattr(inner, "jaxpr") and hasattr(inner, "consts"):
            return inner
    return None


def _walk(closed: Any, args: Sequence[Any]) -> NonFiniteSite | None:
    jaxpr = closed.jaxpr
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, jax.extend.core.Literal) else env[v]

    for var, value in zip(jaxpr.constvars, closed.consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = bind_equation(eqn, ins)
        if all(_finite(v) for v in ins) and not all(_finite(v) for v in outs):
            inner = _inner(eqn)
            found = _walk(inner, ins) if inner is not None else None
            if found is not None:
                return found
            line, code = _user_line(eqn)
            return NonFiniteSite(eqn.primitive.name, line, code)
        for var, value in zip(eqn.outvars, outs, strict=True):
            env[var] = value
    return None


def first_non_finite(fn: Callable[..., Any], *args: Any) -> NonFiniteSite | None:
    """The first equation of ``fn(*args)`` to make a NaN or Inf from finite inputs; None
    when there is none (or the function cannot be traced again)."""
    try:
        with jaxlab_work():
            closed = jax.make_jaxpr(fn)(*args)
            return _walk(closed, jax.tree_util.tree_leaves(args))
    except Exception:  # the hunt is a courtesy: the failure itself is reported anyway
        return None


def failure_words(error: BaseException) -> tuple[str, str | None]:
    """The error's first line, and the user's innermost line it passed through."""
    message = f"{type(error).__name__}: {first_line(error)}"
    frames = user_frames(error.__traceback__)
    if not frames:
        return message, None
    line = user_line(*frames[-1])
    return message, f"{line.label}: `{line.text}`" if line.text else line.label
