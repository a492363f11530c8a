"""Two programs matched by structure: what was added, removed or changed, and where.

Each block's equations are aligned as difflib aligns lines, over equation keys interned
to small ints (:class:`~jaxlab.graph.signatures.Interner`): first the exact key
(primitive, parameters, operand and result types, where each operand comes from), then,
in what is left between two exact matches, the primitive alone, so an equation with the
same primitive at the same place but other shapes, dtypes or parameters is *changed*
rather than removed and added. Matched equations that hold nested programs (jit, scan,
cond, remat, custom rules) are aligned inside, block by block, and a box that holds a
difference anywhere inside is marked so, which tells at once where to look in a large
program. Ids are the Graph's (``e3``, ``e3/0/e1``) on each side.

>>> d = diff(jaxpr_graph(f, jnp.ones(3)), jaxpr_graph(f, jnp.ones(4)))   # doctest: +SKIP
>>> d.changed[0].what                                                     # doctest: +SKIP
'f32[3] → f32[4]'
>>> d.graph()      # both programs side by side, marks on the nodes      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jax.extend.core as jcore

from ..session.programs import kept_programs
from . import model as m
from .labels import literal_text, type_text
from .signatures import Interner, is_jaxpr, literal_key
from .walk import Block, Item, walk

# The marks (Node.diff, Cluster.diff).
ADDED, REMOVED, CHANGED, HOLDS = "added", "removed", "changed", "holds"
BEFORE, AFTER = "before", "after"  # the drawing's two top-level clusters
LISTED = 8  # differences the summary names one by one (all are counted)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class Change:
    """A matched pair that differs: the same primitive at the same place, other shapes,
    dtypes, parameters or operands (``what``: ``"f32[3] → f32[4]"``)."""

    before: str  # equation id in the first program ("" for an input or output it lacks)
    after: str
    what: str


@dataclass(frozen=True)
class ProgramDiff:
    """Two programs matched equation by equation (see module docstring).

    ``pairs`` holds every matched pair, changed ones included; ``removed`` the first
    program's equations without a match, ``added`` the second's (nested equations of an
    added or removed box included); ``holds_before``/``holds_after`` the nested programs
    (their equations' ids) that hold a difference anywhere inside; ``io`` the program's
    inputs and outputs whose types differ (``in0``, ``out1``).
    """

    before_title: str
    after_title: str
    pairs: tuple[tuple[str, str], ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]
    changed: tuple[Change, ...]
    holds_before: tuple[str, ...]
    holds_after: tuple[str, ...]
    io: tuple[Change, ...] = ()
    n_before: int = 0  # equations, nested ones included
    n_after: int = 0
    before: m.Graph | None = field(default=None, compare=False, repr=False)
    after: m.Graph | None = field(default=None, compare=False, repr=False)

    @property
    def same(self) -> bool:
        """Nothing added, removed or changed."""
        return not (self.removed or self.added or self.changed or self.io)

    def marks(self, side: str) -> dict[str, str]:
        """Equation (and input/output) id -> mark, for one side (``"before"``/``"after"``)."""
        first = side == BEFORE
        found: dict[str, str] = dict.fromkeys(
            self.holds_before if first else self.holds_after, HOLDS
        )
        for c in (*self.changed, *self.io):
            if c.before and c.after:
                found[c.before if first else c.after] = CHANGED
            elif c.before and first:  # an input or output only the first program has
                found[c.before] = REMOVED
            elif c.after and not first:
                found[c.after] = ADDED
        found.update(
            dict.fromkeys(self.removed if first else self.added, REMOVED if first else ADDED)
        )
        return found

    @property
    def summary(self) -> str:
        """What differs, in a few lines: counts, then the first differences by id."""
        head = f"{self.before_title} → {self.after_title}: "
        if self.same:
            return head + f"the same program ({self.n_before} equations matched)"
        top_added = _outermost(self.added)
        top_removed = _outermost(self.removed)
        lines = [
            head
            + f"{_count(len(self.added), 'equation')} added, {len(self.removed)} removed, "
            + f"{len(self.changed)} changed; {len(self.pairs) - len(self.changed)} the same "
            + f"({self.n_before} before, {self.n_after} after)"
        ]
        listed = [f"changed {c.before} → {c.after}: {c.what}" for c in (*self.io, *self.changed)]
        listed += [f"added {i}" for i in top_added] + [f"removed {i}" for i in top_removed]
        lines += [f"  {line}" for line in listed[:LISTED]]
        if len(listed) > LISTED:
            lines.append(f"  and {len(listed) - LISTED} more")
        boxes = _outermost(self.holds_after) or _outermost(self.holds_before)
        if boxes:
            shown = ", ".join(boxes[:LISTED]) + (" …" if len(boxes) > LISTED else "")
            lines.append(f"  differences inside the nested programs {shown}")
        return "\n".join(lines)

    def graph(self, *, explore: bool = False, budget: int | None = None) -> m.Graph:
        """Both programs side by side, two top-level clusters ``before`` and ``after``,
        their nodes and boxes marked (``Node.diff``, ``Cluster.diff``). ``explore``: the
        GraphExplorer's first view (open ``before`` and ``after`` to see inside)."""
        views = DiffViews(self, budget)
        if explore:
            return views(frozenset())
        drawn = dataclasses.replace(views, static=True)(frozenset({BEFORE, AFTER}))
        return dataclasses.replace(drawn, rebuild=views, view_of=None)

    def __repr__(self) -> str:
        return f"<ProgramDiff {self.summary}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        import html

        from .render import graph_mimebundle

        bundle = dict(graph_mimebundle(self.graph()))
        bundle["text/plain"] = self.summary
        bundle["text/html"] = f"<pre>{html.escape(self.summary)}</pre>" + bundle.get(
            "text/html", ""
        )
        bundle.pop("image/svg+xml", None)
        return bundle


# --------------------------------------------------------------------------- matching


def diff(
    before: Any,
    after: Any,
    *args: Any,
    titles: tuple[str, str] | None = None,
    **kwargs: Any,
) -> ProgramDiff:
    """Match two programs (each a Graph from ``jaxpr_graph``, a ``ClosedJaxpr``, or a
    function traced with ``args``/``kwargs``) and return their :class:`ProgramDiff`;
    ``titles`` name them (by default the Graphs' titles).

    >>> jaxlab.diff(f, jax.checkpoint(f), x).added          # doctest: +SKIP
    ('e0', 'e0/e0', ...)
    """
    a, b = _as_graph(before, args, kwargs), _as_graph(after, args, kwargs)
    ta, tb = walk(a.jaxpr.jaxpr), walk(b.jaxpr.jaxpr)
    found = _Matcher()
    found.block(ta, tb)
    io = _io_changes(a.jaxpr.jaxpr, b.jaxpr.jaxpr)
    title_a, title_b = titles or (a.title, b.title if b.title != a.title else f"{b.title} (2)")
    return ProgramDiff(
        before_title=title_a,
        after_title=title_b,
        pairs=tuple(found.pairs),
        removed=tuple(found.removed),
        added=tuple(found.added),
        changed=tuple(found.changed),
        holds_before=tuple(found.holds_a),
        holds_after=tuple(found.holds_b),
        io=io,
        n_before=ta.n_equations,
        n_after=tb.n_equations,
        before=a,
        after=b,
    )


def recompile_diff(name: str, log: Any = None) -> ProgramDiff:
    """What changed in the program of the user's function ``name`` between its last two
    compilations, from the programs the compile log keeps (``CompileLog.programs``).

    >>> jaxlab.recompile_diff("step").changed[0].what         # doctest: +SKIP
    'f32[32,10] → f32[64,10]'
    """
    keeper = log or kept_programs()
    kept = keeper.programs(name) if keeper is not None else None
    if kept is None:
        raise ValueError(
            f"the compile log keeps no two programs of `{name}`: it keeps the last two "
            "traced programs of each of your own jitted functions while it records (the "
            "extension loaded, or inside `jaxlab.compile_log().recording()`); compile "
            f"`{name}` twice, with a change between"
        )
    return diff(kept[0], kept[1], titles=(f"{name} (before)", f"{name} (recompiled)"))


def _as_graph(program: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> m.Graph:
    if isinstance(program, m.Graph):
        if program.jaxpr is None:
            raise TypeError("this Graph keeps no jaxpr to compare; draw it with jaxpr_graph")
        return program
    if isinstance(program, jcore.ClosedJaxpr):
        from .build import graph_from_jaxpr

        return graph_from_jaxpr(program, title="program", explore=True)
    if callable(program):
        from .build import jaxpr_graph

        return jaxpr_graph(program, *args, explore=True, **kwargs)
    raise TypeError(
        f"diff compares Graphs (jaxlab.jaxpr_graph), ClosedJaxprs or functions, not a "
        f"{type(program).__name__}"
    )


class _Matcher:
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


def _count(n: int, noun: str) -> str:
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


def _outermost(ids: Iterable[str]) -> list[str]:
    """The ids not nested in another of ``ids`` (an added box, not each of its equations)."""
    chosen = set(ids)
    return [i for i in ids if not any(p in chosen for p in _ancestors(i))]


def _ancestors(item_id: str) -> list[str]:
    """The equations holding ``item_id``: ``e3/0/e5`` -> ``["e3"]``."""
    parts = item_id.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts) - 1) if parts[k - 1].startswith("e")]


def _io_changes(a: Any, b: Any) -> tuple[Change, ...]:
    found = []
    for kind, xs, ys in (("in", a.invars, b.invars), ("out", a.outvars, b.outvars)):
        for k in range(max(len(xs), len(ys))):
            ta = type_text(xs[k].aval) if k < len(xs) else None
            tb = type_text(ys[k].aval) if k < len(ys) else None
            if ta != tb:
                what = f"{ta} → {tb}" if ta and tb else ("removed" if ta else "added")
                found.append(Change(f"{kind}{k}" if ta else "", f"{kind}{k}" if tb else "", what))
    return tuple(found)


# --------------------------------------------------------------------------- drawing

_SEGMENT = re.compile(
    r"^(?P<prefix>(?:.*/)?)(?:run(?P<lo>\d+)-(?P<hi>\d+)|e(?P<a>\d+)-e(?P<b>\d+))$"
)


def _positions(item_id: str) -> list[tuple[str, int]]:
    """(block prefix, index) of ``item_id`` and of every equation holding it:
    ``e3/0/e5`` -> ``[("", 3), ("e3/0/", 5)]``."""
    found: list[tuple[str, int]] = []
    prefix = ""
    parts = item_id.split("/")
    k = 0
    while k < len(parts):
        part = parts[k]
        if not (part.startswith("e") and part[1:].isdigit()):
            return found
        found.append((prefix, int(part[1:])))
        prefix += part + "/"
        if k + 1 < len(parts) and parts[k + 1].isdigit():  # a cond branch, a while's parts
            prefix += parts[k + 1] + "/"
            k += 1
        k += 1
    return found


def mark(graph: m.Graph, marks: dict[str, str]) -> m.Graph:
    """``graph`` with ``Node.diff`` and ``Cluster.diff`` set from one side's ``marks``: a
    drawn equation by its own mark, a run of equations or a box that holds a marked one
    as holding a difference."""
    dirty: dict[str, set[int]] = {}
    for key in marks:
        for prefix, index in _positions(key):
            dirty.setdefault(prefix, set()).add(index)
    prefixes = {p.rstrip("/") for p in dirty if p}

    def of(node_id: str) -> str:
        if node_id in marks:
            return marks[node_id]
        run = _SEGMENT.match(node_id)
        if run is not None:
            lo = int(run.group("lo") or run.group("a"))
            hi = int(run.group("hi") or run.group("b"))
            if any(lo <= k <= hi for k in dirty.get(run.group("prefix"), ())):
                return HOLDS
            return ""
        owner, _, branch = node_id.rpartition("/")
        if branch.isdigit() and marks.get(owner) in (ADDED, REMOVED):
            return marks[owner]  # a branch of an added or removed cond
        return HOLDS if node_id in prefixes else ""

    nodes = tuple(
        dataclasses.replace(n, diff=d) if (d := of(n.id)) and n.kind != m.PORT else n
        for n in graph.nodes
    )
    clusters = tuple(
        dataclasses.replace(c, diff=d) if (d := of(c.id)) else c for c in graph.clusters
    )
    return dataclasses.replace(graph, nodes=nodes, clusters=clusters)


def side_by_side(
    before: m.Graph,
    after: m.Graph,
    *,
    title: str,
    labels: tuple[str, str] | None = None,
    notes: tuple[str, ...] = (),
) -> m.Graph:
    """Two Graphs as one, each inside a top-level cluster (``before``, ``after``) whose id
    prefixes everything in it (``before/e3``), marks kept; ``labels`` name the clusters
    (by default the Graphs' titles)."""
    nodes: list[m.Node] = []
    edges: list[m.Edge] = []
    clusters: list[m.Cluster] = []
    names = labels or (before.title, after.title)
    for side, g, name in ((BEFORE, before, names[0]), (AFTER, after, names[1])):
        held = any(n.diff for n in g.nodes) or any(c.diff for c in g.clusters)
        clusters.append(
            m.Cluster(
                side, "program", f"{side}: {name}", None, 1, g.n_equations, HOLDS if held else ""
            )
        )
        for n in g.nodes:
            parent = f"{side}/{n.cluster}" if n.cluster else side
            nodes.append(dataclasses.replace(n, id=f"{side}/{n.id}", cluster=parent))
        for c in g.clusters:
            parent = f"{side}/{c.parent}" if c.parent else side
            clusters.append(
                dataclasses.replace(c, id=f"{side}/{c.id}", parent=parent, depth=c.depth + 1)
            )
        edges.extend(
            dataclasses.replace(e, src=f"{side}/{e.src}", dst=f"{side}/{e.dst}") for e in g.edges
        )
        notes += tuple(f"{side}: {note}" for note in g.notes)
    return m.Graph(
        title=title,
        nodes=tuple(nodes),
        edges=tuple(edges),
        clusters=tuple(clusters),
        notes=notes,
        n_equations=before.n_equations + after.n_equations,
        grad=before.grad or after.grad,
        jaxpr=after.jaxpr,
    )


@dataclass(frozen=True)
class DiffViews:
    """A diff Graph's ``rebuild``: each side drawn for the ids opened inside it (the
    GraphExplorer's views of each program, graph/explore.py), marked, side by side."""

    diff: ProgramDiff
    budget: int | None = None
    static: bool = False  # each side's budgeted drawing whole (the static view)

    def __call__(self, opened: frozenset[str]) -> m.Graph:
        d = self.diff
        sides = []
        for side, g in ((BEFORE, d.before), (AFTER, d.after)):
            assert g is not None
            inner = frozenset(o[len(side) + 1 :] for o in opened if o.startswith(side + "/"))
            sides.append(mark(self._side(g, inner), d.marks(side)))
        first = d.summary.splitlines()[0]
        graph = side_by_side(
            sides[0],
            sides[1],
            title=f"diff {d.before_title} → {d.after_title}",
            labels=(d.before_title, d.after_title),
            notes=(first,),
        )
        return dataclasses.replace(graph, rebuild=self, view_of=opened)

    def _side(self, g: m.Graph, inner: frozenset[str]) -> m.Graph:
        """One program: its budgeted drawing (the static view) or its explorer's view of
        the ids opened inside it."""
        views: Callable[[frozenset[str]], m.Graph] | None = g.rebuild
        if self.static:
            if g.view_of is None:
                return g
            from .build import DEFAULT_BUDGET, graph_from_jaxpr

            return graph_from_jaxpr(
                g.jaxpr,
                title=g.title,
                grad=g.grad,
                budget=self.budget or DEFAULT_BUDGET // 2,
                input_names=g.input_names(),
            )
        return views(inner) if views is not None else g
