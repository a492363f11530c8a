"""What a report adds beyond the derivative: its finite-difference check, the custom
derivative rules behind a failed check, where a NaN is born, and the gradient graph.

>>> check_report(sel, derivative, False, directions=2, seed=0, tolerance=None)  # doctest: +SKIP
GradCheck(...)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..session.work import jaxlab_work
from .args import Selection
from .check import GradCheck, check_derivative
from .derivative import GRADIENT, HESSIAN, HVP, WHILE_REVERSE, Derivative, primary
from .nans import NonFinite, locate_nonfinite
from .second_order import check_second_order


@jaxlab_work()
def check_report(
    sel: Selection,
    result: Derivative,
    has_aux: bool,
    directions: int,
    seed: int,
    tolerance: float | None,
) -> GradCheck:
    """The finite-difference check of ``result``: of the output for first derivatives,
    second differences of the value for second ones (never a derivative rule)."""
    if result.kind in (HESSIAN, HVP):
        return check_second_order(sel, result, has_aux, directions, seed, tolerance)
    fun = primary(sel, has_aux)

    def checked(x: list[list[Any]]) -> Any:
        return fun(*x)

    leaves = [leaf for per in result.per_arg for leaf in jax.tree_util.tree_leaves(per)]
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    return check_derivative(
        names=sel.names,
        diff=sel.diff,
        fun=checked,
        apply=result.apply,
        dtype=dtype,
        directions=directions,
        seed=seed,
        tolerance=tolerance,
    )


def locate(sel: Selection, has_aux: bool) -> NonFinite | None:
    """Where the value or gradient turns non-finite (see :mod:`jaxlab.autodiff.nans`)."""
    closed = jax.make_jaxpr(primary(sel, has_aux))(*sel.diff)
    flat = jax.tree_util.tree_leaves(sel.diff)
    return locate_nonfinite(closed, flat)


def gradient_graph(
    sel: Selection,
    has_aux: bool,
    kind: str,
    names: tuple[Sequence[str | None] | None, dict[str, str | None] | None] = (None, None),
) -> tuple[Any, str | None]:
    """The annotated graph of ``jax.grad`` of the function, or None and why not;
    ``names``: the call line's names of the arguments and keywords, if known."""
    if kind != GRADIENT:
        return None, "the gradient graph is drawn for scalar outputs only (not for a " + kind + ")"
    from ..graph import jaxpr_graph

    call = _call_of(sel)
    fun = primary(sel, has_aux)
    (only,) = sel.chosen if len(sel.chosen) == 1 else (None,)
    if only is not None and all(only.mask):
        # One argument, all of it differentiated: draw it under its own name and paths
        # (``params[0]['w']``), as jax.grad(f) would see it.
        def whole(value: Any) -> Any:
            return fun(only.split(value))

        whole.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(only.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        )
        packed: Callable[..., Any] = whole
        arg: Any = only.value
    else:

        def leaves(wrt: list[list[Any]]) -> Any:
            return fun(*wrt)

        packed, arg = leaves, list(sel.diff)
    packed.__name__ = sel.function.__name__
    try:
        if call is not None and sel.original is not None:
            return _named_gradient_graph(sel, has_aux, *call, names=names), None
        return jaxpr_graph(packed, arg, grad=True, values=True), None
    except ValueError as e:
        if WHILE_REVERSE not in str(e):
            raise
        # The graph draws jax.grad's program, which reverse mode cannot build here; the
        # report's numbers (forward mode) stand without it.
        return None, (
            "the gradient graph is left out: it draws reverse mode's program (jax.grad), "
            "and reverse mode cannot go through a `while_loop` whose trip count depends "
            "on the data. The gradient above was taken in forward mode"
        )


def _call_of(sel: Selection) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The call's arguments, as ``select_arguments`` closed over them (None if not)."""
    try:
        found = inspect.getclosurevars(sel.function).nonlocals
    except (TypeError, ValueError):
        return None
    args, kwargs = found.get("args"), found.get("kwargs")
    if isinstance(args, tuple | list) and isinstance(kwargs, dict):
        return tuple(args), dict(kwargs)
    return None


def _named_gradient_graph(
    sel: Selection,
    has_aux: bool,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    names: tuple[Sequence[str | None] | None, dict[str, str | None] | None] = (None, None),
) -> Any:
    """The gradient graph of the whole call: every argument a named input (those not
    differentiated greyed), outputs ``∂loss/∂x1`` in argument order (issue 11)."""
    from ..graph.gradient import gradient_graph

    original = sel.original
    assert original is not None
    fun: Callable[..., Any] = original
    if has_aux:

        @functools.wraps(original)
        def fun(*a: Any, **kw: Any) -> Any:
            return original(*a, **kw)[0]

    return gradient_graph(
        fun,
        args,
        kwargs,
        wrt=[c.where for c in sel.chosen],
        masks={c.where: c.mask for c in sel.chosen},
        values=True,
        name=sel.function.__name__,
        arg_names=names[0],
        kwarg_names=names[1],
    )
