"""Turn what the user wrote into a program JAX can trace.

Two forms reach the magics:

* a call expression, ``%jaxpr f(x, y=2)``, evaluated in the user namespace into a
  :class:`Call` (the callable, positional and keyword arguments);
* a whole cell, ``%%jit`` / ``%%grad``, analysed into a :class:`CellProgram`: the names it
  reads before assigning (its inputs), the names it assigns (its outputs) and its final
  expression, and compiled into a pure Python function of its inputs.

Nothing here imports IPython: errors are :class:`ProgramError`, which the magics turn
into ``UsageError``.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
    call = Call(fun, tuple(args), dict(kwargs), text, ast.unparse(node.func))
    _check_binding(call)
    return call


# --------------------------------------------------------------------------- cells

_BUILTINS = frozenset(dir(builtins))
# Python 3.12 added type parameters to function definitions; 3.11 has no such field.
_FUNCTION_DEF_EXTRA: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}


@dataclass(frozen=True)
class CellProgram:
    """A cell seen as a function: ``outputs, value = f(*inputs)``.

    ``inputs`` are the names the cell reads before it assigns them (in first-read
    order); ``outputs`` the names it assigns at top level (in first-assignment order);
    ``final`` the source of its last expression statement, or None.
    """

    source: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    final: str | None
    body: tuple[ast.stmt, ...] = field(repr=False, compare=False)
    global_names: tuple[str, ...] = ()  # names declared `global`: the cell mutates them

    def function(
        self, params: tuple[str, ...], namespace: dict[str, Any], name: str = "cell"
    ) -> Callable[..., tuple[dict[str, Any], Any]]:
        """Compile the cell into ``f(*params) -> ({output: value}, final value)``.

        ``params`` are the inputs passed as arguments; every other name the cell reads
        is looked up in ``namespace`` when the function runs (modules, functions,
        constants).
        """
        body = list(self.body)
        final: ast.expr = ast.Constant(None)
        last = body[-1] if body else None
        if self.final is not None and isinstance(last, ast.Expr):
            body.pop()
            final = last.value
        result = ast.Tuple(
            elts=[
                ast.Dict(
                    keys=[ast.Constant(n) for n in self.outputs],
                    values=[ast.Name(n, ast.Load()) for n in self.outputs],
                ),
                final,
            ],
            ctx=ast.Load(),
        )
        fdef = ast.FunctionDef(
            name=name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(p) for p in params],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            body=[*body, ast.Return(result)] if body else [ast.Return(result)],
            decorator_list=[],
            **_FUNCTION_DEF_EXTRA,
        )
        module = ast.fix_missing_locations(ast.Module(body=[fdef], type_ignores=[]))
        scope: dict[str, Any] = {}
        exec(compile(module, "<jaxlab cell>", "exec"), namespace, scope)
        fun = scope[name]
        fun.__qualname__ = name
        return fun


class _Reads(ast.NodeVisitor):
    """Names a statement reads from the enclosing (cell) scope, in source order.

    Names bound inside nested scopes (lambda and function parameters, comprehension
    targets) are local to those scopes and not reads of the cell's namespace.
    """

    def __init__(self) -> None:
        self.reads: list[str] = []
        self._local: list[set[str]] = []

    def _read(self, name: str) -> None:
        if not any(name in scope for scope in self._local):
            self.reads.append(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)

    def _visit_scope(self, bound: set[str], nodes: list[ast.AST]) -> None:
        self._local.append(bound)
        for n in nodes:
            self.visit(n)
        self._local.pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(d)
        self._visit_scope(_arg_names(node.args), [node.body])

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list + node.args.defaults:
            self.visit(d)
        bound = _arg_names(node.args) | _stored_names(node.body)
        self._visit_scope(bound, list(node.body))

    visit_AsyncFunctionDef = visit_FunctionDef

    def _visit_comprehension(self, node: ast.AST, elts: list[ast.AST]) -> None:
        gens: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        self.visit(gens[0].iter)  # the first iterable is evaluated in the enclosing scope
        bound: set[str] = set()
        for g in gens:
            bound |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        rest: list[ast.AST] = [*elts]
        for i, g in enumerate(gens):
            if i:
                rest.append(g.iter)
            rest.extend(g.ifs)
        self._visit_scope(bound, rest)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node, [node.elt])

    visit_SetComp = visit_ListComp  # type: ignore[assignment]
    visit_GeneratorExp = visit_ListComp  # type: ignore[assignment]

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_comprehension(node, [node.key, node.value])


def _arg_names(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in every}


def _stored_names(body: list[ast.stmt]) -> set[str]:
    return {
        n.id
        for stmt in body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _statement_stores(stmt: ast.stmt) -> list[str]:
    """Top-level names a statement binds (not those bound inside nested scopes)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    names: list[str] = []
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        nested_scope = ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        if isinstance(node, nested_scope) and node is not stmt:
            if not isinstance(node, ast.Lambda):
                names.append(node.name)
            continue
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.NamedExpr):
            names.append(node.target.id)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return names


def analyse_cell(source: str) -> CellProgram:
    """Find a cell's inputs, outputs and final expression.

    >>> p = analyse_cell("y = a * x + b\\ny.sum()")
    >>> p.inputs, p.outputs, p.final
    (('a', 'x', 'b'), ('y',), 'y.sum()')
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ProgramError(f"the cell is not valid Python: {e.msg} (line {e.lineno})") from e
    assigned: set[str] = set()
    inputs: list[str] = []
    outputs: list[str] = []
    global_names: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Global | ast.Nonlocal):
            global_names.extend(stmt.names)
            continue
        reads = _Reads()
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            reads.reads.append(stmt.target.id)  # `x += 1` reads x first
        reads.visit(stmt)
        for name in reads.reads:
            if name not in assigned and name not in inputs and name not in _BUILTINS:
                inputs.append(name)
        for name in _statement_stores(stmt):
            assigned.add(name)
            if name not in outputs:
                outputs.append(name)
    final = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = ast.get_source_segment(source, tree.body[-1]) or ast.unparse(tree.body[-1])
    return CellProgram(
        source=source,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        final=final,
        body=tuple(tree.body),
        global_names=tuple(global_names),
    )
