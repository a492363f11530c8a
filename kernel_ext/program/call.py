"""A call expression, ``%jaxpr f(x, y=2)``, evaluated in the user namespace into a
:class:`Call` (the callable, positional and keyword arguments), bound as Python binds it.

Nothing here imports IPython: errors are :class:`ProgramError`, which the magics turn
into ``UsageError``.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class ProgramError(ValueError):
    """What the user wrote cannot be turned into a program; the message says why and the fix."""


@dataclass(frozen=True)
class Call:
    """A call expression evaluated in the user namespace, not yet called."""

    fun: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    source: str  # the expression as typed
    fun_source: str  # the callee as typed, e.g. "model.loss"
    # What the call line names each argument: positional ones in order, then keywords
    # by keyword ("params", "model.w", "data['x']"; None for an expression such as
    # ``jnp.ones(3)``). None when ``*`` or ``**`` unpacking hides which value is which.
    arg_names: tuple[str | None, ...] | None = None
    kwarg_names: dict[str, str | None] | None = None

    @property
    def fun_name(self) -> str:
        return getattr(self.fun, "__name__", None) or self.fun_source


def parse_expression(source: str) -> ast.expr:
    """Parse one Python expression, with a message that names the problem."""
    text = source.strip()
    if not text:
        raise ProgramError("expected a call such as `f(x)`, but the line is empty")
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError as e:
        hint = ""
        if text.count("(") != text.count(")") or text.count("[") != text.count("]"):
            hint = " (the brackets are unbalanced)"
        raise ProgramError(f"`{text}` is not a Python expression{hint}: {e.msg}") from e


def _evaluate(node: ast.expr, namespace: Mapping[str, Any], whole: str) -> Any:
    code = compile(ast.Expression(body=node), "<jaxlab call>", "eval")
    try:
        # a copy: a walrus in the expression must not assign into the notebook
        return eval(code, dict(namespace))
    except NameError as e:
        raise ProgramError(f"{e} in the notebook: define it in a cell first (in `{whole}`)") from e
    except Exception as e:
        piece = ast.unparse(node)
        raise ProgramError(
            f"evaluating `{piece}` in `{whole}` raised {type(e).__name__}: {e}"
        ) from e


def _capture(name: str) -> Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]:
    """A stand-in callee: Python itself unpacks ``*args`` and ``**kwargs`` into it."""

    def capture(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return args, kwargs

    # Python names the callee in its unpacking errors: "f() argument after ** must be ..."
    capture.__qualname__ = capture.__name__ = name
    capture.__module__ = None  # type: ignore[assignment]  # "f()", not "jaxlab.program.f()"
    return capture


_CAPTURE = "__jaxlab_call_arguments__"


def _arguments(
    node: ast.Call, namespace: Mapping[str, Any], whole: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments, evaluated and unpacked exactly as Python would: left to right,
    ``*`` of an iterable, ``**`` of a mapping, a keyword given twice an error."""
    call = ast.Call(func=ast.Name(_CAPTURE, ast.Load()), args=node.args, keywords=node.keywords)
    try:
        code = compile(
            ast.fix_missing_locations(ast.Expression(body=call)), "<jaxlab call>", "eval"
        )
    except SyntaxError as e:  # f(x=1, x=2): Python refuses it when compiling
        raise ProgramError(f"`{whole}` is not a valid call: {e.msg}") from e
    scope = dict(namespace)
    scope[_CAPTURE] = _capture(ast.unparse(node.func))
    try:
        args, kwargs = eval(code, scope)
    except NameError as e:
        raise ProgramError(f"{e} in the notebook: define it in a cell first (in `{whole}`)") from e
    except Exception as e:
        raise ProgramError(
            f"evaluating the arguments of `{whole}` raised {type(e).__name__}: {e}"
        ) from e
    return args, kwargs


def _check_binding(call: Call) -> None:
    """A call that does not fit the callee's signature is the user's error, said now
    (rather than as a TypeError from deep inside tracing)."""
    try:
        signature = inspect.signature(call.fun)
    except (TypeError, ValueError):  # builtins and some C callables have none: JAX will say
        return
    try:
        signature.bind(*call.args, **call.kwargs)
    except TypeError as e:
        if _wrapper_accepts(call):
            return
        shown = str(signature)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ProgramError(f"`{call.source}` does not fit `{call.fun_source}{shown}`: {e}") from e


def _wrapper_accepts(call: Call) -> bool:
    """Whether a decorator that declares parameters of its own (``@wraps(f) def
    w(*args, key=None, **kwargs)``) takes the call that ``f``'s signature refuses.

    ``inspect.signature`` reports the wrapped function's signature; a wrapper that only
    forwards ``(*args, **kwargs)`` (``jax.grad``, ``jax.vmap``) is right to be judged by it.
    """
    if not hasattr(call.fun, "__wrapped__"):
        return False
    try:
        own = inspect.signature(call.fun, follow_wrapped=False)
    except (TypeError, ValueError):
        return False
    forwards = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if all(p.kind in forwards for p in own.parameters.values()):
        return False
    try:
        own.bind(*call.args, **call.kwargs)
    except TypeError:
        return False
    return True


def _named(node: ast.expr) -> str | None:
    """The name an argument is written as: a variable, an attribute or a constant index
    of one (``x``, ``model.w``, ``data['x']``, ``xs[0]``); None for any other expression."""
    inner = node
    while isinstance(inner, (ast.Attribute, ast.Subscript)):
        if isinstance(inner, ast.Subscript) and not isinstance(inner.slice, ast.Constant):
            return None
        inner = inner.value
    return ast.unparse(node) if isinstance(inner, ast.Name) else None


def _call_line_names(
    node: ast.Call,
) -> tuple[tuple[str | None, ...] | None, dict[str, str | None] | None]:
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return None, None
    return tuple(_named(a) for a in node.args), {
        k.arg: _named(k.value) for k in node.keywords if k.arg is not None
    }


def parse_call(source: str, namespace: Mapping[str, Any]) -> Call:
    """Evaluate the callee and arguments of ``source`` (e.g. ``"f(x, n=3)"``) in ``namespace``.

    The arguments are evaluated and unpacked as Python evaluates them, and must fit the
    callee's signature; otherwise a :class:`ProgramError` says why.

    >>> parse_call("max(a, 2)", {"a": 1}).args
    (1, 2)
    """
    text = source.strip()
    node = parse_expression(text)
    if not isinstance(node, ast.Call):
        raise ProgramError(
            f"`{text}` is not a call: write the function applied to its arguments, "
            f"e.g. `f(x)` rather than `f`"
        )
    fun = _evaluate(node.func, namespace, text)
    if not callable(fun):
        raise ProgramError(f"`{ast.unparse(node.func)}` is a {type(fun).__name__}, not a function")
    args, kwargs = _arguments(node, namespace, text)
    arg_names, kwarg_names = _call_line_names(node)
    call = Call(
        fun, tuple(args), dict(kwargs), text, ast.unparse(node.func), arg_names, kwarg_names
    )
    _check_binding(call)
    return call
