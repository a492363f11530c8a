"""``%%jit``: a whole cell compiled as one function of the names it reads.

The cell's *inputs* are the names it reads before assigning them. Those holding arrays
(typed PRNG keys included, or pytrees of arrays and numbers) are traced; Python scalars,
strings, callables and modules are static, so a new value recompiles. A model mixing
arrays and other leaves (an equinox module, a flax nnx module) has its arrays traced and
the rest static (:mod:`jaxlab.compile.cell_inputs`). Its *outputs* are the names it
assigns; its last expression is its value::

    cells = CellJit()
    value, run = cells.run("y = jnp.sin(x) * n\\ny.sum()", namespace)
    namespace["y"], value, run.explanation      # run is None when nothing compiled

Compiled cells are cached by (source, which inputs are static); JAX's own cache then
keys on shapes, dtypes and static values. Outputs are written to the namespace only
after the compiled call returned; a cell that would write anywhere else is refused
before it runs, or undone and refused after tracing (:mod:`jaxlab.program.guard`).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import hashlib
import types
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..explain.trace_failure import first_line, needs_concrete_value, returns_non_array
from ..program import CellProgram, ProgramError, analyse_cell
from ..program.guard import OutsideWrite, guarded, outside_writes, refuse_unfit
from .cell_inputs import (
    SplitPart,
    array_key,
    merge_args,
    nnx_of,
    nnx_part,
    split_changes,
    split_part,
    to_split,
)
from .leaves import NUMBERS, is_array, jax_accepts
from .log import ArgChange, CompileLog, compile_log

MAX_CELLS = 256  # compiled cells kept (one per source and static pattern)
MAX_KEYS = 64  # signatures remembered per cell, to tell a cache hit from a compile
CELL_FILE = "<jaxlab cell>"  # the filename program.CellProgram.function compiles under
_CONTROL_FLOW_HINT = (
    "Python control flow (`if`, `while`, `range(n)`, `int(x)`) needs concrete values, but "
    "under %%jit the inputs are abstract tracers. Use `jax.lax.cond(pred, f_true, f_false, x)` "
    "or `jnp.where` for a branch, `jax.lax.fori_loop` / `jax.lax.while_loop` for a loop, or "
    "make the name static: `%%jit --static n`."
)


@dataclass(frozen=True)
class CellRun:
    """One run of a ``%%jit`` cell that compiled (or was asked for with ``-o``)."""

    name: str  # the cell function's name in the compile log, e.g. "cell_y_3fa2"
    inputs: tuple[str, ...]  # traced inputs
    static: tuple[str, ...]  # static inputs
    outputs: tuple[str, ...]  # names written to the namespace
    compiled: bool
    explanation: str  # why it compiled ("first run", "x: f32[3] → f32[4]"), "" if not
    changes: tuple[ArgChange, ...]
    signature: tuple[str, ...]  # "x: f32[3]", "n=3 (static)"
    call_s: float  # wall time of the call (compilation included when it compiled)
    value: Any = field(repr=False, compare=False, default=None)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (without the value)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del data["value"]
        data["changes"] = [dataclasses.asdict(c) for c in self.changes]
        return data

    def __str__(self) -> str:
        static = f"; static {', '.join(self.static)}" if self.static else ""
        head = (
            f"%%jit cell({', '.join(self.inputs)}{static}) → "
            f"{', '.join(self.outputs) or 'its value'}"
        )
        if not self.compiled:
            return f"{head}: cached, {self.call_s * 1e3:.3g} ms"
        verb = "compiled" if self.explanation == "first run" else "recompiled"
        return f"{head}: {verb} in {self.call_s * 1e3:.3g} ms ({self.explanation})"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        import html

        colour = "#b03030" if self.compiled and self.explanation != "first run" else "#555"
        return {
            "text/plain": str(self),
            "text/html": (
                f"<div style='color:{colour};font-size:90%'>{html.escape(str(self))}</div>"
            ),
        }


# --------------------------------------------------------------------------- analysis


@dataclass
class _Variant:
    """The cell compiled for one pattern of static inputs."""

    jitted: Callable[..., Any]
    static: tuple[str, ...]
    dynamic: tuple[str, ...]
    split: tuple[int, ...] = ()  # positions of inputs passed split (arrays traced, rest static)
    last_key: tuple[Any, ...] | None = None


@dataclass
class _Cell:
    program: CellProgram
    name: str
    forced_static: frozenset[str]
    outputs: tuple[str, ...]
    container_writes: tuple[OutsideWrite, ...]  # refused if the input is a list, dict, set
    variants: dict[tuple[str, ...], _Variant] = field(default_factory=dict)
    # Signatures that ran, and the variant each ran with: a hit here compiles nothing.
    seen: OrderedDict[tuple[Any, ...], _Variant] = field(default_factory=OrderedDict)


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _check(program: CellProgram) -> tuple[tuple[str, ...], tuple[OutsideWrite, ...]]:
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


# --------------------------------------------------------------------------- values

_SCALARS = (*NUMBERS, str, bytes, type(None))
_STATIC_TYPES = (*_SCALARS, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)
_STATIC_FAST = frozenset(_STATIC_TYPES)  # exact types the hot path takes as static


def short(value: Any) -> str:
    """An input for a message: ``f32[3]`` for arrays, ``3`` for scalars."""
    from .capture import short_type

    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return short_type(value)
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{type(value).__name__} {value.__qualname__}"
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


class CellJit:
    """The ``%%jit`` cache: analysed and compiled cells by source, bounded."""

    def __init__(self, log: CompileLog | None = None) -> None:
        self._cells: OrderedDict[tuple[str, tuple[str, ...]], _Cell] = OrderedDict()
        self._log = log if log is not None else compile_log()
        self._fast: set[type] = set()  # concrete jax.Array types seen (the hot path's test)

    def __len__(self) -> int:
        return len({id(c) for c in self._cells.values()})

    def clear(self) -> None:
        self._cells.clear()

    def prepare(self, source: str, static: tuple[str, ...] = ()) -> _Cell:
        """Analyse and check ``source`` once; raises :class:`ProgramError` on bad cells."""
        cell = self._cells.get((source, static))
        if cell is not None:
            return cell
        typed = (source, static)
        source = source.rstrip()  # the same cell typed with or without a final newline
        static = tuple(sorted(set(static)))
        cell = self._cells.get((source, static))
        if cell is not None:
            self._remember(typed, cell)
            return cell
        program = analyse_cell(source)
        unknown = [n for n in static if n not in program.inputs]
        if unknown:
            raise ProgramError(
                f"--static names {', '.join(unknown)}, which the cell does not read "
                f"(its inputs are: {', '.join(program.inputs) or 'none'})"
            )
        outputs, methods = _check(program)
        digest = hashlib.sha1(source.encode()).hexdigest()[:4]
        name = f"cell_{'_'.join(outputs[:2]) or 'value'}_{digest}"
        cell = _Cell(program, name, frozenset(static), outputs, methods)
        self._remember((source, static), cell)
        self._remember(typed, cell)
        return cell

    def _remember(self, key: tuple[str, tuple[str, ...]], cell: _Cell) -> None:
        self._cells[key] = cell
        while len(self._cells) > 2 * MAX_CELLS:  # each cell may sit under two keys
            self._cells.popitem(last=False)

    def run(
        self,
        source: str,
        namespace: MutableMapping[str, Any],
        static: tuple[str, ...] = (),
        *,
        record: bool = False,
    ) -> tuple[Any, CellRun | None]:
        """Run the cell compiled: read its inputs from ``namespace``, call, write outputs.

        Returns the cell's value and, when it compiled (or ``record`` is true), a
        :class:`CellRun`. Raises :class:`ProgramError` (namespace untouched) on failure.
        """
        cell = self.prepare(source, static)
        return self.call(cell, namespace, record=record)

    # The hot path: keep it lean (benchmarks/jit_overhead.py measures it).
    def call(
        self, cell: _Cell, namespace: MutableMapping[str, Any], *, record: bool = False
    ) -> tuple[Any, CellRun | None]:
        inputs = cell.program.inputs
        try:
            values = [namespace[n] for n in inputs]
        except KeyError:
            missing = next(n for n in inputs if n not in namespace)
            raise ProgramError(
                f"the cell reads `{missing}`, which is not defined: define it in a cell "
                "first (or assign it in this cell before reading it)"
            ) from None
        fast = self._fast
        forced = cell.forced_static
        key: list[Any] = []
        for name, value in zip(inputs, values, strict=True):
            kind = type(value)
            if kind in fast and name not in forced:
                key.append((value.shape, value.dtype, value.weak_type))
            elif kind in _STATIC_FAST:
                key.append(("static", kind, value))
            else:
                key.append(self._classify(cell, name, value))
        signature_key = tuple(key)
        variant = cell.seen.get(signature_key)
        if variant is None or record:
            return self._call_slow(cell, values, signature_key, namespace)
        count = self._log.count
        outs, value = self._invoke(variant, values, signature_key)
        namespace.update(outs)
        if self._log.count != count:  # JAX compiled although the signature ran before
            why = self._logged_reason()
            return value, self._run_record(cell, variant, signature_key, value, 0.0, why, outs)
        return value, None

    # ------------------------------------------------------------------ slow paths
    def _classify(self, cell: _Cell, name: str, value: Any) -> Any:
        """The signature part of one input value that is not a plain jax.Array: a
        ``("static", type, value)`` triple for static inputs."""
        import jax

        for write in cell.container_writes:
            if write.name == name and isinstance(value, list | dict | set):
                raise ProgramError(write.message())
        forced = name in cell.forced_static
        if not forced:
            if isinstance(value, jax.Array):
                if hasattr(value, "weak_type"):
                    self._fast.add(type(value))
                    return (value.shape, value.dtype, value.weak_type)
                return array_key(value)  # a typed PRNG key array (dtype key<fry>)
            if is_array(value):
                return (tuple(np.shape(value)), np.asarray(value).dtype, False)
            if not isinstance(value, _STATIC_TYPES):  # callable too: an equinox model
                leaves, tree = jax.tree_util.tree_flatten(value)
                if leaves and any(is_array(v) for v in leaves):
                    if all(jax_accepts(v) for v in leaves):
                        # As JAX takes it: a number is traced, so its type is the key.
                        kinds = (short(v) if is_array(v) else type(v).__name__ for v in leaves)
                        return (tree, tuple(kinds))
                    # An equinox model, a dict of arrays and settings: arrays traced, the
                    # rest (numbers too) static, as eqx.filter_jit and %jit do.
                    return split_part(value, leaves, tree, name)
                if leaves == [value] and nnx_of(value) is not None:
                    return nnx_part(value, name)
        try:
            hash(value)
        except TypeError:
            raise ProgramError(
                f"input `{name}` is a {type(value).__name__}, "
                f"{_unhashable_hint(name, value, forced)}"
            ) from None
        return ("static", type(value), value)

    def _compile(self, cell: _Cell, pattern: tuple[str, ...]) -> _Variant:
        import functools

        import jax

        inputs = cell.program.inputs
        program = dataclasses.replace(cell.program, outputs=cell.outputs)
        fun = program.function(inputs, {"__builtins__": builtins}, name=cell.name)
        split = tuple(i for i, kind in enumerate(pattern) if kind == "split")
        if split:
            cell_fun = fun

            @functools.wraps(cell_fun)
            def fun(*args: Any) -> Any:
                return cell_fun(*merge_args(args))

        variant = _Variant(
            jitted=jax.jit(
                fun, static_argnums=tuple(i for i, k in enumerate(pattern) if k == "static")
            ),
            static=tuple(n for n, k in zip(inputs, pattern, strict=True) if k == "static"),
            dynamic=tuple(n for n, k in zip(inputs, pattern, strict=True) if k != "static"),
            split=split,
        )
        cell.variants[pattern] = variant
        return variant

    def _invoke(
        self, variant: _Variant, values: list[Any], key: tuple[Any, ...]
    ) -> tuple[dict[str, Any], Any]:
        if variant.split:
            values = [
                to_split(v, key[i]) if i in variant.split else v for i, v in enumerate(values)
            ]
        try:
            return variant.jitted(*values)
        except Exception as e:
            raise _describe(e) from e

    def _call_slow(
        self,
        cell: _Cell,
        values: list[Any],
        key: tuple[Any, ...],
        namespace: MutableMapping[str, Any],
    ) -> tuple[Any, CellRun]:
        import time

        import jax

        from .capture import explaining

        pattern = tuple(_kind(part) for part in key)
        variant = cell.variants.get(pattern) or self._compile(cell, pattern)
        why = _why(cell, variant, key) if key not in cell.seen else None
        count = self._log.count
        t0 = time.perf_counter()
        # Tracing runs the cell's Python: an input changed in place through an alias the
        # analysis cannot see is put back and refused.
        with guarded(dict(zip(cell.program.inputs, values, strict=True))):
            if why is not None and why[0] != "first run":
                with explaining(cell.name, *why):
                    outs, value = self._invoke(variant, values, key)
            else:
                outs, value = self._invoke(variant, values, key)
        if why is None and self._log.count != count:
            why = self._logged_reason()
        if why is not None:
            jax.block_until_ready((outs, value))  # the time a user waits for a compile
        call_s = time.perf_counter() - t0
        cell.seen[key] = variant
        variant.last_key = key
        if len(cell.seen) > MAX_KEYS:
            cell.seen.popitem(last=False)
        namespace.update(outs)
        return value, self._run_record(cell, variant, key, value, call_s, why, outs)

    def _logged_reason(self) -> tuple[str, tuple[ArgChange, ...]]:
        last = self._log.events[-1] if len(self._log) else None
        return (last.explanation, last.changes) if last is not None else ("recompiled", ())

    def _run_record(
        self,
        cell: _Cell,
        variant: _Variant,
        key: tuple[Any, ...],
        value: Any,
        call_s: float,
        why: tuple[str, tuple[ArgChange, ...]] | None,
        outs: dict[str, Any],
    ) -> CellRun:
        # Modules, functions and classes the cell reads are static too, but naming them
        # in the report (`static jnp`) tells a reader nothing.
        parts = dict(zip(cell.program.inputs, key, strict=True))
        shown = [n for n in cell.program.inputs if not _is_tool(parts[n])]
        return CellRun(
            name=cell.name,
            inputs=variant.dynamic,
            static=tuple(n for n in variant.static if n in shown),
            outputs=tuple(outs),
            compiled=why is not None,
            explanation=why[0] if why else "",
            changes=why[1] if why else (),
            signature=_signature(tuple(shown), tuple(parts[n] for n in shown)),
            call_s=call_s,
            value=value,
        )


def _is_static(part: Any) -> bool:
    return isinstance(part, tuple) and len(part) == 3 and isinstance(part[0], str)


def _kind(part: Any) -> str:
    """How an input reaches the compiled cell: "static", "traced" or "split"."""
    if isinstance(part, SplitPart):
        return "split"
    return "static" if _is_static(part) else "traced"


def _unhashable_hint(name: str, value: Any, forced: bool) -> str:
    """The fix for an input that is neither traceable nor hashable."""
    if forced:
        return "marked --static, so it must be hashable: use a tuple"
    if isinstance(value, list | tuple):
        return (
            "neither an array (or pytree of arrays) nor a hashable static value: "
            f"convert it (`{name} = jnp.asarray({name})`) or make it a tuple"
        )
    return (
        "which holds no array the cell could trace and is not hashable, so it cannot be "
        f"a static value either: read what the cell needs from it into names in a normal "
        f"cell (`k = {name}.k`, `k = {name}['k']`), or pass arrays"
    )


def _is_tool(part: Any) -> bool:
    """A static input that is a module, function or class rather than a setting."""
    return _is_static(part) and isinstance(
        part[2], types.ModuleType | types.FunctionType | types.BuiltinFunctionType | type
    )


def _describe_part(part: Any) -> str:
    if isinstance(part, SplitPart):
        return part.describe()
    if _is_static(part):
        return f"{short(part[2])} (static)"
    if isinstance(part, tuple) and len(part) == 3:
        shape, dtype, weak = part
        from .capture import short_type

        return short_type(types.SimpleNamespace(shape=shape, dtype=dtype, weak_type=weak))
    if isinstance(part, tuple) and len(part) == 2:
        tree, leaves = part
        return f"{tree} with {', '.join(leaves)}"
    return str(part)


def _signature(names: tuple[str, ...], key: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(f"{n}: {_describe_part(p)}" for n, p in zip(names, key, strict=True))


def _why(cell: _Cell, variant: _Variant, key: tuple[Any, ...]) -> tuple[str, tuple[ArgChange, ...]]:
    before = variant.last_key
    if before is None:
        if any(v.last_key is not None for v in cell.variants.values() if v is not variant):
            return "an input changed kind (an array now, a static value before, or back)", ()
        return "first run", ()
    changes = tuple(
        change
        for n, old, new in zip(cell.program.inputs, before, key, strict=True)
        if old != new
        for change in (
            split_changes(n, old, new)
            if isinstance(old, SplitPart) and isinstance(new, SplitPart)
            else (ArgChange(n, _describe_part(old), _describe_part(new)),)
        )
    )
    return "; ".join(
        map(str, changes)
    ) or "a signature seen before, evicted from the cache", changes


def _describe(error: BaseException) -> ProgramError:
    """A compiled cell failed: say where in the cell, and how to fix the common cases."""
    import traceback

    line = 0
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == CELL_FILE:
            line = frame.lineno or 0
    where = f" at line {line} of the cell" if line else ""
    text = f"the cell failed{where}: {type(error).__name__}: {first_line(error)}"
    if needs_concrete_value(error):
        text += "\n" + _CONTROL_FLOW_HINT
    elif returns_non_array(error):
        text += (
            "\nEvery name a %%jit cell assigns is returned as an array: keep strings and "
            "other Python objects out of it (compute them in a normal cell)."
        )
    return ProgramError(text)


_DEFAULT: CellJit | None = None


def cell_jit() -> CellJit:
    """The session's ``%%jit`` cache."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = CellJit()
    return _DEFAULT


def jit_cell(source: str, namespace: MutableMapping[str, Any], static: tuple[str, ...] = ()) -> Any:
    """Plain-Python twin of ``%%jit``: run ``source`` compiled against ``namespace``.

    >>> ns = {"jnp": jnp, "x": jnp.arange(3.0)}
    >>> jaxlab.jit_cell("y = jnp.sin(x)\\ny.sum()", ns)
    Array(1.7507684, dtype=float32)
    """
    return cell_jit().run(source, namespace, static)[0]
