"""Overlays: a number per equation drawn on a Graph as a colour scale (time, FLOPs, adjoint
magnitudes).

The user's data is keyed by what a reader of the program can name::

    g2 = graph.overlay({"e12": 3.1, "In[4], line 3": 2.0, "e3": 9.0}, name="time", unit="ms")
    g2.node("e12").overlay            # 3.1
    g2.overlay_unmatched              # keys that matched nothing (also in g2.notes)
    g2.overlay_ranked(5)              # the five largest equations, with their lines
    g2.overlay_ranked(1)[0].text()    # "x @ p['W'] at In[4], line 3, layer 0 (params[0])"

* an **equation id** at any depth (``e12``, ``e3/e1``) or any drawn node's id (``in0``);
* a **source line** as ``Node.source`` writes it (``"In[4], line 3"``, ``"file.py:12"``,
  the function name in brackets optional): the value is split evenly between the
  equations of that line (so a box's sum still adds up to what was given);
* a **box**, a nested program's id (``e3``): given, it is the box's value; not given, a
  box (a closed nested program or a run of equations) shows the sum of what it holds.

NaN (and ±inf) is kept as "no value": the node is drawn uncoloured and says so on hover,
and sums leave it out. Negative values are allowed: when the values drawn straddle zero
the scale is diverging (blue below zero, red above, white at zero), else sequential
(light low, dark high). The scale spans what the view draws (its legend says min–max and
the unit). The data is resolved once over the whole program; every view the
GraphExplorer builds applies it again (``explore.then``), so opening a box keeps it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import model as m

MOST_UNMATCHED = 20  # unmatched keys named in the notes (all are listed on the Graph)
RANKED_IN_NOTES = 3  # the largest equations named in the view's notes
# Sequential: light low, dark high (ColorBrewer Oranges); diverging: blue, white, red
# (ColorBrewer RdBu). Pale enough at the top that dark text stays readable.
SEQUENTIAL = ("#fff5eb", "#fdd0a2", "#fdae6b", "#fd8d3c", "#e6550d")
DIVERGING = ("#4393c3", "#92c5de", "#f7f7f7", "#f4a582", "#d6604d")
_RUN = re.compile(r"^(?P<prefix>.*?)run(?P<lo>\d+)-(?P<hi>\d+)$")


@dataclass(frozen=True)
class Ranked:
    """One equation of an overlay, by value: its id, primitive, line, value and share, and
    what a reader calls it: its code (``x @ p['W']``) and the call holding it (``layer 0
    (params[0])``), where known."""

    id: str
    primitive: str
    source: str | None
    value: float
    share: float | None  # of the program's total (None when values are of both signs)
    code: str | None = None
    call: str | None = None

    def text(self) -> str:
        """``"x @ p['W'] at In[4], line 3, layer 0 (params[0])"``: the code, its line and
        its call (else its function), never jaxlab's id."""
        return named_text(self.code or self.primitive, self.source, self.call)


def named_text(what: str, source: str | None, call: str | None) -> str:
    """``what`` at its line, in its call (else its function, as the line names it)."""
    if not source:
        return what + (f", {call}" if call else "")
    where = _where(source)
    function = source[len(where) :].strip()
    return f"{what} at {where}" + (f", {call}" if call else (f" {function}" if function else ""))


def describe(graph: m.Graph, item_id: str) -> tuple[str | None, str | None]:
    """(code, call) of equation ``item_id`` of an explored ``graph`` (None where unknown)."""
    from .equation_code import call_of, equation_code
    from .explore import Views

    views = graph.rebuild
    if not isinstance(views, Views) or item_id not in views.explorer.where:
        return None, None
    block, at = views.explorer.where[item_id]
    return equation_code(block.items[at].eqn), call_of(views.explorer, item_id)


@dataclass(frozen=True)
class _Resolved:
    """The data resolved over the whole program: a value per equation (or node) id."""

    given: dict[str, float]  # id -> value (NaN: no value)
    unmatched: tuple[str, ...]
    total: float  # of every finite value given
    signed: bool  # some value is negative
    name: str
    unit: str
    notes: tuple[str, ...]
    ranked_notes: list[tuple[str, ...]] = dataclasses.field(default_factory=list)  # once


def overlay(
    graph: m.Graph, data: Mapping[str, float], *, name: str = "", unit: str = ""
) -> m.Graph:
    """``graph`` with ``data`` drawn on it (see module docstring); every view of it too."""
    from .explore import then

    resolved = resolve(graph, data, name=name, unit=unit)
    return then(graph, lambda g: apply(g, resolved))


def overlay_from_adjoints(graph: m.Graph) -> m.Graph:
    """The adjoints of a ``%grad --graph`` (or ``jaxpr_graph(..., grad=True,
    values=True)``) Graph as an overlay: each node's largest magnitude |∂|, max(|min|,
    |max|) of its adjoint (a summary keeps mean, min and max, not the mean magnitude).
    Computed per view, from the adjoints that view's nodes carry."""
    from .explore import then

    def step(g: m.Graph) -> m.Graph:
        data = {
            n.id: abs(n.adjoint.scalar)
            if n.adjoint.scalar is not None
            else max(abs(n.adjoint.min), abs(n.adjoint.max))
            for n in g.nodes
            if n.adjoint is not None
        }
        return apply(g, resolve(g, data, name="|∂| largest", unit=""))

    return then(graph, step)


# ---------------------------------------------------------------------- resolving
def _where(source: str | None) -> str:
    """``"In[4], line 3 (loss)"`` -> ``"In[4], line 3"``: the line without its function."""
    from .walk import without_function

    return without_function(source)


# The index of each explored program, built once (every view of a 10,000-equation
# program would otherwise walk it again); dropped with its explorer.
_PROGRAMS: weakref.WeakKeyDictionary[Any, tuple[dict[str, Any], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _program(graph: m.Graph) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The explorer's index of the whole program: equation id -> Item, prefix -> Block."""
    from .explore import Views

    views = graph.rebuild
    if not isinstance(views, Views):
        return None
    explorer = views.explorer
    known = _PROGRAMS.get(explorer)
    if known is not None:
        return known
    items = {k: block.items[i] for k, (block, i) in explorer.where.items()}
    blocks: dict[str, Any] = {"": explorer.tree}
    for item in items.values():
        for sub in item.blocks:
            blocks[sub.prefix] = sub
    _PROGRAMS[explorer] = (items, blocks)
    return items, blocks


def resolve(graph: m.Graph, data: Mapping[str, float], *, name: str, unit: str) -> _Resolved:
    """``data``'s keys matched to equation ids over the whole program (see module
    docstring); what matched nothing listed."""
    from .walk import source_line

    program = _program(graph)
    ids: set[str] = {n.id for n in graph.nodes}
    by_line: dict[str, list[str]] = {}
    if program is not None:
        items, _ = program
        ids |= set(items)
        for item_id, item in items.items():
            if not item.blocks:  # a box's line is its contents' lines
                by_line.setdefault(_where(source_line(item.eqn)), []).append(item_id)
        for item_id, item in items.items():  # a line that only calls a box: the box
            if not item.blocks:
                continue
            where = _where(source_line(item.eqn))
            if where not in by_line:
                by_line.setdefault(where, []).append(item_id)
    else:
        for n in graph.nodes:
            if n.kind in (m.EQUATION, m.COLLAPSED) and n.source:
                by_line.setdefault(_where(n.source), []).append(n.id)
    by_line.pop("", None)
    given: dict[str, float] = {}
    unmatched: list[str] = []
    missing = 0
    for key, raw in data.items():
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            missing += 1
            value = math.nan
        key = str(key)
        if key in ids:
            given[key] = _add(given.get(key), value)
        elif _where(key) in by_line:
            at = by_line[_where(key)]
            for k in at:
                given[k] = _add(given.get(k), value / len(at))
        else:
            unmatched.append(key)
    finite = [v for v in given.values() if math.isfinite(v)]
    notes: list[str] = []
    if unmatched:
        shown = ", ".join(unmatched[:MOST_UNMATCHED])
        more = (
            f" and {len(unmatched) - MOST_UNMATCHED} more"
            if len(unmatched) > MOST_UNMATCHED
            else ""
        )
        notes.append(
            f"overlay {name or 'values'}: {len(unmatched)} keys match nothing: {shown}{more}"
        )
    if missing:
        notes.append(f"overlay {name or 'values'}: {missing} values are NaN or infinite (no value)")
    return _Resolved(
        given,
        tuple(unmatched),
        math.fsum(finite),
        any(v < 0 for v in finite),
        name,
        unit,
        tuple(notes),
    )


def _add(old: float | None, value: float) -> float:
    """Two values for one id add up; a NaN only stands when nothing else is known."""
    if old is None or math.isnan(old):
        return value
    return old if math.isnan(value) else old + value


# ---------------------------------------------------------------------- applying
class _Sums:
    """What each box holds, summed from the data (memoised over one view)."""

    def __init__(self, resolved: _Resolved, program: tuple[dict[str, Any], dict[str, Any]] | None):
        self.given = resolved.given
        self.items, self.blocks = program if program is not None else ({}, {})
        self.memo: dict[str, float | None] = {}

    def item(self, item: Any) -> float | None:
        key = item.id
        if key in self.given:
            return self.given[key]
        if key not in self.memo:
            self.memo[key] = _total(
                self.item(sub_item) for b in item.blocks for sub_item in b.items
            )
        return self.memo[key]

    def of(self, node: m.Node) -> float | None:
        if node.id in self.given:
            return self.given[node.id]
        if node.id in self.items:
            return self.item(self.items[node.id])
        if node.id + "/" in self.blocks:  # a branch of a cond drawn closed ("e3/1")
            return _total(self.item(it) for it in self.blocks[node.id + "/"].items)
        run = _RUN.match(node.id)
        if run is not None and run["prefix"] in self.blocks:
            block = self.blocks[run["prefix"]]
            lo, hi = int(run["lo"]), int(run["hi"])
            return _total(self.item(it) for it in block.items[lo : hi + 1])
        return None


def _total(values: Any) -> float | None:
    """The sum of the values known (NaN left out); None when none is known."""
    known = [v for v in values if v is not None]
    finite = [v for v in known if math.isfinite(v)]
    if finite:
        return math.fsum(finite)
    return math.nan if known else None


def apply(graph: m.Graph, resolved: _Resolved) -> m.Graph:
    """One view with the resolved data on its nodes, its scale and notes."""
    sums = _Sums(resolved, _program(graph))
    nodes = tuple(
        dataclasses.replace(n, overlay=value) if (value := sums.of(n)) is not None else n
        for n in graph.nodes
    )
    shown = [n.overlay for n in nodes if n.overlay is not None and math.isfinite(n.overlay)]
    lo, hi = (min(shown), max(shown)) if shown else (0.0, 0.0)
    notes = list(resolved.notes)
    first = not resolved.ranked_notes
    graph = dataclasses.replace(
        graph,
        nodes=nodes,
        overlay_name=resolved.name or "overlay",
        overlay_unit=resolved.unit,
        overlay_range=(lo, hi),
        overlay_total=resolved.total,
        overlay_signed=resolved.signed,
        overlay_unmatched=resolved.unmatched,
        overlay_values=resolved.given,
    )
    if first:  # over the whole program, so the same for every view: ranked once
        resolved.ranked_notes.append(
            tuple(
                f"{graph.overlay_name} largest: {r.text()}"
                + f": {value_text(r.value, resolved.unit)}"
                + (f" ({r.share:.0%})" if r.share is not None else "")
                for r in ranked(graph, RANKED_IN_NOTES)
            )
        )
    notes += resolved.ranked_notes[0]
    return dataclasses.replace(graph, notes=(*graph.notes, *notes))


def ranked(graph: m.Graph, most: int = 10) -> list[Ranked]:
    """The ``most`` largest equations of the overlay over the whole program (drawn or
    not; boxes given a value count as one), largest first, with their lines."""
    from .walk import source_line

    program = _program(graph)
    items = program[0] if program is not None else {}
    by_id = {n.id: n for n in graph.nodes}
    known = [
        (key, value)
        for key, value in graph.overlay_values.items()
        if math.isfinite(value) and (key in items or key in by_id)
    ]
    # Only the chosen are described (a 10,000-equation program's lines not all looked up).
    found: list[Ranked] = []
    for key, value in sorted(known, key=lambda kv: -abs(kv[1]))[:most]:
        code = call = None
        if key in items:
            item = items[key]
            primitive, source = item.primitive, source_line(item.eqn)
            code, call = describe(graph, key)
        else:
            primitive, source = by_id[key].primitive or by_id[key].label, by_id[key].source
        share = (
            value / graph.overlay_total
            if not graph.overlay_signed and graph.overlay_total > 0
            else None
        )
        found.append(Ranked(key, primitive, source, value, share, code, call))
    return found


# ---------------------------------------------------------------------- drawing
def value_text(value: float | None, unit: str) -> str:
    """``"3.1 ms"``; seconds written in the unit that suits them; NaN "no value"."""
    if value is None or not math.isfinite(value):
        return "no value"
    if unit == "s":
        for scale, word in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(value) >= scale or word == "ns":
                return f"{value / scale:.3g} {word}"
    return f"{value:.3g} {unit}".rstrip()


def node_text(graph: m.Graph, value: float | None) -> str:
    """What hover says: the overlay's name, value and share of the program's total."""
    text = value_text(value, graph.overlay_unit)
    if (
        value is not None
        and math.isfinite(value)
        and not graph.overlay_signed
        and graph.overlay_total > 0
    ):
        text += f" ({value / graph.overlay_total:.1%})"
    return f"{graph.overlay_name}: {text}"


def diverging(graph: m.Graph) -> bool:
    """Whether the scale is diverging: some value of the data is negative (so the
    colours of every view agree on where zero is)."""
    lo, _ = graph.overlay_range
    return graph.overlay_signed or lo < 0


def colour(graph: m.Graph, value: float | None) -> str | None:
    """The fill for ``value`` on the view's scale; None for no value."""
    if value is None or not math.isfinite(value):
        return None
    lo, hi = graph.overlay_range
    if diverging(graph):
        edge = max(-lo, hi, 1e-300)
        t = 0.5 + 0.5 * value / edge
        stops = DIVERGING
    else:
        t = (value - lo) / (hi - lo) if hi > lo else 1.0
        stops = SEQUENTIAL
    return stops[min(len(stops) - 1, max(0, round(t * (len(stops) - 1))))]


def legend_text(graph: m.Graph) -> str:
    """``"time: 2.1 µs–3.4 ms (colour, light low, dark high)"``."""
    lo, hi = graph.overlay_range
    unit = graph.overlay_unit
    how = "blue below 0, red above" if diverging(graph) else "light low, dark high"
    return f"{graph.overlay_name}: {value_text(lo, unit)} – {value_text(hi, unit)} ({how})"
