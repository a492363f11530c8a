"""Two programs matched by structure: what was added, removed or changed, and where.

Each block's equations are aligned as difflib aligns lines, over equation keys interned
to small ints (:class:`~jaxlab.graph.signatures.Interner`): first the exact key
(primitive, parameters, operand and result types, where each operand comes from), then,
in what is left between two exact matches, the primitive alone, so an equation with the
same primitive at the same place but other shapes, dtypes or parameters is *changed*
rather than removed and added. Matched equations that hold nested programs (jit, scan,
cond, remat, custom rules) are aligned inside, block by block, and a box that holds a
difference anywhere inside is marked so, which tells at once where to look in a large
program. Ids are the Graph's (``e3``, ``e3/0/e1``) on each side. The matching is
``diff_match``, the marks and the side-by-side drawing ``diff_draw``; here are the record,
its views and the entry functions.

>>> d = diff(jaxpr_graph(f, jnp.ones(3)), jaxpr_graph(f, jnp.ones(4)))   # doctest: +SKIP
>>> d.changed[0].what                                                     # doctest: +SKIP
'f32[3] → f32[4]'
>>> d.graph()      # both programs side by side, marks on the nodes      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax.extend.core as jcore

from ..session.programs import kept_programs
from . import model as m
from .build import jaxpr_graph
from .diff_draw import ADDED, AFTER, BEFORE, CHANGED, HOLDS, REMOVED, mark, side_by_side
from .diff_match import Change, Matcher, counted, io_changes, outermost
from .from_jaxpr import graph_from_jaxpr
from .plan import DEFAULT_BUDGET
from .walk import walk

__all__ = [
    "ADDED",
    "AFTER",
    "BEFORE",
    "CHANGED",
    "HOLDS",
    "REMOVED",
    "Change",
    "DiffViews",
    "ProgramDiff",
    "diff",
    "recompile_diff",
]

LISTED = 8  # differences the summary names one by one (all are counted)


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
        top_added = outermost(self.added)
        top_removed = outermost(self.removed)
        lines = [
            head
            + f"{counted(len(self.added), 'equation')} added, {len(self.removed)} removed, "
            + f"{len(self.changed)} changed; {len(self.pairs) - len(self.changed)} the same "
            + f"({self.n_before} before, {self.n_after} after)"
        ]
        listed = [f"changed {c.before} → {c.after}: {c.what}" for c in (*self.io, *self.changed)]
        listed += [f"added {i}" for i in top_added] + [f"removed {i}" for i in top_removed]
        lines += [f"  {line}" for line in listed[:LISTED]]
        if len(listed) > LISTED:
            lines.append(f"  and {len(listed) - LISTED} more")
        boxes = outermost(self.holds_after) or outermost(self.holds_before)
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
    found = Matcher()
    found.block(ta, tb)
    io = io_changes(a.jaxpr.jaxpr, b.jaxpr.jaxpr)
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
            "extension loaded, or inside `jaxlab.compile_log().recording()`), for the "
            "functions compiled most recently only (a few dozen, fewer when large); compile "
            f"`{name}` twice, with a change between"
        )
    return diff(kept[0], kept[1], titles=(f"{name} (before)", f"{name} (recompiled)"))


def _as_graph(program: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> m.Graph:
    if isinstance(program, m.Graph):
        if program.jaxpr is None:
            raise TypeError("this Graph keeps no jaxpr to compare; draw it with jaxpr_graph")
        return program
    if isinstance(program, jcore.ClosedJaxpr):
        return graph_from_jaxpr(program, title="program", explore=True)
    if callable(program):
        return jaxpr_graph(program, *args, explore=True, **kwargs)
    raise TypeError(
        f"diff compares Graphs (jaxlab.jaxpr_graph), ClosedJaxprs or functions, not a "
        f"{type(program).__name__}"
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
            return graph_from_jaxpr(
                g.jaxpr,
                title=g.title,
                grad=g.grad,
                budget=self.budget or DEFAULT_BUDGET // 2,
                input_names=g.input_names(),
            )
        return views(inner) if views is not None else g
