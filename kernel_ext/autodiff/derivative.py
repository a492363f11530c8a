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

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .args import GradError, Selection

GRADIENT, JACOBIAN, HESSIAN, HVP = "gradient", "jacobian", "hessian", "hvp"
# Forward mode costs one JVP per input element; beyond this many, it is not a fallback.
FORWARD_LIMIT = 4096
WHILE_REVERSE = "Reverse-mode differentiation does not work for lax.while_loop"
CUSTOM_VJP_FORWARD = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"
WHILE_GRAPH_NOTE = (
    "the gradient graph is left out: it draws reverse mode's program (jax.grad), and "
    "reverse mode cannot go through a `while_loop` whose trip count depends on the data. "
    "The gradient above was taken in forward mode"
)


@dataclass(frozen=True)
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
        return FirstPass(as_arrays(out), aux, vjp)
    out, vjp = res
    return FirstPass(as_arrays(out), None, vjp)


def as_arrays(out: Any) -> Any:
    """The output with Python numbers as arrays: ``return 0.0`` (a stub) is a constant
    whose gradient is zero, as ``jax.grad`` says, not an object without a dtype."""
    return jax.tree_util.tree_map(
        lambda leaf: jnp.asarray(leaf) if isinstance(leaf, int | float | complex) else leaf, out
    )


@dataclass(frozen=True)
class Derivative:
    """A derivative per chosen argument, how it was taken, and the same numbers as a
    linear map (``apply``: tangents shaped like ``sel.diff`` → the output's tangent), so
    that the finite-difference check tests what is reported, not a recomputation."""

    kind: str
    mode: str
    per_arg: list[list[Any]]  # per chosen argument, its float leaves' derivatives
    apply: Callable[[list[list[Any]]], Any]
    why: str = ""
    notes: tuple[str, ...] = ()
    vector: list[list[Any]] | None = None  # the v of a Hessian-vector product


def traced(call: Callable[[], Any]) -> Any:
    """Run a JAX transform of user code, turning JAX's own leaked-tracer error into a
    GradError that explains it.

    No ``jax.checking_leaks()`` here: it misfires on libraries that cache traced
    functions (equinox, and so diffrax, keep jaxprs whose tracers outlive the trace, on
    purpose) and makes every derivative several times slower. A leak is reported only
    when JAX itself raises :class:`jax.errors.UnexpectedTracerError`, and after the call
    :func:`jaxlab.autodiff.args.leaked_tracer` looks where the user's leaks land.
    """
    try:
        return call()
    except jax.errors.UnexpectedTracerError as e:
        raise GradError(leak_message(str(e))) from e


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


def primary(sel: Selection, has_aux: bool) -> Callable[..., Any]:
    """``f(*diff)``: the output differentiated, as a function of the chosen float leaves
    (with ``has_aux``, the aux is dropped)."""
    if not has_aux:
        return sel.function

    def value_only(*diff: Any) -> Any:
        return sel.function(*diff)[0]

    value_only.__name__ = sel.function.__name__
    return value_only


def contract(block: Any, tangent: Any) -> Any:
    """A derivative block (output shape + input shape) applied to an input tangent."""
    return jnp.tensordot(block, tangent, axes=jnp.ndim(tangent))


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
        [list(g) for g in grads],
        apply,
        why="reverse mode (jax.vjp): one backward pass for a scalar output",
    )


def forward_fallback(
    sel: Selection, has_aux: bool, out: Any, error: Exception | None
) -> Derivative:
    """The gradient in forward mode, where reverse mode met a dynamic ``while_loop``."""
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
    result = jacobian(sel, has_aux, out, "fwd", forced=True)
    return dataclasses.replace(
        result,
        why=f"forward mode (jax.jacfwd, {n} JVP{'s' if n != 1 else ''}): reverse mode cannot "
        "go through a while_loop with a dynamic trip count",
        notes=(
            *result.notes,
            "reverse mode failed on a `while_loop` with a data-dependent trip count; the "
            f"gradient was computed in forward mode instead ({n} JVP{'s' if n != 1 else ''}, "
            "one per input element)",
        ),
    )


def _elements(n: int, kind: str) -> str:
    return f"{n:,} {kind} element{'s' if n != 1 else ''}"


def _passes(n: int, way: str) -> str:
    return f"{n:,} {way} pass{'es' if n != 1 else ''}"


def _mode_why(n_in: int, n_out: int) -> str:
    """Why jacfwd or jacrev, in words that call a tie a tie."""
    if n_in == n_out:
        return (
            f"jacfwd: {_elements(n_in, 'input')} and as many output, so "
            f"{_passes(n_in, 'forward')} (JVPs) or as many backward (VJPs), a tie; forward "
            "mode keeps no residuals"
        )
    if n_in < n_out:
        return (
            f"jacfwd: {_elements(n_in, 'input')} < {_elements(n_out, 'output')}, so "
            f"{_passes(n_in, 'forward')} (JVPs) instead of {_passes(n_out, 'backward')}"
        )
    return (
        f"jacrev: {_elements(n_out, 'output')} < {_elements(n_in, 'input')}, so "
        f"{_passes(n_out, 'backward')} (VJPs) instead of {_passes(n_in, 'forward')}"
    )


def jacobian(
    sel: Selection, has_aux: bool, out: Any, mode: str | None, *, forced: bool
) -> Derivative:
    """The Jacobian of the output ``out`` (arrays or ShapeDtypeStructs: only its structure
    and sizes are read), a gradient when ``out`` is one scalar."""
    out_leaves = jax.tree_util.tree_leaves(out)
    n_in, n_out = sel.size, sum(int(np.prod(leaf.shape)) for leaf in out_leaves)
    argnums = tuple(range(len(sel.chosen)))
    if mode is None:
        mode = "fwd" if n_in <= n_out else "rev"
        why = _mode_why(n_in, n_out)
    else:
        why = f"jac{mode}, as asked (--mode {mode})" if forced else f"jac{mode}"
    fun = primary(sel, has_aux)

    def take(transform: Callable[..., Any]) -> Any:
        return traced(lambda: transform(fun, argnums=argnums)(*sel.diff))

    notes: tuple[str, ...] = ()
    try:
        jac = take(jax.jacfwd if mode == "fwd" else jax.jacrev)
    except ValueError as e:
        if WHILE_REVERSE not in str(e) or n_in > FORWARD_LIMIT:
            raise
        mode, jac = "fwd", take(jax.jacfwd)
        notes = ("reverse mode failed on a dynamic while_loop; used jacfwd instead",)
    except TypeError as e:
        if CUSTOM_VJP_FORWARD not in str(e):
            raise
        mode, jac = "rev", take(jax.jacrev)
        notes = ("a custom_vjp function has no forward-mode rule; used jacrev instead",)
    # jac: the output's structure, each leaf a tuple (per argument) of leaf lists.
    out_tree: Any = jax.tree_util.tree_structure(out)
    per_out = out_tree.flatten_up_to(jac)
    per_arg: list[list[Any]] = []
    for i, chosen in enumerate(sel.chosen):
        leaves_i = []
        for k in range(len(chosen.diff_leaves)):
            parts = [po[i][k] for po in per_out]
            leaves_i.append(parts[0] if len(parts) == 1 else out_tree.unflatten(parts))
        per_arg.append(leaves_i)

    def apply(d: list[list[Any]]) -> Any:
        return out_tree.unflatten(
            [
                sum(contract(po[i][k], t) for i, ts in enumerate(d) for k, t in enumerate(ts))
                for po in per_out
            ]
        )

    scalar = len(out_leaves) == 1 and out_leaves[0].shape == ()
    return Derivative(
        GRADIENT if scalar else JACOBIAN,
        "forward" if mode == "fwd" else "reverse",
        per_arg,
        apply,
        why=why,
        notes=notes,
    )
