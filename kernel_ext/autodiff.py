"""Gradients for teaching: value and derivative, how JAX took it, and whether it is right.

:func:`grad_report` is the plain-Python twin of ``%grad``. It takes the derivative JAX
would (``jax.value_and_grad``), but never stops at JAX's refusals:

* a non-scalar output gives the Jacobian (``jacfwd`` or ``jacrev``, whichever needs fewer
  passes for these input and output sizes, and the report says why);
* a ``while_loop`` with a dynamic trip count (no reverse mode) falls back to forward mode
  when the inputs are small, and says so;
* integer inputs, integer outputs and leaked tracers get a message that names the
  problem and the fix;
* ``check=True`` compares the derivative with float64 finite differences, and a NaN
  or inf gradient is traced to the first equation whose adjoint turns non-finite.

>>> r = grad_report(lambda x: jnp.sum(x ** 2), jnp.arange(3.0))  # doctest: +SKIP
>>> r.value, r.grad                                              # doctest: +SKIP
(Array(5., dtype=float32), Array([0., 2., 4.], dtype=float32))
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from .fd_check import GradCheck, check_derivative
from .grad_args import GradError, Selection, describe_leaf, leaked_tracer, select_arguments
from .nan_locate import NonFinite, locate_nonfinite

__all__ = ["GradError", "GradReport", "LeafSummary", "grad_report"]

GRADIENT, JACOBIAN, HESSIAN, HVP = "gradient", "jacobian", "hessian", "hvp"
# Forward mode costs one JVP per input element; beyond this many, it is not a fallback.
FORWARD_LIMIT = 4096
_WHILE_REVERSE = "Reverse-mode differentiation does not work for lax.while_loop"
_CUSTOM_VJP_FORWARD = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"


@dataclass(frozen=True)
class LeafSummary:
    """One derivative leaf, small enough to print."""

    path: str  # e.g. "w", "params['b']", "x → out[1]"
    shape: tuple[int, ...]
    dtype: str
    norm: float
    min: float
    max: float
    first: tuple[float, ...]  # the first few entries, flattened
    finite: bool

    @classmethod
    def of(cls, path: str, value: Any, n_first: int = 4) -> LeafSummary:
        arr = np.asarray(value)
        flat = arr.reshape(-1)
        real = np.real(flat).astype(np.float64)
        finite = bool(np.all(np.isfinite(flat)))
        with np.errstate(invalid="ignore", over="ignore"):
            return cls(
                path=path,
                shape=tuple(arr.shape),
                dtype=arr.dtype.name,
                norm=float(np.sqrt(np.sum(np.abs(flat.astype(np.complex128)) ** 2)))
                if flat.size
                else 0.0,
                min=float(np.min(real)) if flat.size else math.nan,
                max=float(np.max(real)) if flat.size else math.nan,
                first=tuple(float(v) for v in real[:n_first]),
                finite=finite,
            )


@dataclass(frozen=True)
class GradReport:
    """Value and derivative of a function, how they were computed, and their check.

    ``grad`` has the structure of the arguments chosen: one argument's structure, or a
    tuple of them when several were chosen (float leaves replaced by their derivative,
    other leaves by None). ``grads`` maps each argument's name to its part.
    """

    fun_name: str
    names: tuple[str, ...]  # the arguments differentiated
    kind: str  # "gradient", "jacobian", "hessian" or "hvp"
    mode: str  # "reverse", "forward", "forward-over-reverse"
    value: Any
    grads: Mapping[str, Any]
    single: bool = True
    aux: Any = None
    why: str = ""  # how the derivative was taken, in a sentence
    notes: tuple[str, ...] = ()  # fallbacks and warnings
    check: GradCheck | None = None
    nonfinite: NonFinite | None = None
    graph: Any = field(default=None, compare=False, repr=False)

    @property
    def grad(self) -> Any:
        if self.single:
            return self.grads[self.names[0]]
        return tuple(self.grads[n] for n in self.names)

    def leaves(self) -> list[LeafSummary]:
        """Every derivative leaf with its path (``w['b']``), shape and statistics."""
        out: list[LeafSummary] = []
        for name in self.names:
            flat, _ = jax.tree_util.tree_flatten_with_path(self.grads[name])
            for path, leaf in flat:
                out.append(LeafSummary.of(name + jax.tree_util.keystr(path), leaf))
        return out

    def value_summary(self) -> list[LeafSummary]:
        flat, _ = jax.tree_util.tree_flatten_with_path(self.value)
        return [LeafSummary.of("value" + jax.tree_util.keystr(p), v) for p, v in flat]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fun": self.fun_name,
            "names": list(self.names),
            "kind": self.kind,
            "mode": self.mode,
            "why": self.why,
            "value": [_leaf_dict(s) for s in self.value_summary()],
            "grad": [_leaf_dict(s) for s in self.leaves()],
            "notes": list(self.notes),
            "check": self.check.to_dict() if self.check else None,
            "nonfinite": self.nonfinite.to_dict() if self.nonfinite else None,
        }

    def text(self) -> str:
        from .grad_display import report_text

        return report_text(self)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .grad_display import report_html

        return {"text/plain": self.text(), "text/html": report_html(self)}


def _leaf_dict(s: LeafSummary) -> dict[str, Any]:
    return {
        "path": s.path,
        "shape": list(s.shape),
        "dtype": s.dtype,
        "norm": s.norm,
        "min": s.min,
        "max": s.max,
        "first": list(s.first),
        "finite": s.finite,
    }


# --------------------------------------------------------------------------- core


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
    Jacobian; ``check=True`` adds a float64 finite-difference check (``directions``
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
) -> GradReport:
    """:func:`grad_report` with the call's arguments as a tuple and a dict, so that a
    keyword of ``fun`` may share a name with an option (``check=``, ``mode=``)."""
    if mode not in (None, "fwd", "rev"):
        raise GradError(f"mode must be 'fwd' or 'rev', not {mode!r}")
    if hessian and hvp is not None:
        raise GradError("choose one of --hessian and --hvp")
    sel = select_arguments(fun, tuple(args), dict(kwargs), argnums=argnums, wrt=wrt)
    first = _first_pass(sel, has_aux)
    leak = leaked_tracer(sel.original)
    if leak is not None:
        raise GradError(_leak_message(f"`{leak}` holds a tracer after the call"))
    out_leaves = jax.tree_util.tree_leaves(first.out)
    _check_output(sel, out_leaves)
    scalar = len(out_leaves) == 1 and out_leaves[0].shape == ()
    known = first.out if first.vjp is not None else None

    if hessian or hvp is not None:
        if not scalar:
            what = "Hessian" if hessian else "Hessian-vector product"
            raise GradError(
                f"the {what} needs a scalar output, but {sel.function.__name__} returns "
                f"{_shapes(out_leaves)}: reduce it to a number first (e.g. `.sum()`)"
            )
        result = _second_order(sel, has_aux, hvp if not hessian else None, known, first.aux)
    elif scalar and mode != "fwd" and first.vjp is not None:
        try:
            result = _gradient(sel, first)
        except ValueError as e:  # JAX finds the while_loop when it transposes
            if _WHILE_REVERSE not in str(e):
                raise
            result = _forward_fallback(sel, has_aux, e)
    elif scalar and mode != "fwd":
        result = _forward_fallback(sel, has_aux, first.reverse_error)
    elif scalar:
        result = _jacobian(sel, has_aux, "fwd", forced=True, n_out=1, value=known)
    else:
        if not jacobian:
            raise GradError(
                f"{sel.function.__name__} returns {_shapes(out_leaves)}, not a scalar: "
                "reduce it to one number (e.g. `.sum()` or `.mean()`) or ask for its "
                "Jacobian (--jacobian)"
            )
        n_out = sum(int(np.prod(leaf.shape)) for leaf in out_leaves)
        result = _jacobian(sel, has_aux, mode, forced=mode is not None, n_out=n_out, value=known)
    if first.vjp is not None:  # the first pass's value and aux: the function ran once
        result.value, result.aux = first.out, first.aux

    grads = sel.rebuild(result.per_arg)
    report = GradReport(
        fun_name=sel.function.__name__,
        names=sel.names,
        kind=result.kind,
        mode=result.mode,
        value=result.value,
        grads=grads,
        single=sel.single,
        aux=result.aux,
        why=result.why,
        notes=tuple(result.notes),
    )
    extra: dict[str, Any] = {}
    if check:
        extra["check"] = _check(sel, result, has_aux, directions, seed, tolerance)
        if not extra["check"].passed:
            custom = _custom_rules(sel, has_aux)
            if custom:
                extra["notes"] = (
                    *report.notes,
                    f"the function has custom derivative rules ({', '.join(custom)}): "
                    "a custom rule may differ from the true derivative on purpose "
                    "(clipping, straight-through estimators), and then the check fails",
                )
    summaries = [*report.value_summary(), *report.leaves()]
    if result.kind == GRADIENT and not all(s.finite for s in summaries):
        extra["nonfinite"] = _locate(sel, has_aux)
    if graph:
        graph_obj, note = _gradient_graph(sel, has_aux, result.kind)
        extra["graph"] = graph_obj
        if note:
            extra["notes"] = (*extra.get("notes", report.notes), note)
    return dataclasses.replace(report, **extra) if extra else report


@dataclass
class _First:
    """The first run: value, aux and the VJP (None where reverse mode cannot go)."""

    out: Any  # the primary output (arrays, or ShapeDtypeStructs if reverse mode failed)
    aux: Any
    vjp: Callable[..., Any] | None
    reverse_error: Exception | None = None


def _first_pass(sel: Selection, has_aux: bool) -> _First:
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
        res = _traced(lambda: vjp_any(fun, *sel.diff, has_aux=has_aux))
    except ValueError as e:
        if _WHILE_REVERSE not in str(e):
            raise
        shape = _traced(lambda: jax.eval_shape(fun, *sel.diff))
        return _First(shape[0] if has_aux else shape, None, None, e)
    if has_aux:
        out, vjp, aux = res
        return _First(out, aux, vjp)
    out, vjp = res
    return _First(out, None, vjp)


@dataclass
class _Result:
    kind: str
    mode: str
    value: Any
    per_arg: list[list[Any]]  # per chosen argument, its float leaves' derivatives
    aux: Any = None
    why: str = ""
    notes: list[str] = field(default_factory=list)
    apply: Callable[[list[list[Any]]], Any] | None = None  # derivative applied to d


def _shapes(leaves: Sequence[Any]) -> str:
    text = ", ".join(f"{np.dtype(leaf.dtype).name}{list(leaf.shape)}" for leaf in leaves[:4])
    return text + (", ..." if len(leaves) > 4 else "")


def _traced(call: Callable[[], Any]) -> Any:
    """Run a JAX transform of user code, turning tracer leaks into a GradError."""
    try:
        with jax.checking_leaks():
            out = call()
    except jax.errors.UnexpectedTracerError as e:
        raise GradError(_leak_message(str(e))) from e
    except Exception as e:
        if str(e).startswith("Leaked trace"):
            raise GradError(_leak_message(str(e))) from e
        raise
    return out


def _leak_message(detail: str) -> str:
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    return (
        "the function leaks a tracer: it stores a traced value outside itself (a global, "
        "a list, an attribute) or uses one stored by an earlier transform. Values inside "
        "jax.grad are placeholders that only exist during the call: return what you need "
        f"instead of storing it ({first[:160]})"
    )


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


def _unwrap(value_aux: Any, has_aux: bool) -> tuple[Any, Any]:
    return (value_aux[0], value_aux[1]) if has_aux else (value_aux, None)


def _gradient(sel: Selection, first: _First) -> _Result:
    assert first.vjp is not None
    grads = first.vjp(jnp.ones_like(first.out))

    def apply(d: list[list[Any]]) -> Any:
        return sum(
            jnp.vdot(g, t).real
            for gs, ts in zip(grads, d, strict=True)
            for g, t in zip(gs, ts, strict=True)
        )

    return _Result(
        GRADIENT,
        "reverse",
        first.out,
        [list(g) for g in grads],
        first.aux,
        why="reverse mode (jax.vjp): one backward pass for a scalar output",
        apply=apply,
    )


def _forward_fallback(sel: Selection, has_aux: bool, error: Exception | None) -> _Result:
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
    result = _jacobian(sel, has_aux, "fwd", forced=True, n_out=1)
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


def _jacobian(
    sel: Selection,
    has_aux: bool,
    mode: str | None,
    *,
    forced: bool,
    n_out: int,
    value: Any = None,
) -> _Result:
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
        jac = _traced(lambda: transform(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    except ValueError as e:
        if _WHILE_REVERSE not in str(e) or n_in > FORWARD_LIMIT:
            raise
        mode, transform = "fwd", jax.jacfwd
        notes.append("reverse mode failed on a dynamic while_loop; used jacfwd instead")
        jac = _traced(lambda: jax.jacfwd(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    except TypeError as e:
        if _CUSTOM_VJP_FORWARD not in str(e):
            raise
        mode = "rev"
        notes.append("a custom_vjp function has no forward-mode rule; used jacrev instead")
        jac = _traced(lambda: jax.jacrev(sel.function, argnums=argnums, has_aux=has_aux)(*sel.diff))
    jac, aux = _unwrap(jac, has_aux)
    if value is None:
        value, _ = _unwrap(sel.function(*sel.diff), has_aux)
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
        _, tangent = jax.jvp(lambda *x: _unwrap(sel.function(*x), has_aux)[0], sel.diff, d)
        return tangent

    scalar = n_out == 1 and jax.tree_util.tree_leaves(value)[0].shape == ()
    return _Result(
        GRADIENT if scalar else JACOBIAN,
        "forward" if mode == "fwd" else "reverse",
        value,
        per_arg,
        aux,
        why=why,
        notes=notes,
        apply=apply,
    )


def _second_order(
    sel: Selection, has_aux: bool, v: Any, value: Any = None, aux: Any = None
) -> _Result:
    argnums = tuple(range(len(sel.chosen)))

    def scalar(*x: Any) -> Any:
        return _unwrap(sel.function(*x), has_aux)[0]

    grad_fn = jax.grad(scalar, argnums=argnums)
    if value is None:
        value, aux = _unwrap(sel.function(*sel.diff), has_aux)
    try:
        if v is None:
            hess = _traced(lambda: jax.hessian(scalar, argnums=argnums)(*sel.diff))
            # hess[i][a][j][b]: argument i leaf a, argument j leaf b. The row of leaf a is
            # shaped like the arguments (like one argument when only one was chosen).
            per_arg = [
                [_hessian_row(sel, hess[i][a]) for a in range(len(sel.chosen[i].diff_leaves))]
                for i in range(len(sel.chosen))
            ]
            kind = HESSIAN
            why = (
                "forward-over-reverse (jax.hessian = jacfwd(jacrev)): one JVP of the "
                "gradient per input element"
            )
        else:
            tangents = _hvp_tangents(sel, v)
            _, hv = _traced(lambda: jax.jvp(grad_fn, sel.diff, tangents))
            per_arg = [list(h) for h in hv]
            kind = HVP
            why = (
                "forward-over-reverse (jax.jvp of jax.grad): one JVP of the gradient, no "
                "Hessian built"
            )
    except TypeError as e:
        if _CUSTOM_VJP_FORWARD not in str(e):
            raise
        raise GradError(
            "second derivatives here use forward mode over the gradient, but the function "
            "contains a custom_vjp rule, which has no forward mode. Define the rule with "
            "jax.custom_jvp instead (it supports both modes)"
        ) from e

    def apply(d: list[list[Any]]) -> Any:
        return jax.jvp(grad_fn, sel.diff, d)[1]

    return _Result(kind, "forward-over-reverse", value, per_arg, aux, why=why, apply=apply)


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


# --------------------------------------------------------------------------- extras


def _check(
    sel: Selection,
    result: _Result,
    has_aux: bool,
    directions: int,
    seed: int,
    tolerance: float | None,
) -> GradCheck:
    def primal(x: list[list[Any]]) -> Any:
        return _unwrap(sel.function(*x), has_aux)[0]

    if result.kind in (HESSIAN, HVP):
        argnums = tuple(range(len(sel.chosen)))
        fun = lambda x: jax.grad(primal_star, argnums=argnums)(*x)  # noqa: E731

        def primal_star(*x: Any) -> Any:
            return primal(list(x))
    else:
        fun = primal
    leaves = [leaf for per in result.per_arg for leaf in jax.tree_util.tree_leaves(per)]
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    assert result.apply is not None
    return check_derivative(
        names=sel.names,
        diff=sel.diff,
        fun=fun,
        apply=result.apply,
        dtype=dtype,
        directions=directions,
        seed=seed,
        tolerance=tolerance,
    )


def _rule_name(eqn: Any) -> str:
    """The decorated function's name: custom_jvp_call carries it, custom_vjp_call's
    program says it in its debug info (``"clip at <string>:3"``)."""
    if eqn.params.get("name"):
        return str(eqn.params["name"])
    program = eqn.params.get("call_jaxpr")
    info = getattr(getattr(program, "jaxpr", program), "debug_info", None)
    text = str(getattr(info, "func_src_info", "") or "")
    return text.split(" at ", 1)[0]


def _custom_rules(sel: Selection, has_aux: bool) -> list[str]:
    """``custom_vjp clip``, ...: the custom derivative rules the function calls."""

    def scalar(*x: Any) -> Any:
        return _unwrap(sel.function(*x), has_aux)[0]

    found: list[str] = []

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name.startswith("custom_"):
                kind = "custom_vjp" if "vjp" in name else "custom_jvp"
                label = f"{kind} {_rule_name(eqn)}".strip()
                if label not in found:
                    found.append(label)
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(scalar)(*sel.diff).jaxpr)
    return found


def _locate(sel: Selection, has_aux: bool) -> NonFinite | None:
    def scalar(*x: Any) -> Any:
        return _unwrap(sel.function(*x), has_aux)[0]

    closed = jax.make_jaxpr(scalar)(*sel.diff)
    flat = jax.tree_util.tree_leaves(sel.diff)
    return locate_nonfinite(closed, flat)


def _gradient_graph(sel: Selection, has_aux: bool, kind: str) -> tuple[Any, str | None]:
    if kind != GRADIENT:
        return None, "the gradient graph is drawn for scalar outputs only (not for a " + kind + ")"
    from .graph import jaxpr_graph

    (only,) = sel.chosen if len(sel.chosen) == 1 else (None,)
    if only is not None and all(only.mask):
        # One argument, all of it differentiated: draw it under its own name and paths
        # (``params[0]['w']``), as jax.grad(f) would see it.
        def whole(value: Any) -> Any:
            return _unwrap(sel.function(only.split(value)), has_aux)[0]

        whole.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(only.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        )
        packed: Callable[..., Any] = whole
        arg: Any = only.value
    else:

        def leaves(wrt: list[list[Any]]) -> Any:
            return _unwrap(sel.function(*wrt), has_aux)[0]

        packed, arg = leaves, list(sel.diff)
    packed.__name__ = sel.function.__name__
    return jaxpr_graph(packed, arg, grad=True, values=True), None
