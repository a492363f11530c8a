"""Find where a NaN or inf gradient is born, and say how to avoid it.

Backpropagation carries one adjoint per intermediate, from the output back to the
inputs. A gradient is NaN when some equation turns a finite adjoint into a
non-finite one (``sqrt`` at 0: ``1/(2·√0) = inf``; behind a ``jnp.where`` that masked
it: ``0 · inf = nan``). This module computes every intermediate's value and adjoint
(:func:`jaxlab.graph.interpret.adjoints`), finds the latest intermediate whose adjoint is
non-finite, and replays the backward step of each equation that reads it to name the
one that broke it, with its source line and the usual fix.

>>> closed = jax.make_jaxpr(lambda x: jnp.sqrt(x).sum())(jnp.zeros(2))  # doctest: +SKIP
>>> locate_nonfinite(closed, [jnp.zeros(2)]).primitive                  # doctest: +SKIP
'sqrt'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._jax_compat import bind_equation
from ..graph.interpret import Adjoints, Step, adjoints
from ..graph.walk import source_line
from ..session.work import jaxlab_work

_DOUBLE_WHERE = (
    "the double-where trick: make the input safe as well as the output, "
    "`safe = jnp.where(ok, x, 1.0); y = jnp.where(ok, f(safe), 0.0)`, so the masked "
    "branch never sees the bad value (a jnp.where on the output alone still "
    "multiplies its zero adjoint by the infinite derivative: 0 · inf = nan)"
)
_FIXES = {
    "sqrt": "sqrt's derivative 1/(2√x) is infinite at x = 0: use `jnp.sqrt(x + eps)` "
    "(eps ≈ 1e-12), or for a norm `jnp.sqrt(jnp.sum(x**2) + eps)`",
    "rsqrt": "rsqrt's derivative is infinite at 0: add a small eps, `lax.rsqrt(x + eps)`",
    "log": "log's derivative 1/x is infinite at x = 0: use `jnp.log(x + eps)`, or "
    "`jnp.log(jnp.maximum(x, eps))`; for log of a softmax use `jax.nn.log_softmax`",
    "div": "the derivative of a / b is infinite where b = 0: keep b away from zero, "
    "`a / (b + eps)` or `a / jnp.where(b == 0, 1.0, b)`",
    "pow": "the derivative of x ** p (p < 1) is infinite at x = 0: use `(x + eps) ** p`",
    "integer_pow": "a negative integer power is infinite at x = 0: keep x away from 0",
    "atan2": "atan2's derivative is undefined at (0, 0): offset one argument by eps",
    "asin": "asin's derivative is infinite at ±1: clip, `jnp.clip(x, -1 + eps, 1 - eps)`",
    "acos": "acos's derivative is infinite at ±1: clip, `jnp.clip(x, -1 + eps, 1 - eps)`",
    "exp": "exp overflowed: subtract the maximum first (`jax.nn.logsumexp`, "
    "`jax.nn.softmax` do this)",
}


@dataclass(frozen=True)
class NonFinite:
    """Where a value or gradient first becomes NaN or inf."""

    where: str  # "value": the forward pass; "gradient": the backward pass
    primitive: str
    source: str | None  # the user's line, e.g. "<ipython-input-3>:2 (loss)"
    node_id: str  # the equation's id in the graph model, e.g. "e4" or "e1/e0"
    detail: str  # what happened, in numbers
    fix: str
    masked: bool = False  # the equation's own adjoint was zero (masked by a where)

    def markdown(self) -> str:
        """The sentence with code in backticks (the HTML view turns them into <code>):
        the primitive and the user's line name the place, not a graph id."""
        at = f" at {self.source}" if self.source else ""
        verb = "value" if self.where == "value" else "gradient"
        return (
            f"the {verb} first turns non-finite in `{self.primitive}`{at}: {self.detail}. "
            f"Fix: {self.fix}"
        )

    def text(self) -> str:
        """The sentence as plain text."""
        return self.markdown().replace("`", "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite(value: Any) -> bool:
    if value is None:
        return True
    try:
        arr = np.asarray(value)
    except Exception:
        return True
    if not np.issubdtype(arr.dtype, np.inexact):
        return True
    return bool(np.all(np.isfinite(arr)))


def _short(value: Any) -> str:
    arr = np.asarray(value)
    if arr.size == 1:
        return f"{arr.reshape(()).item():.4g}"
    bad = np.asarray(~np.isfinite(arr)) if np.issubdtype(arr.dtype, np.inexact) else None
    count = f", {int(bad.sum())} non-finite" if bad is not None and bad.any() else ""
    return f"{arr.dtype.name}{list(arr.shape)}{count}"


def _inputs(adj: Adjoints, step: Step) -> list[Any]:
    values = adj.evaluation.values
    return [
        atom.val if slot is None else values[slot]
        for atom, slot in zip(step.eqn.invars, step.inputs, strict=True)
    ]


def _fix(primitive: str, masked: bool) -> str:
    base = _FIXES.get(primitive)
    if masked:
        return (
            base + "; or, since a jnp.where already discards this branch, " if base else ""
        ) + _DOUBLE_WHERE
    return base or (
        f"look at the inputs of `{primitive}` where the gradient is non-finite; if a "
        f"jnp.where hides the bad region, use {_DOUBLE_WHERE}"
    )


@jaxlab_work()
def locate_nonfinite(closed: Any, flat_args: Sequence[Any]) -> NonFinite | None:
    """Find the equation where a scalar program's value or gradient turns non-finite.

    Returns None when both are finite everywhere.
    """
    adj = adjoints(closed, flat_args)
    ev = adj.evaluation
    # Forward, when the output itself is non-finite: the first equation with finite
    # inputs and a non-finite result. (A masked -inf, log(0) behind a jnp.where, is not
    # the story when the output is finite: its gradient is.)
    output_finite = all(_finite(ev.values[s]) for s in ev.outputs)
    for step in [] if output_finite else ev.steps:
        ins = _inputs(adj, step)
        outs = [ev.values[s] for s in step.outputs]
        if all(_finite(v) for v in ins) and not all(_finite(v) for v in outs):
            name = step.eqn.primitive.name
            args = ", ".join(_short(v) for v in ins)
            return NonFinite(
                "value",
                name,
                source_line(step.eqn),
                step.node_id,
                f"{name}({args}) = {', '.join(_short(v) for v in outs)}",
                _FIXES.get(name, f"check the inputs of `{name}`"),
            )
    # Backward: the latest-created slot whose adjoint is non-finite; every equation
    # after it has finite adjoints, so one of the equations reading it broke it.
    bad = [s for s, a in enumerate(adj.adjoints) if a is not None and not _finite(a)]
    if not bad:
        return None
    slot = max(bad)
    for step in ev.steps:
        if slot not in step.inputs:
            continue
        contribution, out_cts = _backward_step(adj, step, slot)
        if contribution is not None and not _finite(contribution):
            return _gradient_culprit(adj, step, slot, contribution, out_cts)
    # The non-finite adjoint arrived through an input's direct use (the output itself).
    return None


def _gradient_culprit(
    adj: Adjoints, step: Step, slot: int, contribution: Any, out_cts: list[Any]
) -> NonFinite:
    name = step.eqn.primitive.name
    x = np.asarray(adj.evaluation.values[slot])
    bad = ~np.isfinite(np.asarray(contribution))
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    cts = [np.asarray(c) for c in out_cts if c is not None]
    # Masked: the equation's own adjoint is 0 where its backward step gives inf/nan
    # (a jnp.where that discarded this branch); only decidable for elementwise steps.
    elementwise = bool(cts) and all(c.shape == x.shape for c in cts)
    if elementwise:
        masked = all(c[index] == 0 for c in cts)
        ct_text = ", ".join(_short(c[index]) for c in cts)
    else:
        masked = all(not np.any(c) for c in cts)
        ct_text = ", ".join(_short(c) for c in cts)
    at = f"[{', '.join(map(str, index))}]" if index else ""
    inside = " (inside a nested program JAX differentiates whole)" if step.summarised else ""
    detail = (
        f"at input{at} = {_short(x[index] if index else x)}, the backward step of "
        f"`{name}` turns the adjoint {ct_text} into "
        f"{_short(np.asarray(contribution)[index] if index else contribution)}{inside}"
    )
    if masked:
        detail += " (its adjoint is 0 there: a jnp.where discarded it, but 0 · inf = nan)"
    return NonFinite(
        "gradient", name, source_line(step.eqn), step.node_id, detail, _fix(name, masked), masked
    )


def _backward_step(adj: Adjoints, step: Step, slot: int) -> tuple[Any, list[Any]]:
    """One equation's VJP, evaluated alone: its contribution to ``slot``'s adjoint."""
    eqn = step.eqn
    values = _inputs(adj, step)
    positions = [k for k, s in enumerate(step.inputs) if s == slot]
    if not positions or not jnp.issubdtype(jnp.result_type(values[positions[0]]), jnp.inexact):
        return None, []

    def local(*xs: Any) -> list[Any]:
        full = list(values)
        for k, x in zip(positions, xs, strict=True):
            full[k] = x
        return bind_equation(eqn, full)

    outs, vjp = jax.vjp(local, *[values[k] for k in positions])
    out_cts = []
    for s, o in zip(step.outputs, outs, strict=True):
        a = adj.adjoints[s]
        if a is None:
            a = (
                np.zeros(np.shape(o), dtype=jax.dtypes.float0)
                if not jnp.issubdtype(jnp.result_type(o), jnp.inexact)
                else jnp.zeros_like(o)
            )
        out_cts.append(a)
    cts = vjp(out_cts)
    total = sum(np.asarray(c) for c in cts)
    shown = [adj.adjoints[s] for s in step.outputs]
    return total, shown
