"""A compiled program's HLO text read for what profile events need: every instruction's
JAX op names and user line, what a fusion holds, what a loop or branch runs.

JAX 0.12's HLO text writes ``metadata={op_name="jit(f)/layer0/dot_general"
stack_frame_id=4}`` and, at the top, the tables that resolve a frame to a file and line
(``FileNames``, ``FileLocations``, ``StackFrames``), which is where XProf's memory viewer
reads them too (ANCHORS.md); an older ``source_file=… source_line=…`` is read as well::

    hlo = read_hlo(jax.jit(f).lower(x).compile().as_text())
    hlo.module                              # "jit_f"
    i = hlo.instructions["ynn_fusion.6"]
    i.opcode, [hlo.instructions[k].op_names for k in hlo.members("ynn_fusion.6")]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._jax_compat import executable_fingerprint
from ..explain.source import is_cell, label

_TABLE = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)$")
_ROW = re.compile(r"^(\d+) (.*)$")
_COMPUTATION = re.compile(r"^(ENTRY )?%(\S+) \(.*\{$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%(\S+) = (.*)$")
_OPCODE = re.compile(r"^.*?(?<![\w.%-])([a-z][a-z0-9_-]*)\(")
_SHAPE = re.compile(r"^[a-z]+\d*\[([\d,]*)\]")
_OPERAND = re.compile(r"%([\w.\-]+)")
# (No \b before the key: tried at every character it triples the search; a key that
# starts inside a word is dropped in _called instead.)
_CALLED = re.compile(
    r"(?:calls|body|condition|to_apply|true_computation|false_computation)=%([\w.\-]+)"
)
_WORD = re.compile(r"\w")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_OP_NAME = re.compile(r'op_name="([^"\\]*(?:\\.[^"\\]*)*)"')  # (unrolled: 2x faster)
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_SOURCE = re.compile(r'source_file="((?:[^"\\]|\\.)*)" source_line=(\d+)')
_FIELD = re.compile(r"(\w+)=(\d+)")
_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")
_DIM_LABELS = re.compile(r"dim_labels=\w+_(\w+)->")  # a convolution's kernel's: "01io"
_PARAMETER = re.compile(r"parameter\((\d+)\)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_DTYPE = re.compile(r"^([a-z]+)(\d*)\[")
_BITS = {"pred": 8, "token": 0}  # else the number after the type: f32, s8, bf16, u4
# Instructions that move nothing worth timing: their op names still count when an op
# holds nothing else.
FREE = frozenset(
    {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "broadcast", "iota"}
)
CONTROL = frozenset({"while", "conditional", "call"})  # events that hold other events


class Instruction(NamedTuple):
    """One instruction of the module. (A named tuple, not a frozen dataclass: a frozen
    dataclass sets each field through ``object.__setattr__``, five times the cost of a
    tuple over a 10,000-equation program's 23,000 instructions.)"""

    name: str
    opcode: str
    computation: str
    op_names: tuple[str, ...]  # JAX's names (several when XLA merged instructions: "a;b")
    line: str  # the user's line, "In[4], line 3" or "model.py:12"; "" when unknown
    elements: int  # of its (first) output
    called: tuple[str, ...]  # computations it runs: a fusion's, a loop's body and cond
    work: float  # an estimate: a product's multiply-adds, else its output elements
    trips: int | None = None  # a while's known trip count (XLA's backend config)
    text: str = ""  # the rest of its line, after "name = " (read further when needed)

    @property
    def out_bytes(self) -> int:
        """Bytes of its output (0 for a tuple: its parts are counted). Read when asked:
        only the costs per equation need it, not every profile's join."""
        return _out_bytes(self.text, self.elements)

    def operands(self) -> list[str]:
        """The instructions it reads, by name."""
        args = self.text.split("(", 1)[1] if "(" in self.text else ""
        return _OPERAND.findall(args.split("), ", 1)[0])


@dataclass
class Hlo:
    module: str
    entry: str
    instructions: dict[str, Instruction] = field(default_factory=dict)
    computations: dict[str, list[str]] = field(default_factory=dict)
    has_metadata: bool = False
    _callers: dict[str, Instruction] | None = field(default=None, repr=False, compare=False)

    def members(self, name: str) -> list[str]:
        """The instructions an event of ``name`` executes itself: a fusion's contents
        (nested fusions too), or the instruction alone (a loop's body runs as events of
        its own)."""
        top = self.instructions[name]
        if top.opcode != "fusion":
            return [name]
        found: list[str] = []
        stack = list(top.called)
        while stack:
            for k in self.computations.get(stack.pop(), []):
                inner = self.instructions[k]
                if inner.opcode == "fusion":
                    stack.extend(inner.called)
                else:
                    found.append(k)
        return found

    def caller(self, computation: str) -> Instruction | None:
        """The loop, branch or call instruction that runs ``computation`` (None: the entry,
        or a fusion's computation)."""
        if self._callers is None:
            self._callers = {
                c: i for i in self.instructions.values() if i.opcode in CONTROL for c in i.called
            }
        return self._callers.get(computation)

    def nested_events(self, name: str) -> list[str]:
        """The instructions directly inside a loop, branch or call: events of their own,
        whose time the outer event's includes."""
        top = self.instructions[name]
        if top.opcode not in CONTROL:
            return []
        return [k for c in top.called for k in self.computations.get(c, [])]


def _out_bytes(rest: str, elements: int) -> int:
    """Bytes of an instruction's array output (0 for a tuple: its parts are counted)."""
    dtype = _DTYPE.match(rest)
    if dtype is None:
        return 0
    bits = _BITS.get(dtype[1], int(dtype[2]) if dtype[2] else 0)
    return elements * bits // 8


def _where(filename: str, line: int) -> str:
    """A line as ``walk.source_line`` writes it, without the function."""
    if is_cell(filename):
        return label(filename, line)
    return f"{filename.rsplit('/', 1)[-1]}:{line}"


def _frames(tables: dict[str, dict[int, str]]) -> dict[int, str]:
    """Stack frame id -> the user's line of that (innermost) frame."""
    files = {k: v.strip().strip('"') for k, v in tables.get("FileNames", {}).items()}
    locations: dict[int, tuple[str, int]] = {}
    for k, text in tables.get("FileLocations", {}).items():
        f = dict((a, int(b)) for a, b in _FIELD.findall(text))
        locations[k] = (files.get(f.get("file_name_id", 0), ""), f.get("line", 0))
    frames: dict[int, str] = {}
    for k, text in tables.get("StackFrames", {}).items():
        f = dict((a, int(b)) for a, b in _FIELD.findall(text))
        where = locations.get(f.get("file_location_id", 0))
        if where is not None and where[0]:
            frames[k] = _where(*where)
    return frames


# Modules read, kept for the next profile of the same program (%%profile --graph of a
# training step, profiled again and again): the compiled HLO text is read once, and
# a compiled program's text is asked of XLA once, by its fingerprint. Kept: the last few,
# their texts up to KEPT_CHARS together.
KEPT_MODULES = 8
KEPT_CHARS = 16 << 20  # a large program: megabytes of text, its Hlo a few times that
_read: dict[str, Hlo] = {}  # text -> its Hlo, oldest first
_texts: dict[bytes, str] = {}  # a compiled program's fingerprint -> its text, oldest first


def compiled_text(compiled: Any) -> str:
    """``compiled.as_text()`` (a ``jax.stages.Compiled``), asked of XLA once per program:
    kept by the executable's fingerprint where XLA gives one."""
    fingerprint = executable_fingerprint(compiled)
    if fingerprint is None:  # another JAX or backend: the text each time
        return str(compiled.as_text())
    text = _texts.pop(fingerprint, None)
    if text is None:
        text = str(compiled.as_text())
    _texts[fingerprint] = text  # (last: the newest)
    _bound(_texts, _texts.__getitem__)
    return text


def read_hlo(text: str) -> Hlo:
    """``text`` (``Compiled.as_text()``) read into instructions by name; a text read
    before is not read again (the Hlo is shared: nothing changes it once read)."""
    hlo = _read.pop(text, None)
    if hlo is None:
        hlo = _read_text(text)
    _read[text] = hlo
    _bound(_read, str)
    return hlo


def _bound(kept: dict[Any, Any], text: Callable[[Any], str]) -> None:
    """Drop the oldest entries past KEPT_MODULES, or past KEPT_CHARS of text (``text``:
    an entry's, by its key); the newest is kept whatever its size."""
    size = sum(len(text(k)) for k in kept)
    while len(kept) > 1 and (len(kept) > KEPT_MODULES or size > KEPT_CHARS):
        oldest = next(iter(kept))
        size -= len(text(oldest))
        del kept[oldest]


def _read_text(text: str) -> Hlo:
    hlo, rows, tables = _rows(text)
    frames = _frames(tables)
    dims: dict[str, str] = {}  # name -> its output's dimensions as written, "8,8"
    products: list[str] = []  # dots and convolutions: their work needs an operand's shape
    for name, rest, computation in rows:
        inst = _instruction(name, rest, computation, frames, dims)
        if inst.opcode in ("dot", "convolution"):
            products.append(name)
        if inst.op_names and inst.opcode != "parameter":
            hlo.has_metadata = True
        hlo.instructions[name] = inst
    for name in products:  # (in place: the instructions keep the text's order)
        hlo.instructions[name] = _with_product_work(hlo.instructions[name], dims)
    unnamed = [k for k in products if not hlo.instructions[k].op_names]
    if unnamed:
        _name_products(hlo, unnamed)
    return hlo


def _name_products(hlo: Hlo, unnamed: list[str]) -> None:
    """A product XLA rewrote without metadata (a 1-row matmul's ``dot`` after layout
    assignment) takes the JAX op name and line of the reshape of its result that kept
    them (a ``bitcast`` named ``.../dot_general``, often inside the fusion reading it)."""
    users: dict[str, list[str]] = {}
    for inst in hlo.instructions.values():
        for operand in inst.operands() if inst.opcode != "parameter" else ():
            users.setdefault(operand, []).append(inst.name)
    wanted = {"dot": "dot_general", "convolution": "conv_general_dilated"}
    for name in unnamed:
        inst = hlo.instructions[name]
        primitive = wanted[inst.opcode]
        seen: set[str] = set()
        todo = list(users.get(name, []))
        while todo:
            user = hlo.instructions[todo.pop()]
            if user.name in seen:
                continue
            seen.add(user.name)
            named = [n for n in user.op_names if n.rsplit("/", 1)[-1] == primitive]
            if named:
                hlo.instructions[name] = inst._replace(op_names=tuple(named), line=user.line)
                break
            if user.opcode == "fusion":  # the fusion's parameter for this operand, inside
                for at, operand in enumerate(user.operands()):
                    if operand == name:
                        todo += _fused_parameter_users(hlo, user, at, users)
            elif user.opcode in ("bitcast", "copy", "reshape", "transpose"):
                todo += users.get(user.name, [])


def _fused_parameter_users(
    hlo: Hlo, fusion: Instruction, index: int, users: dict[str, list[str]]
) -> list[str]:
    """The instructions inside ``fusion`` that read its operand number ``index``."""
    for computation in fusion.called:
        for k in hlo.computations.get(computation, []):
            inner = hlo.instructions[k]
            found = _PARAMETER.search(inner.text) if inner.opcode == "parameter" else None
            if found is not None and int(found[1]) == index:
                return users.get(k, [])
    return []


def _rows(text: str) -> tuple[Hlo, list[tuple[str, str, str]], dict[str, dict[int, str]]]:
    """The module (its computations' instruction names), every instruction as (name, the
    rest of its line, its computation), and the tables that resolve stack frames."""
    lines = text.splitlines()
    header = lines[0] if lines else ""
    module = header.split()[1].rstrip(",") if header.startswith("HloModule") else ""
    tables: dict[str, dict[int, str]] = {}
    table: str | None = None
    computation: str | None = None
    rows: list[tuple[str, str, str]] = []
    hlo = Hlo(module=module, entry="")
    for row in lines[1:]:
        if computation is None:
            if _TABLE.match(row):
                table = row
                tables[table] = {}
                continue
            found = _COMPUTATION.match(row)
            if found is not None:
                computation, table = found[2], None
                names: list[str] = []
                hlo.computations[computation] = names
                if found[1]:
                    hlo.entry = computation
                continue
            got = _ROW.match(row)
            if table is not None and got is not None:
                tables[table][int(got[1])] = got[2]
            continue
        if row.startswith("}"):
            computation = None
            continue
        found = _INSTRUCTION.match(row)
        if found is not None:
            rows.append((found[1], found[2], computation))
            names.append(found[1])
    return hlo, rows, tables


def _instruction(
    name: str, rest: str, computation: str, frames: dict[int, str], dims: dict[str, str]
) -> Instruction:
    """One instruction from the rest of its line; its output's dimensions kept in ``dims``
    (each search only where its field's name appears: 23,000 instructions, six fields)."""
    shape = _SHAPE.match(rest)
    elements = 1
    if shape is not None:
        dims[name] = shape[1]
        elements = math.prod(map(int, filter(None, shape[1].split(",")))) if shape[1] else 1
    opcode = _OPCODE.match(rest)
    names = _OP_NAME.search(rest) if "op_name=" in rest else None
    line = ""
    frame = _FRAME.search(rest) if "stack_frame_id=" in rest else None
    if frame is not None:
        line = frames.get(int(frame[1]), "")
    elif "source_file=" in rest:
        source = _SOURCE.search(rest)
        if source is not None:
            line = _where(source[1], int(source[2]))
    called = _called(rest) if "=%" in rest else ()
    branches = _BRANCHES.search(rest) if "branch_computations=" in rest else None
    if branches is not None:
        called += tuple(_OPERAND.findall(branches[1]))
    op = opcode[1] if opcode else ""
    trips = _TRIPS.search(rest) if op == "while" and "known_trip_count" in rest else None
    return Instruction(
        name, op, computation, tuple(filter(None, names[1].split(";"))) if names else (),
        line, elements, called, float(elements), int(trips[1]) if trips else None, rest,
    )  # fmt: skip


def _called(rest: str) -> tuple[str, ...]:
    """The computations an instruction runs, named by its ``calls=``, ``body=`` ... ."""
    return tuple(
        m[1] for m in _CALLED.finditer(rest) if not (m.start() and _WORD.match(rest, m.start() - 1))
    )


def _dims(written: str | None) -> tuple[int, ...]:
    """``"8,8"`` -> ``(8, 8)``; a scalar's ``""`` (or no array shape) -> ``()``."""
    return tuple(map(int, filter(None, written.split(",")))) if written else ()


def _with_product_work(inst: Instruction, dims: dict[str, str]) -> Instruction:
    """A product's work (multiply-adds): a dot's output elements times its contracted
    size, read from its left operand's shape; a convolution's output elements times its
    kernel window times the input channels of a group (the kernel's elements less its
    output channels: 2 x N·H·W·Cout·kh·kw·Cin FLOPs, padding counted as XLA does not)."""
    rest = inst.text
    args = _OPERAND.findall(rest.split("(", 1)[1]) if "(" in rest else []
    if inst.opcode == "convolution":
        labels = _DIM_LABELS.search(rest)
        kernel = _dims(dims.get(args[1])) if len(args) > 1 else ()
        if labels is None or "o" not in labels[1] or len(kernel) != len(labels[1]):
            return inst
        window = math.prod(kernel) // max(1, kernel[labels[1].index("o")])
        return inst._replace(work=inst.work * window)
    contracting = _CONTRACTING.search(rest)
    lhs = _dims(dims.get(args[0])) if args else ()
    if contracting is None or not lhs:
        return inst
    picked = [int(d) for d in contracting[1].split(",") if d]
    return inst._replace(work=inst.work * math.prod(lhs[d] for d in picked if d < len(lhs)))
