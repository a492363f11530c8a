"""Second derivatives: the Hessian and Hessian-vector products, forward over reverse.

``jax.hessian`` is ``jacfwd(jacrev(f))``: one JVP of the gradient per input element.
A Hessian-vector product needs one JVP of the gradient and never builds the Hessian.

>>> sel = select_arguments(lambda x: jnp.sum(x ** 3), (jnp.ones(2),), {})  # doctest: +SKIP
>>> second_order(sel, False, jnp.ones(2)).per_arg                          # doctest: +SKIP
[[Array([6., 6.], dtype=float32)]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .args import GradError, Selection
from .derivative import CUSTOM_VJP_FORWARD, HESSIAN, HVP, Derivative, contract, primary, traced


def second_order(sel: Selection, has_aux: bool, v: Any) -> Derivative:
    """The Hessian (``v`` None) or the Hessian-vector product with ``v``."""
    argnums = tuple(range(len(sel.chosen)))
    fun = primary(sel, has_aux)
    grad_fn = jax.grad(fun, argnums=argnums)
    try:
        if v is None:
            return _hessian(sel, traced(lambda: jax.hessian(fun, argnums=argnums)(*sel.diff)))
        tangents = _hvp_tangents(sel, v)
        _, hv = traced(lambda: jax.jvp(grad_fn, sel.diff, tangents))
    except TypeError as e:
        if CUSTOM_VJP_FORWARD not in str(e):
            raise
        raise GradError(
            "second derivatives here use forward mode over the gradient, but the function "
            "contains a custom_vjp rule, which has no forward mode. Define the rule with "
            "jax.custom_jvp instead (it supports both modes)"
        ) from e

    def apply(d: list[list[Any]]) -> Any:
        # H·v is all that is reported: the check tests the operator it came from (a JVP
        # of the gradient) along its own random directions.
        return jax.jvp(grad_fn, sel.diff, d)[1]

    why = "forward-over-reverse (jax.jvp of jax.grad): one JVP of the gradient, no Hessian built"
    return Derivative(HVP, "forward-over-reverse", [list(h) for h in hv], apply, why=why)


def _hessian(sel: Selection, hess: Any) -> Derivative:
    # hess[i][a][j][b]: argument i leaf a, argument j leaf b. The row of leaf a is shaped
    # like the arguments (like one argument when only one was chosen).
    per_arg = [
        [_hessian_row(sel, hess[i][a]) for a in range(len(c.diff_leaves))]
        for i, c in enumerate(sel.chosen)
    ]

    def apply(d: list[list[Any]]) -> Any:
        # Shaped like the gradient (a tuple per argument of leaf lists), as the check's
        # finite differences of the gradient are.
        return tuple(
            [
                sum(
                    contract(hess[i][a][j][b], t)
                    for j, ts in enumerate(d)
                    for b, t in enumerate(ts)
                )
                for a in range(len(c.diff_leaves))
            ]
            for i, c in enumerate(sel.chosen)
        )

    why = (
        "forward-over-reverse (jax.hessian = jacfwd(jacrev)): one JVP of the gradient per "
        "input element"
    )
    return Derivative(HESSIAN, "forward-over-reverse", per_arg, apply, why=why)


def _hessian_row(sel: Selection, row: Sequence[Sequence[Any]]) -> Any:
    parts = tuple(c.rebuild(r, fill=None) for c, r in zip(sel.chosen, row, strict=True))
    return parts[0] if sel.single else parts


def _hvp_tangents(sel: Selection, v: Any) -> list[list[Any]]:
    parts = [v] if sel.single else list(v) if isinstance(v, tuple | list) else None
    if parts is None or len(parts) != len(sel.chosen):
        raise GradError(
            f"--hvp needs a vector shaped like the chosen argument{'s' if not sel.single else ''} "
            f"({', '.join(sel.names)}){'' if sel.single else ', as a tuple'}"
        )
    out = []
    for c, part in zip(sel.chosen, parts, strict=True):
        leaves = c.split(part)
        fixed = []
        for t, x in zip(leaves, c.diff_leaves, strict=True):
            if np.shape(t) != np.shape(x):
                raise GradError(
                    f"--hvp: the vector for `{c.name}` has shape {np.shape(t)}, but "
                    f"`{c.name}` has shape {np.shape(x)}"
                )
            fixed.append(jnp.asarray(t, dtype=jnp.result_type(x)))
        out.append(fixed)
    return out
