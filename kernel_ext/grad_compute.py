"""Taking a derivative the way JAX would, without stopping at JAX's refusals.

:func:`first_pass` runs the function once under ``jax.vjp`` (value, aux and the VJP);
:func:`gradient` applies that VJP to a scalar output; :func:`jacobian` takes a
non-scalar output's Jacobian with ``jacfwd`` or ``jacrev``, whichever needs fewer passes;
:func:`forward_fallback` takes a gradient in forward mode where reverse mode cannot go
(a ``while_loop`` with a data-dependent trip count). Each returns a :class:`Derivative`:
the derivative per chosen argument, how it was taken, and the derivative as a linear map
(``apply``) for the finite-difference check.

>>> sel = select_arguments(lambda x: jnp.sum(x ** 2), (jnp.ones(2),), {})  # doctest: +SKIP
>>> gradient(sel, first_pass(sel, has_aux=False)).per_arg                   # doctest: +SKIP
[[Array([2., 2.], dtype=float32)]]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from .grad_args import GradError, Selection

GRADIENT, JACOBIAN, HESSIAN, HVP = "gradient", "jacobian", "hessian", "hvp"
# Forward mode costs one JVP per input element; beyond this many, it is not a fallback.
FORWARD_LIMIT = 4096
WHILE_REVERSE = "Reverse-mode differentiation does not work for lax.while_loop"
CUSTOM_VJP_FORWARD = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"


@dataclass
class FirstPass:
    """The first run: value, aux and the VJP (None where reverse mode cannot go)."""

    out: Any  # the primary output (arrays, or ShapeDtypeStructs if reverse mode failed)
    aux: Any
    vjp: Callable[..., Any] | None
    reverse_error: Exception | None = None


def first_pass(sel: Selection, has_aux: bool) -> FirstPass:
    name = sel.function.__name__

    def fun(*x: Any) -> Any:
        out = sel.function(*x)
        if has_aux and not (isinstance(out, tuple | list) and len(out) == 2):
            raise GradError(
                f"--has-aux expects {name} to return a pair (value, aux), but it returns "
                f"{type(out).__name__}"
            )
        return out

    vjp_any: Any = jax.vjp  # one call for both arities (its overloads split on has_aux)
    try:
        res = traced(lambda: vjp_any(fun, *sel.diff, has_aux=has_aux))
    except ValueError as e:
        if WHILE_REVERSE not in str(e):
            raise
        shape = traced(lambda: jax.eval_shape(fun, *sel.diff))
        return FirstPass(shape[0] if has_aux else shape, None, None, e)
    if has_aux:
        out, vjp, aux = res
        return FirstPass(out, aux, vjp)
    out, vjp = res
    return FirstPass(out, None, vjp)


@dataclass
class Derivative:
    kind: str
    mode: str
    value: Any
    per_arg: list[list[Any]]  # per chosen argument, its float leaves' derivatives
    aux: Any = None
    why: str = ""
    notes: list[str] = field(default_factory=list)
    apply: Callable[[list[list[Any]]], Any] | None = None  # derivative applied to d


def traced(call: Callable[[], Any]) -> Any:
    """Run a JAX transform of user code, turning tracer leaks into a GradError."""
    try:
        with jax.checking_leaks():
            out = call()
    except jax.errors.UnexpectedTracerError as e:
        raise GradError(leak_message(str(e))) from e
    except Exception as e:
        if str(e).startswith("Leaked trace"):
            raise GradError(leak_message(str(e))) from e
        raise
    return out


def leak_message(detail: str) -> str:
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    return (
        "the function leaks a tracer: it stores a traced value outside itself (a global, "
        "a list, an attribute) or uses one stored by an earlier transform. Values inside "
        "jax.grad are placeholders that only exist during the call: return what you need "
        f"instead of storing it ({first[:160]})"
    )


def unwrap(value_aux: Any, has_aux: bool) -> tuple[Any, Any]:
    return (value_aux[0], value_aux[1]) if has_aux else (value_aux, None)


def gradient(sel: Selection, first: FirstPass) -> Derivative:
    assert first.vjp is not None
    grads = first.vjp(jnp.ones_like(first.out))

    def apply(d: list[list[Any]]) -> Any:
        return sum(
            jnp.vdot(g, t).real
            for gs, ts in zip(grads, d, strict=True)
            for g, t in zip(gs, ts, strict=True)
        )

    return Derivative(
        GRADIENT,
        "reverse",
        first.out,
        [list(g) for g in grads],
        first.aux,
        why="reverse mode (jax.vjp): one backward pass for a scalar output",
        apply=apply,
    )


def forward_fallback(sel: Selection, has_aux: bool, error: Exception | None) -> Derivative:
    n = sel.size
    if n > FORWARD_LIMIT:
        raise GradError(
            "reverse mode cannot go through a `lax.while_loop` (or `fori_loop`) whose trip "
            "count depends on the data: JAX would have to store every iteration, and it "
            f"cannot know how many there are. Forward mode would need {n} JVPs (one per "
            f"input element, more than {FORWARD_LIMIT}). Fix: bound the loop, e.g. "
            "`lax.fori_loop` with Python-int bounds or `lax.scan` with a fixed length "
            "(masking finished iterations)"
        ) from error
    result = jacobian(sel, has_aux, "fwd", forced=True, n_out=1)
    result.kind = GRADIENT
    result.why = (
        f"forward mode (jax.jacfwd, {n} JVP{'s' if n != 1 else ''}): reverse mode cannot go "
        "through a while_loop with a dynamic trip count"
    )
    result.notes.append(
        "reverse mode failed on a `while_loop` with a data-dependent trip count; the "
        f"gradient was computed in forward mode instead ({n} JVPs, one per input element)"
    )
    return result


def jacobian(
    sel: Selection,
    has_aux: bool,
    mode: str | None,
    *,
    forced: bool,
    n_out: int,
    value: Any = None,
) -> Derivative:
    n_in = sel.size
    argnums = tuple(range(len(sel.chosen)))
    if mode is None:
        mode = "fwd" if n_in <= n_out else "rev"
        why = (
            f"jacfwd: {n_in} input element{'s' if n_in != 1 else ''} ≤ {n_out} output "
            f"elements, so {n_in} forward passes (JVPs) beat {n_out} backward passes"
            if mode == "fwd"
            else f"jacrev: {n_out} output element{'s' if n_out != 1 else ''} < {n_in} input "
            f"elements, so {n_out} backward passes (VJPs) beat {n_in} forward passes"
        )
    else:
        why = f"jac{mode}, as asked (--mode {mode})" if forced else f"jac{mode}"
    notes: list[str] = []
    transform = jax.jacfwd if mode == "fwd" else jax.jacrev
    try:
        jac = traced(lambda: transform(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    except ValueError as e:
        if WHILE_REVERSE not in str(e) or n_in > FORWARD_LIMIT:
            raise
        mode, transform = "fwd", jax.jacfwd
        notes.append("reverse mode failed on a dynamic while_loop; used jacfwd instead")
        jac = traced(lambda: jax.jacfwd(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    except TypeError as e:
        if CUSTOM_VJP_FORWARD not in str(e):
            raise
        mode = "rev"
        notes.append("a custom_vjp function has no forward-mode rule; used jacrev instead")
        jac = traced(lambda: jax.jacrev(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    jac, aux = unwrap(jac, has_aux)
    if value is None:
        value, _ = unwrap(sel.function(*sel.diff), has_aux)
    # jac: the output's structure, each leaf a tuple (per argument) of leaf lists.
    out_tree: Any = jax.tree_util.tree_structure(value)
    per_out = out_tree.flatten_up_to(jac)
    per_arg: list[list[Any]] = []
    for i in range(len(sel.chosen)):
        leaves_i = []
        for k in range(len(sel.chosen[i].diff_leaves)):
            parts = [po[i][k] for po in per_out]
            leaves_i.append(
                parts[0] if len(parts) == 1 else jax.tree_util.tree_unflatten(out_tree, parts)
            )
        per_arg.append(leaves_i)

    def apply(d: list[list[Any]]) -> Any:
        _, tangent = jax.jvp(lambda *x: unwrap(sel.function(*x), has_aux)[0], sel.diff, d)
        return tangent

    scalar = n_out == 1 and jax.tree_util.tree_leaves(value)[0].shape == ()
    return Derivative(
        GRADIENT if scalar else JACOBIAN,
        "forward" if mode == "fwd" else "reverse",
        value,
        per_arg,
        aux,
        why=why,
        notes=notes,
        apply=apply,
    )
