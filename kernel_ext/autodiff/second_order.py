"""Second derivatives: the Hessian and Hessian-vector products, forward over reverse,
and their check against second differences of the value.

``jax.hessian`` is ``jacfwd(jacrev(f))``: one JVP of the gradient per input element.
A Hessian-vector product needs one JVP of the gradient and never builds the Hessian.

The check (:func:`check_second_order`) must not use a derivative rule: differencing
``jax.grad`` would run the same rule that made the Hessian, and a wrong rule would pass.
It compares ``dᵀHd`` (Hessian) or ``dᵀHv`` (by polarization, ``(q(d+v) - q(d-v)) / 4``)
with second differences ``q(d) = (f(x+hd) - 2f(x) + f(x-hd)) / h²`` of the value alone,
with the exact steps, Richardson extrapolation and noise floor of
:mod:`jaxlab.autodiff.check`.

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

from . import differences as fd
from .args import GradError, Selection
from .check import (
    NOISE_SIGMAS,
    NOISE_SPACING,
    NOISE_ULPS,
    ArgCheck,
    Direction,
    GradCheck,
    compiled,
    tolerance_for,
)
from .derivative import CUSTOM_VJP_FORWARD, HESSIAN, HVP, Derivative, contract, primary, traced
from .noise import evaluation_noise

# Second differences divide by h²: a larger step keeps the function's rounding small.
STEP2 = {"float64": 1e-2, "float32": 5e-2, "float16": 1e-1, "bfloat16": 1e-1}


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
        # dᵀ(H·v) from the numbers reported: the check compares it with second
        # differences of the value along d ± v, which no derivative rule touches.
        return sum(
            jnp.vdot(t, h).real
            for ts, hs in zip(d, hv, strict=True)
            for t, h in zip(ts, hs, strict=True)
        )

    why = "forward-over-reverse (jax.jvp of jax.grad): one JVP of the gradient, no Hessian built"
    per_arg = [list(h) for h in hv]
    return Derivative(HVP, "forward-over-reverse", per_arg, apply, why=why, vector=tangents)


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


def check_second_order(
    sel: Selection,
    result: Derivative,
    has_aux: bool,
    directions: int,
    seed: int,
    tolerance: float | None,
) -> GradCheck:
    """The Hessian's (or HVP's) check against second differences of the value, along
    ``directions`` random unit directions per argument."""
    fun = primary(sel, has_aux)
    diff = sel.diff

    def value(x: list[list[Any]]) -> Any:
        return fun(*x)

    rng = np.random.default_rng(seed)
    evaluate, out0 = compiled(value, diff)  # once, for the many evaluations that follow
    f0, eps = fd.flat(out0), fd.eps_of(out0)
    leaves = [leaf for per in result.per_arg for leaf in jax.tree_util.tree_leaves(per)]
    tol = tolerance if tolerance is not None else tolerance_for(jnp.result_type(*leaves), 2)
    v_hat: list[list[np.ndarray]] | None = None
    if result.vector is not None:
        v_np = [[np.asarray(t, dtype=np.float64) for t in ts] for ts in result.vector]
        v_norm = float(np.sqrt(sum(np.sum(t**2) for ts in v_np for t in ts))) or 1.0
        v_hat = [[t / v_norm for t in ts] for ts in v_np]
    all_leaves = [x for xs in diff for x in xs]
    results = []
    for i, name in enumerate(sel.names):
        h = fd.step_for(all_leaves if v_hat else diff[i], STEP2)
        # One evaluation's rounding, measured (a cancelled sum is rounded as its terms
        # are, not as its value): the allowance never falls below it.
        near = fd.unit_direction(np.random.default_rng(seed + 1), diff, i)
        sigma = NOISE_SIGMAS * evaluation_noise(evaluate, diff, near, h * NOISE_SPACING, f0).sigma
        per_direction = []
        for _ in range(directions):
            d = fd.unit_direction(rng, diff, i)
            if v_hat is None:
                q_fd, q_ad = _quadratic(evaluate, diff, d, h, f0, eps, result.apply, sigma)
            else:
                dp, dm = fd.combine(d, v_hat, 1, 1), fd.combine(d, v_hat, 1, -1)
                plus, _ = _quadratic(evaluate, diff, dp, h, f0, eps, sigma=sigma)
                minus, _ = _quadratic(evaluate, diff, dm, h, f0, eps, sigma=sigma)
                q_fd = ((plus[0] - minus[0]) / 4, (plus[1] + minus[1]) / 4)
                q_ad = float(result.apply(fd.cast_like(d, diff))) / v_norm
            found = Direction.compare(np.array([q_fd[0]]), np.array([q_ad]), q_fd[1], tol)
            per_direction.append(found)
        results.append(ArgCheck.of(name, h, per_direction))
    return GradCheck(tuple(results), tol, directions, seed, dtype=fd.dtype_name(out0), order=2)


def _quadratic(
    value: Any,
    diff: list[list[Any]],
    direction: list[list[np.ndarray]],
    h: float,
    f0: np.ndarray,
    eps: float,
    apply: Any = None,
    sigma: float = 0.0,
) -> tuple[tuple[float, float], float]:
    """((dᵀHd by second differences, its noise), dᵀHd from ``apply``: H·d, or 0.0).
    ``sigma``: a bound on one evaluation's rounding, measured."""
    qs, ads, sizes = [], [], [abs(float(f0[0].real))]
    for s in (h, h / 2):
        delta = [
            [fd.exact_step(x, t, s) for x, t in zip(xs, ts, strict=True)]
            for xs, ts in zip(diff, direction, strict=True)
        ]
        fp = float(fd.flat(value(fd.shifted(diff, delta, 1.0)))[0].real)
        fm = float(fd.flat(value(fd.shifted(diff, delta, -1.0)))[0].real)
        qs.append((fp - 2 * float(f0[0].real) + fm) / s**2)
        sizes += [abs(fp), abs(fm)]
        if apply is not None:
            unit = fd.scaled(delta, s)
            hu = fd.flat(apply(fd.cast_like(unit, diff)))
            ads.append(float(np.vdot(fd.flat(unit), hu).real))
    # Richardson: (4 q(h/2) - q(h)) / 3; the noise of q(s) is 4 ε|f| / s².
    q = (4 * qs[1] - qs[0]) / 3
    noise = (68 / 3) * max(NOISE_ULPS * eps * max(sizes), sigma) / h**2
    ad = (4 * ads[1] - ads[0]) / 3 if ads else 0.0
    return (q, noise), ad
