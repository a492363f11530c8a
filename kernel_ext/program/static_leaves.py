"""Split a call's arguments into the arrays JAX traces and the rest, held static.

Plain JAX refuses a call whose arguments hold anything but arrays and numbers: an equinox
module keeps its activation function as a leaf, a flax nnx model may keep callables.
``eqx.filter_jit`` answers by partitioning: array leaves are traced, every other leaf is
closed over as a constant. ``split_static`` does the same for every magic, so a call that
works under ``%grad`` also works under ``%jaxpr``, ``%jaxpr --grad`` and ``%jit``::

    split = split_static(loss, (model, x), {})
    jax.make_jaxpr(split.fun)(*split.args, **split.kwargs)   # model's arrays are inputs
    split.static_paths                                         # ("model.activation", ...)

An argument JAX accepts as it is (arrays, Python numbers and pytrees of them) is passed
unchanged, so such calls trace exactly as in plain JAX. An argument holding other leaves
keeps its structure with ``None`` where the static leaves were (as ``eqx.partition``
does); the function ``split.fun`` puts them back before calling the user's function.

This module's job is a call's side (``%jit``, ``%jaxpr``, ``%grad``): the split call and
the hints about static arguments (which parameter JAX's error blames is
:func:`jaxlab.explain.finding.blamed_parameter`). Which leaves are arrays, and the
partition itself, are :mod:`jaxlab.program.leaves`, shared with ``%%jit``'s inputs
(:mod:`jaxlab.compile.cell_inputs`).
"""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .leaves import combine, is_array_input, jax_accepts, partition


@dataclass(frozen=True)
class _Part:
    """One argument split: its structure and its static leaves with their positions."""

    treedef: Any
    statics: tuple[tuple[int, Any], ...]  # (leaf position, leaf) of the static leaves
    paths: tuple[str, ...]  # key paths of the static leaves, e.g. ".activation"

    def combine(self, dynamic: Any) -> Any:
        import jax

        leaves = combine(jax.tree_util.tree_leaves(dynamic), self.statics)
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


class PassedThrough:
    """The output leaves JAX cannot return (an updated model's activation function), found
    when the function is traced: ``fun`` returns the rest, and :meth:`rebuild` puts them
    back, as ``eqx.filter_jit`` returns them."""

    def __init__(self) -> None:
        self._part: _Part | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Key paths of the output leaves passed through, e.g. ``"[1].activation"``."""
        return self._part.paths if self._part is not None else ()

    def rebuild(self, dynamic: Any) -> Any:
        """The output as the user's function returned it, from what the trace returned
        (as it is when its structure is not the last trace's: nothing put back wrongly)."""
        import jax

        part = self._part
        if part is None:
            return dynamic
        if len(jax.tree_util.tree_leaves(dynamic)) + len(part.statics) != part.treedef.num_leaves:
            return dynamic
        return part.combine(dynamic)

    def returning_arrays(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """``fun`` whose output leaves JAX cannot return are kept here, not returned."""

        def arrays_out(*args: Any, **kwargs: Any) -> Any:
            import jax

            out = fun(*args, **kwargs)
            flat, treedef = jax.tree_util.tree_flatten_with_path(out)
            leaves = [leaf for _, leaf in flat]
            if all(_jax_accepts(leaf) for leaf in leaves):
                self._part = None
                return out
            _, statics = partition(leaves, _jax_accepts)
            paths = tuple(jax.tree_util.keystr(flat[i][0]) for i, _ in statics)
            self._part = _Part(treedef, statics, paths)
            return jax.tree_util.tree_unflatten(
                treedef, [leaf if _jax_accepts(leaf) else None for leaf in leaves]
            )

        return _wraps(fun, arrays_out)


@dataclass(frozen=True)
class StaticSplit:
    """``fun(*args, **kwargs)`` with non-array leaves closed over: call ``fun`` with
    ``args``/``kwargs`` (arrays only) and it calls the user's function with the originals.
    Where the call is equinox's kind (a module among the arguments, or an
    ``eqx.filter_jit`` function), ``fun`` also returns only what JAX can return, and
    ``outputs`` holds the rest (filled when ``fun`` is traced)."""

    fun: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    static_paths: tuple[str, ...] = field(default=())  # "model.activation", "mode"
    outputs: PassedThrough = field(default_factory=PassedThrough, compare=False)

    @property
    def changed(self) -> bool:
        return bool(self.static_paths)


def _split_one(value: Any, numbers_static: bool) -> tuple[Any, _Part] | None:
    """``value`` with its static leaves replaced by None, and how to put them back; None
    when JAX accepts ``value`` as it is."""
    import jax

    flat, treedef = jax.tree_util.tree_flatten_with_path(value)
    leaves = [leaf for _, leaf in flat]
    accepted = is_array_input if numbers_static else _jax_accepts
    if all(accepted(leaf) for leaf in leaves):
        return None
    # Inside an argument that must be split, Python numbers are static too, as
    # eqx.filter_jit holds them (equinox's MaxPool keeps its -inf init as a float).
    _, statics = partition(leaves, is_array_input)
    paths = tuple(jax.tree_util.keystr(flat[i][0]) for i, _ in statics)
    dynamic = jax.tree_util.tree_unflatten(
        treedef, [leaf if is_array_input(leaf) else None for leaf in leaves]
    )
    return dynamic, _Part(treedef, statics, paths)


def _jax_accepts(leaf: Any) -> bool:
    return jax_accepts(leaf, is_array_input)


def _argument_names(fun: Callable[..., Any], n_args: int) -> list[str]:
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return [positional[i] if i < len(positional) else f"arg{i}" for i in range(n_args)]


def split_static(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    keep: Iterable[int | str] = (),
    numbers_static: bool = False,
) -> StaticSplit:
    """Close over the leaves of ``args``/``kwargs`` that JAX cannot trace (see module doc).

    ``keep``: positions and names passed unchanged (arguments the caller makes static
    itself). ``numbers_static``: hold top-level Python numbers static too, as
    ``eqx.filter_jit`` does (used for functions it wrapped).

    >>> s = split_static(lambda m, x: m["f"](x), ({"f": jnp.sin}, 1.0), {})
    >>> s.static_paths, jax.make_jaxpr(s.fun)(*s.args).eqns[0].primitive.name
    (("m['f']",), 'sin')
    """
    kept = set(keep)
    names = _argument_names(fun, len(args))
    new_args: list[Any] = []
    arg_parts: dict[int, _Part] = {}
    kwarg_parts: dict[str, _Part] = {}
    paths: list[str] = []
    for i, value in enumerate(args):
        split = None if i in kept or names[i] in kept else _split_one(value, numbers_static)
        if split is None:
            new_args.append(value)
            continue
        new_args.append(split[0])
        arg_parts[i] = split[1]
        paths += [names[i] + p for p in split[1].paths]
    new_kwargs: dict[str, Any] = {}
    for name, value in kwargs.items():
        split = None if name in kept else _split_one(value, numbers_static)
        if split is None:
            new_kwargs[name] = value
            continue
        new_kwargs[name] = split[0]
        kwarg_parts[name] = split[1]
        paths += [name + p for p in split[1].paths]
    outputs = PassedThrough()
    if not paths:
        if numbers_static or filter_jit_target(fun) is not None:
            # equinox's own kind of function: its outputs may hold a module's activation.
            wrapped, outputs = _passing_through(fun)
            return StaticSplit(wrapped, tuple(args), dict(kwargs), (), outputs)
        return StaticSplit(fun, tuple(args), dict(kwargs))

    def with_static(*dyn_args: Any, **dyn_kwargs: Any) -> Any:
        full_args = [
            arg_parts[i].combine(a) if i in arg_parts else a for i, a in enumerate(dyn_args)
        ]
        full_kwargs = {
            k: kwarg_parts[k].combine(v) if k in kwarg_parts else v for k, v in dyn_kwargs.items()
        }
        return fun(*full_args, **full_kwargs)

    # The user's name and signature (through __wrapped__): JAX names the jaxpr and its
    # inputs after them, and argument names still bind.
    # Arguments that had to be split hold equinox-style models; what the function returns
    # may too (an updated model), and passes through as eqx.filter_jit passes it.
    wrapped = outputs.returning_arrays(_wraps(fun, with_static))
    return StaticSplit(wrapped, tuple(new_args), new_kwargs, tuple(paths), outputs)


# The wrapper of a function whose arguments need no split, kept per function: the same
# function object each time lets jax.jit answer a second report from its caches. Bounded:
# an entry keeps its function alive until it is pushed out.
_WRAPPERS: OrderedDict[Any, tuple[Callable[..., Any], PassedThrough]] = OrderedDict()
_MOST_WRAPPERS = 64


def _passing_through(fun: Callable[..., Any]) -> tuple[Callable[..., Any], PassedThrough]:
    try:
        found = _WRAPPERS.pop(fun, None)
    except TypeError:  # an unhashable callable: a wrapper for this call only
        outputs = PassedThrough()
        return outputs.returning_arrays(fun), outputs
    if found is None:
        outputs = PassedThrough()
        found = (outputs.returning_arrays(fun), outputs)
    _WRAPPERS[fun] = found
    while len(_WRAPPERS) > _MOST_WRAPPERS:
        _WRAPPERS.popitem(last=False)
    return found


def _wraps(fun: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    try:
        return functools.wraps(fun)(wrapper)
    except (AttributeError, TypeError):  # an object whose attributes cannot be read
        return wrapper


def resolve_static(
    fun: Callable[..., Any], nums: Sequence[int], names: Sequence[str]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Static positions and names completed from ``fun``'s signature, as ``jax.jit`` does
    when given only one of them: ``n`` static means position 1 too in ``f(x, n)``, so a
    call that passes ``n`` by position holds it static as well.

    Raises ValueError naming the parameters when a name or position is not ``fun``'s.
    """
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: as given
        return tuple(nums), tuple(names)
    kinds = inspect.Parameter
    positional = [
        p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    by_name = {p.name: p for p in params}
    open_args = any(p.kind == kinds.VAR_POSITIONAL for p in params)
    open_kwargs = any(p.kind == kinds.VAR_KEYWORD for p in params)
    listed = ", ".join(p.name for p in params) or "none"
    fun_name = getattr(fun, "__name__", "the function")
    out_nums = set(nums)
    out_names = set(names)
    for name in names:
        param = by_name.get(name)
        if param is None and not open_kwargs:
            raise ValueError(f"{fun_name} has no parameter {name!r} (its parameters: {listed})")
        if param is not None and param in positional:
            out_nums.add(positional.index(param))
    for num in nums:
        index = num + len(positional) if num < 0 else num
        if 0 <= index < len(positional):
            if positional[index].kind != kinds.POSITIONAL_ONLY:
                out_names.add(positional[index].name)
        elif not open_args:
            raise ValueError(
                f"{fun_name} has {len(positional)} positional parameters ({listed}); "
                f"static position {num} is not one of them"
            )
    return tuple(sorted(out_nums)), tuple(sorted(out_names))


def filter_jit_target(fun: Any) -> Callable[..., Any] | None:
    """The function an ``equinox.filter_jit`` wrapper compiles, or None for anything else."""
    if type(fun).__module__.split(".")[0] != "equinox":
        return None
    inner = getattr(fun, "__wrapped__", None)
    return inner if callable(inner) and hasattr(fun, "lower") else None


def call_with_bound(source: str, fun: Callable[..., Any], name: str) -> str | None:
    """``f(x, True)`` rewritten with parameter ``name`` bound by ``functools.partial``:
    ``functools.partial(f, neg=True)(x)``; None when the call cannot be rewritten."""
    import ast

    try:
        node = ast.parse(source.strip(), mode="eval").body
        params = list(inspect.signature(fun).parameters.values())
    except (SyntaxError, TypeError, ValueError):
        return None
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    positional = [
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    bound: ast.expr | None = None
    args: list[ast.expr] = []
    by_name: list[ast.keyword] = []
    for i, arg in enumerate(node.args):
        param = positional[i] if i < len(positional) else None
        if param == name:
            bound = arg
        elif bound is not None and param is not None:
            # After the bound one, arguments go by name so they keep their parameters.
            by_name.append(ast.keyword(arg=param, value=arg))
        else:
            args.append(arg)
    named = [k.value for k in node.keywords if k.arg == name]
    if (bound is None) == (not named) or len(named) > 1:  # not given, or given twice
        return None
    bound = bound or named[0]
    keywords = by_name + [k for k in node.keywords if k.arg != name]
    fun_text = ast.unparse(node.func)
    call = ast.unparse(ast.Call(func=ast.Name("CALLEE"), args=args, keywords=keywords))
    return call.replace("CALLEE", f"functools.partial({fun_text}, {name}={ast.unparse(bound)})", 1)
