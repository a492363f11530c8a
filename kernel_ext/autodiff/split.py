"""Reverse mode in three programs, the way JAX builds it: primal, linearized, transposed.

``jax.grad`` is not one transform but three steps. JAX linearizes the function (a JVP
split into the primal computation and a *linear* program of the tangents, which keeps
the forward values it needs: the residuals), then transposes the linear program (the
VJP: the same equations run backwards, cotangent in, cotangents out). ``%grad --split``
shows the three programs one under the other, each at full width:

1. **primal**: ``jax.make_jaxpr(f)``;
2. **linearized** (JVP): the linear function from ``jax.linearize(f, *x)``, its
   residuals as constants, numbered ``r1``, ``r2``...;
3. **transposed** (VJP): ``jax.linear_transpose`` of that function, which applied to
   the output cotangent 1.0 gives the gradient.

Each residual carries a coloured badge, and the primal node that computed the same value
carries the same badge (:mod:`jaxlab.autodiff.residuals` finds it); a residual computed
only for the derivative (``cos(x)`` for ``sin``) is said to be so in the legend, and one
from literals alone (the ``2.0`` of ``2 * x``) is called a constant. An argument not
differentiated stays a value of its own (a Python float as an array), drawn as the primal's
input by its name and held fixed, never folded into the equations (``sin 1.0``).

>>> split = grad_split(lambda x: jnp.sin(x) * x, jnp.float32(1.0))  # doctest: +SKIP
>>> split.n_residuals, split.apply_transposed()                      # doctest: +SKIP
(3, [Array(1.3817732, dtype=float32)])
>>> [r.text() for r in split.residuals][1]                           # doctest: +SKIP
'r2 = cos(x) f32[] (b in the printout): computed for the derivative, not by the primal program'
"""

from __future__ import annotations

import dataclasses
import html
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..graph.text import plain_text
from ..session.work import jaxlab_work
from .args import GradError, select_arguments
from .residuals import Residual, const_names, find_residuals, traced_linearize
from .split_drawing import CUE_STYLE, drawing, fit, scroll_cue

_TITLES = ("primal", "linearized (JVP)", "transposed (VJP)")
_EXPLAIN = (
    "what {name} computes, forward",
    "tangents in, tangent out; the forward values it needs (residuals r1, r2, ...) are "
    "its constants",
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
    residuals: tuple[Residual, ...] = ()  # the linear program's constants, in order
    const_names: tuple[str, ...] = ()  # the primal's constants that are arguments ("x")

    @property
    def programs(self) -> tuple[Any, Any, Any]:
        return (self.primal, self.linear, self.transposed)

    def graphs(self) -> tuple[Any, Any, Any]:
        """The three programs as Graph models (titles say which is which), residuals
        badged ``r1``... in the linearized and transposed programs and on their producers."""
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
        primal, linear, transposed = (
            graph_from_jaxpr(p, title=f"{t}: {self.fun_name}", input_names=ins, output_names=outs)
            for p, t, (ins, outs) in zip(self.programs, _TITLES, names, strict=True)
        )
        return (
            self._badge_primal(primal),
            self._badge_consts(linear, self.linear.consts),
            self._badge_consts(transposed, self.transposed.consts),
        )

    def _badge_primal(self, graph: Any) -> Any:
        """The primal graph with its argument constants named and each residual's
        producer badged (a node inside a collapsed program: the collapsed node)."""
        from ..graph import model as m

        ids = {n.id for n in graph.nodes}
        tags: dict[str, list[str]] = {}
        for r in self.residuals:
            node = _drawn(r.producer, ids) if r.producer else None
            if node is not None:
                tags.setdefault(node, []).append(r.name)
        named = {f"c{k}": name for k, name in enumerate(self.const_names) if name}
        nodes = []
        for n in graph.nodes:
            if n.id in named and n.kind == m.CONST:  # an argument held fixed: an input
                n = dataclasses.replace(n, label=named[n.id], role=m.FIXED, kind=m.INPUT)
            if n.id in tags:
                n = dataclasses.replace(n, tag=",".join(tags[n.id]))
            nodes.append(n)
        linked = [r.name for r in self.residuals if r.producer]
        notes = graph.notes
        if linked:
            notes += (f"badges {', '.join(linked)}: values the linearized program keeps",)
        graph = dataclasses.replace(graph, nodes=tuple(nodes), notes=notes)
        return _residual_operands(graph, named)  # x @ W where x is held fixed

    def _badge_consts(self, graph: Any, consts: Sequence[Any]) -> Any:
        """A program holding the residuals (the same arrays): its constants badged."""
        by_id = {id(c): r for c, r in zip(self.linear.consts, self.residuals, strict=False)}
        tagged = {f"c{k}": by_id[id(c)] for k, c in enumerate(consts) if id(c) in by_id}
        nodes = tuple(
            dataclasses.replace(n, label=_short_label(tagged[n.id]), tag=tagged[n.id].name)
            if n.id in tagged and n.cluster is None
            else n
            for n in graph.nodes
        )
        graph = dataclasses.replace(graph, nodes=nodes)
        return _residual_operands(graph, {k: _operand_name(r) for k, r in tagged.items()})

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

    def legend(self) -> list[str]:
        """One line per residual: ``r2 = cos(x) f32[]: computed for the derivative...``."""
        return [r.text() for r in self.residuals]

    def text(self) -> str:
        parts = [
            f"reverse mode of {self.fun_name} w.r.t. {', '.join(self.names)} in three "
            f"programs ({_residuals(self.n_residuals)} kept from the forward pass)"
        ]
        if self.residuals:
            parts.append("residuals, the linearized program's constants:")
            parts += [f"  {line}" for line in self.legend()]
        for title, explain, program in zip(_TITLES, _EXPLAIN, self.programs, strict=True):
            parts.append(f"── {title}: {explain.format(name=self.fun_name)}\n{plain_text(program)}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self._html()}

    def _html(self) -> str:
        esc = html.escape
        try:
            graphs: Sequence[Any] = self.graphs()
        except Exception as e:  # the builder failed: the text of each program still shows
            graphs = [None, None, None]
            note = f"(graphs not built: {e})"
        else:
            note = ""
        sections = []
        for title, explain, program, graph in zip(
            _TITLES, _EXPLAIN, self.programs, graphs, strict=True
        ):
            body = (
                fit(drawing(graph))
                if graph is not None
                else f"<pre>{esc(plain_text(program))}</pre>"
            )
            explain = explain.format(name=self.fun_name)
            body = scroll_cue(body) + body
            # One program under the other, each at the output's full width (issue 11).
            sections.append(
                '<section class="jaxlab-split-program" style="margin:10px 0 0;'
                'padding-top:6px;border-top:1px solid #9a9a9a80">'
                f'<div style="font-size:15px;font-weight:bold">{esc(title)}: '
                f"<code>{esc(self.fun_name)}</code></div>"
                f'<div style="font-size:13px;margin-bottom:4px">{esc(explain)}</div>'
                f'<div style="overflow-x:auto">{body}</div></section>'
            )
        head = (
            f'<p style="font-size:13px">reverse mode of <code>{esc(self.fun_name)}</code> '
            f"w.r.t. {esc(', '.join(self.names))}: {_residuals(self.n_residuals)} kept from "
            f"the forward pass {esc(note)}</p>"
        )
        return (
            f'<div class="jaxlab-grad-split">{CUE_STYLE}{head}{self._legend_html()}'
            f"{''.join(sections)}</div>"
        )

    def _legend_html(self) -> str:
        """The residuals as a list: badge, expression, type and where each comes from."""
        from ..graph.render import tag_colour

        if not self.residuals:
            return ""
        esc = html.escape
        rows = []
        for r in self.residuals:
            badge = (
                f'<span style="background:{tag_colour(r.name)};color:#ffffff;'
                'font-weight:bold;border-radius:3px;padding:0 4px">'
                f"{esc(r.name)}</span>"
            )
            code = f" = <code>{esc(r.expression)}</code>" if r.expression else ""
            rows.append(f"<li>{badge}{code} {esc(r.type)}: {esc(r.origin())}</li>")
        return (
            '<div class="jaxlab-split-residuals" style="font-size:13px">residuals, the '
            "linearized program's constants (the primal node with the same badge computed "
            f'the same value):<ul style="margin:2px 0">{"".join(rows)}</ul></div>'
        )


def _short_label(r: Residual) -> str:
    """A residual's node: its badge and a short expression (``r2 = cos(x)``); a long one
    is said once, in the residuals' list, so the drawing stays narrow (issue 34)."""
    return r.label if len(r.short or "") <= 8 else r.name


def _operand_name(r: Residual) -> str:
    """What an equation reading residual ``r`` calls it: the input it keeps (``x``), its
    expression where short (``cos(x)``), else its badge (``r2``)."""
    if r.kept_input and r.producer_label.startswith(("input ", "argument ")):
        return r.producer_label.split(" ", 1)[1]
    return r.short if r.short and len(r.short) <= 14 else r.name


def _residual_operands(graph: Any, names: dict[str, str]) -> Any:
    """``graph`` with the labels of the equations that read a named constant naming it
    (a residual: ``r2 @ dx`` where the drawing said ``· @ dx``; an argument held fixed):
    the constants are named after the program is drawn, so those labels are written
    again with their names."""
    from jax.extend.core import Literal

    from ..graph import model as m
    from ..graph.labels import friendly_label

    if not names or graph.jaxpr is None:
        return graph
    jaxpr = graph.jaxpr.jaxpr
    node_of = graph.var_node
    label_of = {n.id: n.label for n in graph.nodes}
    known: dict[Any, str] = {
        v: names[f"c{k}"] for k, v in enumerate(jaxpr.constvars) if f"c{k}" in names
    }
    known.update(
        (v, label_of[node_of[v]])
        for v in jaxpr.invars
        if v in node_of and graph.node(node_of[v]).kind == m.INPUT
    )
    relabel: dict[str, str] = {}
    for eqn in jaxpr.eqns:
        if not any(v in known for v in eqn.invars if not isinstance(v, Literal)):
            continue
        node_id = node_of.get(eqn.outvars[0]) if eqn.outvars else None
        old = label_of.get(node_id or "", "")
        new = friendly_label(
            str(eqn.primitive.name),
            eqn.params,
            [v.aval for v in eqn.invars],
            [None if isinstance(v, Literal) else known.get(v) for v in eqn.invars],
        )
        if node_id and new and new.count("·") < old.count("·"):
            relabel[node_id] = new
    nodes = tuple(
        dataclasses.replace(n, label=relabel[n.id]) if n.id in relabel else n for n in graph.nodes
    )
    return dataclasses.replace(graph, nodes=nodes)


def _residuals(n: int) -> str:
    return f"{n} residual{'s' if n != 1 else ''}"


def _drawn(node_id: str, ids: set[str]) -> str | None:
    """The drawn node showing ``node_id``: itself, else the collapsed program around it."""
    parts = node_id.split("/")
    for k in range(len(parts), 0, -1):
        if "/".join(parts[:k]) in ids:
            return "/".join(parts[:k])
    return None


def _named_leaves(
    fun: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    caller: Callable[[int | str, str], str] = lambda where, name: name,
) -> list[tuple[str, Any]]:
    """Every leaf of the call with its name, ``x`` or ``batch['y']``, as Python binds it
    (``caller``: the name the call line gives the argument at a position or keyword)."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs).arguments
        named, position = [], 0
        for name, value in bound.items():
            if name in kwargs:
                named.append((caller(name, name), value))
            elif position < len(args) and value is args[position]:
                named.append((caller(position, name), value))
                position += 1
            else:  # *args gathered into one tuple: its parameter's name
                named.append((name, value))
    except (TypeError, ValueError):
        named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    return [
        (name + jax.tree_util.keystr(path), leaf)
        for name, value in named
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]
    ]


def _as_arrays(tree: Any) -> Any:
    """``tree`` with each Python or NumPy float or complex scalar an array (weakly typed,
    as JAX types a Python number), so that tracing keeps it a constant of its own rather
    than folding it into the equations; integers and booleans stay as they are (a loop
    count, a flag)."""

    def array(leaf: Any) -> Any:
        if isinstance(leaf, (bool, int)) or not isinstance(
            leaf, (float, complex, np.floating, np.complexfloating)
        ):
            return leaf
        return jnp.asarray(leaf)

    return jax.tree_util.tree_map(array, tree)


def grad_split(
    fun: Callable[..., Any],
    *args: Any,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
    **kwargs: Any,
) -> GradSplit:
    """The primal, linearized (JVP) and transposed (VJP) programs of ``fun`` at ``args``.

    Arguments are chosen as in :func:`jaxlab.grad_report` (``argnums`` or ``wrt``).
    Runs the function's forward pass twice (jaxlab's interpreter, equation by equation)
    to find which primal value each residual is.
    """
    return split_for_call(fun, args, kwargs, argnums=argnums, wrt=wrt)


@jaxlab_work()  # its tangents and cotangents are made eagerly: jaxlab's compilations
def split_for_call(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: dict[str, str | None] | None = None,
) -> GradSplit:
    """:func:`grad_split` of a call, its arguments named as the call line names them
    (``arg_names``, ``kwarg_names``: ``%grad --split f(X, Y)`` says ``X``, as ``%jaxpr``
    does); an argument written as an expression keeps its parameter's name."""

    def caller(where: int | str, name: str) -> str:
        if isinstance(where, int) and arg_names is not None and where < len(arg_names):
            return arg_names[where] or name
        if isinstance(where, str) and kwarg_names is not None:
            return kwarg_names.get(where) or name
        return name

    # A Python number would be folded into the programs (theta = 0.5 drawn as `sin 1.0`):
    # as an array it stays a value of its own, the argument theta, named and held fixed.
    # Only arguments not differentiated: a float leaf of a chosen one (a pooling layer's
    # -inf) stays a fixed leaf, as select_arguments holds it.
    chosen = {c.where for c in select_arguments(fun, args, kwargs, argnums=argnums, wrt=wrt).chosen}
    args = tuple(a if i in chosen else _as_arrays(a) for i, a in enumerate(args))
    kwargs = {k: a if k in chosen else _as_arrays(a) for k, a in kwargs.items()}
    sel = select_arguments(fun, args, kwargs, argnums=argnums, wrt=wrt)
    diff = sel.diff
    primal, out_shape = jax.make_jaxpr(sel.function, return_shape=True)(*diff)
    out_leaves = jax.tree_util.tree_leaves(out_shape)
    if not out_leaves:  # as %grad says: three programs of nothing would explain nothing
        raise GradError(
            f"{sel.function.__name__} returns no array: there is nothing to differentiate"
        )
    if not all(jnp.issubdtype(s.dtype, jnp.inexact) for s in out_leaves):
        raise GradError(
            f"{sel.function.__name__} returns an integer or boolean result, which has no "
            "linearization: differentiate a float quantity"
        )
    lin = traced_linearize(sel.function, diff)
    tangents = [[jnp.zeros_like(jnp.asarray(x)) for x in leaves] for leaves in diff]
    linear = jax.make_jaxpr(lin.fun)(*tangents)
    transpose_fun = jax.linear_transpose(lin.fun, *tangents)
    cotangent = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)
    transposed = jax.make_jaxpr(transpose_fun)(cotangent)
    leaf_names = tuple(
        caller(c.where, c.name) + jax.tree_util.keystr(path)
        for c in sel.chosen
        for (path, _), d in zip(
            jax.tree_util.tree_flatten_with_path(c.value)[0], c.mask, strict=True
        )
        if d
    )
    # The call's other leaves (data, fixed settings) are the primal's captured constants.
    consts = tuple(const_names(primal.consts, _named_leaves(fun, args, kwargs, caller)))
    flat = [leaf for leaves in diff for leaf in leaves]
    return GradSplit(
        fun_name=sel.function.__name__,
        names=tuple(caller(c.where, c.name) for c in sel.chosen) or sel.names,
        primal=primal,
        linear=linear,
        transposed=transposed,
        n_residuals=len(linear.consts),
        out_shape=out_shape,
        leaf_names=leaf_names,
        residuals=find_residuals(primal, flat, linear, lin, leaf_names, consts, plain_text(linear)),
        const_names=consts,
    )
