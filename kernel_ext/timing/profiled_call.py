"""The call of a jitted function a profiled cell made, found again in the cell's code.

``%%profile --graph`` draws the program of the cell's costliest jitted function. Where the
compile log kept no program of it (jaxlab compiled it first, for ``%jaxpr --cost``, and
the user's call hit that compilation), the cell itself says which function object it
called and with what: the call ``f(x)`` in the cell, ``f`` and ``x`` read from the user's
namespace. Arguments are read after the cell ran; only their shapes and dtypes (and any
static argument) reach the trace, which a loop's rebinding (``params = step(params)``)
keeps::

    profiled_call("g(x).block_until_ready()", shell.user_ns, "<lambda>")
    # (g, (x,), {})
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

# Expressions read back from the namespace: names, attributes, subscripts, literals and
# containers of them; a call or an operator in an argument is never run again.
_PLAIN = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List, ast.Slice)


def profiled_call(
    cell: str, namespace: Mapping[str, Any], name: str
) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None:
    """``(function, args, kwargs)`` of the first call in ``cell`` of a jitted function
    named ``name`` whose arguments are plain expressions, read from ``namespace``; None
    where there is none."""
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError):  # IPython syntax (a line magic) in the cell
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _plain(node.func):
            continue
        fun = _value(node.func, namespace)
        if not hasattr(fun, "trace") or getattr(fun, "__name__", None) != name:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args):
            continue
        if any(k.arg is None for k in node.keywords) or not all(
            _plain(a) for a in [*node.args, *(k.value for k in node.keywords)]
        ):
            continue
        missing = object()
        args = tuple(_value(a, namespace, missing) for a in node.args)
        kwargs = {str(k.arg): _value(k.value, namespace, missing) for k in node.keywords}
        if any(v is missing for v in (*args, *kwargs.values())):
            continue
        return fun, args, kwargs
    return None


def _plain(node: ast.AST) -> bool:
    """Whether ``node`` reads values only (no call, no operator)."""
    return all(isinstance(n, (*_PLAIN, ast.expr_context)) for n in ast.walk(node))


def _value(node: ast.expr, namespace: Mapping[str, Any], missing: Any = None) -> Any:
    """The value of a plain expression in ``namespace`` (``missing`` where it fails)."""
    try:
        code = compile(ast.Expression(body=node), "<profiled call>", "eval")
        return eval(code, {"__builtins__": {}}, dict(namespace))
    except Exception:  # a name the cell deleted, an index out of range: not this call
        return missing
