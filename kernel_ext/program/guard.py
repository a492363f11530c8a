"""What a cell may do when ``%%jit`` or ``%%grad`` runs it as a traced function.

A magic turns a cell into a function of the notebook names it reads
(:func:`jaxlab.program.analyse_cell`) and traces it, several times for ``%%grad``
(derivative, check, graph). So the cell must be a function body, and it must not change
anything outside itself: a write to a notebook object would store tracers there, run once
per trace, and stay behind when the magic fails. Names the cell assigns are written back
by the magic, and only once everything succeeded. This module enforces that in two steps:

* before running, :func:`refuse_unfit` rejects code that cannot become a function
  (``await``, ``yield``, a top-level ``return``, ``from m import *``) and
  :func:`outside_writes` finds the statements that would write outside the cell
  (``global``, ``del`` of a notebook name, assigning an attribute or item of an object the
  cell did not create, ``setattr``/``delattr``/``exec``/``eval``, ``append``/``update``/...
  on a notebook list, dict or set);
* while running, :func:`guarded` snapshots the inputs' contents and, if the cell changed
  one anyway (through an alias the analysis cannot follow), puts it back and refuses.

>>> from jaxlab.program import analyse_cell
>>> [(w.name, w.line, w.kind) for w in outside_writes(analyse_cell("m.k = x * 2\\nm.k"))]
[('m', 1, 'attribute')]

(:func:`refuse_writes` raises the first one as "the cell changes `m` in place (line 1:
`m.k = x * 2`): ... Build a new value instead: `m = dataclasses.replace(m, k=x * 2)` ...")

Nothing here imports JAX or IPython: errors are :class:`ProgramError`.
"""

from __future__ import annotations

import ast
import collections
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .call import ProgramError
from .cell import CellProgram

# Methods that change a list, dict, set or deque in place. Called on a notebook object of
# another type (`optimizer.update(grads, state)`) they are ordinary calls, so the value
# decides (see `refuse_writes`).
_MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "update", "setdefault", "clear", "remove",
     "add", "discard", "sort", "reverse", "appendleft", "extendleft", "popleft",
     "difference_update", "intersection_update", "symmetric_difference_update"}
)  # fmt: skip
_DUNDER_WRITES = frozenset({"__setattr__", "__delattr__", "__setitem__", "__delitem__"})
_CONTAINERS = (list, dict, set, bytearray, collections.deque)
_AS_FUNCTION = "the cell runs as a function"


@dataclass(frozen=True)
class OutsideWrite:
    """A statement that would change something outside the cell."""

    name: str  # the notebook name it reaches
    line: int  # in the cell, from 1
    code: str  # the statement as typed (its first line)
    kind: str  # "global", "del", "attribute", "item", "call", "method", "code"
    fix: str  # what to write instead
    containers_only: bool = False  # a method call: a write only if the value is a container

    def message(self) -> str:
        where = f"line {self.line}: `{self.code}`"
        if self.kind == "global":
            return (
                f"the cell declares `global {self.name}` ({where}): a cell run by the magic "
                f"cannot set notebook names as a side effect. {self.fix}"
            )
        if self.kind == "code":
            return f"the cell calls {self.name} ({where}). {self.fix}"
        if self.kind == "del":
            return (
                f"the cell deletes the notebook name `{self.name}` ({where}): a cell run by "
                f"the magic cannot remove notebook names. {self.fix}"
            )
        return (
            f"the cell changes `{self.name}` in place ({where}): {_AS_FUNCTION} that is "
            "traced, so the change would store tracers in a notebook object, once per "
            f"trace, and stay there if the magic failed. {self.fix}"
        )


# --------------------------------------------------------------------------- before running


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _code(node: ast.AST) -> str:
    text = (ast.unparse(node).splitlines() or [""])[0]
    if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
        text = text.removeprefix("(").removesuffix(")")
    return text if len(text) <= 80 else text[:77] + "..."


def _top_level(body: tuple[ast.stmt, ...] | list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``body`` outside nested functions, lambdas and classes."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _unfit(node: ast.AST) -> str | None:
    """Why ``node`` (outside nested functions) cannot be part of a function body."""
    if not isinstance(node, ast.stmt | ast.Await | ast.Yield | ast.YieldFrom):
        return None
    code = f"`{_code(node)}`"
    if isinstance(node, ast.Await | ast.AsyncFor | ast.AsyncWith):
        return (
            f"{code} awaits, but {_AS_FUNCTION}, which cannot await. Await in a normal cell "
            "first (`result = await ...`) and use the result here"
        )
    if isinstance(node, ast.Yield | ast.YieldFrom):
        return (
            f"{code} yields, which would make the cell a generator rather than a value. "
            "Collect the values in a list (`ys = [...]`) or end the cell with the value"
        )
    if isinstance(node, ast.Return):
        value = ast.unparse(node.value) if node.value is not None else "the value"
        return (
            f"{code} returns outside a function. End the cell with the value as its last "
            f"line (`{value}` instead of `return {value}`)"
        )
    if isinstance(node, ast.Nonlocal):
        return f"{code} is only allowed inside a nested function. Assign the name instead"
    return None


def refuse_unfit(program: CellProgram) -> None:
    """Raise :class:`ProgramError` if the cell cannot become a function body."""
    for node in _top_level(program.body):
        why = _unfit(node)
        if why is not None:
            raise ProgramError(f"line {_line(node)}: {why}.")
    for node in (n for stmt in program.body for n in ast.walk(stmt)):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            module = "." * node.level + (node.module or "")
            raise ProgramError(
                f"line {_line(node)}: `from {module} import *` is not allowed inside a "
                f"function, and {_AS_FUNCTION}. Import the names it uses "
                f"(`from {module} import sin, cos`) or run the import in a normal cell first."
            )
    # `global x` of an input is refused later, with its own words, by `outside_writes`.
    declared = {
        n
        for node in ast.walk(ast.Module(list(program.body), []))
        if isinstance(node, ast.Global)
        for n in node.names
    }
    params = tuple(n for n in program.inputs if n not in declared)
    try:  # what else Python refuses in a function body, with Python's words
        program.function(params, {"__builtins__": {}})
    except SyntaxError as e:
        raise ProgramError(
            f"line {e.lineno}: {e.msg}: {_AS_FUNCTION}, and Python refuses this there"
        ) from None


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node = node.value
    return node


def _target_fix(target: ast.Attribute | ast.Subscript, name: str, value: str) -> str:
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        index = ast.unparse(target.slice)
        return (
            f"Build a new value instead: `{name} = {name}.at[{index}].set({value})` for an "
            f"array, `{name} = {{**{name}, {index}: {value}}}` for a dict."
        )
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        attr = target.attr
        return (
            f"Build a new value instead: `{name} = dataclasses.replace({name}, {attr}={value})`"
            f" (`eqx.tree_at(lambda t: t.{attr}, {name}, {value})` for an equinox module), "
            f"or assign `{attr} = {value}` here and set `{name}.{attr}` in a normal cell."
        )
    return "Build a new value under a new name instead, and assign it in a normal cell."


class _Writes:
    """Collects the outside writes of a cell, statement by statement."""

    def __init__(self, program: CellProgram) -> None:
        self.inputs = set(program.inputs)
        self.created: set[str] = set()  # names the cell has bound so far
        self.found: list[OutsideWrite] = []

    def outer(self, node: ast.expr) -> str | None:
        """The notebook name ``node`` reaches, if the cell did not create it."""
        root = _root(node)
        if isinstance(root, ast.Name) and root.id in self.inputs and root.id not in self.created:
            return root.id
        return None

    def add(self, node: ast.AST, name: str, kind: str, fix: str, containers: bool = False) -> None:
        self.found.append(OutsideWrite(name, _line(node), _code(node), kind, fix, containers))

    def targets(self, stmt: ast.AST, targets: list[ast.expr], value: ast.expr | None) -> None:
        shown = ast.unparse(value) if value is not None else "v"
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute | ast.Subscript):
                    name = self.outer(sub)
                    if name is not None:
                        kind = "attribute" if isinstance(sub, ast.Attribute) else "item"
                        self.add(stmt, name, kind, _target_fix(sub, name, shown))
                        return

    def visit(self, node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.Global):
            first = node.names[0]
            fix = (
                f"Assign the value instead (`{first} = ...`): the names a cell assigns are "
                "written back once the whole magic succeeded."
            )
            self.add(node, ", ".join(node.names), "global", fix)
        elif isinstance(node, ast.Assign):
            self.targets(node, node.targets, node.value)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            self.targets(node, [node.target], node.value)
            name = node.target.id if isinstance(node.target, ast.Name) else None
            if isinstance(node, ast.AugAssign) and name in self.inputs and name not in self.created:
                # `lst += [1]` extends a notebook list in place (an array gets a new value).
                fix = f"Write `{name} = {name} {_OPS.get(type(node.op), '+')} ...`."
                self.add(node, name, "method", fix, containers=True)
        elif isinstance(node, ast.Delete):
            self.targets(node, node.targets, None)
            for target in node.targets:
                if top and isinstance(target, ast.Name) and target.id not in self.created:
                    fix = f"Delete it in a normal cell (`del {target.id}`)."
                    self.add(node, target.id, "del", fix)
        elif isinstance(node, ast.Call):
            self.call(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            name = self.outer(node.args[0])
            if name is not None or not isinstance(_root(node.args[0]), ast.Name):
                what = name or ast.unparse(node.args[0])
                fix = f"Build a new `{what}` instead (`dataclasses.replace`, `eqx.tree_at`)."
                self.add(node, what, "call", fix)
        elif isinstance(func, ast.Name) and func.id in ("exec", "eval"):
            fix = (
                f"Write the code itself in the cell: jaxlab cannot see what {func.id} reads "
                "or writes."
            )
            self.add(node, func.id, "code", fix)
        elif isinstance(func, ast.Attribute) and func.attr in _DUNDER_WRITES:
            what = self.outer(func.value) or ast.unparse(func.value)
            self.add(node, what, "call", "Build a new value instead.")
        elif isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            name = self.outer(func.value)
            if name is not None and isinstance(func.value, ast.Name):
                fix = (
                    f"Build a new one instead, e.g. `{name} = [*{name}, item]` for a list, "
                    f"`{name} = {{**{name}, key: value}}` for a dict."
                )
                self.add(node, name, "method", fix, containers=True)


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitOr: "|", ast.BitAnd: "&"}


def outside_writes(program: CellProgram) -> tuple[OutsideWrite, ...]:
    """The statements of ``program`` that would write outside the cell, in order."""
    writes = _Writes(program)
    for stmt in program.body:
        top = {id(node) for node in _top_level([stmt])}
        # Nested functions run when the cell calls them: their writes count too.
        for node in ast.walk(stmt):
            writes.visit(node, top=id(node) in top)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                writes.created.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                writes.created.add(node.name)
            elif isinstance(node, ast.alias):
                writes.created.add((node.asname or node.name).split(".")[0])
    return tuple(writes.found)


def refuse_writes(
    program: CellProgram,
    values: Mapping[str, Any],
    writes: tuple[OutsideWrite, ...] | None = None,
) -> None:
    """Raise :class:`ProgramError` for the first write outside the cell.

    ``values`` are the cell's inputs as the notebook holds them: a mutating method call
    (``lst.append(x)``) is refused only when its object is a list, dict, set or deque.
    """
    for write in outside_writes(program) if writes is None else writes:
        if write.containers_only and not isinstance(values.get(write.name), _CONTAINERS):
            continue
        raise ProgramError(write.message())


# --------------------------------------------------------------------------- while running


def _contents(value: Any) -> Any:
    """What a cell could change in place in ``value`` (one level deep), or None."""
    if isinstance(value, list | collections.deque | bytearray):
        return list(value)
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, set):
        return set(value)
    if isinstance(value, types.ModuleType | type | types.FunctionType):
        return None
    state = getattr(value, "__dict__", None)
    return dict(state) if isinstance(state, dict) else None


def _traced(value: Any) -> bool:
    """A JAX tracer (told by its class name: this module does not import JAX)."""
    return any(c.__name__.endswith("Tracer") for c in type(value).__mro__)


def _same(before: Any, value: Any) -> bool:
    now = _contents(value)
    if isinstance(before, set):
        return before == now
    if isinstance(before, dict):  # attributes
        # A new attribute holding a plain value is a cache filled on first use
        # (`functools.cached_property`), not the cell's doing; a tracer there is a leak.
        added = now.keys() - before.keys()
        return (
            before.keys() <= now.keys()
            and all(before[k] is now[k] for k in before)
            and not any(_traced(now[k]) for k in added)
        )
    return len(before) == len(now) and all(
        (a[0] is b[0] and a[1] is b[1]) if isinstance(a, tuple) and isinstance(b, tuple)
        else a is b
        for a, b in zip(before, now, strict=True)
    )  # fmt: skip


def _restore(value: Any, before: Any) -> None:
    if isinstance(value, list | collections.deque | bytearray | set):
        value.clear()
        (value.update if isinstance(value, set) else value.extend)(before)
    elif isinstance(value, dict):
        value.clear()
        value.update(before)
    else:
        state = value.__dict__
        state.clear()
        state.update(before)


@contextmanager
def guarded(values: Mapping[str, Any]) -> Iterator[None]:
    """Run the block; if it changed one of ``values`` in place (its items or attributes,
    one level deep), put the old contents back and raise :class:`ProgramError`.

    The static refusal catches the writes a reader sees (``m.k = ...``); this catches the
    rest (``a = m; a.k = ...``, a helper that appends to its argument).
    """
    saved = [(n, v, c) for n, v in values.items() if (c := _contents(v)) is not None]
    failure: Exception | None = None
    try:
        yield
    except Exception as e:  # a change in place is the likelier cause: say that instead
        failure = e
    finally:  # an interrupt too leaves the inputs as they were
        changed = [n for n, v, c in saved if not _same(c, v)]
        for name, value, before in saved:
            if name in changed:
                _restore(value, before)
    if changed:
        names = ", ".join(f"`{n}`" for n in changed)
        raise ProgramError(
            f"the cell changed {names} in place (through another name or a function it "
            f"called): {_AS_FUNCTION} that is traced, so the change would store tracers in "
            f"a notebook object. {names} {'is' if len(changed) == 1 else 'are'} restored; "
            "build a new value instead."
        ) from failure
    if failure is not None:
        raise failure
