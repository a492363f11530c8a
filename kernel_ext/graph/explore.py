"""The GraphExplorer's drawings: one Graph per set of opened ids, built for what is visible.

A 10,000-equation program is never emitted whole (as Model Explorer, the cost follows
what is visible). Every nested program not opened is one COLLAPSED node; a block with
more than ``RUN_ITEMS`` equations shows them as runs (SEGMENT nodes), balanced and
hierarchical: a run opened shows its equations, or sub-runs when it still holds more than
``RUN_ITEMS``. A run never crosses from forward to backward equations. Ids are stable:
the run of the block ``e12/`` holding its equations 3 to 40 is ``e12/run3-40``; the top
level's runs are ``run0-119``, ``run120-239`` ...

Search looks at the whole program (primitive, equation id, source line, argument and
output names), not only at what is drawn; :meth:`Explorer.holders` says which closed
boxes hold a match, outermost first (``['run0-716', 'run675-701', 'e700']``), so that
opening them shows it. Views are emitted by ``explore_emit``, joined by ``assemble``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import jax.extend.core as jcore

from . import model as m
from .assemble import assemble
from .emit import _port_groups, _summary
from .explore_emit import REPEAT, ExploreEmitter, ExplorePlan, RunSummary
from .groups import Path_, Piece, item_path, split_range
from .labels import param_summary, type_text
from .plan import _group_inputs, _io_nodes
from .walk import Block, Item, count_primitives, name_stack, source_line

__all__ = ["REPEAT", "Explorer", "Views", "then"]


RUN_ITEMS = 32  # most equations an open block shows before it groups them into runs
GROUP_INPUTS = 100  # more inputs and outputs than this: one node per argument
ARGUMENT_LEAVES = 8  # a pytree argument of more arrays than this: one node (its leaves on hover)
SEARCH_MOST = 200  # matches listed by a search (all are counted)
CARRIED_KEPT = 8  # views whose edges' arrays are kept (the GraphExplorer asks the last)


class Explorer:
    """The drawings of one traced program for the GraphExplorer (see module docstring)."""

    def __init__(
        self,
        closed_jaxpr: Any,
        tree: Block,
        *,
        title: str,
        grad: bool,
        input_names: list[str],
        output_names: list[str] | None = None,
    ) -> None:
        self.closed = closed_jaxpr
        self.tree = tree
        self.title = title
        self.grad = grad
        self.input_names = input_names
        j = tree.jaxpr
        self.output_names = (
            output_names if output_names and len(output_names) == len(j.outvars) else None
        )
        self.io_groups = _io_groups(tree, input_names)
        # Where every equation sits: id -> (its block, its index); block prefix -> the
        # equation holding it and, when that equation holds several programs (cond
        # branches), the branch's own cluster id ("e3/1").
        self.where: dict[str, tuple[Block, int]] = {}
        self.owner: dict[str, tuple[str, str | None]] = {}
        self.nested: set[str] = set()
        self._index(tree)
        self._pieces: dict[tuple[str, int, int], list[tuple[int, int]] | None] = {}
        self._backward: dict[str, list[bool]] = {}
        self._haystack: list[tuple[str, str]] | None = None
        self._runs: dict[str, RunSummary] = {}
        # The structure the program says (graph/groups.py): each equation's path, per
        # block, and the named box of every range it made.
        self._paths: dict[str, list[Path_]] = {}
        self._named: dict[tuple[str, int, int], Piece] = {}
        self._labels: dict[tuple[str, int, int], str] = {}
        # A box's parameters are named by the top-level argument leaves it reads.
        self._argument_of: dict[Any, str] | None = None
        self._leaves_of: Counter[str] = Counter()
        self.n_equations = tree.n_equations  # counted once: every view says it
        self._carried: dict[frozenset[str], dict[tuple[str, str], frozenset[int]]] = {}

    def _index(self, block: Block) -> None:
        for k, item in enumerate(block.items):
            self.where[item.id] = (block, k)
            if item.blocks:
                self.nested.add(item.id)
            several = len(item.blocks) > 1
            for sub in item.blocks:
                self.owner[sub.prefix] = (item.id, sub.prefix.rstrip("/") if several else None)
                self._index(sub)

    # ------------------------------------------------------------------ runs
    def pieces(self, block: Block, lo: int, hi: int) -> list[tuple[int, int]] | None:
        """The runs (first, last item index) that items ``lo..hi`` of ``block`` show as,
        or None when they are few enough to show one by one."""
        key = (block.prefix, lo, hi)
        if key not in self._pieces:
            self._pieces[key] = self._split(block, lo, hi)
        return self._pieces[key]

    def _split(self, block: Block, lo: int, hi: int) -> list[tuple[int, int]] | None:
        n = hi - lo + 1
        named = self._structure(block, lo, hi)
        if named is not None:
            return named
        if n <= RUN_ITEMS:
            return None
        # Balanced: L levels of runs reach single equations (RUN_ITEMS ** L >= n), each
        # level showing about n ** (1/L) runs: 1,435 equations -> 12 runs of 120 -> 11
        # runs of 11 -> the equations.
        levels = 1
        while RUN_ITEMS**levels < n:
            levels += 1
        size = math.ceil(n / math.ceil(n ** (1 / levels)))
        back = self._phases(block)
        cuts = {k for k in range(lo + 1, hi + 1) if back[k] != back[k - 1]}
        if len(cuts) > RUN_ITEMS // 2:  # forward and backward interleaved: cut by size only
            cuts = set()
        found: list[tuple[int, int]] = []
        start = lo
        for k in range(lo + 1, hi + 2):
            if k == hi + 1 or k in cuts or k - start >= size:
                found.append((start, k - 1))
                start = k
        return found

    def _structure(self, block: Block, lo: int, hi: int) -> list[tuple[int, int]] | None:
        """Items ``lo..hi`` as the boxes the program's own structure makes (named scopes,
        the user's calls, loop iterations: graph/groups.py), or None."""
        known = self._named.get((block.prefix, lo, hi))
        if known is not None and known.pieces:  # a range of instances: the instances
            for p in known.pieces:
                self._named[(block.prefix, p.lo, p.hi)] = p
            return [(p.lo, p.hi) for p in known.pieces]
        whole = lo == 0 and hi == len(block.items) - 1
        if known is None and not whole:
            return None  # a run cut by size holds no named structure of its own
        if block.prefix not in self._paths:
            self._paths[block.prefix] = [item_path(item.eqn) for item in block.items]
        primitives = [item.primitive for item in block.items]
        then = known.then if known is not None else ("path", 0)
        pieces = split_range(
            self._paths[block.prefix], primitives, self._phases(block), lo, hi, then
        )
        if pieces is not None and len(pieces) > RUN_ITEMS:
            pieces = _chunks(pieces)  # 714 iterations: 31 boxes "iteration 0–22", ...
        if pieces is None or len(pieces) == hi - lo + 1:
            return None
        if hi - lo + 1 <= RUN_ITEMS and all(not p.name or p.then[0] == "none" for p in pieces):
            return None  # a few equations by line: each drawn is clearer
        for p in pieces:
            if p.lo < p.hi:
                self._named[(block.prefix, p.lo, p.hi)] = p
        return [(p.lo, p.hi) for p in pieces]

    def run_label(self, block: Block, lo: int, hi: int) -> str | None:
        """A named box's title: ``layer 3 (params[3])``, ``∂ layer 3``, ``mlp/linear_1``,
        ``layer ×20``; None for a run cut by size."""
        key = (block.prefix, lo, hi)
        piece = self._named.get(key)
        if piece is None:
            return None
        if key not in self._labels:  # a view redraws every closed box: named once
            self._labels[key] = self._label(block, lo, hi, piece)
        return self._labels[key]

    def _label(self, block: Block, lo: int, hi: int, piece: Piece) -> str:
        name = piece.name or source_line(block.items[lo].eqn) or block.items[lo].primitive
        name = name.removesuffix(".__call__")  # a module's call: its class (N, not N.__call__)
        used = self._parameters(block, lo, hi)
        if piece.instance is not None and re.search(r"\.\w+$", used):
            # Calls told apart by the module attribute they read (flax nnx's model.l1).
            name = used
        else:
            if piece.instance is not None:
                name += f" {piece.instance}"
            if used:
                name += f" ({used})"
        if self._phases(block)[lo]:
            name = "∂ " + name
        return name

    def repeats(self, block: Block, lo: int, hi: int) -> bool:
        """Whether the box of items ``lo..hi`` is a call or iteration made of the same
        equations as its site's first (a repeated layer, as Model Explorer marks them)."""
        piece = self._named.get((block.prefix, lo, hi))
        return piece is not None and piece.repeats

    def _parameters(self, block: Block, lo: int, hi: int) -> str:
        """The top-level arguments a box reads, by their shared pytree path (``params[3]``,
        ``model.l1``): how an iteration or an nnx module is told apart."""
        if block.prefix:
            return ""
        if self._argument_of is None:
            self._argument_of = dict(zip(self.tree.jaxpr.invars, self.input_names, strict=False))
            self._leaves_of = Counter(_root(name) for name in self.input_names)
        names, leaves = self._argument_of, self._leaves_of
        read = [
            names[v]
            for item in block.items[lo : hi + 1]
            for v in item.eqn.invars
            if not isinstance(v, jcore.Literal) and v in names
        ]
        by_argument: dict[str, list[str]] = {}
        for name in dict.fromkeys(read):
            by_argument.setdefault(_root(name), []).append(name)
        # Parts of pytree arguments only: a whole x, or all of params, tells no box apart.
        shown = [
            _shared_path(parts) for root, parts in by_argument.items() if len(parts) < leaves[root]
        ]
        shown = [p for p in shown if p and ("[" in p or "." in p)]
        return ", ".join(shown[:2]) + (" …" if len(shown) > 2 else "")

    def _phases(self, block: Block) -> list[bool]:
        """Per item of ``block``: is it a backward equation (runs are cut where this changes)."""
        if block.prefix not in self._backward:
            self._backward[block.prefix] = [
                self.grad and "transpose" in name_stack(item.eqn) for item in block.items
            ]
        return self._backward[block.prefix]

    def run_id(self, block: Block, lo: int, hi: int) -> str:
        return f"{block.prefix}run{lo}-{hi}"

    def run_summary(self, run: list[Item], run_id: str) -> RunSummary:
        """What a closed run reads from outside, writes, holds and says (kept per run)."""
        if run_id not in self._runs:
            counts: Counter[str] = Counter()
            count_primitives(run, counts)
            reads: list[Any] = []
            writes: list[Any] = []
            written: set[Any] = set()
            for item in run:
                for v in item.eqn.invars:
                    if not isinstance(v, jcore.Literal) and v not in written:
                        reads.append(v)
                for v in item.eqn.outvars:
                    if not isinstance(v, jcore.DropVar):
                        writes.append(v)
                        written.add(v)
            last = run[-1].eqn
            self._runs[run_id] = RunSummary(
                reads=tuple(dict.fromkeys(reads)),
                writes=tuple(writes),
                n=sum(item.n_equations for item in run),
                top=counts.most_common(1)[0][0],
                types=tuple(type_text(v.aval) for v in last.outvars),
                source=source_line(run[0].eqn),
                text=_summary(counts),
            )
        return self._runs[run_id]

    # ------------------------------------------------------------------ drawing
    def graph(self, opened: frozenset[str]) -> m.Graph:
        """The program drawn with ``opened`` open (nested programs' and runs' ids; other
        ids are ignored): everything else closed, one node each."""
        plan = ExplorePlan(self, opened)
        emitter = ExploreEmitter(plan, grad=self.grad)
        if self.output_names:
            emitter.output_names = self.output_names
        emitter.program(self.tree, self.input_names)
        edges = tuple(dict.fromkeys(emitter.edges))
        # The arrays each drawn edge carries, counted where the emitter saw them (an edge
        # it rerouted, or one added when assembling, is not counted: None for those).
        self._carried[opened] = {
            pair: frozenset(map(id, found)) for pair, found in emitter.carried.items()
        }
        while len(self._carried) > CARRIED_KEPT:
            self._carried.pop(next(iter(self._carried)))
        graph = assemble(
            self.tree,
            emitter,
            edges,
            self.closed,
            title=self.title,
            grad=self.grad,
            notes=tuple(plan.notes),
            n_equations=self.n_equations,
        )
        return dataclasses.replace(graph, rebuild=Views(self), view_of=opened)

    def carried(self, opened: frozenset[str]) -> dict[tuple[str, str], frozenset[int]]:
        """The arrays (their identities) each edge of the view of ``opened`` carries, by
        (src, dst); an edge the emitter did not count (see :meth:`graph`) is absent."""
        if opened not in self._carried:
            self.graph(opened)  # not drawn lately: emitted again to count them
        return self._carried[opened]

    # ------------------------------------------------------------------ finding
    def holders(self, node_id: str) -> list[str]:
        """The ids to open, outermost first, for ``node_id`` (an equation at any depth) to
        be drawn: the nested programs and runs that hold it. [] for the top level's
        inputs, constants and outputs, and for an id not in the program."""
        if node_id not in self.where:
            return []
        block, k = self.where[node_id]
        chain: list[str] = []
        if block.prefix:
            owner, branch = self.owner[block.prefix]
            chain = [*self.holders(owner), owner]
            if branch is not None:
                chain.append(branch)
        lo, hi = 0, len(block.items) - 1
        while (pieces := self.pieces(block, lo, hi)) is not None:
            lo, hi = next((a, b) for a, b in pieces if a <= k <= b)
            if lo == hi:
                break
            chain.append(self.run_id(block, lo, hi))
        return chain

    def boxes_to_open(self, words: list[str]) -> list[str]:
        """The ids to open, outermost first, so that every nested program whose primitive
        or name is one of ``words`` (``scan``, ``shard_map``, ``while``, ``pjit``'s
        function name) is drawn open with what holds it; a number ``N`` opens every nested
        program down to depth N. In program order (a view opens them so, breadth-first,
        as far as they fit). What a tutorial's figure walks through opens as its text says
        (``%jaxpr --open scan``)."""
        wanted = {w.strip().lower() for w in words if w.strip()}
        depth = max((int(w) for w in wanted if w.isdigit()), default=0)
        found: list[str] = []
        for node_id, (block, k) in self.where.items():  # in program order
            if node_id not in self.nested:
                continue
            item = block.items[k]
            names = {item.primitive.lower(), str(item.eqn.params.get("name", "")).lower()}
            if names & wanted or item.depth <= depth:
                found += [*self.holders(node_id), node_id]
        # Boxes the program's structure names (a call, a scope, a loop) open by that name
        # too (``--open scan,hamiltonian``: the scan and the calls inside it).
        blocks = {self.tree.prefix: self.tree} | {b.prefix: b for b, _ in self.where.values()}
        for block in blocks.values():
            found += self._named_runs(block, 0, len(block.items) - 1, wanted)
        return list(dict.fromkeys(found))

    def _named_runs(self, block: Block, lo: int, hi: int, wanted: set[str]) -> list[str]:
        """The runs of ``block`` (at any level) whose name's first word is wanted, each
        after what holds it."""
        found: list[str] = []
        for a, b in self.pieces(block, lo, hi) or []:
            if a == b:
                continue
            label = (self.run_label(block, a, b) or "").removeprefix("∂ ").lower()
            run = self.run_id(block, a, b)
            if label and (label in wanted or label.split()[0] in wanted):
                chain = self.holders(block.items[a].id)
                found += [*chain[: chain.index(run) + 1]] if run in chain else [run]
            found += self._named_runs(block, a, b, wanted)
        return found

    def search(self, query: str) -> list[str]:
        """Ids of everything in the program ``query`` matches (case-insensitive): equations
        at any depth by primitive, id, parameters or source line; inputs and outputs by
        name. In program order."""
        q = query.strip().lower()
        if not q:
            return []
        if self._haystack is None:
            self._haystack = self._texts()
        return list(dict.fromkeys(node_id for node_id, text in self._haystack if q in text))

    def _texts(self) -> list[tuple[str, str]]:
        j = self.tree.jaxpr
        texts: list[tuple[str, str]] = []
        groups = self.io_groups or [(name, [k]) for k, name in enumerate(self.input_names)]
        for name, positions in groups:
            names = " ".join(self.input_names[k] for k in positions)
            texts.append((f"in{positions[0]}", f"{name} {names}".lower()))
        if self.output_names:
            grouped = self.io_groups is not None and len(j.outvars) > 1
            for k, name in enumerate(self.output_names):
                texts.append(("out0" if grouped else f"out{k}", name.lower()))

        def visit(block: Block) -> None:
            for item in block.items:
                eqn = item.eqn
                text = f"{item.primitive} {item.id} {param_summary(eqn.params)} "
                texts.append((item.id, (text + (source_line(eqn) or "")).lower()))
                for sub in item.blocks:
                    visit(sub)

        visit(self.tree)
        return list(dict.fromkeys(texts))

    def openable(self) -> list[str]:
        """Every id that can be opened (nested programs, their branches, runs), outermost
        first: opening them all draws every equation."""
        found: list[str] = []

        def runs(block: Block, lo: int, hi: int) -> None:
            for a, b in self.pieces(block, lo, hi) or []:
                if a < b:
                    found.append(self.run_id(block, a, b))
                    runs(block, a, b)

        def visit(block: Block) -> None:
            runs(block, 0, len(block.items) - 1)
            for item in block.items:
                if item.blocks:
                    found.append(item.id)
                for sub in item.blocks:
                    owner = self.owner[sub.prefix][1]
                    if owner is not None:
                        found.append(owner)
                    visit(sub)

        visit(self.tree)
        return found


@dataclasses.dataclass(frozen=True)
class Views:
    """A Graph's ``rebuild``: the explorer's drawing for an opened set, then the steps its
    producer applied to its own drawing (names and roles, notes, values and adjoints), so
    every view reads as the Graph it came from.

    >>> views = Views(explorer).then(with_roles)                 # doctest: +SKIP
    >>> views(frozenset({"e3"})).rebuild is views                # doctest: +SKIP
    True
    """

    explorer: Explorer
    steps: tuple[Callable[[m.Graph], m.Graph], ...] = ()

    def __call__(self, opened: frozenset[str]) -> m.Graph:
        graph = self.explorer.graph(opened)
        for step in self.steps:
            graph = step(graph)
        return dataclasses.replace(graph, rebuild=self, view_of=opened)

    def then(self, step: Callable[[m.Graph], m.Graph]) -> Views:
        return Views(self.explorer, (*self.steps, step))


def then(graph: m.Graph, step: Callable[[m.Graph], m.Graph]) -> m.Graph:
    """``step(graph)``, whose ``rebuild`` applies ``step`` to every view as well."""
    done = step(graph)
    views = graph.rebuild
    return dataclasses.replace(done, rebuild=views.then(step) if isinstance(views, Views) else None)


def _io_groups(tree: Block, input_names: list[str]) -> list[tuple[str, list[int]]] | None:
    """The inputs drawn one node per argument (a 20-layer model's 40 parameter arrays as
    one ``params`` node whose edges run to the boxes that read them), or None to draw
    each input: when the program has more than ``GROUP_INPUTS`` inputs and outputs, or an
    argument more than ``ARGUMENT_LEAVES`` arrays."""
    groups = _group_inputs(input_names)
    if _io_nodes(tree) > GROUP_INPUTS or any(len(k) > ARGUMENT_LEAVES for _, k in groups):
        return groups
    # A row of inputs wider than a projector's pane (issue 34): one node per argument.
    if len(groups) < len(input_names) and _port_groups(list(input_names)):
        return groups
    return None


def _chunks(pieces: list[Piece]) -> list[Piece] | None:
    """More call instances or iterations than a view shows, as at most ``RUN_ITEMS``
    consecutive ranges named by the instances they hold (``layer 23–45``); each opens to
    its instances. None when the pieces are not numbered instances."""
    if any(p.instance is None for p in pieces) or len({p.name for p in pieces}) != 1:
        return None
    n = len(pieces)
    groups = math.ceil(n / math.ceil(n / RUN_ITEMS))  # as even as they can be
    found: list[Piece] = []
    for g in range(groups):
        part = pieces[g * n // groups : (g + 1) * n // groups]
        numbers = sorted(p.instance for p in part if p.instance is not None)
        name = f"{part[0].name} {numbers[0]}–{numbers[-1]}"
        found.append(Piece(part[0].lo, part[-1].hi, name, ("pieces", 0), pieces=tuple(part)))
    return found


def _shared_path(names: list[str]) -> str:
    """The pytree path ``names`` share, cut at a key: ``params[3][0]``, ``params[3][1]`` ->
    ``params[3]``; ``model.l1.kernel``, ``model.l1.bias`` -> ``model.l1``; one name as is."""
    if len(names) == 1:  # one array: its module's path (model.l1.kernel -> model.l1)
        return re.sub(r"\.\w+$", "", names[0])
    first = names[0]
    k = 0
    while k < len(first) and all(len(n) > k and n[k] == first[k] for n in names):
        k += 1
    shared = first[:k]
    cut = max(shared.rfind("["), shared.rfind("."))
    if k < len(first) or any(len(n) > k for n in names):
        shared = shared[:cut] if cut > 0 else ""
    return shared


def _root(name: str) -> str:
    """The argument a leaf's name belongs to: ``params[3][0]`` -> ``params``."""
    return re.split(r"[\[.]", name, maxsplit=1)[0]
