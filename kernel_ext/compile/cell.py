"""``%%jit``: a whole cell compiled as one function of the names it reads.

The cell's *inputs* are the names it reads before assigning them. Those holding arrays
(typed PRNG keys included, or pytrees of arrays and numbers) are traced; Python scalars,
strings, callables and modules are static, so a new value recompiles. A model mixing
arrays and other leaves (an equinox module, a flax nnx module) has its arrays traced and
the rest static (:mod:`jaxlab.compile.cell_inputs`); what the cell changes in a flax
nnx module (running statistics, counters) is written back into it after the call, as
plain execution would. Its *outputs* are the names it assigns; its last expression is
its value::

    cells = CellJit()
    value, run = cells.run("y = jnp.sin(x) * n\\ny.sum()", namespace)
    namespace["y"], value, run.explanation      # run is None when nothing compiled

Compiled cells are cached by (source, which inputs are static); JAX's own cache then
keys on shapes, dtypes and static values. Outputs are written to the namespace only
after the compiled call returned; a cell that would write anywhere else is refused
before it runs, or undone and refused after tracing (:mod:`jaxlab.program.guard`).

This module is the cache and the run (the hot path). Around it: what a cell may do and
how its failures read (:mod:`~jaxlab.compile.cell_check`), each input's part of the
compile key (:mod:`~jaxlab.compile.cell_keys`, models through
:mod:`~jaxlab.compile.cell_inputs`), and the :class:`CellRun` report with why the cell
compiled (:mod:`~jaxlab.compile.cell_run`).
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ..program import CellProgram, ProgramError, analyse_cell
from ..program.guard import OutsideWrite, guarded
from .cell_check import check_cell, describe_failure
from .cell_inputs import Split, merge_args, nnx_state_out, to_split, write_back
from .cell_keys import STATIC_FAST, input_key, part_kind
from .cell_run import CellRun as CellRun
from .cell_run import compile_reason, is_tool, signature
from .log import ArgChange, CompileLog, compile_log

MAX_CELLS = 256  # compiled cells kept (one per source and static pattern)
MAX_KEYS = 64  # signatures remembered per cell, to tell a cache hit from a compile


# --------------------------------------------------------------------------- the cache


@dataclass
class _Variant:
    """The cell compiled for one pattern of static inputs."""

    jitted: Callable[..., Any]
    static: tuple[str, ...]
    dynamic: tuple[str, ...]
    split: tuple[int, ...] = ()  # positions of inputs passed split (arrays traced, rest static)
    nnx: tuple[int, ...] = ()  # positions of the split inputs that are flax nnx modules
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
        outputs, methods = check_cell(program)
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

    # The hot path: keep it lean (benchmarks/jit_overhead.py measures it): the signature in
    # one comprehension; a plain cell's call and write-back inline (that saved 3-4 µs of
    # the 15 that a ~10 µs call paid; the comprehension alone, nothing measurable).
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
        fast, forced, writes = self._fast, cell.forced_static, cell.container_writes
        signature_key = tuple(
            [
                (v.shape, v.dtype, v.weak_type)
                if type(v) in fast and n not in forced
                else ("static", type(v), v)
                if type(v) in STATIC_FAST
                else input_key(n, v, forced=n in forced, container_writes=writes, fast=fast)
                for n, v in zip(inputs, values)  # noqa: B905 (values is read from inputs)
            ]
        )
        variant = cell.seen.get(signature_key)
        if variant is None or record:
            return self._call_slow(cell, values, signature_key, namespace)
        count = self._log.count
        if variant.split:
            outs, value, states = self._invoke(variant, values, signature_key)
            _store(namespace, outs, variant, values, states)
        else:  # _invoke's and _store's plain case, inline: the calls cost as much as the key
            try:
                outs, value = variant.jitted(*values)
            except Exception as e:
                raise describe_failure(e) from e
            namespace.update(outs)
        if self._log.count != count:  # JAX compiled although the signature ran before
            why = self._logged_reason()
            return value, self._run_record(cell, variant, signature_key, value, 0.0, why, outs)
        return value, None

    # ------------------------------------------------------------------ slow paths
    def _compile(self, cell: _Cell, pattern: tuple[str, ...]) -> _Variant:
        import functools

        import jax

        inputs = cell.program.inputs
        program = dataclasses.replace(cell.program, outputs=cell.outputs)
        fun = program.function(inputs, {"__builtins__": builtins}, name=cell.name)
        split = tuple(i for i, kind in enumerate(pattern) if kind in ("split", "nnx"))
        nnx = tuple(i for i, kind in enumerate(pattern) if kind == "nnx")
        if split:
            cell_fun = fun

            @functools.wraps(cell_fun)
            def fun(*args: Any) -> Any:
                merged = merge_args(args)
                result = cell_fun(*merged)
                # The cell ran on copies of the nnx modules (nnx.merge): what it changed
                # in them (running statistics, counters) is returned, to be written back.
                return result, [nnx_state_out(merged[i]) for i in nnx]

        variant = _Variant(
            jitted=jax.jit(
                fun, static_argnums=tuple(i for i, k in enumerate(pattern) if k == "static")
            ),
            static=tuple(n for n, k in zip(inputs, pattern, strict=True) if k == "static"),
            dynamic=tuple(n for n, k in zip(inputs, pattern, strict=True) if k != "static"),
            split=split,
            nnx=nnx,
        )
        cell.variants[pattern] = variant
        return variant

    def _invoke(
        self, variant: _Variant, values: list[Any], key: tuple[Any, ...]
    ) -> tuple[dict[str, Any], Any, list[Split]]:
        """The compiled call: the outputs, the value, and the nnx states to write back."""
        if not variant.split:
            try:
                outs, value = variant.jitted(*values)
            except Exception as e:
                raise describe_failure(e) from e
            return outs, value, []
        values = [to_split(v, key[i]) if i in variant.split else v for i, v in enumerate(values)]
        try:
            (outs, value), states = variant.jitted(*values)
        except Exception as e:
            raise describe_failure(e) from e
        return outs, value, states

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

        pattern = tuple(part_kind(part) for part in key)
        variant = cell.variants.get(pattern) or self._compile(cell, pattern)
        why = _why(cell, variant, key) if key not in cell.seen else None
        count = self._log.count
        t0 = time.perf_counter()
        # Tracing runs the cell's Python: an input changed in place through an alias the
        # analysis cannot see is put back and refused.
        with guarded(dict(zip(cell.program.inputs, values, strict=True))):
            if why is not None and why[0] != "first run":
                with explaining(cell.name, *why):
                    outs, value, states = self._invoke(variant, values, key)
            else:
                outs, value, states = self._invoke(variant, values, key)
        if why is None and self._log.count != count:
            why = self._logged_reason()
        if why is not None:
            jax.block_until_ready((outs, value))  # the time a user waits for a compile
        call_s = time.perf_counter() - t0
        cell.seen[key] = variant
        variant.last_key = key
        if len(cell.seen) > MAX_KEYS:
            cell.seen.popitem(last=False)
        _store(namespace, outs, variant, values, states)
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
        shown = [n for n in cell.program.inputs if not is_tool(parts[n])]
        return CellRun(
            name=cell.name,
            inputs=variant.dynamic,
            static=tuple(n for n in variant.static if n in shown),
            outputs=tuple(outs),
            compiled=why is not None,
            explanation=why[0] if why else "",
            changes=why[1] if why else (),
            signature=signature(tuple(shown), tuple(parts[n] for n in shown)),
            call_s=call_s,
            value=value,
        )


def _store(
    namespace: MutableMapping[str, Any],
    outs: dict[str, Any],
    variant: _Variant,
    values: list[Any],
    states: list[Split],
) -> None:
    """After the call returned: the outputs into the namespace, and what the cell changed
    in each nnx module into the user's module, as running the cell plainly would."""
    namespace.update(outs)
    for i, state in zip(variant.nnx, states, strict=True):
        write_back(values[i], state)


def _why(cell: _Cell, variant: _Variant, key: tuple[Any, ...]) -> tuple[str, tuple[ArgChange, ...]]:
    others = any(v.last_key is not None for v in cell.variants.values() if v is not variant)
    return compile_reason(cell.program.inputs, variant.last_key, key, other_variant_ran=others)


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
