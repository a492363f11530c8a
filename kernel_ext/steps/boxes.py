"""Nested programs as steps: a scan's body stepped iteration by iteration (up to a limit),
and a ``custom_vjp``'s backward rule, inlined by JAX into the transposed program, gathered
into one step that names the user's rule (its equations kept as the step's substeps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.extend import core as jcore

from ..graph.port_names import position
from ..program.static_leaves import split_static
from .record import BACKWARD, Step, short

__all__ = ["ITERATIONS", "custom_rules", "gather_custom", "scan_runs"]

ITERATIONS = 5  # a scan's iterations stepped one by one; the rest said in a note


def scan_runs(ev: Any) -> list[tuple[int, int, int, bool]]:
    """Runs of consecutive evaluation steps inside one scan body run per iteration:
    (first, end, length, reverse)."""
    runs: list[tuple[int, int, int, bool]] = []
    k = 0
    steps = ev.steps
    while k < len(steps):
        st = steps[k]
        stacked = [s for s in st.outputs if s in ev.iterations]
        if not stacked or "/" not in st.node_id:
            k += 1
            continue
        prefix = st.node_id.rsplit("/", 1)[0] + "/"
        end = k
        while end < len(steps) and steps[end].node_id.startswith(prefix):
            end += 1
        scan = next((s for s in steps[end:] if s.node_id == prefix[:-1]), None)
        reverse = bool(scan.eqn.params.get("reverse", False)) if scan is not None else False
        runs.append((k, end, ev.iterations[stacked[0]], reverse))
        k = end
    return runs


def custom_rules(
    fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> dict[tuple[str, int, int], str]:
    """Where the primal program calls a ``custom_vjp`` (file, line, column) -> the name
    of the user's backward rule."""
    split = split_static(fun, tuple(args), dict(kwargs))
    try:
        closed = jax.make_jaxpr(split.fun)(*split.args, **split.kwargs)
    except Exception:  # traced already by the gradient: a failure here names nothing
        return {}
    found: dict[tuple[str, int, int], str] = {}

    def visit(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("custom_vjp_call", "custom_vjp_call_jaxpr"):
                bwd = eqn.params.get("bwd")
                rule = getattr(getattr(bwd, "f", bwd), "__name__", None) or "bwd"
                where = position(eqn)
                if where is not None:
                    found[where] = rule
            for sub in jcore.jaxprs_in_params(eqn.params):
                visit(sub)

    visit(closed.jaxpr)
    return found


def gather_custom(
    steps: list[Step], where: list[Any], rules: dict[tuple[str, int, int], str]
) -> list[Step]:
    """Backward steps written at a custom_vjp's call (its rule's equations) gathered into
    one step: the cotangent arriving, the rule by name, the cotangent leaving."""
    if not rules:
        return steps
    out: list[Step] = []
    k = 0
    while k < len(steps):
        st = steps[k]
        rule = rules.get(where[k]) if st.kind == BACKWARD else None
        if rule is None:
            out.append(st)
            k += 1
            continue
        end = k
        while end < len(steps) and steps[end].kind == BACKWARD and where[end] == where[k]:
            end += 1
        group = steps[k:end]
        made = {n for s in group for n in s.names_out}
        arriving = [
            (n, v)
            for s in group
            for n, v in zip(s.names_in, s.operands, strict=False)
            if n not in made and _is_cotangent(n)
        ]
        last = group[-1]
        ct_names = ", ".join(dict.fromkeys(n for n, _ in arriving)) or "·"
        lhs = ", ".join(last.names_out)
        result = ", ".join(short(v) for v in last.cotangent_out)
        numbers = ", ".join(short(v) for _, v in dict(arriving).items())
        out.append(
            Step(
                index=0,
                kind=BACKWARD,
                equation=f"custom_vjp rule {rule}",
                rule=f"{lhs} = {rule}(residuals, {ct_names})  (your custom_vjp rule)",
                text=f"{lhs} = {rule}(residuals, {numbers}) = {result}",
                node=st.node,
                box=list(st.box),
                primitive="custom_vjp",
                cotangent_in=[v for _, v in dict(arriving).items()],
                cotangent_out=list(last.cotangent_out),
                values_in=[v for s in group for v in s.values_in],
                names_in=list(dict(arriving)),
                names_out=list(last.names_out),
                operands=[v for _, v in arriving],
                of=group[0].of,
                substeps=group,
                source=st.source,
            )
        )
        k = end
    return out


def _is_cotangent(name: str) -> bool:
    return (
        name.startswith("∂")
        or "\u0304" in name
        or any(ch in name for ch in "āēīōūȳǖ")
        or name.startswith("δ")
    )
