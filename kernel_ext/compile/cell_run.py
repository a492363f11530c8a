"""The report of a ``%%jit`` run: the :class:`CellRun` record, and why the cell compiled.

A run that compiled (or was asked for with ``-o``) says which inputs were traced and
which static, what it wrote, whether it compiled and why, in the user's terms: the
inputs whose key part changed since the same cell last ran::

    compile_reason(("x", "n"), before, key, other_variant_ran=False)
    # ("x: f32[3] → f32[4]", (ArgChange("x", "f32[3]", "f32[4]"),))
    signature(("x", "n"), key)   # ("x: f32[4]", "n: 3 (static)")
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any

from .cell_inputs import SplitPart, split_changes
from .cell_keys import is_static_part, short
from .log import ArgChange


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


def is_tool(part: Any) -> bool:
    """A static input that is a module, function or class rather than a setting."""
    return is_static_part(part) and isinstance(
        part[2], types.ModuleType | types.FunctionType | types.BuiltinFunctionType | type
    )


def describe_part(part: Any) -> str:
    """An input's key part as the user reads it: ``f32[3]``, ``3 (static)``, ``MLP(…)``."""
    if isinstance(part, SplitPart):
        return part.describe()
    if is_static_part(part):
        return f"{short(part[2])} (static)"
    if isinstance(part, tuple) and len(part) == 3:
        shape, dtype, weak = part
        from .capture import short_type

        return short_type(types.SimpleNamespace(shape=shape, dtype=dtype, weak_type=weak))
    if isinstance(part, tuple) and len(part) == 2:
        tree, leaves = part
        return f"{tree} with {', '.join(leaves)}"
    return str(part)


def signature(names: tuple[str, ...], key: tuple[Any, ...]) -> tuple[str, ...]:
    """Each input named with its key part: ``("x: f32[3]", "n: 3 (static)")``."""
    return tuple(f"{n}: {describe_part(p)}" for n, p in zip(names, key, strict=True))


def compile_reason(
    inputs: tuple[str, ...],
    before: tuple[Any, ...] | None,
    key: tuple[Any, ...],
    *,
    other_variant_ran: bool,
) -> tuple[str, tuple[ArgChange, ...]]:
    """Why the cell compiles for ``key``: the inputs changed since ``before`` (the key its
    variant last ran with, None if it never ran; ``other_variant_ran``: the cell ran with
    another pattern of static inputs)."""
    if before is None:
        if other_variant_ran:
            return "an input changed kind (an array now, a static value before, or back)", ()
        return "first run", ()
    changes = tuple(
        change
        for n, old, new in zip(inputs, before, key, strict=True)
        if old != new
        for change in (
            split_changes(n, old, new)
            if isinstance(old, SplitPart) and isinstance(new, SplitPart)
            else (ArgChange(n, describe_part(old), describe_part(new)),)
        )
    )
    return "; ".join(
        map(str, changes)
    ) or "a signature seen before, evicted from the cache", changes
