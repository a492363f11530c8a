"""A call's arguments named as the call line names them, and the note of what was held
static: ``x``, ``params['w']``, ``layers[0].b``; ``held static (not arrays): model.act``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

__all__ = ["argument_names", "static_note"]


def static_note(
    paths: tuple[str, ...], most: int = 4, held: str = "held static (not arrays)"
) -> str:
    """``"held static (not arrays): model.activation, ..."``, the first few paths named."""
    shown = ", ".join(paths[:most]) + (
        f" and {len(paths) - most} more" if len(paths) > most else ""
    )
    return f"{held}: {shown}"


def argument_names(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: Mapping[str, str | None] | None = None,
) -> list[str]:
    """A readable name for every flattened input leaf: ``x``, ``params['w']``, ``layers[0].b``.

    Given the call line's names of the arguments (``arg_names``, one per positional
    argument, and ``kwarg_names``), each argument is named as the caller wrote it, since
    the parameter names ``inspect.signature`` finds may be those of a function nested
    inside ``fun`` (a ``shard_map``'s per-device ``block``, a ``jit``'s inner ``a``); an
    argument written as an expression takes its parameter's name.
    """
    if arg_names is not None and len(arg_names) == len(args):
        return _caller_names(fun, args, kwargs, arg_names, kwarg_names or {})
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        named = list(bound.arguments.items())
    except (TypeError, ValueError):
        named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    names: list[str] = []
    for arg_name, value in named:
        leaves = jax.tree_util.tree_flatten_with_path(value)[0]
        for path, _ in leaves:
            names.append(arg_name + jax.tree_util.keystr(path))
    return names


def _caller_names(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None],
    kwarg_names: Mapping[str, str | None],
) -> list[str]:
    # The leaves in the order JAX flattens ``(args, kwargs)``: positional arguments, then
    # keywords sorted (a dict's pytree order).
    positional = _positional_parameters(fun, len(args))
    named = [
        (given or positional[i], a)
        for i, (given, a) in enumerate(zip(arg_names, args, strict=True))
    ]
    named += [(kwarg_names.get(k) or k, kwargs[k]) for k in sorted(kwargs)]
    return [
        arg_name + jax.tree_util.keystr(path)
        for arg_name, value in named
        for path, _ in jax.tree_util.tree_flatten_with_path(value)[0]
    ]


def _positional_parameters(fun: Callable[..., Any], n: int) -> list[str]:
    """The parameter name each of ``n`` positional arguments binds to (``args[1]`` for the
    second of ``*args``; ``arg2`` where the signature says nothing)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    found: list[str] = []
    for p in params:
        if len(found) == n:
            break
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            found += [f"{p.name}[{j}]" for j in range(n - len(found))]
        elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            found.append(p.name)
    return found + [f"arg{i}" for i in range(len(found), n)]
