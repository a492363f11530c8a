"""``%%grad``'s twin: differentiate a notebook cell's final expression.

The cell is analysed into a function of the notebook variables it reads
(:func:`jaxlab.program.analyse_cell`); its last expression must be a scalar (or, with
``jacobian=True``, any float array). The derivative is taken with respect to the names
given, or by default every float array the cell reads. Nothing is written anywhere:
the result says what the cell assigns and what ``%%grad`` stores (``grad_<name>`` for
each name and ``_grad`` for the report), and the magic applies it only on success.

>>> ns = {"jnp": jnp, "w": jnp.ones(3)}                                  # doctest: +SKIP
>>> cg = grad_cell("y = w * 2\\n(y ** 2).sum()", ns)                       # doctest: +SKIP
>>> sorted(cg.updates())                                                   # doctest: +SKIP
['_grad', 'grad_w', 'y']
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from ..program import analyse_cell
from ..program.guard import guarded, refuse_unfit, refuse_writes
from .args import GradError, is_float_leaf, parse_names
from .report import GradReport, report_for_call


@dataclass(frozen=True)
class CellGrad:
    """The report of one ``%%grad`` cell and the names it would set."""

    report: GradReport
    assignments: Mapping[str, Any]  # what the cell itself assigns, as a normal run would

    def stored(self) -> dict[str, Any]:
        """What ``%%grad`` adds besides the cell's own assignments."""
        found = {f"grad_{name}": self.report.grads[name] for name in self.report.names}
        found["_grad"] = self.report
        return found

    def updates(self) -> dict[str, Any]:
        return {**self.assignments, **self.stored()}


def _float_array_tree(value: Any) -> bool:
    """A float array, or a pytree (dict, list, module) whose leaves are all float arrays."""
    if (
        inspect.ismodule(value)
        or inspect.isclass(value)
        or (callable(value) and not hasattr(value, "__dataclass_fields__"))
    ):
        return False
    leaves = jax.tree_util.tree_leaves(value)
    return bool(leaves) and all(is_float_leaf(leaf) and hasattr(leaf, "shape") for leaf in leaves)


def _names(wrt: str | Sequence[str] | None) -> list[str] | None:
    if wrt is None:
        return None
    names = parse_names(wrt, noun="variable")
    for name in names:
        if not name.isidentifier():
            raise GradError(f"`--wrt {name}`: `{name}` is not a variable name")
    return names


def grad_cell(
    source: str,
    namespace: dict[str, Any],
    *,
    wrt: str | Sequence[str] | None = None,
    jacobian: bool = False,
    check: bool = False,
    mode: str | None = None,
    graph: bool = False,
    directions: int = 2,
    seed: int = 0,
) -> CellGrad:
    """Differentiate the cell ``source``'s final expression with respect to notebook
    variables (``wrt``, default: every float array it reads) in ``namespace``."""
    program = analyse_cell(source)
    refuse_unfit(program)
    if program.final is None:
        raise GradError(
            "the cell has no final expression: end it with the scalar to differentiate, "
            "e.g. `loss(params, x)` on its last line"
        )
    names = _names(wrt)
    if names is None:
        names = [n for n in program.inputs if n in namespace and _float_array_tree(namespace[n])]
        if not names:
            reads = ", ".join(f"`{n}`" for n in program.inputs if n in namespace) or "nothing"
            raise GradError(
                f"the cell reads no float arrays from the notebook (it reads {reads}): name "
                "what to differentiate with --wrt"
            )
    for name in names:
        if name not in namespace:
            raise GradError(f"`--wrt {name}`: `{name}` is not defined in the notebook")
        if name not in program.inputs:
            if name in program.outputs:
                raise GradError(
                    f"`--wrt {name}`: the cell assigns `{name}` before reading it, so its "
                    f"result does not depend on the notebook's `{name}`"
                )
            raise GradError(
                f"`--wrt {name}`: the cell does not read `{name}`, so its gradient would "
                "be zero; name a variable the cell uses"
            )
    # Every input the notebook holds is a parameter (those not differentiated are fixed),
    # and the globals are a copy: whatever the cell assigns stays in the function, and
    # the magic writes it back once everything succeeded.
    fixed = {n: namespace[n] for n in program.inputs if n in namespace and n not in names}
    refuse_writes(program, {n: namespace[n] for n in program.inputs if n in namespace})
    params = tuple(n for n in program.inputs if n in namespace)
    cell_fn = program.function(params, dict(namespace))

    def cell(*values: Any) -> tuple[Any, dict[str, Any]]:
        given = dict(zip(names, values, strict=True))
        outputs, final = cell_fn(*(given[n] if n in given else fixed[n] for n in params))
        return final, outputs

    cell.__name__ = "the cell"
    cell.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )
    with guarded(fixed):  # a change through an alias the analysis cannot see
        report = report_for_call(
            cell,
            [namespace[n] for n in names],
            {},
            wrt=names,
            has_aux=True,
            check=check,
            mode=mode,
            jacobian=jacobian,
            graph=graph,
            directions=directions,
            seed=seed,
        )
    assignments = dict(report.aux or {})
    return CellGrad(report, assignments)
