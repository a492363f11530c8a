"""Two walked programs aligned equation by equation (graph/diff.py's matching).

Each block's equations are aligned as difflib aligns lines, over equation keys interned
to small ints (:class:`~jaxlab.graph.signatures.Interner`): first the exact key
(primitive, parameters, operand and result types, where each operand comes from), then,
in what is left between two exact matches, the primitive alone, so an equation with the
same primitive at the same place but other shapes, dtypes or parameters is *changed*
rather than removed and added. Matched equations that hold nested programs are aligned
inside, block by block, and every box holding a difference is noted.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jax.extend.core as jcore

from .labels import literal_text, type_text
from .signatures import Interner, is_jaxpr, literal_key
from .walk import Block, Item

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class Change:
    """A matched pair that differs: the same primitive at the same place, other shapes,
    dtypes, parameters or operands (``what``: ``"f32[3] → f32[4]"``)."""

    before: str  # equation id in the first program ("" for an input or output it lacks)
    after: str
    what: str


class Matcher:
    """The alignment of two walked programs, block by block (see module docstring)."""

    def __init__(self) -> None:
        self.keys = Interner()
        self.pairs: list[tuple[str, str]] = []
        self.removed: list[str] = []
        self.added: list[str] = []
        self.changed: list[Change] = []
        self.holds_a: list[str] = []
        self.holds_b: list[str] = []
        self._by_block: dict[int, tuple[list[int], list[int]]] = {}

    def block(self, a: Block, b: Block) -> bool:
        """Align two blocks' equations; whether anything in them differs."""
        ka, kb = self._keys(a), self._keys(b)
        if ka[0] == kb[0] and not any(item.blocks for item in a.items):
            self.pairs.extend((x.id, y.id) for x, y in zip(a.items, b.items, strict=True))
            return False
        return self.items(a.items, ka, b.items, kb)

    def items(
        self,
        xs: list[Item],
        kx: tuple[list[int], list[int]],
        ys: list[Item],
        ky: tuple[list[int], list[int]],
    ) -> bool:
        """Align two runs of equations (with their exact and loose keys)."""
        differs = False
        for op, i1, i2, j1, j2 in _opcodes(kx[0], ky[0]):
            if op == "equal":
                for x, y in zip(xs[i1:i2], ys[j1:j2], strict=True):
                    differs |= self.pair(x, y, changed=False)
                continue
            differs = True
            gap_x, gap_y = xs[i1:i2], ys[j1:j2]
            if self._wrapped(gap_x, gap_y):
                continue
            # What is left between exact matches: the same primitive is a change.
            for op2, p1, p2, q1, q2 in _opcodes(kx[1][i1:i2], ky[1][j1:j2]):
                left, right = gap_x[p1:p2], gap_y[q1:q2]
                if op2 == "equal":
                    for x, y in zip(left, right, strict=True):
                        self.pair(x, y, changed=True)
                    continue
                for x in left:
                    self.removed.extend(_ids(x))
                for y in right:
                    self.added.extend(_ids(y))
        return differs

    def _wrapped(self, xs: list[Item], ys: list[Item]) -> bool:
        """A gap where one side is a single box (``jax.checkpoint(f)``'s remat, a jit)
        around what the other side has plain: the box is added (or removed) and its
        inside aligned with the other side's equations. Whether it was that."""
        for box, plain, added in ((ys, xs, True), (xs, ys, False)):
            if len(box) != 1 or len(box[0].blocks) != 1 or not plain:
                continue
            if len(plain) == 1 and plain[0].primitive == box[0].primitive:
                continue  # the same box on both sides: a change, not a wrapping
            inner = box[0].blocks[0]
            k_inner, k_plain = self._keys(inner), self._key_list(plain)
            shared = difflib.SequenceMatcher(None, k_inner[0], k_plain[0], autojunk=False)
            if shared.ratio() < 0.5:
                continue
            (self.added if added else self.removed).append(box[0].id)
            if added:
                self.items(plain, k_plain, inner.items, k_inner)
            else:
                self.items(inner.items, k_inner, plain, k_plain)
            return True
        return False

    def pair(self, x: Item, y: Item, *, changed: bool) -> bool:
        """Match ``x`` with ``y`` (and their nested programs); whether they differ."""
        self.pairs.append((x.id, y.id))
        if changed:
            self.changed.append(Change(x.id, y.id, _what(x, y)))
        inside = False
        if x.blocks or y.blocks:
            for k in range(max(len(x.blocks), len(y.blocks))):
                if k < len(x.blocks) and k < len(y.blocks):
                    inside |= self.block(x.blocks[k], y.blocks[k])
                    continue
                inside = True
                for item in x.blocks[k].items if k < len(x.blocks) else ():
                    self.removed.extend(_ids(item))
                for item in y.blocks[k].items if k < len(y.blocks) else ():
                    self.added.extend(_ids(item))
            if inside:
                self.holds_a.append(x.id)
                self.holds_b.append(y.id)
        return changed or inside

    def _keys(self, block: Block) -> tuple[list[int], list[int]]:
        """Each equation's exact and loose key, interned (once per block)."""
        known = self._by_block.get(id(block))
        if known is None:
            known = self._by_block[id(block)] = self._key_list(block.items)
        return known

    def _key_list(self, items: list[Item]) -> tuple[list[int], list[int]]:
        exact: list[int] = []
        loose: list[int] = []
        for item in items:
            eqn = item.eqn
            key = (
                item.primitive,
                _params(eqn),
                tuple(
                    literal_key(v) if isinstance(v, jcore.Literal) else type_text(v.aval)
                    for v in eqn.invars
                ),
                tuple(type_text(v.aval) for v in eqn.outvars),
                len(item.blocks),
            )
            exact.append(self.keys(key))
            loose.append(self.keys((item.primitive, len(item.blocks))))
        return exact, loose


def _opcodes(a: list[int], b: list[int]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes for ``a`` → ``b``, the common start and end taken first (a
    change in one place of a long program costs a linear scan, not a quadratic search)."""
    n = min(len(a), len(b))
    lo = 0
    while lo < n and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and a[len(a) - 1 - hi] == b[len(b) - 1 - hi]:
        hi += 1
    ops: list[tuple[str, int, int, int, int]] = [("equal", 0, lo, 0, lo)] if lo else []
    middle = difflib.SequenceMatcher(None, a[lo : len(a) - hi], b[lo : len(b) - hi], autojunk=False)
    for op, i1, i2, j1, j2 in middle.get_opcodes():
        ops.append((op, lo + i1, lo + i2, lo + j1, lo + j2))
    if hi:
        ops.append(("equal", len(a) - hi, len(a), len(b) - hi, len(b)))
    return ops


def _params(eqn: Any) -> tuple[tuple[str, str], ...]:
    """An equation's parameters as text, nested programs as placeholders (they are
    aligned themselves) and object addresses masked."""
    found = []
    for name in sorted(eqn.params):
        value = eqn.params[name]
        if is_jaxpr(value) or (
            isinstance(value, tuple) and value and all(is_jaxpr(v) for v in value)
        ):
            text = "<jaxpr>"
        elif callable(value) and not isinstance(value, type):
            text = getattr(value, "__name__", type(value).__name__)
        else:
            text = _ADDRESS.sub("", repr(value))
        found.append((name, text))
    return tuple(found)


def _what(x: Item, y: Item) -> str:
    """What differs between two equations of one primitive, in a few words."""
    parts: list[str] = []
    out_a = [type_text(v.aval) for v in x.eqn.outvars]
    out_b = [type_text(v.aval) for v in y.eqn.outvars]
    if out_a != out_b:
        parts.append(f"{', '.join(out_a)} → {', '.join(out_b)}")
    in_a = [type_text(v.aval) for v in x.eqn.invars]
    in_b = [type_text(v.aval) for v in y.eqn.invars]
    if in_a != in_b and out_a == out_b:
        parts.append(f"operands {', '.join(in_a)} → {', '.join(in_b)}")
    pa, pb = dict(_params(x.eqn)), dict(_params(y.eqn))
    for name in sorted(set(pa) | set(pb)):
        if pa.get(name) != pb.get(name):
            parts.append(f"{name}: {_short(pa.get(name))} → {_short(pb.get(name))}")
    if len(x.blocks) != len(y.blocks):
        parts.append(f"{len(x.blocks)} → {len(y.blocks)} nested programs")
    lit_a = [literal_text(v) for v in x.eqn.invars if isinstance(v, jcore.Literal)]
    lit_b = [literal_text(v) for v in y.eqn.invars if isinstance(v, jcore.Literal)]
    if lit_a != lit_b:
        parts.append(f"constants {', '.join(lit_a) or '(none)'} → {', '.join(lit_b) or '(none)'}")
    return "; ".join(parts) or "the programs inside differ"


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _short(text: str | None, most: int = 40) -> str:
    if text is None:
        return "(none)"
    return text if len(text) <= most else text[: most - 1] + "…"


def _ids(item: Item) -> list[str]:
    """An equation's id and those of every equation nested in it."""
    found = [item.id]
    for block in item.blocks:
        for inner in block.items:
            found.extend(_ids(inner))
    return found


def outermost(ids: Iterable[str]) -> list[str]:
    """The ids not nested in another of ``ids`` (an added box, not each of its equations)."""
    chosen = set(ids)
    return [i for i in ids if not any(p in chosen for p in _ancestors(i))]


def _ancestors(item_id: str) -> list[str]:
    """The equations holding ``item_id``: ``e3/0/e5`` -> ``["e3"]``."""
    parts = item_id.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts) - 1) if parts[k - 1].startswith("e")]


def io_changes(a: Any, b: Any) -> tuple[Change, ...]:
    found = []
    for kind, xs, ys in (("in", a.invars, b.invars), ("out", a.outvars, b.outvars)):
        for k in range(max(len(xs), len(ys))):
            ta = type_text(xs[k].aval) if k < len(xs) else None
            tb = type_text(ys[k].aval) if k < len(ys) else None
            if ta != tb:
                what = f"{ta} → {tb}" if ta and tb else ("removed" if ta else "added")
                found.append(Change(f"{kind}{k}" if ta else "", f"{kind}{k}" if tb else "", what))
    return tuple(found)
