"""The call of a jitted function a profiled cell made, found again in the cell's code.

``%%profile --graph`` draws the program of the cell's costliest jitted function. Where the
compile log kept no program of it (jaxlab compiled it first, for ``%jaxpr --cost``, and
the user's call hit that compilation), the cell itself says which function object it
called and with what: the call ``f(x)`` in the cell, ``f`` and ``x`` read from the user's
namespace. Arguments are read after the cell ran; only their shapes and dtypes (and any
static argument) reach the trace, which a loop's rebinding (``params = step(params)``)
keeps::

    profiled_call("g(P, X).block_until_ready()", shell.user_ns, "<lambda>")
    # ProfiledCall(g, (P, X), {}, ('P', 'X'), {}): the values, and the names the cell
    # gives them (the drawing's inputs are called as in %jaxpr g(P, X), not ``params, x``)
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..graph import model as m
from .attribution import Attribution, attribute

# Expressions read back from the namespace: names, attributes, subscripts, literals and
# containers of them; a call or an operator in an argument is never run again.
_PLAIN = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List, ast.Slice)


class ProfiledCall(NamedTuple):
    """A call the cell made: the function, its arguments, and the names the cell writes
    them as (``P``, ``data['x']``; None for an expression or a literal)."""

    fun: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    arg_names: tuple[str | None, ...]
    kwarg_names: dict[str, str | None]


def profiled_call(cell: str, namespace: Mapping[str, Any], name: str) -> ProfiledCall | None:
    """The first call in ``cell`` of a jitted function named ``name`` whose arguments are
    plain expressions, read from ``namespace``; None where there is none."""
    for node, fun in _calls(cell, namespace, name):
        if not all(_plain(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            continue
        missing = object()
        args = tuple(_value(a, namespace, missing) for a in node.args)
        kwargs = {str(k.arg): _value(k.value, namespace, missing) for k in node.keywords}
        if any(v is missing for v in (*args, *kwargs.values())):
            continue
        arg_names = tuple(_written(a) for a in node.args)
        return ProfiledCall(
            fun, args, kwargs, arg_names, {str(k.arg): _written(k.value) for k in node.keywords}
        )
    return None


def called_as(cell: str, namespace: Mapping[str, Any], name: str) -> dict[str, str]:
    """The parameters of the jitted function ``name`` the cell's first call of it passes
    a named value, each with that name: ``{"params": "P", "x": "X"}`` for ``f(P, X)``
    (an argument written as an expression keeps its parameter's name)."""
    import inspect

    for node, fun in _calls(cell, namespace, name):
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            return {}
        positional = [
            p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        written = {
            positional[i]: _written(a)
            for i, a in enumerate(node.args[: len(positional)])
            if _written(a)
        }
        written.update({str(k.arg): _written(k.value) for k in node.keywords if _written(k.value)})
        return {p: str(w) for p, w in written.items()}
    return {}


def _calls(
    cell: str, namespace: Mapping[str, Any], name: str
) -> list[tuple[ast.Call, Callable[..., Any]]]:
    """The cell's calls of a jitted function named ``name`` (its callee read from
    ``namespace``) with no ``*args``/``**kwargs``, in the order ``ast.walk`` meets them."""
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError):  # IPython syntax (a line magic) in the cell
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _plain(node.func):
            continue
        fun = _value(node.func, namespace)
        if not hasattr(fun, "trace") or getattr(fun, "__name__", None) != name:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            continue
        found.append((node, fun))
    return found


def _written(node: ast.expr) -> str | None:
    """The name an argument is written as (``X``, ``model.w``, ``data['x']``, ``xs[0]``);
    None for a literal or any other expression (it keeps its parameter's name)."""
    inner = node
    while isinstance(inner, (ast.Attribute, ast.Subscript)):
        if isinstance(inner, ast.Subscript) and not isinstance(inner.slice, ast.Constant):
            return None
        inner = inner.value
    return ast.unparse(node) if isinstance(inner, ast.Name) else None


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


# Each kept program's compiled text, by the program (a new jit of its jaxpr is compiled
# anew by XLA at every call: a profile of the same program, again and again, compiles it
# once). Kept: the last KEPT programs.
KEPT = 8
_compiled: dict[int, tuple[weakref.ref[Any], str]] = {}


def _compiled_once(closed: Any) -> str | None:
    """The text compiled before for ``closed`` (the same object, still alive), if any."""
    known = _compiled.get(id(closed))
    if known is None or known[0]() is not closed:
        return None
    return known[1]


def attribution_from_program(
    result: Any, name: str, closed: Any, *, module: str | None = None, called: Any = None
) -> Attribution:
    """As :func:`~jaxlab.timing.attribution.profile_attribution`, from a program the
    compile log kept (``closed``): compiled again from the jaxpr, whose instructions XLA
    names as it named the profiled module's (``module``, as the profile names it: a
    lambda's ``jit__lambda``). ``called`` (:func:`called_as`: ``{"params": "P"}``) names
    the inputs as the cell's call does, the function's own names in their tooltips."""
    import jax
    import jax.extend.core as jcore

    from ..graph.build import graph_from_jaxpr
    from ..graph.explore import then
    from ..graph.value_names import with_parameters
    from ..session.work import jaxlab_work

    text = _compiled_once(closed)
    if text is None:
        with jaxlab_work():
            lowered = jax.jit(jcore.jaxpr_as_fun(closed)).trace(*closed.in_avals).lower()
            text = lowered.compile().as_text()
        _compiled[id(closed)] = (weakref.ref(closed), text)
        while len(_compiled) > KEPT:
            del _compiled[next(iter(_compiled))]
    module = module or "jit_" + re.sub(r"\W", "_", name)  # as the profiled module is named
    text = re.sub(r"^HloModule \S+?,", f"HloModule {module},", text, count=1)
    own = _traced_names(closed)
    names = [_renamed(n, called or {}) for n in own] if own is not None else None

    def graph_of(c: Any) -> m.Graph:
        drawn = graph_from_jaxpr(c, title=name, input_names=names, explore=True)
        return then(drawn, lambda g: with_parameters(g, names or [], own or [], name))

    drawn = (name, None if names is None else tuple(names), tuple(own or ()))
    return attribute(result, closed, text, function=name, graph_of=graph_of, program_key=drawn)


def _renamed(leaf: str, called: Mapping[str, str]) -> str:
    """``params['W']`` as the call names its argument: ``P['W']`` for ``{"params": "P"}``."""
    root = re.split(r"[\[.]", leaf, maxsplit=1)[0]
    return called[root] + leaf[len(root) :] if root in called else leaf


def _traced_names(closed: Any) -> list[str] | None:
    """The inputs' names JAX recorded when it traced the program (``params['W']``, ``x``),
    or None where it recorded none (then they are drawn as ``in0``, ``in1``, ...)."""
    info = getattr(closed.jaxpr, "debug_info", None)
    names = list(getattr(info, "arg_names", None) or ())
    if len(names) != len(closed.jaxpr.invars) or not all(names):
        return None
    return [str(n) for n in names]
