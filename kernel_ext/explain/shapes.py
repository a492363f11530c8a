"""Shape mismatches in ``dot``/``matmul``/broadcasting: both operand shapes and the fix.

JAX's matmul message names only the contracting sizes, so the operands are found in the
user's statement (``a @ b``, ``jnp.dot(a, b)``, ``a + b``) and their shapes read from the
frame, for plain names and attributes only (nothing is called).

>>> matmul_fix("a", "b", (3, 4), (3, 4))
('a @ b.T', 'transpose `b`: (3, 4) → (4, 3)')
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from . import rewrite as rw
from .finding import DOCS, Finding, jax_name, jnp_name
from .source import ErrorSite

MATMUL_PAGE = f"{DOCS}/_autosummary/jax.numpy.matmul.html"
BROADCAST_PAGE = f"{DOCS}/_autosummary/jax.numpy.broadcast_shapes.html"

_CONTRACT = re.compile(
    r"contracting dimensions to have the same shape, got \(([^)]*)\) and \(([^)]*)\)"
)
_BCAST_LAX = re.compile(r"got incompatible shapes for broadcasting: (\([^)]*\)), (\([^)]*\))")
_BCAST_NP = re.compile(r"Incompatible shapes for broadcasting: shapes=\[(.*)\]")
_MATMUL_TYPES = re.compile(r"matmul arguments: \w+\[([\d,]*)\] and \w+\[([\d,]*)\]")
_PRODUCTS = ("dot", "matmul")
_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)

Shape = tuple[int, ...]


def _ints(text: str) -> Shape:
    return tuple(int(n) for n in re.findall(r"\d+", text))


def _value_of(node: ast.expr, site: ErrorSite) -> Any:
    """The value of ``x``, ``self.w``, ``w.T`` or ``batch["x"]`` at the site; nothing is
    called except attribute access and indexing a dict, list or tuple by a constant."""
    if isinstance(node, ast.Name):
        return site.lookup(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_value_of(node.value, site), node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        container, key = _value_of(node.value, site), node.slice.value
        if isinstance(container, dict):
            return container[key]
        if isinstance(container, list | tuple) and isinstance(key, int):
            return container[key]
    raise LookupError(ast.unparse(node))


def _shape_of(node: ast.expr, site: ErrorSite) -> Shape | None:
    """The shape of an operand at the site, or None when it cannot be read safely."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return ()
    try:
        shape = _value_of(node, site).shape
    except Exception:  # a user object's property may raise anything: no shape then
        return None
    return tuple(int(n) for n in shape) if isinstance(shape, tuple) else None


def _operands(stmt: ast.stmt, products: bool) -> list[tuple[ast.expr, ast.expr, ast.AST]]:
    """(left, right, node) for each product (``@``, dot, matmul) or element-wise operation."""
    found: list[tuple[ast.expr, ast.expr, ast.AST]] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.BinOp):
            is_product = isinstance(node.op, ast.MatMult)
            if is_product == products and (products or isinstance(node.op, _ELEMENTWISE)):
                found.append((node.left, node.right, node))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            name = (rw.dotted(node.func) or "").rsplit(".", 1)[-1]
            if (name in _PRODUCTS) == products:
                found.append((node.args[0], node.args[1], node))
    return found


def _contracted(sa: Shape, sb: Shape) -> tuple[int, int] | None:
    if not sa or not sb:
        return None
    return sa[-1], (sb[-2] if len(sb) >= 2 else sb[0])


def matmul_fix(a: str, b: str, sa: Shape, sb: Shape) -> tuple[str, str] | None:
    """The likely intended product and why, or None."""
    pair = _contracted(sa, sb)
    if pair is None:
        return None
    k, k_b = pair
    if len(sb) == 2 and sb[1] == k:
        return f"{a} @ {b}.T", f"transpose `{b}`: {sb} → {sb[::-1]}"
    if len(sa) == 2 and sa[0] == k_b:
        return f"{a}.T @ {b}", f"transpose `{a}`: {sa} → {sa[::-1]}"
    if len(sb) <= 2 and math.prod(sb) % k == 0:
        return f"{a} @ {b}.reshape({k}, -1)", f"reshape `{b}` to ({k}, {math.prod(sb) // k})"
    return None


def broadcast_fix(b: str, sa: Shape, sb: Shape) -> tuple[str, str] | None:
    """How ``b`` (shape ``sb``) can line up with ``a`` (shape ``sa``), or None."""
    if len(sa) == len(sb) == 2 and sa == sb[::-1]:
        return f"{b}.T", f"transpose `{b}`: {sb} → {sa}"
    if 0 < len(sb) < len(sa) and sa[: len(sb)] == sb:
        index = ", ".join([":"] * len(sb) + ["None"] * (len(sa) - len(sb)))
        new = sb + (1,) * (len(sa) - len(sb))
        return f"{b}[{index}]", f"a missing axis: `{b}` {sb} → {new} lines up with {sa}"
    if math.prod(sa) == math.prod(sb) and sa != sb:
        return f"{b}.reshape{sa}", f"reshape `{b}`: {sb} → {sa}"
    return None


def shape_finding(exc: BaseException, site: ErrorSite) -> Finding:
    message = str(exc)
    products = _CONTRACT.search(message) is not None or _MATMUL_TYPES.search(message) is not None
    stmt = site.statement
    if stmt is None:
        return _from_message(message, products, site)
    for left, right, node in _operands(stmt, products):
        sa, sb = _shape_of(left, site), _shape_of(right, site)
        if sa is None or sb is None:
            continue
        if products:
            found = _product_finding(site, stmt, node, left, right, sa, sb, message)
        else:
            found = _broadcast_finding(stmt, left, right, sa, sb)
        if found is not None:
            return found
    return _from_message(message, products, site)


def _product_finding(
    site: ErrorSite,
    stmt: ast.stmt,
    node: ast.AST,
    left: ast.expr,
    right: ast.expr,
    sa: Shape,
    sb: Shape,
    message: str,
) -> Finding | None:
    a, b = ast.unparse(left), ast.unparse(right)
    batch = _MATMUL_TYPES.search(message)
    if batch:
        what = (
            f"`{a}` has shape {sa} and `{b}` has shape {sb}: matmul multiplies the last two "
            f"axes and the leading (batch) axes {sa[:-2]} and {sb[:-2]} must be equal or 1."
        )
        fix = f"{a}[:, None] @ {b}[None]  # every pair of batches; or make the batch axes equal"
        return Finding(what, fix, MATMUL_PAGE)
    pair = _contracted(sa, sb)
    if pair is None or pair[0] == pair[1]:
        return None
    what = (
        f"`{a}` has shape {sa} and `{b}` has shape {sb}: a matrix product (n, k) @ (k, m) "
        f"needs the inner sizes to agree, here {pair[0]} and {pair[1]}."
    )
    likely = matmul_fix(a, b, sa, sb)
    if likely is None:
        return Finding(what, "# reshape or transpose one side so the inner sizes meet", MATMUL_PAGE)
    product, why = likely
    new = rw.expr(product)
    if isinstance(node, ast.Call):  # jnp.dot(a, b) keeps its spelling
        assert isinstance(new, ast.BinOp)
        call = ast.Call(
            func=node.func, args=[new.left, new.right, *node.args[2:]], keywords=node.keywords
        )
        new = call
    rewritten = rw.replace_nodes(stmt, {node: new})
    text = f"{rewritten}  # {why}"
    if len(sa) == len(sb) == 2 and sa == sb:
        per_row = f"{jax_name(site)}.vmap({jnp_name(site)}.dot)({a}, {b})"
        text += f"\n# or one dot per row (a batch axis): {per_row}"
    return Finding(what, text, MATMUL_PAGE, rewritten=True)


def _broadcast_finding(
    stmt: ast.stmt, left: ast.expr, right: ast.expr, sa: Shape, sb: Shape
) -> Finding | None:
    if _broadcastable(sa, sb):
        return None
    a, b = ast.unparse(left), ast.unparse(right)
    what = (
        f"`{a}` has shape {sa} and `{b}` has shape {sb}: broadcasting lines shapes up from the "
        "right, and each pair of sizes must be equal or 1."
    )
    fix = broadcast_fix(b, sa, sb)
    target = right
    if fix is None:
        fix, target = broadcast_fix(a, sb, sa), left
    if fix is None:
        return Finding(
            what, "# reshape one operand, or add an axis with x[:, None]", BROADCAST_PAGE
        )
    new, why = fix
    rewritten = rw.replace_nodes(stmt, {target: rw.expr(new)})
    return Finding(what, f"{rewritten}  # {why}", BROADCAST_PAGE, rewritten=True)


def _broadcastable(sa: Shape, sb: Shape) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(sa), reversed(sb), strict=False))


def _from_message(message: str, products: bool, site: ErrorSite) -> Finding:
    """Without operands in the statement: what the message itself says."""
    if products:
        found = _CONTRACT.search(message)
        sizes = f" ({found.group(1).strip(', ')} vs {found.group(2).strip(', ')})" if found else ""
        what = f"A matrix product (n, k) @ (k, m) needs the inner sizes to agree{sizes}."
        return Finding(what, "# print both shapes; transpose one (x.T) or reshape it", MATMUL_PAGE)
    shapes: list[Shape] = []
    lax_form = _BCAST_LAX.search(message)
    np_form = _BCAST_NP.search(message)
    if lax_form:
        shapes = [_ints(lax_form.group(1)), _ints(lax_form.group(2))]
    elif np_form:
        shapes = [_ints(s) for s in re.findall(r"\([^)]*\)", np_form.group(1))]
    if len(shapes) >= 2:
        sa, sb = shapes[0], shapes[1]
        what = (
            f"Shapes {sa} and {sb} do not broadcast: lined up from the right, each pair of "
            "sizes must be equal or 1."
        )
        fix = broadcast_fix("b", sa, sb)
        if fix:
            return Finding(what, f"{fix[0]}  # {fix[1]}", BROADCAST_PAGE)
        return Finding(
            what, "# reshape one operand, or add an axis with x[:, None]", BROADCAST_PAGE
        )
    return Finding("The operand shapes do not fit together.", "# print both shapes", BROADCAST_PAGE)
