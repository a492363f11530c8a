"""Profile time per jaxpr equation: ``%%profile``'s XLA op times joined to the program.

Each op event (``dot.2``, ``ynn_fusion.3``, ``while.6``) is an instruction of the
compiled module; its instructions (a fusion's contents too) carry JAX's op name
(``jit(step)/transpose(jvp())/dot_general``) and the user's line (``hlo_map``). An
instruction goes to the equations of its primitive at its line (in a library's jit, of no
line; of the most specific name stack the op name holds); else to its line's, else its
primitive's; of those, the ones of its size and, for a product (a ``dot`` XLA may name
``transpose``), of its work. Alike equations share by their own work: evenly only for
the same work on the same shapes (a Python loop's identical layers).

* An op holding several equations' instructions (a fusion) **splits its time by an
  estimate of each instruction's work**: a dot's multiply-adds, any other instruction's
  output elements (broadcasts and constants count only when nothing else is there).
  Counting instructions alone gave a 512x512 matmul fused with three adds a quarter of
  its fusion.
* A loop's or branch's event holds its body's events: only its own time (the event's
  less its body's) is the loop's, given to the ``scan``/``while``/``cond`` equation.
* An op XLA added inside a loop's body with no JAX op name (a copy of the loop's carry)
  is the loop's: given to the ``scan``/``while`` equation that runs the body.
* Time that cannot be attributed (an op with no JAX op name, ``wrapped_reduce-window``;
  an op name the module does not have) is listed by op name with its share, never
  dropped: ``attributed + unattributed`` is the module's profiled op time.

::

    a = jaxlab.profile_attribution(p.result, step, params, x, y)
    a.share                       # 0.97: of the module's op time, attributed
    a.ranked(3)                   # [EquationTime("e41", "dot_general", "In[4], line 6", ...)]
    a.unattributed                # (Unattributed("wrapped_reduce-window", 1.6e-05, 0.001),)
    a.graph                       # the Graph with the time overlay (GraphExplorer-ready)
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..graph import model as m
from ..session.collector import collector_paused
from .hlo_map import FREE, Hlo, compiled_text, read_hlo

_SCOPE_PRIMITIVE = {"while": ("scan", "while"), "conditional": ("cond",)}
_PRODUCTS = frozenset({"dot_general", "conv_general_dilated"})
_PRODUCT_OF = {"dot": "dot_general", "convolution": "conv_general_dilated"}
PRODUCT_OPCODES = frozenset(_PRODUCT_OF)  # instructions whose work tells products apart


@dataclass(frozen=True)
class EquationTime:
    """One equation's profiled time, all its runs together."""

    id: str
    primitive: str
    source: str | None
    seconds: float
    share: float  # of the module's profiled op time
    code: str | None = None  # what made it: "x @ p['W']"
    call: str | None = None  # the call holding it: "layer 0 (params[0])"


@dataclass(frozen=True)
class Unattributed:
    op: str
    seconds: float
    share: float
    why: str = ""


@dataclass(frozen=True)
class Attribution:
    """A module's op time joined to the equations of its program."""

    function: str
    module: str
    total_s: float  # the module's op time in the trace (each op's own time, summed)
    attributed_s: float
    times: dict[str, float]  # equation id -> seconds (boxes: their loop control only)
    unattributed: tuple[Unattributed, ...]
    graph: m.Graph
    notes: tuple[str, ...] = ()
    primitives: dict[str, str] | None = None  # equation id -> primitive
    sources: dict[str, str | None] | None = None  # equation id -> line

    @property
    def share(self) -> float:
        """Of the module's profiled op time, the part given to equations."""
        return self.attributed_s / self.total_s if self.total_s > 0 else 0.0

    def ranked(self, most: int = 10) -> list[EquationTime]:
        """The most expensive equations, most first, with their source lines, code and
        the call holding each."""
        from ..graph.overlay import describe

        prims = self.primitives or {}
        sources = self.sources or {}
        order = sorted(self.times, key=lambda k: -self.times[k])[:most] if self.total_s > 0 else []
        return [
            EquationTime(
                k, prims.get(k, ""), sources.get(k), self.times[k],
                self.times[k] / self.total_s, *describe(self.graph, k),
            )
            for k in order
        ]  # fmt: skip

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return self.graph._repr_mimebundle_()


class AttributionError(ValueError):
    """The profile and the program cannot be joined; the message says why."""


class _Equation(NamedTuple):  # (a tuple: made for each of 10,000 equations at every join)
    id: str
    primitive: str
    where: str
    scope: str
    box: bool
    size: int  # elements of its first result
    work: float  # its own work, from its shapes: a product's multiply-adds, else its size


def _work(eqn: Any, size: int) -> float:
    """An equation's own work from its shapes: a matmul's output elements x its contracted
    size, a convolution's x its kernel's elements per output channel; else its size."""
    primitive = str(eqn.primitive.name)
    try:
        if primitive == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            return float(size * math.prod(lhs[d] for d in contract))
        if primitive == "conv_general_dilated":
            kernel = eqn.invars[1].aval.shape
            out_channels = kernel[eqn.params["dimension_numbers"].rhs_spec[0]]
            return float(size * math.prod(kernel) // max(1, out_channels))
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return float(size)  # a JAX whose params are written otherwise: its size
    return float(size)


def _equations(tree: Any) -> list[_Equation]:
    from ..graph.walk import name_stack, source_line, without_function

    found: list[_Equation] = []

    def visit(block: Any) -> None:
        for item in block.items:
            where = without_function(source_line(item.eqn))
            outs = item.eqn.outvars
            size = math.prod(getattr(outs[0].aval, "shape", ())) if outs else 0
            scope = name_stack(item.eqn)
            work = _work(item.eqn, size) if item.primitive in _PRODUCTS else float(size)
            found.append(
                _Equation(item.id, item.primitive, where, scope, bool(item.blocks), size, work)
            )
            for sub in item.blocks:
                visit(sub)

    visit(tree)
    return found


class _Matcher:
    def __init__(self, equations: list[_Equation]) -> None:
        self.by_both: dict[tuple[str, str], list[_Equation]] = defaultdict(list)
        self.by_line: dict[str, list[_Equation]] = defaultdict(list)
        self.by_primitive: dict[str, list[_Equation]] = defaultdict(list)
        for e in equations:
            self.by_both[(e.primitive, e.where)].append(e)
            if e.where:
                self.by_line[e.where].append(e)
            self.by_primitive[e.primitive].append(e)
        self.memo: dict[tuple[str, str, int, float], int] = {}
        # Each set of equations an instruction goes to, numbered once: a group of a
        # 714-layer program's layers is a tuple of 714 ids, whose hash (never cached)
        # would be recomputed at every op that adds time to it.
        self.groups: list[tuple[str, ...]] = []
        self._numbers: dict[tuple[str, ...], int] = {}
        self._work = {e.id: e.work for e in equations}
        self._primitive = {e.id: e.primitive for e in equations}
        self._shares: dict[int, tuple[tuple[str, float], ...]] = {}

    def match(self, op_name: str, line: str, elements: int, work: float = 0.0) -> tuple[str, ...]:
        """The ids of the equations an instruction of ``op_name`` at ``line`` is of (a
        product's ``work``, its multiply-adds, tells apart products of one line)."""
        return self.groups[self.group(op_name, line, elements, work)]

    def group(self, op_name: str, line: str, elements: int, work: float = 0.0) -> int:
        """The number of :meth:`match`'s group (in ``groups``): equal groups, one number."""
        key = (op_name, line, elements, work)
        number = self.memo.get(key)
        if number is None:
            ids = self._match(op_name, line, elements, work)
            number = self._numbers.setdefault(ids, len(self.groups))
            if number == len(self.groups):
                self.groups.append(ids)
            self.memo[key] = number
        return number

    def instruction_group(self, inst: Any, op_name: str) -> int:
        """:meth:`group` of ``inst``'s ``op_name``; a product XLA named after a neighbour (a
        ``dot`` named ``transpose``) goes to the products at its line, else its scope's."""
        work = inst.work if inst.opcode in PRODUCT_OPCODES else 0.0
        group = self.group(op_name, inst.line, inst.elements, work)
        wanted = _PRODUCT_OF.get(inst.opcode)
        if wanted is None or any(self._primitive[k] == wanted for k in self.groups[group]):
            return group
        alike = op_name.rsplit("/", 1)[0] + "/" + wanted
        for line in (inst.line, ""):
            found = self.group(alike, line, inst.elements, work)
            if any(self._primitive[k] == wanted for k in self.groups[found]):
                return found
        return group

    def shares(self, group: int) -> tuple[tuple[str, float], ...]:
        """Each equation of a group with its part of what the group is given (summing to
        1): by each one's own work, so equal only for the same work on the same shapes
        (a Python loop's identical layers)."""
        known = self._shares.get(group)
        if known is None:
            ids = self.groups[group]
            weights = [max(self._work.get(k, 1.0), 1.0) for k in ids]
            whole = sum(weights)
            known = self._shares[group] = tuple(
                (k, w / whole) for k, w in zip(ids, weights, strict=True)
            )
        return known

    def _match(self, op_name: str, line: str, elements: int, work: float) -> tuple[str, ...]:
        last = op_name.rsplit("/", 1)[-1].split("[", 1)[0]
        primitive = last.split("(", 1)[0] if "(" in last else last
        primitives = _SCOPE_PRIMITIVE.get(primitive, (primitive,))
        found = [e for p in primitives for e in self.by_both.get((p, line), [])]
        if not found and line:  # inside a library's own jit (jnp.fft): no line of the user's
            found = [e for p in primitives for e in self.by_both.get((p, ""), [])]
        if not found and line:
            # XLA's own instruction for a line (a loop's counter): that line's equations,
            # the innermost box first.
            found = self.by_line.get(line, [])
        if not found and not line:
            found = [e for p in primitives for e in self.by_primitive.get(p, [])]
        if len(found) > 1:  # several: those whose name stack the op name holds
            scoped = [e for e in found if e.scope and e.scope in op_name]
            # the most specific: "transpose(jvp())" holds "jvp()", a forward equation's
            deepest = max((len(e.scope) for e in scoped), default=0)
            found = [e for e in scoped if len(e.scope) == deepest] or found
        if len(found) > 1 and any(not e.box for e in found):
            found = [e for e in found if not e.box]  # a box's line is its contents'
        if len(found) > 1:  # alike but for their size (a Python loop's layers of two widths)
            sized = [e for e in found if e.size == elements]
            found = sized or found
        if len(found) > 1:  # a product's instruction is a product's; any other, not
            alike = [e for e in found if (e.primitive in _PRODUCTS) == bool(work)]
            found = alike or found
        if len(found) > 1 and work:  # a product: those doing its work (a layer of its own)
            worked = [e for e in found if e.work == work]
            found = worked or found
        return tuple(e.id for e in found)


_Program = tuple[m.Graph, Any, list[_Equation], _Matcher]
KEPT_PROGRAMS = 4  # programs drawn for a join, kept for the next (program_equations)
_programs: dict[tuple[int, Any], tuple[weakref.ref[Any], _Program]] = {}


def program_equations(
    closed_jaxpr: Any, graph_of: Callable[[Any], m.Graph], key: Hashable = None
) -> _Program:
    """The program's Graph (``graph_of(closed)``), its explorer's views, every equation
    of it (nested programs too) and the matcher that joins HLO instructions to them.
    With a ``key`` (what ``graph_of`` draws besides the program), kept per program
    object (JAX's trace cache hands it back) and key: a join overlays a copy."""
    from ..graph.explore import Views

    kept = _programs.get((id(closed_jaxpr), key)) if key is not None else None
    if kept is not None and kept[0]() is closed_jaxpr:
        return kept[1]
    graph = graph_of(closed_jaxpr)
    views = graph.rebuild
    if not isinstance(views, Views):
        raise AttributionError("the Graph of this program cannot be explored")
    equations = _equations(views.explorer.tree)
    made = graph, views, equations, _Matcher(equations)
    if key is not None:
        _programs[(id(closed_jaxpr), key)] = (weakref.ref(closed_jaxpr), made)
        while len(_programs) > KEPT_PROGRAMS:
            del _programs[next(iter(_programs))]
    return made


def op_times(result: Any, module: str) -> dict[str, float]:
    """Seconds per op name of ``module`` in the profile, every span counted."""
    return {c.name: c.total_s for c in getattr(result, "op_times", ()) if c.module == module}


# The join makes ~80,000 objects that outlive it and no cycle: a collection in the middle
# walks the kernel's whole heap (0.1-0.25 s of a 10,000-equation join) and frees nothing
# it made.
@collector_paused()
def attribute(
    result: Any,
    closed_jaxpr: Any,
    hlo_text: str,
    *,
    function: str,
    graph_of: Callable[[Any], m.Graph],
    program_key: Hashable = None,
) -> Attribution:
    """Join ``result``'s op times of the module ``hlo_text`` compiles to the equations of
    ``closed_jaxpr`` (see module docstring); the Graph ``graph_of(closed)`` gets the
    time overlay (the program drawn once per ``program_key``: program_equations)."""
    hlo = read_hlo(hlo_text)
    times = op_times(result, hlo.module)
    if not times:
        ran = sorted({c.module for c in getattr(result, "op_times", ()) if c.module})
        if not ran:
            raise AttributionError(
                "the profile holds no XLA op of a jitted function: the cell ran no jitted "
                "function (or only eagerly, op by op); profile a call of a jax.jit function"
            )
        raise AttributionError(
            f"the profile holds no op of {hlo.module!r} ({function}); the modules it ran: "
            + ", ".join(ran)
        )
    graph, views, equations, matcher = program_equations(closed_jaxpr, graph_of, program_key)
    # An event's own time: a loop's or branch's less the events it holds.
    own = dict(times)
    for name in times:
        if name in hlo.instructions:
            inner = sum(times.get(k, 0.0) for k in hlo.nested_events(name))
            own[name] = max(0.0, times[name] - inner)
    total = sum(own.values())
    # Time per group of equations alike (shared evenly at the end: a 714-layer
    # program's layers would otherwise be visited for every op of every layer).
    grouped: dict[int, float] = defaultdict(float)  # by the matcher's group number
    lost: dict[str, tuple[float, str]] = {}
    for name, seconds in own.items():
        if seconds <= 0:
            continue
        if name not in hlo.instructions:
            lost[name] = (seconds, "not an instruction of the compiled module")
            continue
        shares = _split(hlo, name, matcher)
        if not shares:
            lost[name] = (seconds, "its instructions carry no JAX op name")
            continue
        for group, part in shares.items():
            grouped[group] += seconds * part
    given: dict[str, float] = defaultdict(float)
    for group, seconds in grouped.items():
        for eq_id, part in matcher.shares(group):
            given[eq_id] += seconds * part
    attributed = sum(given.values())
    unattributed = tuple(
        sorted(
            (Unattributed(k, s, s / total if total else 0.0, why) for k, (s, why) in lost.items()),
            key=lambda u: -u.seconds,
        )
    )
    notes = _notes(hlo, attributed, total, unattributed)
    data = _with_boxes(dict(given), views.explorer.where)
    shown = graph.overlay(data, name="time", unit="s")
    shown = dataclasses_replace_notes(shown, notes)
    return Attribution(
        function=function,
        module=hlo.module,
        total_s=total,
        attributed_s=attributed,
        times=dict(given),
        unattributed=unattributed,
        graph=shown,
        notes=notes,
        primitives={e.id: e.primitive for e in equations},
        sources={e.id: e.where or None for e in equations},
    )


def _split(hlo: Hlo, name: str, matcher: _Matcher) -> dict[int, float]:
    """The groups of equations an event's time goes to (by number: ``matcher.groups``),
    each with its part (summing to 1), by each instruction's estimated work; a group
    shares its part by its equations' own work (``_Matcher.shares``)."""
    members = [hlo.instructions[k] for k in hlo.members(name)]
    named = [i for i in members if i.op_names and i.opcode != "parameter"]
    costly = [i for i in named if i.opcode not in FREE] or named
    if not costly and hlo.instructions[name].op_names:
        costly = [hlo.instructions[name]]
    if not costly:  # XLA's own (a copy of a loop's carry): the loop's, if in its body
        owner = hlo.caller(hlo.instructions[name].computation)
        if owner is not None and owner.op_names:
            costly = [owner]
    weights: dict[int, float] = defaultdict(float)
    for inst in costly:
        for op_name in inst.op_names:
            group = matcher.instruction_group(inst, op_name)
            if matcher.groups[group]:
                weights[group] += max(inst.work, 1.0) / len(inst.op_names)
    whole = sum(weights.values())
    return {k: w / whole for k, w in weights.items()} if whole > 0 else {}


def _with_boxes(given: dict[str, float], where: dict[str, Any]) -> dict[str, float]:
    """A box with time of its own (a loop's control) given its whole: its own time plus
    what it holds, as the overlay reads a box given a value."""
    inside: dict[str, float] = defaultdict(float)
    for k, v in given.items():  # every enclosing id: "e3/0/e1" is inside "e3" and "e3/0"
        parts = k.split("/")
        for n in range(1, len(parts)):
            inside["/".join(parts[:n])] += v
    data = dict(given)
    for box in given:
        if box in inside and where.get(box) and where[box][0].items[where[box][1]].blocks:
            data[box] = given[box] + inside[box]
    return data


def _notes(
    hlo: Hlo, attributed: float, total: float, unattributed: Iterable[Unattributed]
) -> tuple[str, ...]:
    notes = [
        f"time: {attributed / total:.1%} of {hlo.module}'s profiled op time attributed to "
        "equations (a fusion split by each instruction's estimated work)"
        if total
        else f"time: {hlo.module} took no measurable op time"
    ]
    if not hlo.has_metadata:
        notes.append(
            "time: the compiled program carries no JAX op names (metadata), so no op "
            "could be joined to an equation"
        )
    listed = list(unattributed)
    if listed:
        shown = ", ".join(f"{u.op} {u.share:.1%}" for u in listed[:5])
        more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
        notes.append(f"time not attributed (by op): {shown}{more}")
    return tuple(notes)


def dataclasses_replace_notes(graph: m.Graph, notes: tuple[str, ...]) -> m.Graph:
    """``graph`` with ``notes`` added to it and to every view."""
    import dataclasses

    from ..graph.explore import then

    return then(graph, lambda g: dataclasses.replace(g, notes=(*notes, *g.notes)))


# ---------------------------------------------------------------------- entry points
def profile_attribution(
    result: Any, fun: Callable[..., Any], *args: Any, **kwargs: Any
) -> Attribution:
    """``result``'s time (a ``ProfileResult``) on the program of ``fun(*args)``, compiled
    as the profiled call was (``jax.jit(fun)`` unless ``fun`` is jitted already)."""
    return call_attribution(result, fun, args, kwargs)


def call_attribution(
    result: Any,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None] | None = None,
    kwarg_names: Mapping[str, str | None] | None = None,
) -> Attribution:
    """:func:`profile_attribution`, the inputs named as the cell's call names its
    arguments (``arg_names``, ``kwarg_names``: ``f(P, X)`` draws ``P['W']`` and ``X``, as
    ``%jaxpr f(P, X)`` does), each with the function's own name in its tooltip."""
    import jax

    from ..graph.build import argument_names, graph_from_jaxpr
    from ..graph.explore import then
    from ..graph.value_names import with_parameters
    from ..session.work import jaxlab_work

    name = getattr(fun, "__name__", None) or type(fun).__name__
    jitted = fun if hasattr(fun, "trace") else jax.jit(fun)
    with jaxlab_work():
        traced = jitted.trace(*args, **kwargs)
        text = compiled_text(traced.lower().compile())
    names = argument_names(fun, args, kwargs, arg_names, kwarg_names)
    own = argument_names(fun, args, kwargs)

    def graph_of(c: Any) -> m.Graph:
        drawn = graph_from_jaxpr(c, title=name, input_names=names, explore=True)
        return then(drawn, lambda g: with_parameters(g, names, own, name))

    drawn = (name, tuple(names), tuple(own))
    return attribute(
        result, traced.jaxpr, text, function=name, graph_of=graph_of, program_key=drawn
    )


def profile_graph(result: Any, fun: Callable[..., Any], *args: Any, **kwargs: Any) -> m.Graph:
    """The Graph of ``fun(*args)`` with ``result``'s profiled time per equation drawn on
    it (the GraphExplorer's first view): ``jaxlab.profile_graph(p.result, step, x)``."""
    return profile_attribution(result, fun, *args, **kwargs).graph
