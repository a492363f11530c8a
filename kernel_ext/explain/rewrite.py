"""Rewrite the user's own statement into the form JAX accepts (control flow on traced
values has its own module, :mod:`jaxlab.explain.control_flow`).

Every function takes a parsed statement (``ast.stmt``) and returns the corrected source,
or None when the statement does not have the shape the rewrite understands; nothing here
runs user code.

>>> rewrite_item_assignment(ast.parse("x[0] = 1.0").body[0])
'x = x.at[0].set(1.0)'
>>> rewrite_module_calls(ast.parse("y = np.sin(x)").body[0], {"np"}, "jnp", lambda a: True)
'y = jnp.sin(x)'
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable, Sequence

_AT_METHODS = {
    ast.Add: "add",
    ast.Sub: "subtract",
    ast.Mult: "multiply",
    ast.Div: "divide",
    ast.Pow: "power",
}
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def dotted(node: ast.AST) -> str | None:
    """``jax.random.normal`` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def unparse_statement(stmt: ast.stmt) -> str:
    """The statement's source; for a compound statement only its header line."""
    if isinstance(stmt, _COMPOUND):
        stmt = copy.copy(stmt)
        for name in ("body", "orelse", "finalbody", "handlers", "decorator_list"):
            if hasattr(stmt, name):
                setattr(stmt, name, [ast.Pass()] if name == "body" else [])
        return ast.unparse(stmt).splitlines()[0]
    return ast.unparse(stmt)


def replace_nodes(stmt: ast.stmt, swaps: dict[ast.AST, ast.AST]) -> str:
    """The statement's source with each node in ``swaps`` replaced (the tree is untouched)."""
    clone = copy.deepcopy(stmt)
    mapping = dict(zip(ast.walk(stmt), ast.walk(clone), strict=True))
    parents = {
        child: parent for parent in ast.walk(clone) for child in ast.iter_child_nodes(parent)
    }
    for old, new in swaps.items():
        target = mapping[old]
        parent = parents.get(target)
        if parent is None:  # the statement itself
            return ast.unparse(new)
        _swap_child(parent, target, new)
    return unparse_statement(clone)


def _swap_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return


def expr(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def assigned_names(stmts: Sequence[ast.stmt]) -> list[str] | None:
    """Names the statements assign, in order; None if any target is not a plain name."""
    names: list[str] = []

    def add(target: ast.expr) -> bool:
        if isinstance(target, ast.Name):
            if target.id not in names:
                names.append(target.id)
            return True
        if isinstance(target, ast.Tuple | ast.List):
            return all(add(t) for t in target.elts)
        return False

    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                if not all(add(t) for t in node.targets):
                    return None
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                if not add(node.target):
                    return None
            elif isinstance(node, ast.For | ast.AsyncFor) and not add(node.target):
                return None
    return names


# --------------------------------------------------------------------------- item assignment
def rewrite_item_assignment(stmt: ast.stmt) -> str | None:
    """``x[i] = v`` → ``x = x.at[i].set(v)``; ``x[i] += v`` → ``x = x.at[i].add(v)``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, method, value = stmt.targets[0], "set", stmt.value
    elif isinstance(stmt, ast.AugAssign) and type(stmt.op) in _AT_METHODS:
        target, method, value = stmt.target, _AT_METHODS[type(stmt.op)], stmt.value
    else:
        return None
    if not isinstance(target, ast.Subscript):
        return None
    base, index = target.value, target.slice
    # x[i][j] = v writes into a temporary copy; x.at[i, j] is what was meant
    inner = base if isinstance(base, ast.Subscript) else None
    if (
        inner is not None
        and not isinstance(inner.slice, ast.Tuple | ast.Slice)
        and not isinstance(index, ast.Tuple | ast.Slice)
    ):
        base, index = inner.value, ast.Tuple(elts=[inner.slice, index], ctx=ast.Load())
    if dotted(base) is None:
        return None
    at = ast.Subscript(value=ast.Attribute(value=base, attr="at"), slice=index, ctx=ast.Load())
    call = ast.Call(func=ast.Attribute(value=at, attr=method), args=[value], keywords=[])
    store = copy.deepcopy(base)
    for node in ast.walk(store):
        if isinstance(node, ast.Name | ast.Attribute):
            node.ctx = ast.Load()
    store.ctx = ast.Store()  # type: ignore[attr-defined]
    return ast.unparse(ast.Assign(targets=[store], value=call, lineno=0))


# --------------------------------------------------------------------------- numpy → jnp
def rewrite_module_calls(
    stmt: ast.stmt, old_names: Iterable[str], new_name: str, exists: Callable[[str], bool]
) -> str | None:
    """``np.sin(x)`` → ``jnp.sin(x)`` for every ``np.<attr>`` where ``exists(attr)``."""
    old = set(old_names)
    swaps: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in old
            and exists(node.attr)
        ):
            swaps[node.value] = ast.Name(id=new_name, ctx=ast.Load())
    return replace_nodes(stmt, swaps) if swaps else None


# --------------------------------------------------------------------------- grad
def _grad_calls(stmt: ast.stmt, names: Sequence[str]) -> list[ast.Call]:
    """Calls of the form ``grad(f)(args)`` where the inner callee ends in one of ``names``."""
    found = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
            callee = dotted(node.func.func) or ""
            if callee.rsplit(".", 1)[-1] in names:
                found.append(node)
    return found


def rewrite_grad_float_args(stmt: ast.stmt, is_int_name: Callable[[str], str | None]) -> str | None:
    """``grad(f)(3)`` → ``grad(f)(3.0)``; a name holding integers gets a float conversion.

    ``is_int_name(name)`` says what the name holds: ``"python"`` for a Python int,
    ``"array"`` for an integer array, None otherwise.
    """
    swaps: dict[ast.AST, ast.AST] = {}
    for call in _grad_calls(stmt, ("grad", "value_and_grad")):
        for arg in call.args:
            number = arg.operand if isinstance(arg, ast.UnaryOp) else arg
            if isinstance(number, ast.Constant) and type(number.value) is int:
                swaps[number] = ast.Constant(float(number.value))
            elif isinstance(arg, ast.Name):
                holds = is_int_name(arg.id)
                if holds == "python":
                    swaps[arg] = expr(f"float({arg.id})")
                elif holds == "array":
                    swaps[arg] = expr(f"{arg.id}.astype(float)")
    return replace_nodes(stmt, swaps) if swaps else None


def rewrite_grad_to_jacobian(stmt: ast.stmt) -> tuple[str, str] | None:
    """``grad(f)(x)`` → (``jacrev(f)(x)``, ``grad(lambda x: f(x).sum())(x)``)."""
    calls = _grad_calls(stmt, ("grad",))
    if not calls:
        return None
    call = calls[0]
    inner = call.func
    assert isinstance(inner, ast.Call)
    callee = dotted(inner.func) or "grad"
    jac = copy.deepcopy(inner)
    jac.func = expr(callee[: -len("grad")] + "jacrev")
    if not inner.args:
        return None
    fun = ast.unparse(inner.args[0])
    n = max(len(call.args), 1)
    params = ", ".join(f"a{i}" for i in range(n)) if n > 1 else "x"
    summed = copy.deepcopy(inner)
    summed.args = [expr(f"lambda {params}: {fun}({params}).sum()"), *inner.args[1:]]
    return replace_nodes(stmt, {inner: jac}), replace_nodes(stmt, {inner: summed})


def rewrite_jit_static(stmt: ast.stmt, function: str, argnum: int) -> str | None:
    """``jax.jit(f)(...)`` → ``jax.jit(f, static_argnums=1)(...)`` at a call site."""
    swaps: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and (dotted(node.func) or "").rsplit(".", 1)[-1] == "jit"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == function
            and not any((k.arg or "").startswith("static_arg") for k in node.keywords)
        ):
            new = copy.deepcopy(node)
            new.keywords.append(ast.keyword(arg="static_argnums", value=ast.Constant(argnum)))
            swaps[node] = new
    return replace_nodes(stmt, swaps) if swaps else None


def jit_decorator(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The spelling of the ``jit`` decorator on ``function`` (``jax.jit``), or None."""
    for decorator in function.decorator_list:
        name = dotted(decorator)
        if name and name.rsplit(".", 1)[-1] == "jit":
            return name
    return None


# --------------------------------------------------------------------------- boolean masks
_MASK_NODES = (ast.Compare, ast.BoolOp)
_REDUCTIONS = ("sum", "mean")


def is_mask_expression(node: ast.expr, is_bool_name: Callable[[str], bool]) -> bool:
    if isinstance(node, _MASK_NODES):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert | ast.Not):
        return is_mask_expression(node.operand, is_bool_name)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr | ast.BitXor):
        return True
    if isinstance(node, ast.Call):
        callee = (dotted(node.func) or "").rsplit(".", 1)[-1]
        return callee.startswith(("is", "logical_"))
    return isinstance(node, ast.Name) and is_bool_name(node.id)


def mask_subscript(stmt: ast.stmt, is_bool_name: Callable[[str], bool]) -> ast.Subscript | None:
    """The first ``x[mask]`` in the statement that reads with a boolean mask."""
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and is_mask_expression(node.slice, is_bool_name)
        ):
            return node
    return None


def rewrite_boolean_index(
    stmt: ast.stmt, jnp: str, is_bool_name: Callable[[str], bool]
) -> str | None:
    """``x[x > 0].sum()`` → ``x.sum(where=x > 0)``; ``x[m]`` → ``jnp.where(m, x, 0)``."""
    node = mask_subscript(stmt, is_bool_name)
    if node is None:
        return None
    mask = node.slice
    parents = {c: p for p in ast.walk(stmt) for c in ast.iter_child_nodes(p)}
    parent = parents.get(node)
    grand = parents.get(parent) if parent is not None else None
    # a method reduction: x[m].sum() → x.sum(where=m)
    if (
        isinstance(parent, ast.Attribute)
        and parent.attr in _REDUCTIONS
        and isinstance(grand, ast.Call)
        and grand.func is parent
    ):
        method = copy.deepcopy(grand)
        method.func = ast.Attribute(value=node.value, attr=parent.attr)
        method.keywords.append(ast.keyword(arg="where", value=mask))
        return replace_nodes(stmt, {grand: method})
    # a function reduction: jnp.sum(x[m]) → jnp.sum(x, where=m)
    if (
        isinstance(parent, ast.Call)
        and parent.args
        and parent.args[0] is node
        and (dotted(parent.func) or "").rsplit(".", 1)[-1] in _REDUCTIONS
    ):
        function = copy.deepcopy(parent)
        function.args[0] = node.value
        function.keywords.append(ast.keyword(arg="where", value=mask))
        return replace_nodes(stmt, {parent: function})
    where = ast.Call(
        func=expr(f"{jnp}.where"), args=[mask, node.value, ast.Constant(0)], keywords=[]
    )
    return replace_nodes(stmt, {node: where})


# --------------------------------------------------------------------------- PRNG keys
def rewrite_key_reuse(stmt: ast.stmt, is_random: Callable[[str], bool]) -> str | None:
    """Split the key a statement passes to several ``random`` calls (or reuses from before).

    ``is_random(prefix)`` says whether a callee prefix such as ``jax.random`` names the
    ``jax.random`` module.
    """
    uses: dict[str, list[tuple[ast.Name, str]]] = {}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            callee = dotted(node.func) or ""
            prefix = callee.rpartition(".")[0]
            if prefix and is_random(prefix):
                uses.setdefault(node.args[0].id, []).append((node.args[0], prefix))
    if not uses:
        return None
    key, found = max(uses.items(), key=lambda item: len(item[1]))
    found.sort(key=lambda item: (item[0].lineno, item[0].col_offset))
    prefix = found[0][1]
    if len(found) == 1:
        new_names = ["subkey"]
        split = f"{key}, subkey = {prefix}.split({key})"
    else:
        new_names = [f"{key}{i + 1}" for i in range(len(found))]
        count = "" if len(found) == 2 else f", {len(found)}"
        split = f"{', '.join(new_names)} = {prefix}.split({key}{count})"
    swaps: dict[ast.AST, ast.AST] = {
        name: ast.Name(id=new, ctx=ast.Load())
        for (name, _), new in zip(found, new_names, strict=True)
    }
    return split + "\n" + replace_nodes(stmt, swaps)


# --------------------------------------------------------------------------- NaNs
_GUARDED_CALLS = {
    "sqrt": "1e-12",
    "log": "1e-12",
    "log2": "1e-12",
    "log10": "1e-12",
    "rsqrt": "1e-12",
}


def rewrite_nan_guard(stmt: ast.stmt, primitive: str, jnp: str) -> str | None:
    """Keep the input of the call that made the NaN inside its domain.

    ``jnp.sqrt(x)`` → ``jnp.sqrt(jnp.maximum(x, 1e-12))`` (finite value *and* gradient);
    ``a / b`` → ``a / jnp.where(b == 0, 1.0, b)``. When ``primitive`` is not on the line
    (a NaN from the chain rule, e.g. ``mul``), the line's sqrt/log calls are guarded.
    """
    swaps: dict[ast.AST, ast.AST] = {}
    wanted = {primitive} if primitive in _GUARDED_CALLS else set(_GUARDED_CALLS)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and len(node.args) == 1:
            name = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if name in wanted:
                arg = ast.unparse(node.args[0])
                new = copy.deepcopy(node)
                new.args = [expr(f"{jnp}.maximum({arg}, {_GUARDED_CALLS[name]})")]
                swaps[node] = new
        elif primitive == "div" and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            den = ast.unparse(node.right)
            swaps[node.right] = expr(f"{jnp}.where({den} == 0, 1.0, {den})")
    if not swaps:
        return None
    # a node inside another swapped node would be lost: keep the outermost only
    inner = {n for old in swaps for n in ast.walk(old) if n is not old and n in swaps}
    return replace_nodes(stmt, {k: v for k, v in swaps.items() if k not in inner})
