"""Gradients for teaching: value and derivative, how JAX took it, and whether it is right.

:func:`grad_report` is the plain-Python twin of ``%grad``. It takes the derivative JAX
would (``jax.value_and_grad``), but never stops at JAX's refusals:

* a non-scalar output gives the Jacobian (``jacfwd`` or ``jacrev``, whichever needs fewer
  passes for these input and output sizes, and the report says why);
* a ``while_loop`` with a dynamic trip count (no reverse mode) falls back to forward mode
  when the inputs are small, and says so;
* integer inputs, integer outputs and leaked tracers get a message that names the
  problem and the fix;
* ``check=True`` compares the derivative with finite differences of the same function
  in its own dtypes (second differences of the value for a Hessian), and a NaN
  or inf gradient is traced to the first equation whose adjoint turns non-finite.

This module decides which derivative to take and assembles the report; the parts live
in their own modules of :mod:`jaxlab.autodiff`: ``args`` (which arguments), ``derivative``
(gradient, Jacobian, forward fallback), ``second_order`` (Hessian, HVP), ``extras``
(check, NaN origin, graph), ``record`` (the report record) and ``display`` (how it looks).

>>> r = grad_report(lambda x: jnp.sum(x ** 2), jnp.arange(3.0))  # doctest: +SKIP
>>> r.value, r.grad                                              # doctest: +SKIP
(Array(5., dtype=float32), Array([0., 2., 4.], dtype=float32))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..session.work import jaxlab_work
from . import derivative as compute
from . import extras as extras
from .args import GradError, Selection, describe_leaf, leaked_tracer, select_arguments
from .derivative import FORWARD_LIMIT as FORWARD_LIMIT  # read there; patch it there
from .derivative import GRADIENT
from .record import GradReport as GradReport
from .record import LeafSummary as LeafSummary
from .second_order import second_order

__all__ = ["GradError", "GradReport", "LeafSummary", "grad_report"]


def grad_report(
    fun: Callable[..., Any],
    *args: Any,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
    has_aux: bool = False,
    check: bool = False,
    mode: str | None = None,
    hessian: bool = False,
    hvp: Any = None,
    jacobian: bool = True,
    graph: bool = False,
    directions: int = 2,
    seed: int = 0,
    tolerance: float | None = None,
    **kwargs: Any,
) -> GradReport:
    """Value and derivative of ``fun(*args, **kwargs)`` with respect to chosen arguments.

    ``argnums`` (positions) or ``wrt`` (names, ``"x,y"``) choose the arguments;
    ``mode`` (``"fwd"``/``"rev"``) forces the Jacobian's mode; ``hessian=True`` gives the
    Hessian and ``hvp=v`` the Hessian-vector product (``v`` shaped like the chosen
    arguments); ``jacobian=False`` refuses a non-scalar output instead of giving its
    Jacobian; ``check=True`` adds a finite-difference check (``directions``
    random directions per argument, ``tolerance`` by default from the dtype);
    ``graph=True`` attaches the annotated gradient graph.

    >>> grad_report(lambda v, th: v**2 * jnp.sin(2 * th) / 9.81, 10.0, 0.3,
    ...             argnums=(0, 1)).grad                            # doctest: +SKIP
    (Array(11.50..., dtype=float32), Array(15.8..., dtype=float32))
    """
    return report_for_call(
        fun,
        args,
        kwargs,
        argnums=argnums,
        wrt=wrt,
        has_aux=has_aux,
        check=check,
        mode=mode,
        hessian=hessian,
        hvp=hvp,
        jacobian=jacobian,
        graph=graph,
        directions=directions,
        seed=seed,
        tolerance=tolerance,
    )


# %grad's own evaluation of the value and derivative (and its checks) compiles on its
# own behalf: counted as jaxlab's work, never logged as the user's compilations.
@jaxlab_work()
def report_for_call(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
    has_aux: bool = False,
    check: bool = False,
    mode: str | None = None,
    hessian: bool = False,
    hvp: Any = None,
    jacobian: bool = True,
    graph: bool = False,
    directions: int = 2,
    seed: int = 0,
    tolerance: float | None = None,
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: dict[str, str | None] | None = None,
) -> GradReport:
    """:func:`grad_report` with the call's arguments as a tuple and a dict, so that a
    keyword of ``fun`` may share a name with an option (``check=``, ``mode=``); the call
    line's names of the arguments (``arg_names``, ``kwarg_names``) name the graph's
    inputs as ``%jaxpr`` does."""
    if mode not in (None, "fwd", "rev"):
        raise GradError(f"mode must be 'fwd' or 'rev', not {mode!r}")
    if hessian and hvp is not None:
        raise GradError("choose one of --hessian and --hvp")
    sel = select_arguments(fun, tuple(args), dict(kwargs), argnums=argnums, wrt=wrt)
    first = compute.first_pass(sel, has_aux)
    leak = leaked_tracer(sel.original)
    if leak is not None:
        raise GradError(compute.leak_message(f"`{leak}` holds a tracer after the call"))
    out_leaves = jax.tree_util.tree_leaves(first.out)
    _check_output(sel, out_leaves)
    scalar = len(out_leaves) == 1 and out_leaves[0].shape == ()
    if hessian or hvp is not None:
        if not scalar:
            what = "Hessian" if hessian else "Hessian-vector product"
            raise GradError(
                f"the {what} needs a scalar output, but {sel.function.__name__} returns "
                f"{_shapes(out_leaves)}: reduce it to a number first (e.g. `.sum()`)"
            )
        result = second_order(sel, has_aux, None if hessian else hvp)
    elif scalar and mode != "fwd" and first.vjp is not None:
        try:
            result = compute.gradient(sel, first)
        except ValueError as e:  # JAX finds the while_loop when it transposes
            if compute.WHILE_REVERSE not in str(e):
                raise
            result = compute.forward_fallback(sel, has_aux, first.out, e)
    elif scalar and mode != "fwd":
        result = compute.forward_fallback(sel, has_aux, first.out, first.reverse_error)
    elif scalar:
        result = compute.jacobian(sel, has_aux, first.out, "fwd", forced=True)
    elif not jacobian:
        raise GradError(
            f"{sel.function.__name__} returns {_shapes(out_leaves)}, not a scalar: "
            "reduce it to one number (e.g. `.sum()` or `.mean()`) or ask for its "
            "Jacobian (--jacobian)"
        )
    else:
        result = compute.jacobian(sel, has_aux, first.out, mode, forced=mode is not None)

    if first.vjp is not None:  # the first pass's value and aux: the function ran once
        value, aux = first.out, first.aux
    else:  # reverse mode failed there, so it gave only shapes: run the function itself
        value, aux = compute.unwrap(sel.function(*sel.diff), has_aux)
    notes = list(result.notes)
    if sel.fixed:
        notes.append(fixed_note(sel.fixed))
    checked = None
    if check:
        checked = extras.check_report(sel, result, has_aux, directions, seed, tolerance)
        # At a kink the rule is not to blame: the check says so itself.
        if checked.failed and not checked.kink:  # stop_gradient, custom rules (not JAX's)
            from .causes import failure_notes

            notes += failure_notes(jax.make_jaxpr(compute.primary(sel, has_aux))(*sel.diff))
    nonfinite = None
    if result.kind == GRADIENT and not _all_finite((value, result.per_arg)):
        nonfinite = extras.locate(sel, has_aux)
    drawn = None
    if graph:
        try:
            drawn, note = extras.gradient_graph(
                sel, has_aux, result.kind, names=(arg_names, kwarg_names)
            )
        except ValueError as e:  # the graph is jax.grad's program: no reverse mode here
            if compute.WHILE_REVERSE not in str(e):
                raise
            drawn, note = None, compute.WHILE_GRAPH_NOTE
        if note:
            notes.append(note)
    return GradReport(
        fun_name=sel.function.__name__,
        names=sel.names,
        kind=result.kind,
        mode=result.mode,
        value=value,
        grads=sel.rebuild(result.per_arg),
        single=sel.single,
        aux=aux,
        why=result.why,
        notes=tuple(notes),
        check=checked,
        nonfinite=nonfinite,
        graph=drawn,
        fixed=sel.fixed,
    )


def fixed_note(paths: Sequence[str], limit: int = 6) -> str:
    """Which Python floats were held fixed: settings beside the arrays, not parameters."""
    shown = ", ".join(paths[:limit]) + (
        f" and {len(paths) - limit} more" if len(paths) > limit else ""
    )
    return (
        f"held fixed (not differentiated): {shown}: Python float{'s' if len(paths) != 1 else ''} "
        "beside float arrays are settings (a pooling init, a dropout rate), as in "
        "equinox.filter_grad; make one an array (jnp.asarray) to differentiate it"
    )


def _all_finite(tree: Any) -> bool:
    return all(bool(np.all(np.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(tree))


def _shapes(leaves: Sequence[Any]) -> str:
    text = ", ".join(f"{np.dtype(leaf.dtype).name}{list(leaf.shape)}" for leaf in leaves[:4])
    return text + (", ..." if len(leaves) > 4 else "")


def _check_output(sel: Selection, leaves: Sequence[Any]) -> None:
    name = sel.function.__name__
    if not leaves:
        raise GradError(f"{name} returns no array: there is nothing to differentiate")
    for leaf in leaves:
        dtype = np.dtype(leaf.dtype) if not hasattr(leaf.dtype, "_rules") else None
        if dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
            kind = describe_leaf(leaf)
            raise GradError(
                f"{name} returns {kind}, which has no derivative: integer results "
                "(indices from argmax, counts, comparisons) are piecewise constant. "
                "Differentiate a float quantity instead, e.g. the value at the index "
                "(`x.max()`), or a smooth surrogate (`jax.nn.softmax`)"
            )
