"""The communication XLA inserted into a compiled program: its collective operations.

A program jitted on a sharded input is partitioned by XLA, which adds the collectives the
sharding needs (a stencil's edge rows from the neighbouring devices are a
``collective-permute``; a sum over a sharded axis an ``all-reduce``). They are read from
the optimised HLO text, one per instruction, with the bytes each moves (its result's
size) and the computation it runs in (a loop body runs it every iteration)::

    found = collectives(jax.jit(evolve).lower(u_sharded).compile().as_text())
    found[0].op, found[0].shape, found[0].bytes     # "collective-permute", "f32[1,128]", 512
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# XLA's collective operations; an asynchronous pair (``all-gather-start`` and
# ``-done``) is one transfer, counted at its start.
OPS = (
    "all-gather",
    "all-reduce",
    "all-to-all",
    "collective-broadcast",
    "collective-permute",
    "reduce-scatter",
    "ragged-all-to-all",
)
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<type>.+?)\s+"
    r"(?P<op>" + "|".join(map(re.escape, OPS)) + r")(?P<start>-start)?\("
)
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_ARRAY = re.compile(r"\b(?P<dtype>pred|[a-z]+\d+)\[(?P<dims>[\d,]*)\]")
_BODY = re.compile(r"\bbody=%?(?P<name>[\w.\-]+)")
_PAIRS = re.compile(r"source_target_pairs=\{(?P<pairs>[\d,{} ]*)\}")
_BITS = {"pred": 8}


@dataclass(frozen=True)
class Collective:
    """One collective instruction of a compiled program."""

    op: str  # "collective-permute", "all-reduce", ...
    name: str  # the instruction's HLO name
    shape: str  # its result, e.g. "f32[1,128]" (a tuple's arrays joined by ", ")
    bytes: int  # what it moves per device each time it runs: its result's size
    computation: str  # the HLO computation it is in ("main", a loop body's name, ...)
    pairs: int = 0  # collective-permute: how many (source, target) device pairs
    in_loop: bool = False  # in a while loop's body: it runs every iteration

    def words(self) -> str:
        pairs = f" between {self.pairs} device pairs" if self.pairs else ""
        where = " in a loop body (every iteration)" if self.in_loop else ""
        return f"{self.op} of {self.shape} ({self.bytes:,} bytes){pairs}{where}"


def collectives(hlo_text: str) -> tuple[Collective, ...]:
    """Every collective instruction of an HLO module's text, in the order written."""
    found: list[Collective] = []
    bodies = {m.group("name") for m in _BODY.finditer(hlo_text)}
    computation = ""
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and "=" not in line.split("{", 1)[0]:
            computation = head.group("name")
            continue
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        arrays = _ARRAY.findall(m.group("type"))
        if m.group("start") and len(arrays) > 1:  # (operand, result, ...): the result
            arrays = arrays[1:2]
        pairs = _PAIRS.search(line)
        found.append(
            Collective(
                op=m.group("op"),
                name=m.group("name"),
                shape=", ".join(f"{d}[{s}]" for d, s in arrays),
                bytes=sum(_bytes(d, s) for d, s in arrays),
                computation=computation,
                pairs=pairs.group("pairs").count("{") if pairs else 0,
                in_loop=computation in bodies,
            )
        )
    return tuple(found)


def _bytes(dtype: str, dims: str) -> int:
    bits = _BITS.get(dtype) or int(re.sub(r"\D", "", dtype) or 8)
    count = 1
    for d in filter(None, dims.split(",")):
        count *= int(d)
    return count * max(bits, 8) // 8
