"""Rewrite Python control flow on a traced value into its ``lax`` (or ``jnp``) form.

An ``if``, ``while`` or ``for i in range(n)`` whose condition or count is traced becomes
``lax.cond``, ``lax.while_loop`` or ``lax.fori_loop``; ``and``/``or``/``not`` become
``jnp.logical_*``. Every function takes the parsed statement and returns the corrected
source, or None when the statement does not have a shape the rewrite understands;
nothing here runs user code.

>>> rewrite_while(ast.parse("while x < 10:\\n    x = x * 2").body[0], "lax", {"x"})
'x = lax.while_loop(lambda x: x < 10, lambda x: x * 2, x)'
"""

from __future__ import annotations

import ast
import copy
import textwrap
from collections.abc import Iterable, Sequence

from .rewrite import assigned_names, dotted, expr, unparse_statement

_EXITS = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)


def _has_exit(stmts: Sequence[ast.stmt]) -> bool:
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, _EXITS):
                return True
    return False


def _single_update(stmts: Sequence[ast.stmt]) -> tuple[str, ast.expr] | None:
    """``v = E`` or ``v op= E`` alone: the name and the new value."""
    if len(stmts) != 1:
        return None
    stmt = stmts[0]
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        name = stmt.target.id
        return name, ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=stmt.op, right=stmt.value)
    return None


def _block(stmts: Sequence[ast.stmt]) -> str:
    return textwrap.indent("\n".join(ast.unparse(s) for s in stmts) or "pass", "    ")


def _tuple(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names)


def _init(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


def _single_return(stmts: Sequence[ast.stmt] | None) -> ast.expr | None:
    if stmts and len(stmts) == 1 and isinstance(stmts[0], ast.Return) and stmts[0].value:
        return stmts[0].value
    return None


def _returned(node: ast.If, following: ast.stmt | None) -> tuple[str, str] | None:
    """The two values an ``if`` returns (``return a`` in its body, ``return b`` in its
    ``else`` or as the statement after it), or None."""
    yes = _single_return(node.body)
    no = (
        _single_return(node.orelse)
        if node.orelse
        else _single_return([following] if following else None)
    )
    if yes is None or no is None:
        return None
    return ast.unparse(yes), ast.unparse(no)


def rewrite_if(
    node: ast.If, following: ast.stmt | None, lax: str, bound: Iterable[str]
) -> str | None:
    """A Python ``if`` on a traced value as ``lax.cond``.

    ``following`` is the statement after the ``if`` (the implicit else of an early
    return); ``bound`` are the names that already hold values at the ``if``.
    """
    cond = ast.unparse(node.test)
    returned = _returned(node, following)
    if returned is not None:
        yes, no = returned
        return f"return {lax}.cond({cond}, lambda: {yes}, lambda: {no})"
    if _has_exit(node.body) or _has_exit(node.orelse):
        return None
    outs = assigned_names([*node.body, *node.orelse])
    if not outs:
        return None
    known = set(bound)
    one_yes, one_no = _single_update(node.body), _single_update(node.orelse)
    if len(outs) == 1 and one_yes is not None and (one_no is not None or not node.orelse):
        name = outs[0]
        other = ast.unparse(one_no[1]) if one_no is not None else name
        if one_no is None and name not in known:
            return None
        return f"{name} = {lax}.cond({cond}, lambda: {ast.unparse(one_yes[1])}, lambda: {other})"
    both = set(assigned_names(node.body) or ()) & set(assigned_names(node.orelse) or ())
    if any(n not in known and n not in both for n in outs):
        return None  # a name only one branch defines: Python itself would fail later
    operands = [n for n in outs if n in known]
    params = ", ".join(operands)
    result = f"return {_tuple(outs)}"
    return "\n".join(
        [
            f"def if_true({params}):",
            _block(node.body),
            f"    {result}",
            f"def if_false({params}):",
            _block(node.orelse),
            f"    {result}",
            f"{_tuple(outs)} = {lax}.cond({cond}, if_true, if_false"
            + "".join(f", {n}" for n in operands)
            + ")",
        ]
    )


def rewrite_if_as_where(node: ast.If, following: ast.stmt | None, jnp: str) -> str | None:
    """An ``if`` that returns one of two values as ``jnp.where`` (both sides computed, the
    result picked element-wise), or None for any other ``if``."""
    returned = _returned(node, following)
    if returned is None:
        return None
    yes, no = returned
    return f"return {jnp}.where({ast.unparse(node.test)}, {yes}, {no})"


def rewrite_while(node: ast.While, lax: str, bound: Iterable[str]) -> str | None:
    """A Python ``while`` on a traced value as ``lax.while_loop``."""
    if node.orelse or _has_exit(node.body):
        return None
    outs = assigned_names(node.body)
    if not outs or any(n not in set(bound) for n in outs):
        return None
    cond = ast.unparse(node.test)
    single = _single_update(node.body)
    if len(outs) == 1 and single is not None:
        v = single[0]
        return (
            f"{v} = {lax}.while_loop(lambda {v}: {cond}, lambda {v}: {ast.unparse(single[1])}, {v})"
        )
    state = _tuple(outs)
    return "\n".join(
        [
            "def cond_fun(state):",
            f"    {state} = state",
            f"    return {cond}",
            "def body_fun(state):",
            f"    {state} = state",
            _block(node.body),
            f"    return {state}",
            f"{state} = {lax}.while_loop(cond_fun, body_fun, {_init(outs)})",
        ]
    )


def rewrite_for_range(node: ast.For, lax: str, bound: Iterable[str]) -> str | None:
    """``for i in range(n)`` with a traced ``n`` as ``lax.fori_loop``."""
    it = node.iter
    if not (
        isinstance(it, ast.Call)
        and dotted(it.func) == "range"
        and 1 <= len(it.args) <= 2
        and not it.keywords
        and isinstance(node.target, ast.Name)
        and not node.orelse
        and not _has_exit(node.body)
    ):
        return None
    lo, hi = ("0", ast.unparse(it.args[0])) if len(it.args) == 1 else map(ast.unparse, it.args)
    i = node.target.id
    outs = [n for n in assigned_names(node.body) or () if n != i]
    if not outs or any(n not in set(bound) for n in outs):
        return None
    single = _single_update(node.body)
    if len(outs) == 1 and single is not None:
        v = single[0]
        new = ast.unparse(single[1])
        return f"{v} = {lax}.fori_loop({lo}, {hi}, lambda {i}, {v}: {new}, {v})"
    state = _tuple(outs)
    return "\n".join(
        [
            f"def body_fun({i}, state):",
            f"    {state} = state",
            _block(node.body),
            f"    return {state}",
            f"{state} = {lax}.fori_loop({lo}, {hi}, body_fun, {_init(outs)})",
        ]
    )


# --------------------------------------------------------------------------- and / or / not
def rewrite_logical(stmt: ast.stmt, jnp_alias: str) -> str | None:
    """``a and b`` → ``jnp.logical_and(a, b)``; ``not a`` → ``jnp.logical_not(a)``."""
    if isinstance(stmt, ast.If | ast.While):  # the control-flow rewrites' job
        return None

    class Logical(ast.NodeTransformer):
        changed = False

        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
            self.generic_visit(node)
            self.changed = True
            name = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
            result = node.values[0]
            for value in node.values[1:]:
                result = ast.Call(expr(f"{jnp_alias}.{name}"), [result, value], [])
            return result

        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
            self.generic_visit(node)
            if not isinstance(node.op, ast.Not):
                return node
            self.changed = True
            return ast.Call(expr(f"{jnp_alias}.logical_not"), [node.operand], [])

    transformer = Logical()
    new = transformer.visit(copy.deepcopy(stmt))
    return unparse_statement(new) if transformer.changed else None
