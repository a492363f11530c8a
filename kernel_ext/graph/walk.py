"""Walk a jaxpr into a tree of blocks and equations, before anything is drawn.

The tree keeps every nested program (inner jit, cond branches, scan and while bodies,
custom rules, remat, shard_map, pmap) with its equation count, so that the drawing can
decide what to collapse before it emits a single node.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import jax.extend.core as jcore
from jax.extend import source_info_util

from ..explain.source import is_cell, label

# Outer operands that are not passed to the nested programs (cond's branch index).
_LEADING_NON_OPERANDS = {"cond": 1}
# Nested programs whose outputs are not the equation's results (while's condition).
_NO_RESULTS = {("while", "cond_jaxpr")}


@dataclass
class Block:
    """One program: the top level, or one nested inside an equation."""

    prefix: str  # id prefix of everything inside: "" at the top, "e3/" or "e3/0/" nested
    jaxpr: Any  # jax.extend.core.Jaxpr
    role: str  # "program", or the parameter it came from: "branches[1]", "body_jaxpr", ...
    # Which outer variable feeds each of this block's invars (None: not fed from outside).
    feeds: list[Any] = field(default_factory=list)
    # Whether this block's outvars are the enclosing equation's results.
    gives_results: bool = True
    items: list[Item] = field(default_factory=list)
    # Equations inside, nested ones included: counted by walk (a walked tree never changes).
    n_equations: int = 0
    # Every scan and while at any depth, in program order (marks.carry_edges reads them
    # for every view: no walk of the whole program per view).
    loops: list[Item] = field(default_factory=list)


@dataclass
class Item:
    """One equation of a block, with the programs nested in it (if any)."""

    id: str  # "e3", "e3/0/e1", ...
    eqn: Any  # jax.extend.core.JaxprEqn
    depth: int  # depth of the cluster this equation would open: 1 for top-level equations
    blocks: list[Block] = field(default_factory=list)

    @property
    def primitive(self) -> str:
        return str(self.eqn.primitive.name)

    n_equations: int = 1  # itself and what it nests: counted by walk

    def primitive_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        count_primitives([self], counts)
        return counts


def count_primitives(items: list[Item], counts: dict[str, int]) -> None:
    """Add each equation of ``items``, nested ones included, to ``counts`` by primitive
    (one count for a whole run: no Counter made and merged per equation)."""
    todo = items[::-1]  # in program order, nested ones after their equation (ties in
    while todo:  # a Counter's most_common go to what was counted first)
        item = todo.pop()
        name = str(item.eqn.primitive.name)
        counts[name] = counts.get(name, 0) + 1
        for block in reversed(item.blocks):
            todo.extend(block.items[::-1])


def nested_programs(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """(role, Jaxpr) for every program in an equation's params, in a stable order."""
    found: list[tuple[str, str, Any]] = []  # (param name, role, program)
    closed_t, open_t = jcore.ClosedJaxpr, jcore.Jaxpr
    for name, value in params.items():  # most equations hold none: no sort for them
        if type(value) in _PLAIN:
            continue
        if isinstance(value, closed_t):
            found.append((name, name, value.jaxpr))
        elif isinstance(value, open_t):
            found.append((name, name, value))
        elif isinstance(value, tuple | list):
            for k, v in enumerate(value):
                if isinstance(v, closed_t):
                    found.append((name, f"{name}[{k}]", v.jaxpr))
                elif isinstance(v, open_t):
                    found.append((name, f"{name}[{k}]", v))
    if len(found) > 1:
        found.sort(key=lambda f: f[0])  # stable: a tuple's programs stay in order
    return [(role, program) for _, role, program in found]


# Parameter values that are never a program nor hold one (checked by type first: most of
# a 10,000-equation program's parameters are these).
_PLAIN = frozenset({int, float, bool, str, type(None), bytes})


def _feeds(
    primitive: str, role: str, params: dict[str, Any], outer: list[Any], n: int
) -> list[Any]:
    """Which outer operand feeds each of a nested program's ``n`` parameters."""
    if primitive == "while":
        cn, bn = params.get("cond_nconsts", 0), params.get("body_nconsts", 0)
        carry = outer[cn + bn :]
        feeds = outer[:cn] + carry if role == "cond_jaxpr" else outer[cn : cn + bn] + carry
    else:
        feeds = outer[_LEADING_NON_OPERANDS.get(primitive, 0) :]
    if len(feeds) == n:
        return list(feeds)
    if len(feeds) > n:  # right-align: leading operands are consts the program does not take
        return list(feeds[len(feeds) - n :])
    return [None] * n


def walk(jaxpr: Any, prefix: str = "", role: str = "program", depth: int = 1) -> Block:
    """The tree of ``jaxpr``: its equations, with nested programs walked recursively."""
    block = Block(prefix=prefix, jaxpr=jaxpr, role=role)
    for i, eqn in enumerate(jaxpr.eqns):
        item = Item(id=f"{prefix}e{i}", eqn=eqn, depth=depth)
        programs = nested_programs(eqn.params)
        primitive = str(eqn.primitive.name)
        if primitive in _LOOPS:
            block.loops.append(item)
        for k, (sub_role, sub) in enumerate(programs):
            sub_prefix = f"{item.id}/" if len(programs) == 1 else f"{item.id}/{k}/"
            child = walk(sub, sub_prefix, sub_role, depth + 1)
            child.feeds = _feeds(primitive, sub_role, eqn.params, list(eqn.invars), len(sub.invars))
            child.gives_results = (primitive, sub_role) not in _NO_RESULTS and len(
                sub.outvars
            ) == len(eqn.outvars)
            item.blocks.append(child)
            item.n_equations += child.n_equations
            block.loops += child.loops
        block.items.append(item)
        block.n_equations += item.n_equations
    return block


_LOOPS = frozenset({"scan", "while"})


class Memo(dict):
    """A bounded memo: emptied whole when it holds ``most`` entries (a long session
    traces many programs), so a lookup stays one dict read."""

    def __init__(self, most: int = 4096) -> None:
        super().__init__()
        self.most = most

    def keep(self, key: Any, value: Any) -> Any:
        """Remember ``value`` under ``key``; return it."""
        if len(self) >= self.most:
            self.clear()
        self[key] = value
        return value


# Traceback -> its line: equal tracebacks (a layer's equations, each time a Python loop
# calls it) summarise alike, and summarising costs 14 µs (35,000 asks on a 10,000-equation
# program's overlay). Bounded: a long session traces many programs.
_LINES = Memo()


def source_line(eqn: Any) -> str | None:
    """The user's line that produced ``eqn``: ``"model.py:12 (loss)"``, or for a notebook
    cell ``"In[3], line 2 (loss)"`` as IPython's tracebacks name it."""
    info = eqn.source_info
    try:
        traceback = info.traceback
        found = _LINES.get(traceback, _LINES)
    except (AttributeError, TypeError):  # no traceback, or one that cannot be hashed
        return _source_line(info)
    if found is _LINES:
        found = _LINES.keep(traceback, _source_line(info))
    return found


def _source_line(info: Any) -> str | None:
    try:
        text = source_info_util.summarize(info)
    except Exception:  # a JAX release without a traceback for this equation
        return None
    if not text or text.startswith("unknown"):
        return None
    where, _, func = text.partition(" ")
    func = func.strip("()").rsplit(".", 1)[-1]  # "test.<locals>.loss" -> "loss"
    parts = where.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():  # file:line:column
        filename, line = parts[0], int(parts[1])
        where = label(filename, line) if is_cell(filename) else f"{filename}:{line}"
    where = where.rsplit("/", 1)[-1] if not where.startswith("In[") else where
    return f"{where} ({func})" if func else where


@functools.lru_cache(maxsize=4096)
def without_function(source: str | None) -> str:
    """``"In[4], line 3 (loss)"`` -> ``"In[4], line 3"``: a source line without its function."""
    return _FUNCTION.sub("", source or "")


_FUNCTION = re.compile(r" \([^()]*\)$")


_STACKS = Memo()  # name stack -> its text (made in Python: 6 µs a call)


def name_stack(eqn: Any) -> str:
    stack = getattr(eqn.source_info, "name_stack", "")
    try:
        text = _STACKS.get(stack)
    except TypeError:  # an unhashable stack: its text made each time
        return str(stack)
    if text is None:
        text = _STACKS.keep(stack, str(stack))
    return text
