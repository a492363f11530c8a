"""A whole cell, ``%%jit`` / ``%%grad``, analysed into a :class:`CellProgram`: the names
it reads before assigning (its inputs), the names it assigns (its outputs) and its final
expression, and compiled into a pure Python function of its inputs.

Nothing here imports IPython: errors are :class:`~jaxlab.program.call.ProgramError`.
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .call import ProgramError

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
