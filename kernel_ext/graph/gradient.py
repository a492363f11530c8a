"""The gradient program of a call, drawn with the names the user knows.

``jax.grad(f)`` traced by itself loses names: arguments it does not differentiate are
closed over (drawn ``const 0``), its outputs are ``out0, out1 ...`` and the seed cotangent
is a bare literal ``1.0``. Here the program is traced as a function of *every* array
leaf of the call, so that each node a user can name is named by it:

* inputs by argument name and pytree path (``x1``, ``params[0]['W']``); the ones not
  differentiated stay inputs, marked ``fixed`` (greyed, no adjoint);
* the seed cotangent is the constant ``∂loss/∂loss = 1`` (the program's inputs stay the
  call's leaves, so its jaxpr runs as ``jax.grad``'s does);
* outputs are ``∂loss/∂x1``, ``∂loss/∂params[0]['W']`` ... in argument order.

The program is that of ``jax.vjp`` applied to the seed: what ``jax.grad`` runs, with the
seed made visible.

>>> g = gradient_graph(loss, (x, w), {}, wrt=[1])          # doctest: +SKIP
>>> [n.label for n in g.nodes if n.kind == "output"]        # doctest: +SKIP
['∂loss/∂w']
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..program.call import ProgramError
from . import model as m
from .annotate import annotate
from .arguments import argument_names, static_note
from .explore import then
from .from_jaxpr import graph_from_jaxpr
from .plan import DEFAULT_BUDGET
from .value_names import with_parameters


def leaf_names(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    """A name per leaf of ``(args, kwargs)`` in JAX's flattening order: ``x``,
    ``params[0]['W']``, ``model.layers[0].bias``; keyword arguments by their keyword."""
    positional: list[str] = []
    try:
        for p in inspect.signature(fun).parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                positional.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                break
    except (TypeError, ValueError):
        pass
    names = []
    for path, _ in jax.tree_util.tree_flatten_with_path((tuple(args), dict(kwargs)))[0]:
        where, key, rest = path[0], path[1], path[2:]
        if getattr(where, "idx", 0) == 0:
            i = int(getattr(key, "idx", 0))
            root = positional[i] if i < len(positional) else f"arg{i}"
        else:
            root = str(getattr(key, "key", key))
        names.append(root + jax.tree_util.keystr(tuple(rest)))
    return names


def _is_float(leaf: Any) -> bool:
    if isinstance(leaf, float | complex):
        return True
    dtype = getattr(leaf, "dtype", None)
    try:
        return dtype is not None and bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:  # a PRNG key's extended dtype
        return False


def differentiated_leaves(
    args: Sequence[Any],
    kwargs: dict[str, Any],
    wrt: Sequence[int | str],
    masks: dict[int | str, Sequence[bool]] | None = None,
) -> list[bool]:
    """Per leaf of ``(args, kwargs)``: is it differentiated? The float leaves of the
    arguments in ``wrt`` (positions or keywords), or ``masks[where]`` per leaf of one."""
    chosen = set(wrt)
    flags: list[bool] = []
    places: list[tuple[int | str, Any]] = [(i, a) for i, a in enumerate(args)]
    places += [(k, kwargs[k]) for k in sorted(kwargs)]  # JAX flattens a dict by sorted key
    for where, value in places:
        leaves = jax.tree_util.tree_leaves(value)
        if where not in chosen:
            flags += [False] * len(leaves)
        elif masks is not None and where in masks:
            flags += list(masks[where])
        else:
            flags += [_is_float(leaf) for leaf in leaves]
    return flags


def gradient_graph(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    wrt: Sequence[int | str] = (0,),
    masks: dict[int | str, Sequence[bool]] | None = None,
    values: bool = False,
    depth: int | None = None,
    budget: int | None = None,
    name: str | None = None,
    explore: bool = False,
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: dict[str, str | None] | None = None,
) -> m.Graph:
    """The graph of the gradient of ``fun(*args, **kwargs)`` (a scalar) with respect to
    the arguments ``wrt``, every node named (see the module docstring); given the call
    line's names of the arguments (``arg_names``, ``kwarg_names``), inputs and outputs are
    named as ``%jaxpr`` names them (``X``, ``∂f/∂X`` for ``f(X, Y)``), never by the
    function's parameters in one view and the caller's in another.

    ``masks[where]`` chooses, per leaf of one argument, which leaves are differentiated
    (as ``%grad`` does for a module's non-float settings); by default its float leaves.
    ``values`` annotates values and adjoints. ``explore`` returns the GraphExplorer's
    first view (see ``graph_from_jaxpr``); either way the Graph's ``rebuild`` draws the
    explorer's views with the same names, roles and annotations.
    """
    from ..program.static_leaves import split_static

    name = name or getattr(fun, "__name__", None) or type(fun).__name__
    if arg_names is not None and len(arg_names) == len(args):
        names = argument_names(fun, tuple(args), dict(kwargs), arg_names, kwarg_names)
    else:
        names = leaf_names(fun, args, kwargs)
    diff_all = differentiated_leaves(args, kwargs, wrt, masks)
    # Non-array leaves (an activation function) are held static; the rest keep their
    # names and flags, matched by identity as split_static keeps the same objects.
    split = split_static(fun, tuple(args), dict(kwargs))
    originals = jax.tree_util.tree_leaves((tuple(args), dict(kwargs)))
    flat, treedef = jax.tree_util.tree_flatten((split.args, split.kwargs))
    kept_names, diff = _keep(originals, names, diff_all, flat)
    own = _keep(originals, leaf_names(fun, args, kwargs), diff_all, flat)[0]  # fun's names
    if not any(diff):
        raise NothingToDifferentiate(
            f"{name}: none of the arguments chosen holds a float to differentiate "
            f"({_what_was_chosen(fun, args, kwargs, wrt)}); jax.grad differentiates with "
            "respect to float arrays only: pass floats (e.g. `3.0`, `x.astype(float)`), or "
            "draw the program without --grad"
        )
    positions = [k for k, d in enumerate(diff) if d]

    def full(leaves: Sequence[Any]) -> Any:
        a, kw = jax.tree_util.tree_unflatten(treedef, list(leaves))
        return split.fun(*a, **kw)

    # The seed is closed over, so the program's inputs stay the call's leaves (its jaxpr
    # runs as jax.grad's would); JAX keeps it as a constant, drawn ∂loss/∂loss = 1. It is
    # made while tracing, once the output's dtype is known: a jax.eval_shape first would
    # trace the function a second time (0.4 s of a 10,000-equation program).
    seeds: list[Any] = []

    def program(*leaves: Any) -> Any:
        def of_chosen(chosen: list[Any]) -> Any:
            mixed = list(leaves)
            for k, v in zip(positions, chosen, strict=True):
                mixed[k] = v
            return full(mixed)

        out, pullback = jax.vjp(of_chosen, [leaves[k] for k in positions])
        if not hasattr(out, "shape"):  # a tuple, a model: several things, not one number
            raise NotAScalar(
                f"{name} returns {_returned(out)}, not a float scalar: --grad draws the "
                "program of jax.grad, which differentiates one number; draw the gradient "
                "of the scalar it computes (its loss), or this function without --grad"
            )
        if not (out.shape == () and jnp.issubdtype(out.dtype, jnp.inexact)):
            raise _NotScalar(_returned(out))
        with jax.ensure_compile_time_eval():
            seeds.append(jnp.ones((), out.dtype))
        (grads,) = pullback(seeds[-1])
        return grads

    try:
        closed = jax.make_jaxpr(program)(*flat)
    except _NotScalar as e:
        # JAX's own error ("Gradient only defined for scalar-output functions"), raised in
        # JAX so that the magic reports it as the user's program's, not jaxlab's.
        jax.grad(full)(flat)
        raise TypeError(
            f"{name} must return a float scalar to draw its gradient graph (it returns "
            f"{e.args[0]}): draw the gradient of the scalar it computes, e.g. its loss"
        ) from None
    seed = seeds[-1]
    fname = name.strip("<>") or "f"
    input_names = list(kept_names)
    output_names = [f"∂{fname}/∂{kept_names[k]}" for k in positions]
    drawn = graph_from_jaxpr(
        closed,
        title=f"grad({name})",
        grad=True,
        depth=depth,
        budget=budget or DEFAULT_BUDGET,
        input_names=input_names,
        output_names=output_names,
        explore=explore,
    )
    fixed = {f"in{k}" for k, d in enumerate(diff) if not d}
    seed_id = next((f"c{k}" for k, c in enumerate(closed.consts) if c is seed), None)

    def named(graph: m.Graph) -> m.Graph:
        """``graph`` (this program's drawing or an explorer's view) with the names, roles,
        notes and annotations of the gradient."""
        nodes = tuple(
            dataclasses.replace(n, role=m.FIXED)
            if n.id in fixed
            else dataclasses.replace(n, role=m.SEED, label=f"∂{fname}/∂{fname} = 1")
            if n.id == seed_id
            else n
            for n in graph.nodes
        )
        graph = with_parameters(dataclasses.replace(graph, nodes=nodes), kept_names, own, name)
        if split.changed:
            note = static_note(split.static_paths)
            graph = dataclasses.replace(graph, notes=(*graph.notes, note))
        if values:

            def primal(*leaves: Any) -> Any:
                return full(leaves)

            graph = annotate(graph, tuple(flat), {}, grad=True, fun=primal)
        return graph

    return then(drawn, named)  # the explorer's views named as this drawing is


class NothingToDifferentiate(ProgramError):
    """The arguments chosen hold no float leaf: the user's input, said with the fix."""


def _what_was_chosen(
    fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], wrt: Sequence[int | str]
) -> str:
    """``"`n` is int 3"``: each chosen argument, by name, with what it holds."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    said = []
    for where in wrt:
        if isinstance(where, int) and where < len(args):
            name = params[where] if where < len(params) else f"argument {where}"
            value = args[where]
        elif isinstance(where, str) and where in kwargs:
            name, value = where, kwargs[where]
        else:
            continue
        said.append(f"`{name}` is {_kind(value)}")
    return "; ".join(said) or "nothing chosen"


def _kind(value: Any) -> str:
    """``int32[3]``, ``the int 3``, ``a dict of int32[2], bool[]``: what a value holds."""
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, bool | int | float | complex):
        return f"the {type(value).__name__} {value!r}"
    leaves = jax.tree_util.tree_leaves(value)
    kinds = sorted({_kind(x) if hasattr(x, "dtype") else type(x).__name__ for x in leaves})
    return f"a {type(value).__name__} of {', '.join(kinds[:4]) or 'nothing'}"


def _returned(out: Any) -> str:
    """``f32[3]`` or ``a tuple of 9 arrays``: what a non-scalar output is."""
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return str(jax.ShapeDtypeStruct(out.shape, out.dtype))
    leaves = jax.tree_util.tree_leaves(out)
    return f"a {type(out).__name__} of {len(leaves)} array{'s' if len(leaves) != 1 else ''}"


class NotAScalar(ProgramError):
    """The function returns a pytree (a training step's tuple): no gradient to draw."""


class _NotScalar(Exception):
    """Raised while tracing when the function's output is not a float scalar."""


def _keep(
    originals: list[Any], names: list[str], diff: list[bool], kept: list[Any]
) -> tuple[list[str], list[bool]]:
    """Names and flags of the leaves split_static kept (the same objects, in order)."""
    if len(originals) == len(kept):
        return names, diff
    out_names, out_diff = [], []
    j = 0
    for leaf, n, d in zip(originals, names, diff, strict=True):
        if j < len(kept) and kept[j] is leaf:
            out_names.append(n)
            out_diff.append(d)
            j += 1
    if j != len(kept):  # could not match: plain positions rather than wrong names
        return [f"in{k}" for k in range(len(kept))], [_is_float(x) for x in kept]
    return out_names, out_diff
