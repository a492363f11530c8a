"""What a ``%%jit`` cell may do: refused before it compiles, described when it fails.

A compiled cell is a function of the names it reads, so it cannot write anywhere but the
names it assigns, and ``print`` would show tracers once instead of values every run.
:func:`check_cell` refuses such a cell before anything runs and returns the names the
cell gives back; :func:`describe_failure` turns an error raised inside the compiled cell
into a message that names the cell's line and the usual fix::

    outputs, container_writes = check_cell(analyse_cell("y = jnp.sin(x)"))   # ("y",), ()
    describe_failure(error)   # ProgramError("the cell failed at line 2 of the cell: ...")
"""

from __future__ import annotations

import ast

from ..explain.trace_failure import first_line, needs_concrete_value, returns_non_array
from ..program import CellProgram, ProgramError
from ..program.guard import OutsideWrite, outside_writes, refuse_unfit

CELL_FILE = "<jaxlab cell>"  # the filename program.CellProgram.function compiles under
CONTROL_FLOW_HINT = (
    "Python control flow (`if`, `while`, `range(n)`, `int(x)`) needs concrete values, but "
    "under %%jit the inputs are abstract tracers. Use `jax.lax.cond(pred, f_true, f_false, x)` "
    "or `jnp.where` for a branch, `jax.lax.fori_loop` / `jax.lax.while_loop` for a loop, or "
    "make the name static: `%%jit --static n`."
)


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def check_cell(program: CellProgram) -> tuple[tuple[str, ...], tuple[OutsideWrite, ...]]:
    """Refuse what a compiled cell cannot do; return its outputs and the method calls
    that mutate an input if that input turns out to be a list, dict or set."""
    refuse_unfit(program)
    writes = outside_writes(program)
    for write in writes:
        if not write.containers_only:
            raise ProgramError(write.message())
    helpers: set[str] = set()
    for stmt in program.body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                raise ProgramError(
                    f"the cell calls print (line {_line(node)}): under jit it runs once, "
                    "while tracing, and shows tracers rather than values. Use "
                    '`jax.debug.print("x = {}", x)` to print on every run.'
                )
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            helpers.add(stmt.name)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            helpers.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    outputs = tuple(n for n in program.outputs if n not in helpers)
    if not outputs and program.final is None:
        raise ProgramError(
            "the cell assigns no name and ends in no expression, so a compiled version "
            "would have no result: assign what you want to keep (`y = ...`) or end with it."
        )
    return outputs, tuple(w for w in writes if w.containers_only)


def describe_failure(error: BaseException) -> ProgramError:
    """A compiled cell failed: say where in the cell, and how to fix the common cases."""
    import traceback

    line = 0
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == CELL_FILE:
            line = frame.lineno or 0
    where = f" at line {line} of the cell" if line else ""
    text = f"the cell failed{where}: {type(error).__name__}: {first_line(error)}"
    if needs_concrete_value(error):
        text += "\n" + CONTROL_FLOW_HINT
    elif returns_non_array(error):
        text += (
            "\nEvery name a %%jit cell assigns is returned as an array: keep strings and "
            "other Python objects out of it (compute them in a normal cell)."
        )
    return ProgramError(text)
