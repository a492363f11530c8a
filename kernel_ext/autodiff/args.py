"""Which arguments a derivative is taken with respect to, and a function of just those.

``%grad --wrt w,b loss(x, w, b)`` and ``grad_report(loss, x, w, b, argnums=(1, 2))``
both come here. Each chosen argument may be an array, a Python float or a pytree (dict,
list, tuple, a dataclass pytree such as an equinox module). Its float arrays are
differentiated and its other leaves (integers, functions, strings) are held fixed, as
``equinox.filter_grad`` does. Python floats are differentiated only in an argument that
holds no float array (``f(2.0)``, ``f({"a": 1.0})``, as ``jax.grad`` does); beside float
arrays they are settings, held fixed (equinox's ``MaxPool.init = -inf``, a dropout rate),
and :attr:`Selection.fixed` says which. The result is a function of the differentiated
leaves only, in the form every JAX transform takes.

>>> sel = select_arguments(lambda x, w: (x * w).sum(), (1.0, 2.0), {}, wrt="w")  # doctest: +SKIP
>>> sel.names, sel.function(*sel.diff)                                          # doctest: +SKIP
(('w',), Array(2., dtype=float32))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..program import ProgramError


class GradError(ProgramError):
    """A derivative cannot be taken as asked; the message says why and the fix."""


def is_float_leaf(x: Any) -> bool:
    """A leaf that has a derivative: a float (or complex) array or Python float."""
    if isinstance(x, bool | int | str | bytes) or x is None:
        return False
    if isinstance(x, float | complex):
        return True
    if not _array_like(x):
        return False
    dtype = x.dtype
    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:  # a PRNG key's extended dtype
        return False


def is_float_array(x: Any) -> bool:
    """A float (or complex) array or tracer: what ``equinox.filter_grad`` differentiates."""
    return _array_like(x) and is_float_leaf(x)


def _array_like(x: Any) -> bool:
    """An array (or tracer): a tuple shape and a dtype (not a module such as jnp)."""
    return isinstance(getattr(x, "shape", None), tuple) and hasattr(x, "dtype")


def describe_leaf(x: Any) -> str:
    """``int``, ``bool``, ``int32[3]``...: what a leaf is, for messages."""
    if isinstance(x, bool | int | float | complex) or not _array_like(x):
        return type(x).__name__
    dtype = x.dtype
    return f"{np.dtype(dtype).name if _plain(dtype) else dtype}[{','.join(map(str, x.shape))}]"


def _plain(dtype: Any) -> bool:
    try:
        np.dtype(dtype)
        return True
    except TypeError:
        return False


@dataclass(frozen=True)
class Chosen:
    """One argument under differentiation."""

    name: str
    where: int | str  # positional index, or keyword name
    value: Any
    treedef: Any
    mask: tuple[bool, ...]  # per leaf: differentiated?
    leaves: tuple[Any, ...]
    fixed: tuple[str, ...] = ()  # Python floats held fixed beside float arrays: "m.init"

    @property
    def diff_leaves(self) -> list[Any]:
        return [leaf for leaf, m in zip(self.leaves, self.mask, strict=True) if m]

    @property
    def size(self) -> int:
        return sum(int(np.size(leaf)) for leaf in self.diff_leaves)

    def rebuild(self, diff: Sequence[Any], fill: Any = "original") -> Any:
        """This argument with its float leaves replaced by ``diff``; the other leaves
        keep their values (``fill="original"``) or become ``fill`` (None for gradients)."""
        it = iter(diff)
        leaves = [
            next(it) if m else (leaf if fill == "original" else fill)
            for leaf, m in zip(self.leaves, self.mask, strict=True)
        ]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def split(self, like: Any) -> list[Any]:
        """The float leaves of ``like``, a value with this argument's structure."""
        try:
            leaves = self.treedef.flatten_up_to(like)
        except (ValueError, TypeError) as e:
            raise GradError(
                f"the value given for `{self.name}` does not have its structure "
                f"({self.treedef}): {e}"
            ) from e
        return [leaf for leaf, m in zip(leaves, self.mask, strict=True) if m]


@dataclass(frozen=True)
class Selection:
    """The chosen arguments and ``function(*diff) -> fun(...)`` of their float leaves."""

    names: tuple[str, ...]
    chosen: tuple[Chosen, ...]
    function: Callable[..., Any]
    single: bool  # the caller asked for one argument (the gradient is not a tuple)
    original: Callable[..., Any] | None = None  # the user's function, for leak checks

    @property
    def diff(self) -> list[list[Any]]:
        return [c.diff_leaves for c in self.chosen]

    @property
    def size(self) -> int:
        return sum(c.size for c in self.chosen)

    @property
    def fixed(self) -> tuple[str, ...]:
        """The Python floats held fixed, by path (``model.layers[2].init``)."""
        return tuple(path for c in self.chosen for path in c.fixed)

    def rebuild(self, per_arg: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """Per-argument float-leaf lists → {name: value with the argument's structure}."""
        return {
            c.name: c.rebuild(leaves, fill=None)
            for c, leaves in zip(self.chosen, per_arg, strict=True)
        }


def _parameters(fun: Any) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None


def _positional_names(fun: Any, n: int) -> list[str]:
    params = _parameters(fun) or []
    names: list[str] = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            break
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


def parse_names(wrt: str | Sequence[str], noun: str = "argument") -> list[str]:
    """``"x, y"`` or ``["x", "y"]`` -> ``["x", "y"]``; naming nothing is a GradError."""
    items = wrt.split(",") if isinstance(wrt, str) else list(wrt)
    names = [w.strip() for w in items if w.strip()]
    if not names:
        raise GradError(f"`--wrt` names no {noun}: write e.g. `--wrt x,y`")
    return names


def _parse_argnums(argnums: int | str | Sequence[int]) -> tuple[list[int], bool]:
    if isinstance(argnums, str):
        try:
            nums = [int(a) for a in argnums.split(",") if a.strip()]
        except ValueError as e:
            raise GradError(f"`--argnums {argnums}` must be integers such as `0,1`") from e
        return nums, len(nums) == 1
    if isinstance(argnums, int):
        return [argnums], True
    return [int(a) for a in argnums], False


def select_arguments(
    fun: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    argnums: int | str | Sequence[int] = 0,
    wrt: str | Sequence[str] | None = None,
) -> Selection:
    """Choose the arguments to differentiate, by name (``wrt``) or position (``argnums``)."""
    fun_name = getattr(fun, "__name__", type(fun).__name__)
    positional = _positional_names(fun, len(args))
    places: list[tuple[str, int | str]]
    if wrt is not None:
        names = parse_names(wrt)
        single = len(names) == 1
        places = [_place_by_name(fun, fun_name, n, positional, kwargs) for n in names]
    else:
        nums, single = _parse_argnums(argnums)
        places = [_place_by_number(i, positional) for i in nums]
    if len({w for _, w in places}) != len(places):
        raise GradError("an argument is named twice in `--wrt` / `--argnums`")

    chosen = tuple(_choose(name, where, args, kwargs) for name, where in places)

    def function(*diff: Sequence[Any]) -> Any:
        a, kw = list(args), dict(kwargs)
        for c, leaves in zip(chosen, diff, strict=True):
            value = c.rebuild(leaves)
            if isinstance(c.where, int):
                a[c.where] = value
            else:
                kw[c.where] = value
        return fun(*a, **kw)

    function.__name__ = fun_name
    return Selection(tuple(c.name for c in chosen), chosen, function, single, fun)


def _place_by_name(
    fun: Any, fun_name: str, name: str, positional: list[str], kwargs: dict[str, Any]
) -> tuple[str, int | str]:
    """Where the call passes the argument ``name``: a keyword or a position."""
    if name in kwargs:
        return name, name
    if name in positional:
        return name, positional.index(name)
    if any(p.name == name for p in _parameters(fun) or []):
        raise GradError(
            f"`{name}` is a parameter of {fun_name} but the call does not pass "
            f"it: pass it explicitly, e.g. `{fun_name}(..., {name}=...)`"
        )
    known = [*positional, *kwargs]
    raise GradError(
        f"`--wrt {name}`: {fun_name} has no argument `{name}` in this call "
        f"(its arguments: {', '.join(known) or 'none'})"
    )


def _place_by_number(i: int, positional: list[str]) -> tuple[str, int]:
    """The positional argument ``i`` (negative counts from the end), with its name."""
    n = len(positional)
    if not -n <= i < n:
        raise GradError(
            f"argnums {i} is out of range: the call passes {n} positional "
            f"argument{'s' if n != 1 else ''}"
        )
    return positional[i % n], i % n


def _choose(name: str, where: int | str, args: Sequence[Any], kwargs: dict[str, Any]) -> Chosen:
    value = args[where] if isinstance(where, int) else kwargs[where]
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(value)
    leaves = [leaf for _, leaf in with_paths]
    # Beside float arrays, a Python float is a setting (a pooling init, a dropout rate):
    # held fixed, as equinox.filter_grad does. Alone, it is what the user differentiates.
    arrays = any(is_float_array(leaf) for leaf in leaves)
    mask = tuple(is_float_array(leaf) if arrays else is_float_leaf(leaf) for leaf in leaves)
    if not any(mask):
        raise GradError(_no_float_message(name, value, leaves))
    fixed = tuple(
        name + jax.tree_util.keystr(path)
        for (path, leaf), m in zip(with_paths, mask, strict=True)
        if not m and isinstance(leaf, float | complex)
    )
    return Chosen(name, where, value, treedef, mask, tuple(leaves), fixed)


def _no_float_message(name: str, value: Any, leaves: list[Any]) -> str:
    if len(leaves) == 1 and leaves[0] is value:
        kind = describe_leaf(value)
        numeric = isinstance(value, bool | int) or _array_like(value)
        if not numeric:
            return (
                f"`{name}` is a {kind}, not an array: only floating-point arrays, floats "
                "and pytrees of them have gradients"
            )
        if isinstance(value, bool):
            fix = "a float (e.g. `1.0`)"
        elif isinstance(value, int):
            fix = f"the float `{value}.0`"
        else:
            fix = f"`{name}.astype(jnp.float32)`"
        return (
            f"`{name}` is {kind}: only floating-point values have gradients. Pass {fix} "
            f"instead (integers and booleans are steps, not slopes)"
        )
    kinds = sorted({describe_leaf(leaf).split("[")[0] for leaf in leaves}) or ["nothing"]
    return (
        f"`{name}` holds no floating-point leaves (it holds {', '.join(kinds)}): there is "
        f"nothing to differentiate; make its parameters float arrays"
    )


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def leaked_tracer(fun: Any) -> str | None:
    """Where ``fun`` left a tracer after a transform ran it: ``"saved[0]"``, or None.

    Looks one container deep into the globals its code names and its closure cells
    (and ``self`` for a bound method): where a leak usually lands. JAX's own
    ``checking_leaks`` catches more on recent releases; this catches eager leaks there too.
    """
    seen: list[tuple[str, Any]] = []
    target = getattr(fun, "__func__", fun)
    code = getattr(target, "__code__", None)
    globs = getattr(target, "__globals__", {})
    if code is not None:
        seen += [(n, globs[n]) for n in code.co_names if n in globs]
        cells = getattr(target, "__closure__", None) or ()
        for name, cell in zip(code.co_freevars, cells, strict=False):
            try:
                seen.append((name, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
    owner = getattr(fun, "__self__", None)
    if owner is not None and hasattr(owner, "__dict__"):
        seen += [(f"self.{k}", v) for k, v in vars(owner).items()]
    for name, value in seen:
        if _is_tracer(value):
            return name
        if isinstance(value, list | tuple):
            items: list[tuple[str, Any]] = [(f"{name}[{i}]", v) for i, v in enumerate(value[:1000])]
        elif isinstance(value, dict):
            items = [(f"{name}[{k!r}]", v) for k, v in list(value.items())[:1000]]
        else:
            items = []
        for where, v in items:
            if _is_tracer(v):
                return where
    return None
