"""FLOPs and bytes per jaxpr equation, read from the compiled program and drawn on it.

XLA's ``cost_analysis`` gives a module's totals only (and counts a loop's body once).
Here every instruction of the compiled HLO is costed from its own shapes and joined to
the equations it came from by the op names and lines profile time uses (``attribution``):

* **FLOPs**, as XLA's ``HloCostAnalysis`` counts them: a ``dot``'s 2 x its multiply-adds;
  a convolution's 2 x output elements x kernel window x input channels of a group (its
  padding counted too, where XLA skips it: a few % more on small images); an ``fft``'s
  8 x Πlog2(lengths) per element of its input (4 complex multiply-adds per level; not
  5·n·log2 n); a ``sort``'s n·log2 n; a ``reduce``'s, ``scatter``'s, ``reduce-window``'s
  and ``map``'s applied computation per application; one per output element of an
  arithmetic elementwise instruction (``convert`` too). Transcendental instructions
  (``tanh``, ``exp``, ...) are counted apart, in ``transcendentals``. A ``gather`` does
  no arithmetic.
* **Per equation**: an instruction goes to the equations of its op name and line; of a
  line's alike equations, a product goes to those doing its work (a layer of another
  width has its own count), and what is shared is shared by each equation's own work.
* **Bytes**: what each executed instruction reads and writes (a fusion's operands and its
  output, as XLA counts a fusion: its insides move nothing through memory), split among
  the fusion's equations by their work, as profile time is.
* **Loops counted whole**: an instruction inside a ``while`` body counts as many times as
  XLA's known trip count (a ``scan``, a ``fori_loop``; nested loops multiply); a loop
  without one (a ``while_loop``) is counted once and ``notes`` says so.

::

    c = jaxlab.equation_costs(step, params, x)
    c.flops["e12"], c.total_flops          # per equation id; the module's total
    c.ranked(3)                            # [EquationCost("e12", "dot_general", ...), ...]
    c.graph                                # FLOPs drawn on the program (GraphExplorer)
    jaxlab.equation_costs(step, params, x, measure="bytes").graph
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..graph import model as m
from .hlo_map import CONTROL, FREE, Hlo, Instruction, read_hlo

MEASURES = ("flops", "bytes", "transcendentals")
_ELEMENTWISE = frozenset(
    {
        "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate",
        "abs", "sign", "compare", "select", "clamp", "and", "or", "xor", "not", "floor",
        "ceil", "round-nearest-even", "round-nearest-afz", "power", "sqrt", "rsqrt", "cbrt",
        "atan2", "shift-left", "shift-right-logical", "shift-right-arithmetic", "convert", "real",
        "imag", "complex", "is-finite", "popcnt", "count-leading-zeros",
    }
)  # fmt: skip
_TRANSCENDENTAL = frozenset(
    {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "sine",
     "cosine", "tan", "erf"}
)  # fmt: skip


@dataclass(frozen=True)
class EquationCost:
    """One equation's cost, every run of it counted (loops by their trip counts)."""

    id: str
    primitive: str
    source: str | None
    flops: float
    bytes: float
    transcendentals: float
    code: str | None = None  # what made it: "x @ p['W']"
    call: str | None = None  # the call holding it: "layer 0 (params[0])"


@dataclass(frozen=True)
class EquationCosts:
    """FLOPs, bytes and transcendentals per equation id, with their module totals."""

    function: str
    module: str
    flops: dict[str, float]
    bytes: dict[str, float]
    transcendentals: dict[str, float]
    total_flops: float
    total_bytes: float
    total_transcendentals: float
    measure: str
    graph: m.Graph  # the program, ``measure`` drawn on it
    notes: tuple[str, ...]
    primitives: dict[str, str]
    sources: dict[str, str | None]

    def ranked(self, most: int = 10) -> list[EquationCost]:
        """The ``most`` costliest equations by ``measure``, costliest first, each with its
        code and the call holding it."""
        from ..graph.overlay import describe

        by = getattr(self, self.measure)
        order = sorted(by, key=lambda k: -by[k])[:most]
        return [
            EquationCost(
                k, self.primitives.get(k, "?"), self.sources.get(k), self.flops.get(k, 0.0),
                self.bytes.get(k, 0.0), self.transcendentals.get(k, 0.0),
                *describe(self.graph, k),
            )
            for k in order
        ]  # fmt: skip

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return self.graph._repr_mimebundle_(include, exclude)


# Instructions that apply a computation per element (to_apply=, comparator): the
# computation's cost is theirs, counted by their own rule, never run once on its own.
_APPLYING = frozenset(
    {"reduce", "reduce-window", "scatter", "sort", "map", "select-and-scatter", "all-reduce",
     "reduce-scatter"}
)  # fmt: skip
_FFT_LENGTH = re.compile(r"fft_length=\{([\d,]*)\}")
_WINDOW_SIZE = re.compile(r"window=\{size=([\dx]+)")


def multipliers(hlo: Hlo) -> tuple[dict[str, float], int]:
    """How many times each computation runs per call of the module, and how many loops
    have no known trip count (counted once). A reduction's or sort's applied computation
    is not among them: it is costed per element by the instruction applying it."""
    runs: dict[str, float] = {hlo.entry: 1.0}
    unknown = 0
    stack = [hlo.entry]
    while stack:
        computation = stack.pop()
        times = runs[computation]
        for name in hlo.computations.get(computation, []):
            inst = hlo.instructions[name]
            if not inst.called or inst.opcode in _APPLYING:
                continue
            each = times
            if inst.opcode == "while":
                if inst.trips is None:
                    unknown += 1
                each = times * (inst.trips if inst.trips is not None else 1)
            for called in inst.called:
                if called not in runs:
                    runs[called] = each
                    stack.append(called)
    return runs, unknown


class _Costing:
    """(FLOPs, transcendentals) of each instruction of one module, from its shapes, as
    XLA's ``HloCostAnalysis`` counts them (an applied computation's cost read once)."""

    def __init__(self, hlo: Hlo) -> None:
        self.hlo = hlo
        self.applied: dict[str, tuple[float, float]] = {}

    def elements(self, name: str) -> int:
        given = self.hlo.instructions.get(name)
        return given.elements if given is not None else 0

    def per_application(self, inst: Instruction) -> tuple[float, float]:
        """The cost of one application of the computation ``inst`` applies (an add: 1)."""
        flops = transcendentals = 0.0
        for computation in inst.called:
            if computation not in self.applied:
                self.applied[computation] = (0.0, 0.0)  # (a computation applying itself)
                found = [self.of(self.hlo.instructions[k]) for k in self.hlo.computations.get(
                    computation, [])]  # fmt: skip
                self.applied[computation] = (sum(f for f, _ in found), sum(t for _, t in found))
            f, t = self.applied[computation]
            flops, transcendentals = flops + f, transcendentals + t
        return flops, transcendentals

    def of(self, inst: Instruction) -> tuple[float, float]:
        """(FLOPs, transcendentals) of one run of ``inst``."""
        op = inst.opcode
        if op in ("dot", "convolution"):
            return 2.0 * inst.work, 0.0
        if op in _ELEMENTWISE:
            return float(inst.elements), 0.0
        if op in _TRANSCENDENTAL:
            return 0.0, float(inst.elements)
        if op == "fft":  # 4 complex multiply-adds per element and level, as XLA counts
            length = _FFT_LENGTH.search(inst.text)
            lengths = (length[1] if length else "").split(",")
            levels = math.prod(int(n).bit_length() - 1 for n in lengths if n)
            operands = inst.operands()
            return 8.0 * levels * self.elements(operands[0]) if operands else 0.0, 0.0
        if op == "sort":  # n log2 n comparisons
            operands = inst.operands()
            n = self.elements(operands[0]) if operands else 0
            return float(n * max(0, (n - 1).bit_length())), 0.0
        if op not in _APPLYING:
            return 0.0, 0.0
        operands = inst.operands()
        if op == "reduce":  # input less output elements, each one application
            times = max(0, self.elements(operands[0]) - inst.elements) if operands else 0
        elif op == "scatter":  # one application per update element
            n = max(1, (len(operands) - 1) // 2)
            times = self.elements(operands[n + 1]) if len(operands) > n + 1 else 0
        elif op == "reduce-window":
            size = _WINDOW_SIZE.search(inst.text)
            window = math.prod(int(k) for k in size[1].split("x")) if size else 1
            times = (window - 1) * inst.elements
        elif op == "map":
            times = inst.elements
        else:  # select-and-scatter, collectives: left to XLA's own counts
            return 0.0, 0.0
        flops, transcendentals = self.per_application(inst)
        return flops * times, transcendentals * times


def _bytes(hlo: Hlo, inst: Instruction) -> float:
    """What an executed instruction reads and writes (nothing for free or control ones)."""
    if inst.opcode in FREE or inst.opcode in CONTROL:
        return 0.0
    read = sum(hlo.instructions[k].out_bytes for k in inst.operands() if k in hlo.instructions)
    return float(read + inst.out_bytes)


def costs_of(
    closed_jaxpr: Any,
    hlo_text: str,
    *,
    function: str,
    graph_of: Callable[[Any], m.Graph],
    measure: str = "flops",
) -> EquationCosts:
    """Join the costs of ``hlo_text``'s instructions to ``closed_jaxpr``'s equations (see
    module docstring); ``measure`` drawn on the Graph ``graph_of(closed)``."""
    from .attribution import (
        AttributionError,
        _split,
        _with_boxes,
        dataclasses_replace_notes,
        program_equations,
    )

    if measure not in MEASURES:
        raise ValueError(f"measure is one of {', '.join(MEASURES)}; got {measure!r}")
    hlo = read_hlo(hlo_text)
    if not hlo.has_metadata:
        raise AttributionError(
            "the compiled program carries no JAX op names (metadata): its instructions "
            "cannot be joined to the program's equations"
        )
    graph, views, equations, matcher = program_equations(closed_jaxpr, graph_of)
    runs, unknown = multipliers(hlo)
    fused = {c for i in hlo.instructions.values() if i.opcode == "fusion" for c in i.called}
    found: dict[str, dict[str, float]] = {k: defaultdict(float) for k in MEASURES}
    totals = dict.fromkeys(MEASURES, 0.0)
    lost = dict.fromkeys(MEASURES, 0.0)

    def give(kind: str, inst: Instruction, amount: float) -> None:
        """``amount`` shared by the instruction's op names; a name that matches no
        equation keeps its share as XLA's own (never counted twice)."""
        totals[kind] += amount
        if not inst.op_names:
            lost[kind] += amount
            return
        part = amount / len(inst.op_names)
        for op_name in inst.op_names:
            group = matcher.instruction_group(inst, op_name)
            if not matcher.groups[group]:
                lost[kind] += part
            for k, share in matcher.shares(group):
                found[kind][k] += part * share

    costing = _Costing(hlo)
    for computation, times in runs.items():
        for name in hlo.computations.get(computation, []):
            inst = hlo.instructions[name]
            flops, transcendental = costing.of(inst)
            if flops:
                give("flops", inst, flops * times)
            if transcendental:
                give("transcendentals", inst, transcendental * times)
            if computation in fused:
                continue  # inside a fusion: its bytes are the fusion's
            moved = _bytes(hlo, inst) * times
            if not moved:
                continue
            totals["bytes"] += moved
            shares = _split(hlo, name, matcher)
            for group, part in shares.items():
                for k, share in matcher.shares(group):
                    found["bytes"][k] += moved * part * share
            if not shares:
                lost["bytes"] += moved
    notes = []
    if unknown:
        notes.append(
            f"{unknown} loop{'s' if unknown > 1 else ''} without a known trip count "
            "(a while_loop): its body is counted once"
        )
    for kind in MEASURES:
        if totals[kind] and lost[kind] / totals[kind] > 0.001:
            notes.append(
                f"{lost[kind] / totals[kind]:.1%} of the {kind} went to instructions with "
                "no equation of the program (XLA's own)"
            )
    unit = {"flops": "FLOP", "bytes": "B", "transcendentals": ""}[measure]
    data = _with_boxes(dict(found[measure]), views.explorer.where)
    shown = graph.overlay(data, name=measure, unit=unit)
    if notes:
        shown = dataclasses_replace_notes(shown, tuple(notes))
    return EquationCosts(
        function=function,
        module=hlo.module,
        flops=dict(found["flops"]),
        bytes=dict(found["bytes"]),
        transcendentals=dict(found["transcendentals"]),
        total_flops=totals["flops"],
        total_bytes=totals["bytes"],
        total_transcendentals=totals["transcendentals"],
        measure=measure,
        graph=shown,
        notes=tuple(notes),
        primitives={e.id: e.primitive for e in equations},
        sources={e.id: e.where or None for e in equations},
    )


def equation_costs(
    fun: Callable[..., Any], *args: Any, measure: str = "flops", **kwargs: Any
) -> EquationCosts:
    """FLOPs, bytes and transcendentals per equation of ``fun(*args)`` as XLA compiles it
    (``jax.jit(fun)`` unless jitted already; an equinox module's non-array leaves held
    static, as ``eqx.filter_jit`` holds them); ``measure`` drawn on its program."""
    import jax

    from ..graph.build import argument_names, graph_from_jaxpr
    from ..program.static_leaves import filter_jit_target, split_static
    from ..session.work import jaxlab_work

    name = getattr(fun, "__name__", None) or type(fun).__name__
    names = argument_names(fun, args, kwargs)
    inner = filter_jit_target(fun)
    if hasattr(fun, "trace") and inner is None:
        jitted, call_args, call_kwargs = fun, args, kwargs
    else:
        split = split_static(inner or fun, args, kwargs, numbers_static=inner is not None)
        jitted, call_args, call_kwargs = jax.jit(split.fun), split.args, split.kwargs
    with jaxlab_work():
        traced = jitted.trace(*call_args, **call_kwargs)
        text = traced.lower().compile().as_text()

    def graph_of(c: Any) -> m.Graph:
        return graph_from_jaxpr(c, title=name, input_names=names, explore=True)

    return costs_of(traced.jaxpr, text, function=name, graph_of=graph_of, measure=measure)
