"""Explanations for the errors of tracing: Python asked a traced value for something only
a concrete value has (True/False, an integer, a NumPy array, a size), a boolean mask made
a shape depend on values, or a traced value leaked out of its trace.

Each ``build_*`` takes the exception and its :class:`ErrorSite` and returns a Finding whose
fix is the user's statement rewritten (``lax.cond``, ``lax.while_loop``,
``lax.fori_loop``, ``jnp``: :mod:`jaxlab.explain.control_flow`), with ``static_argnums``
as the alternative when the traced value is a setting rather than data.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from . import control_flow as cf
from . import rewrite as rw
from .finding import (
    ERRORS_PAGE,
    Finding,
    docs_in_message,
    in_trace,
    jax_name,
    jnp_name,
    lax_name,
    traced,
)
from .source import (
    ErrorSite,
    enclosing_function,
    label,
    parent_body,
    parse_statement,
)


# --------------------------------------------------------------------------- static arguments
def static_alternative(exc: BaseException, site: ErrorSite, *, only_integers: bool) -> str | None:
    """``jax.jit(f, static_argnums=i)`` for the argument JAX names, written where f is jitted.

    The user's call site (``jax.jit(f)(x, 3)``) is rewritten when it is in the traceback,
    else the ``@jax.jit`` decorator. With ``only_integers`` it is offered only when that
    argument is an integer or boolean scalar (a setting such as a count), not data.
    """
    t = traced(exc)
    if t is None or t.transform not in ("jit", "pjit") or len(t.arguments) != 1:
        return None
    argname = t.arguments[0]
    function = enclosing_function(site.tree(t.filename), t.lineno, t.function)
    if function is None:
        return None
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if argname not in params or (only_integers and not _is_integer_scalar(site, argname)):
        return None
    argnum = params.index(argname)
    note = f"# or, if `{argname}` is a fixed setting (each new value compiles again):"
    for outer in reversed(site.outer):
        stmt = parse_statement(outer.text)
        rewritten = rw.rewrite_jit_static(stmt, t.function, argnum) if stmt else None
        if rewritten:
            return f"{note}\n{rewritten}"
    decorator = rw.jit_decorator(function)
    if decorator:
        return (
            f"{note}\n@functools.partial({decorator}, static_argnums={argnum})  # not @{decorator}"
        )
    return f"{note}\n{t.function} = {jax_name(site)}.jit({t.function}, static_argnums={argnum})"


def _is_integer_scalar(site: ErrorSite, name: str) -> bool:
    try:
        value = site.lookup(name)
    except KeyError:
        return False
    dtype = getattr(value, "dtype", None)
    if dtype is None or getattr(value, "shape", None) != ():
        return isinstance(value, int)
    return bool(jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_))


def _with(fix: str, alternative: str | None) -> str:
    return f"{fix}\n{alternative}" if alternative else fix


def _without_note(alternative: str) -> str:
    return alternative.split("\n", 1)[1]


# --------------------------------------------------------------------------- True / False
def build_tracer_bool(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.TracerBoolConversionError")
    static = static_alternative(exc, site, only_integers=True)
    where = in_trace(exc)
    lax = lax_name(site)
    stmt = site.statement
    bound = set(site.local_ns)
    if isinstance(stmt, ast.If):
        cond = ast.unparse(stmt.test)
        what = (
            f"A Python `if` needs True or False now, but `{cond}` is a traced value{where}: "
            "it has no value until the compiled code runs. lax.cond picks a branch at run time."
        )
        following = _following(site, stmt)
        fix = cf.rewrite_if(stmt, following, lax, bound)
        if fix is None:
            generic = f"{lax}.cond({cond}, true_fun, false_fun, *operands)  # same shapes out"
            return Finding(what, _with(generic, static), docs)
        pick = cf.rewrite_if_as_where(stmt, following, jnp_name(site))
        if pick is not None:
            fix += f"\n# or compute both sides and pick element-wise: {pick}"
        return Finding(what, _with(fix, static), docs, rewritten=True)
    if isinstance(stmt, ast.While):
        cond = ast.unparse(stmt.test)
        what = (
            f"A Python `while` asks `{cond}` for True or False on every turn, but it is a "
            f"traced value{where}. lax.while_loop runs the loop inside the compiled code."
        )
        fix = cf.rewrite_while(stmt, lax, bound)
        if fix is None:
            generic = f"state = {lax}.while_loop(cond_fun, body_fun, state)"
            return Finding(what, _with(generic, static), docs)
        return Finding(what, _with(fix, static), docs, rewritten=True)
    logical = cf.rewrite_logical(stmt, jnp_name(site)) if stmt is not None else None
    if logical:
        what = (
            f"`and`, `or` and `not` ask Python for True or False, but their operands are "
            f"traced values{where}. jnp.logical_and/or/not work element-wise on arrays."
        )
        return Finding(what, _with(logical, static), docs, rewritten=True)
    what = (
        f"Python asked for True or False (`if`, `while`, `bool()`), but the value is traced"
        f"{where}: it has no value until the compiled code runs."
    )
    generic = f"{lax}.cond(pred, true_fun, false_fun)  # or {jnp_name(site)}.where(pred, a, b)"
    return Finding(what, _with(generic, static), docs)


def _following(site: ErrorSite, stmt: ast.stmt) -> ast.stmt | None:
    body = parent_body(site.module, stmt) or []
    index = next((i for i, s in enumerate(body) if s is stmt), -1)
    return body[index + 1] if 0 <= index < len(body) - 1 else None


# --------------------------------------------------------------------------- concrete values
_CONVERSION = re.compile(r"The problem arose with the `(\w+)` function")


def build_concretization(exc: BaseException, site: ErrorSite) -> Finding:
    message = str(exc)
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.ConcretizationTypeError")
    where = in_trace(exc)
    stmt = site.statement
    conversion = _CONVERSION.search(message)
    # int(x)/float(x) may be handed data, so static_argnums only for a setting-like scalar
    converts = conversion is not None and stmt is not None
    static = static_alternative(exc, site, only_integers=converts)
    if conversion and stmt is not None:
        builtin = conversion.group(1)
        swaps: dict[ast.AST, ast.AST] = {
            node: ast.Call(
                ast.Attribute(value=node.args[0], attr="astype"), [ast.Name(builtin)], []
            )
            for node in ast.walk(stmt)
            if isinstance(node, ast.Call)
            and rw.dotted(node.func) == builtin
            and len(node.args) == 1
        }
        if swaps:
            what = (
                f"`{builtin}(...)` needs a concrete Python number, but the value is traced"
                f"{where}. Keep it a JAX array and change its dtype instead."
            )
            return Finding(what, _with(rw.replace_nodes(stmt, swaps), static), docs, True)
    if "item() method" in message and stmt is not None:
        items: dict[ast.AST, ast.AST] = {
            node: node.func.value
            for node in ast.walk(stmt)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "item"
            and not node.args
        }
        if items:
            what = (
                f"`.item()` makes a Python number, but the array is traced{where}: keep the array."
            )
            return Finding(what, _with(rw.replace_nodes(stmt, items), static), docs, True)
    t = traced(exc)
    argument = f"`{t.arguments[0]}`" if t and t.arguments else "a traced argument"
    what = (
        f"This needs a concrete value (a size, a shape, a Python number), but it depends on "
        f"{argument}, which is traced{where}: JAX knows only its shape and dtype while tracing."
    )
    if static:
        return Finding(what, _without_note(static), docs, rewritten=True)
    return Finding(
        what, "f = jax.jit(f, static_argnums=...)  # the argument that sets a size", docs
    )


def build_tracer_integer(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.TracerIntegerConversionError")
    static = static_alternative(exc, site, only_integers=False)
    where = in_trace(exc)
    stmt = site.statement
    if isinstance(stmt, ast.For):
        what = (
            f"`{ast.unparse(stmt.iter)}` needs a concrete Python integer to count the turns, but "
            f"it is traced{where}. lax.fori_loop runs the loop inside the compiled code."
        )
        fix = cf.rewrite_for_range(stmt, lax_name(site), set(site.local_ns))
        if fix:
            return Finding(what, _with(fix, static), docs, rewritten=True)
        if static:
            return Finding(what, _without_note(static), docs, rewritten=True)
        return Finding(what, f"{lax_name(site)}.fori_loop(0, n, body_fun, init)", docs)
    what = (
        "Python needed an integer here (a `range`, a list index, a count), but the value is "
        f"traced{where}."
    )
    if static:
        return Finding(what, _without_note(static), docs, rewritten=True)
    return Finding(what, f"{jnp_name(site)}.asarray(values)[i]  # index a JAX array instead", docs)


# --------------------------------------------------------------------------- NumPy and masks
def build_tracer_array(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.TracerArrayConversionError")
    numpy_names = {n for n, v in (*site.global_ns.items(), *site.local_ns.items()) if v is np}
    jnp_alias = jnp_name(site)
    what = (
        f"NumPy works only on concrete arrays, but this value is traced{in_trace(exc)}. "
        "jax.numpy has the same functions and works on traced values."
    )
    fix = None
    if site.statement is not None and numpy_names:
        fix = rw.rewrite_module_calls(
            site.statement, numpy_names, jnp_alias, lambda attr: hasattr(jnp, attr)
        )
    if fix:
        return Finding(what, fix, docs, rewritten=True)
    generic = f"# use {jnp_alias}.<function> for NumPy's; NumPy-only code: jax.pure_callback"
    return Finding(what, generic, docs)


def build_boolean_index(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.NonConcreteBooleanIndexError")
    where = in_trace(exc) if traced(exc) else " under jit"
    jnp_alias = jnp_name(site)

    def is_bool_name(name: str) -> bool:
        try:
            dtype = getattr(site.lookup(name), "dtype", None)
        except KeyError:
            return False
        return dtype is not None and dtype == np.bool_

    what = (
        "Selecting with a boolean mask makes an array whose length depends on the values, "
        f"but every shape must be known in advance{where}."
    )
    stmt = site.statement
    fix = rw.rewrite_boolean_index(stmt, jnp_alias, is_bool_name) if stmt is not None else None
    found = rw.mask_subscript(stmt, is_bool_name) if stmt is not None else None
    array, mask = (ast.unparse(found.value), ast.unparse(found.slice)) if found else ("x", "mask")
    extract = f"{jnp_alias}.extract({mask}, {array}, size=K)"
    pad = f"# or keep the selected values, padded to a size: {extract}"
    if fix:
        return Finding(what, f"{fix}\n{pad}", docs, rewritten=True)
    return Finding(what, f"{jnp_alias}.where(mask, x, 0)\n{pad}", docs)


# --------------------------------------------------------------------------- leaks
_LEAKED_IN = re.compile(r"value leaked was (\S+) at (.+):(\d+)")
_STORING = {"append", "extend", "insert", "add", "update", "setdefault", "put", "appendleft"}


def build_leaked_tracer(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.UnexpectedTracerError")
    found = _LEAKED_IN.search(str(exc))
    name = found.group(1) if found else "the transformed function"
    if found:
        filename, lineno = found.group(2), int(found.group(3))
        function = enclosing_function(site.tree(filename), lineno, name)
        leak = side_effect(function) if function is not None else None
        if function is not None and leak is not None:
            stmt, stored = leak
            text = rw.unparse_statement(stmt)
            what = (
                f"`{name}` stored a traced value outside itself ({label(filename, stmt.lineno)}: "
                f"`{text}`). It is valid only during that trace, so using it afterwards fails: "
                "return the value instead."
            )
            ret = _last_return(function)
            fix = f"# in {name}, instead of `{text}`:\nreturn {f'{ret}, ' if ret else ''}{stored}"
            return Finding(what, fix, docs, rewritten=True)
    what = (
        f"A traced value escaped `{name}` through a global, a list or an attribute (a side "
        "effect) and is used after its trace ended: return it from the function instead."
    )
    return Finding(what, "return result, value  # instead of storing `value` outside", docs)


def side_effect(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ast.stmt, str] | None:
    """The first statement of ``function`` that stores a value outside it, and that value."""
    args = function.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    declared = {
        name
        for node in ast.walk(function)
        if isinstance(node, ast.Global | ast.Nonlocal)
        for name in node.names
    }
    local = (set(rw.assigned_names(function.body) or ()) | params) - declared

    def outside(name: str) -> bool:
        return name not in local or name == "self"

    for stmt in (node for node in ast.walk(function) if isinstance(node, ast.stmt)):
        stored = _stored_value(stmt, outside, declared)
        if stored is not None:
            return stmt, stored
    return None


def _stored_value(stmt: ast.stmt, outside: Callable[[str], bool], declared: set[str]) -> str | None:
    """What ``stmt`` stores outside the function (``leak.append(y)``, ``self.y = y``,
    ``cache[k] = y``, an assignment to a ``global`` name), or None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _STORING
            and isinstance(func.value, ast.Name)
            and outside(func.value.id)
            and call.args
        ):
            return ast.unparse(call.args[-1])
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            root = _root(target)
            if root is not None and (
                root.id in declared or (target is not root and outside(root.id))
            ):
                return ast.unparse(stmt.value)
    return None


def _root(target: ast.expr) -> ast.Name | None:
    """The name ``x.a[0].b`` starts from (``x``), or None when it starts elsewhere."""
    while isinstance(target, ast.Subscript | ast.Attribute):
        target = target.value
    return target if isinstance(target, ast.Name) else None


def _last_return(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    returns = [n for n in function.body if isinstance(n, ast.Return) and n.value is not None]
    return ast.unparse(returns[-1].value) if returns and returns[-1].value is not None else None
