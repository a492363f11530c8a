"""Find the user's own line in an exception: the frame, its source text and its statement.

The user's line is the innermost traceback frame that belongs to the user: a notebook cell
(``<ipython-input-3-…>``, ``/tmp/ipykernel_…/….py``) or a file outside JAX, jaxlib,
jaxlab, IPython, the standard library and ``site-packages``. Its text comes from
``linecache``, where IPython registers every cell it runs.

::

    def f():
        return 1 / 0          # in model.py, line 2

    try:
        f()
    except ZeroDivisionError as e:
        error_site(e).line    # UserLine("model.py", 2, "return 1 / 0", "model.py, line 2", "f")
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from .._jax_compat import transformation_source_traceback

_CELL_NAME = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_KERNEL_CELL = re.compile(r"[/\\]ipykernel_\d+[/\\]")
_LIBRARY_PARTS = ("site-packages", "dist-packages")
_MAX_SOURCE_LINES = 20_000  # a bigger file is not parsed: the line alone is used


_LIBRARIES = ("jax", "jaxlib", "IPython", "ipykernel")


def _library_roots() -> tuple[str, ...]:
    return _roots(tuple(name in sys.modules for name in _LIBRARIES))


@functools.lru_cache(maxsize=4)
def _roots(present: tuple[bool, ...]) -> tuple[str, ...]:
    """Folders of libraries loaded now (``present`` keys the cache: IPython may load later)."""
    roots = [str(Path(__file__).resolve().parents[1])]  # jaxlab itself (an editable install too)
    for module in _LIBRARIES:
        loaded = sys.modules.get(module)
        path = getattr(loaded, "__file__", None)
        if path:
            roots.append(str(Path(path).resolve().parent))
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        roots.append(str(Path(stdlib).resolve()))
    return tuple(root + os.sep for root in roots)


@dataclass(frozen=True)
class UserLine:
    """One line of the user's code: where it is and what it says.

    ``label`` is what a person recognises: ``In[3], line 4`` for a notebook cell,
    ``model.py, line 12`` for a file.
    """

    filename: str
    lineno: int
    text: str
    label: str
    function: str  # the enclosing function, "<module>" for a cell's top level


@dataclass
class ErrorSite:
    """Where an error met the user's code. Internal: holds live frames and syntax trees."""

    line: UserLine | None = None
    statement: ast.stmt | None = None  # the statement at the line (parsed from its file)
    module: ast.Module | None = None  # the whole parsed cell or file, when it parses
    local_ns: Mapping[str, Any] = field(default_factory=dict)
    global_ns: Mapping[str, Any] = field(default_factory=dict)
    outer: tuple[UserLine, ...] = ()  # the user's call sites outside the line, outermost first
    transformed: bool = False  # the line came from JAX's pre-transformation stack

    def lookup(self, name: str) -> Any:
        """The value a name has at the user's line (locals, then globals); KeyError if none."""
        if name in self.local_ns:
            return self.local_ns[name]
        return self.global_ns[name]

    def tree(self, filename: str) -> ast.Module | None:
        """``filename`` parsed (see :func:`parse_file`); the site's own file is not parsed again."""
        if self.line is not None and filename == self.line.filename:
            return self.module
        return parse_file(filename, self.global_ns)


def is_cell(filename: str) -> bool:
    """Whether ``filename`` names a notebook or IPython cell rather than a file."""
    return bool(_KERNEL_CELL.search(filename)) or _cell_number(filename) is not None


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` was written by the user (not a library)."""
    if is_cell(filename):
        return True
    if filename.startswith("<") or not filename:
        return False
    path = os.path.abspath(filename)
    if any(part in path for part in _LIBRARY_PARTS):
        return False
    return not path.startswith(_library_roots())


def _cell_number(filename: str) -> int | None:
    match = _CELL_NAME.match(filename)
    if match:
        return int(match.group(1))
    ipython = sys.modules.get("IPython")  # never imported here: only asked when present
    shell = ipython.get_ipython() if ipython is not None else None
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if isinstance(mapping, dict) and filename in mapping:
        return int(mapping[filename])
    return None


def label(filename: str, lineno: int) -> str:
    """``In[3], line 4`` for a cell, ``model.py, line 12`` for a file."""
    number = _cell_number(filename)
    if number is not None:
        return f"In[{number}], line {lineno}"  # as IPython's own tracebacks write it
    if _KERNEL_CELL.search(filename):  # a cell whose number IPython did not record
        return f"cell, line {lineno}"
    return f"{os.path.basename(filename)}, line {lineno}"


def _frames(tb: TracebackType | None) -> Iterator[tuple[FrameType, int]]:
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def user_line(frame: FrameType, lineno: int) -> UserLine:
    filename = frame.f_code.co_filename
    text = linecache.getline(filename, lineno, frame.f_globals).strip()
    return UserLine(filename, lineno, text, label(filename, lineno), frame.f_code.co_name)


def user_frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    """The traceback's frames that belong to the user, outermost first."""
    return [(f, n) for f, n in _frames(tb) if is_user_file(f.f_code.co_filename)]


def error_site(exc: BaseException) -> ErrorSite:
    """The user's line for ``exc`` and what surrounds it.

    When JAX chains the stack from before a transformation (a NaN found in a backward
    pass, a key reused under jit), the operation's own line there is the better answer
    than the line that called the transformed function.
    """
    call_frames = user_frames(exc.__traceback__)
    staged = user_frames(transformation_source_traceback(exc))
    frames, transformed = (staged, True) if staged else (call_frames, False)
    if not frames:
        return ErrorSite()
    frame, lineno = frames[-1]
    line = user_line(frame, lineno)
    module = parse_file(line.filename, frame.f_globals)
    statement = statement_at(module, lineno) if module is not None else None
    if statement is None:
        statement = parse_statement(line.text)
    outer = tuple(user_line(f, n) for f, n in call_frames if (f, n) != (frame, lineno))
    return ErrorSite(
        line=line,
        statement=statement,
        module=module,
        local_ns=dict(frame.f_locals),
        global_ns=frame.f_globals,
        outer=outer,
        transformed=transformed,
    )


def parse_file(filename: str, module_globals: Mapping[str, Any] | None = None) -> ast.Module | None:
    """The whole cell or file as a syntax tree, or None when it is missing or does not parse."""
    # linecache reads only the loader entries of the globals (for files inside zips)
    loader_globals = module_globals if isinstance(module_globals, dict) else None
    lines = linecache.getlines(filename, loader_globals)
    if not lines or len(lines) > _MAX_SOURCE_LINES:
        return None
    try:
        return ast.parse("".join(lines), filename=filename)
    except (SyntaxError, ValueError):
        return None


def parse_statement(text: str) -> ast.stmt | None:
    """One line as a statement; a compound header (``if x > 0:``) gets a ``pass`` body."""
    for candidate in (text, text + " pass"):
        try:
            body = ast.parse(candidate).body
        except (SyntaxError, ValueError):
            continue
        if len(body) == 1:
            return body[0]
    return None


def statement_at(module: ast.Module, lineno: int) -> ast.stmt | None:
    """The innermost statement whose lines hold ``lineno``."""
    found: ast.stmt | None = None
    for node in ast.walk(module):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        if node.lineno <= lineno <= end and (found is None or _inside(node, found)):
            found = node
    return found


def _inside(node: ast.stmt, other: ast.stmt) -> bool:
    span = (node.end_lineno or node.lineno) - node.lineno
    other_span = (other.end_lineno or other.lineno) - other.lineno
    return span < other_span or (span == other_span and node.lineno >= other.lineno)


def enclosing_function(
    module: ast.Module | None, lineno: int, name: str | None = None
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost ``def`` (named ``name`` when given) whose lines hold ``lineno``."""
    if module is None:
        return None
    best: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in ast.walk(module):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if name is not None and node.name != name:
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if first <= lineno <= (node.end_lineno or node.lineno) and (
            best is None or node.lineno > best.lineno
        ):
            best = node
    return best


def parent_body(module: ast.Module | None, statement: ast.stmt) -> list[ast.stmt] | None:
    """The statement list that holds ``statement`` (to find what follows it)."""
    if module is None:
        return None
    for node in ast.walk(module):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and any(s is statement for s in body):
                return body
    return None
