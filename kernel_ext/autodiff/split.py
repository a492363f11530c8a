"""Reverse mode in three programs, the way JAX builds it: primal, linearized, transposed.

``jax.grad`` is not one transform but three steps. JAX linearizes the function (a JVP
split into the primal computation and a *linear* program of the tangents, which keeps
the forward values it needs: the residuals), then transposes the linear program (the
VJP: the same equations run backwards, cotangent in, cotangents out). ``%grad --split``
shows the three programs side by side:

1. **primal**: ``jax.make_jaxpr(f)``;
2. **linearized** (JVP): the linear function from ``jax.linearize(f, *x)``, its
   residuals as constants;
3. **transposed** (VJP): ``jax.linear_transpose`` of that function, which applied to
   the output cotangent 1.0 gives the gradient.

>>> split = grad_split(lambda x: jnp.sin(x) * x, 1.0)  # doctest: +SKIP
>>> split.n_residuals, split.apply_transposed()           # doctest: +SKIP
(2, [Array(1.3817732, dtype=float32)])
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from ..compile.capture import jaxlab_work
from ..graph.text import plain_text
from .args import GradError, select_arguments
from .display import graph_html

_TITLES = ("primal", "linearized (JVP)", "transposed (VJP)")
_EXPLAIN = (
    "what {name} computes, forward",
    "tangents in, tangent out; the forward values it needs (residuals) are constants",
    "the linear program run backwards: output cotangent in, input cotangents (the gradient) out",
)


@dataclass(frozen=True)
class GradSplit:
    """The primal, linearized and transposed programs of one function at one point."""

    fun_name: str
    names: tuple[str, ...]
    primal: Any  # ClosedJaxpr
    linear: Any  # ClosedJaxpr: tangents -> output tangent; residuals are its consts
    transposed: Any  # ClosedJaxpr: output cotangent -> input cotangents
    n_residuals: int
    out_shape: Any = field(compare=False, repr=False)  # ShapeDtypeStruct pytree
    leaf_names: tuple[str, ...] = ()  # each differentiated leaf: "x1", "params[0]['W']"

    @property
    def programs(self) -> tuple[Any, Any, Any]:
        return (self.primal, self.linear, self.transposed)

    def graphs(self) -> tuple[Any, Any, Any]:
        """The three programs as Graph models (titles say which is which)."""
        from ..graph.build import graph_from_jaxpr

        # Inputs and outputs by name (issue 11): x1 in the primal, its tangent dx1 in the
        # linearized program, the seed in and ∂f/∂x1 out of the transposed one.
        f, leaves = self.fun_name.strip("<>") or "f", list(self.leaf_names)
        one = self.primal is not None and len(self.primal.jaxpr.outvars) == 1
        names: list[tuple[list[str] | None, list[str] | None]] = [
            (leaves, [f] if one else None),
            ([f"d{n}" for n in leaves], [f"d{f}"] if one else None),
            (None, [f"∂{f}/∂{n}" for n in leaves]),
        ]
        if self.transposed is not None and len(self.transposed.jaxpr.invars) == 1:
            names[2] = ([f"∂{f}/∂{f} = 1"], names[2][1])
        return tuple(  # type: ignore[return-value]
            graph_from_jaxpr(p, title=f"{t}: {self.fun_name}", input_names=ins, output_names=outs)
            for p, t, (ins, outs) in zip(self.programs, _TITLES, names, strict=True)
        )

    def apply_transposed(self, cotangent: Any = None) -> list[Any]:
        """Run the transposed program on an output cotangent (default: ones): for a
        scalar function this is the gradient, flat, one entry per float input leaf."""
        if cotangent is None:
            cotangent = jax.tree_util.tree_map(lambda s: jnp.ones(s.shape, s.dtype), self.out_shape)
        fun = jax.extend.core.jaxpr_as_fun(self.transposed)
        return list(fun(*jax.tree_util.tree_leaves(cotangent)))

    def apply_linear(self, tangents: Sequence[Any]) -> list[Any]:
        """Run the linearized program on flat input tangents: the JVP."""
        return list(jax.extend.core.jaxpr_as_fun(self.linear)(*tangents))

    def text(self) -> str:
        parts = [
            f"reverse mode of {self.fun_name} w.r.t. {', '.join(self.names)} in three "
            f"programs ({_residuals(self.n_residuals)} kept from the forward pass)"
        ]
        for title, explain, program in zip(_TITLES, _EXPLAIN, self.programs, strict=True):
            parts.append(f"── {title}: {explain.format(name=self.fun_name)}\n{plain_text(program)}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self._html()}

    def _html(self) -> str:
        esc = html.escape
        columns = []
        try:
            graphs: Sequence[Any] = self.graphs()
        except Exception as e:  # the builder failed: the text of each program still shows
            graphs = [None, None, None]
            note = f"(graphs not built: {e})"
        else:
            note = ""
        for title, explain, program, graph in zip(
            _TITLES, _EXPLAIN, self.programs, graphs, strict=True
        ):
            body = (
                graph_html(graph) if graph is not None else f"<pre>{esc(plain_text(program))}</pre>"
            )
            explain = explain.format(name=self.fun_name)
            columns.append(
                '<div style="flex:1;min-width:0;overflow:auto;border:1px solid #ddd;'
                f'padding:4px"><b>{esc(title)}</b><br/><small>{esc(explain)}</small>'
                f"{body}</div>"
            )
        head = (
            f"<p>reverse mode of <code>{esc(self.fun_name)}</code> w.r.t. "
            f"{esc(', '.join(self.names))}: {_residuals(self.n_residuals)} kept from the "
            f"forward pass {esc(note)}</p>"
        )
        return (
            f'<div class="jaxlab-grad-split">{head}<div style="display:flex;gap:8px;'
            f'align-items:flex-start">{"".join(columns)}</div></div>'
        )


@jaxlab_work()
def _residuals(n: int) -> str:
    return f"{n} residual{'s' if n != 1 else ''}"


def grad_split(
    fun: Callable[..., Any],
    *args: Any,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
    **kwargs: Any,
) -> GradSplit:
    """The primal, linearized (JVP) and transposed (VJP) programs of ``fun`` at ``args``.

    Arguments are chosen as in :func:`jaxlab.grad_report` (``argnums`` or ``wrt``).
    """
    sel = select_arguments(fun, args, kwargs, argnums=argnums, wrt=wrt)
    diff = sel.diff
    primal, out_shape = jax.make_jaxpr(sel.function, return_shape=True)(*diff)
    out_leaves = jax.tree_util.tree_leaves(out_shape)
    if not all(jnp.issubdtype(s.dtype, jnp.inexact) for s in out_leaves):
        raise GradError(
            f"{sel.function.__name__} returns an integer or boolean result, which has no "
            "linearization: differentiate a float quantity"
        )
    _, linear_fun = jax.linearize(sel.function, *diff)
    tangents = [[jnp.zeros_like(jnp.asarray(x)) for x in leaves] for leaves in diff]
    linear = jax.make_jaxpr(linear_fun)(*tangents)
    transpose_fun = jax.linear_transpose(linear_fun, *tangents)
    cotangent = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)
    transposed = jax.make_jaxpr(transpose_fun)(cotangent)
    return GradSplit(
        fun_name=sel.function.__name__,
        names=sel.names,
        primal=primal,
        linear=linear,
        transposed=transposed,
        n_residuals=len(linear.consts),
        out_shape=out_shape,
        leaf_names=tuple(
            c.name + jax.tree_util.keystr(path)
            for c in sel.chosen
            for (path, _), d in zip(
                jax.tree_util.tree_flatten_with_path(c.value)[0], c.mask, strict=True
            )
            if d
        ),
    )
