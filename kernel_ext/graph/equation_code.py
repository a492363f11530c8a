"""What a reader calls an equation: the code that made it and the call it belongs to.

An equation's traceback gives its line and column (``jax.extend.source_info_util``'s
summary, ``file:line:column``); the line's text (``linecache``: IPython registers every
cell) parsed gives the expression that starts there and does the equation's work::

    equation_code(eqn)                 # "x @ p['W']" (a dot_general at In[4], line 3)
    call_of(explorer, "e4")            # "layer 1 (params[1])": the call holding it

Ranked lists and overlay notes name equations this way, never by jaxlab's ids.
"""

from __future__ import annotations

import ast
import functools
import linecache
import re
from typing import Any

MOST_CHARACTERS = 48  # longer code is cut with "…"
_WHERE = re.compile(r"^(?P<file>.*):(?P<line>\d+):(?P<column>\d+)(?: \(.*\))?$")
_RUN = re.compile(r"^(?P<prefix>.*?)run(?P<lo>\d+)-(?P<hi>\d+)$")
# The operator an equation of each primitive is written with (its expression is the one
# starting at the equation's column that uses it).
_OPERATOR: dict[str, type[ast.AST]] = {
    "dot_general": ast.MatMult,
    "add": ast.Add,
    "sub": ast.Sub,
    "mul": ast.Mult,
    "div": ast.Div,
    "pow": ast.Pow,
    "integer_pow": ast.Pow,
    "rem": ast.Mod,
    "neg": ast.USub,
}
_EXPRESSIONS = (ast.BinOp, ast.Call, ast.UnaryOp, ast.Subscript, ast.Compare)


def equation_code(eqn: Any) -> str | None:
    """The source text of the expression that made ``eqn`` (``"x @ p['W']"``), or None
    where its line cannot be read or holds no expression at its column."""
    from jax.extend import source_info_util

    try:
        summary = source_info_util.summarize(eqn.source_info)
    except Exception:  # a JAX release without a traceback for this equation
        return None
    found = _WHERE.match(summary or "")
    if found is None:
        return None
    source = "".join(linecache.getlines(found["file"]))
    if not source:
        return None
    return _code_at(source, int(found["line"]), int(found["column"]), str(eqn.primitive.name))


def _code_at(source: str, line: int, column: int, primitive: str) -> str | None:
    here = _expressions(source).get((line, column))
    if not here:
        return None
    operator = _OPERATOR.get(primitive)
    written = [
        n for n in here if operator is not None and isinstance(getattr(n, "op", None), operator)
    ]
    calls = [n for n in here if isinstance(n, ast.Call)]
    # the operator's or the call's own expression; else the whole one starting here (a
    # bias's broadcast is made by the "+" of "x @ W + b")
    chosen = min(written or calls, key=_extent) if written or calls else max(here, key=_extent)
    text = ast.get_source_segment(source, chosen)
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= MOST_CHARACTERS else text[: MOST_CHARACTERS - 1] + "…"


def _extent(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)


@functools.lru_cache(maxsize=32)
def _expressions(source: str) -> dict[tuple[int, int], list[ast.expr]]:
    """The expressions of ``source`` by where they start (line, column); parsed once."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[tuple[int, int], list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, _EXPRESSIONS):
            found.setdefault((node.lineno, node.col_offset), []).append(node)
    return found


def call_of(explorer: Any, item_id: str) -> str | None:
    """The innermost named call or iteration holding equation ``item_id`` as the explorer
    names its box (``layer 3 (params[3])``, ``∂ layer 3``), or None."""
    blocks = {explorer.tree.prefix: explorer.tree}
    named: str | None = None
    for holder in explorer.holders(item_id):
        run = _RUN.match(holder)
        if run is None:
            continue
        block = blocks.get(run["prefix"])
        if block is None:
            block = next((b for b, _ in explorer.where.values() if b.prefix == run["prefix"]), None)
            if block is None:
                continue
            blocks[run["prefix"]] = block
        label = explorer.run_label(block, int(run["lo"]), int(run["hi"]))
        if label and "×" not in label:  # "mlp (layer ×20)" names all of them, not this one
            named = label
    return named
