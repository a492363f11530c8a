"""jaxpr → Graph: trace a function, walk its jaxpr, decide what to collapse, emit the model.

Big programs stay drawable: above a node budget the deepest, then largest, nested
programs collapse into one node each; if a block is still too long (a flat 10,000
equation gradient), runs of consecutive equations become segment nodes. The Graph's
``notes`` say what was collapsed.

>>> g = jaxpr_graph(lambda x: jnp.sin(x) * 2.0, 1.0)   # doctest: +SKIP
>>> g.primitives()                                      # doctest: +SKIP
Counter({'sin': 1, 'mul': 1})
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core as jcore

from . import model as m
from .labels import (
    cluster_label,
    friendly_label,
    literal_text,
    param_summary,
    type_text,
)
from .marks import carry_edges, mark_unused, primal_and_seed, scan_counts
from .names import program_names, result_name
from .walk import Block, Item, name_stack, source_line, walk

DEFAULT_BUDGET = 400  # drawn nodes
EDGE_BUDGET = 320  # drawn edges; see graph_from_jaxpr
MIN_BUDGET = 40
ROWS_PER_NODE_BUDGET = 0.4  # rows of equations allowed per node of budget (400 -> 160)


def jaxpr_graph(
    fun: Callable[..., Any],
    *args: Any,
    grad: bool = False,
    depth: int | None = None,
    values: bool = False,
    budget: int = DEFAULT_BUDGET,
    explore: bool = False,
    **kwargs: Any,
) -> m.Graph:
    """Trace ``fun(*args, **kwargs)`` (without running it) and return its jaxpr as a Graph.

    ``grad=True`` draws the program of ``jax.grad(fun)`` with forward and backward
    equations told apart; ``depth`` collapses nested programs deeper than it; ``values``
    annotates nodes with the values (and, with ``grad``, adjoints) they compute.
    Arguments may hold non-array leaves (an equinox module's activation function): they
    are held static and their arrays traced, as ``eqx.filter_jit`` does; the Graph's
    notes name them. ``explore`` returns the GraphExplorer's first view rather than the
    budgeted drawing (see ``graph_from_jaxpr``); either way ``Graph.rebuild`` draws the
    explorer's views, with the same notes and annotations.
    """
    from ..program.static_leaves import split_static

    name = getattr(fun, "__name__", None) or type(fun).__name__
    if grad:
        from .gradient import gradient_graph

        # jax.grad's program with every node named: the other arguments as named inputs
        # (not constants), the seed cotangent and the outputs ∂f/∂x.
        return gradient_graph(
            fun,
            args,
            kwargs,
            wrt=(0,),
            values=values,
            depth=depth,
            budget=budget,
            name=name,
            explore=explore,
        )
    split = split_static(fun, args, kwargs)
    fun, args, kwargs = split.fun, split.args, split.kwargs
    target = jax.grad(fun) if grad else fun
    closed = jax.make_jaxpr(target)(*args, **kwargs)
    graph = graph_from_jaxpr(
        closed,
        title=f"grad({name})" if grad else name,
        grad=grad,
        depth=depth,
        budget=budget,
        input_names=argument_names(fun, args, kwargs),
        explore=explore,
    )
    # Each step also applies to the explorer's views (explore.then).
    from .explore import then

    notes: tuple[str, ...] = (static_note(split.static_paths),) if split.changed else ()
    if split.outputs.paths:  # an updated model's activation, returned as eqx.filter_jit does
        notes += (static_note(split.outputs.paths, held="returned as they are (not arrays)"),)
    if notes:
        graph = then(graph, lambda g: dataclasses.replace(g, notes=(*g.notes, *notes)))
    if values:
        from .annotate import annotate

        graph = then(graph, lambda g: annotate(g, args, kwargs, grad=grad, fun=fun))
    return graph


def static_note(
    paths: tuple[str, ...], most: int = 4, held: str = "held static (not arrays)"
) -> str:
    """``"held static (not arrays): model.activation, ..."``, the first few paths named."""
    shown = ", ".join(paths[:most]) + (
        f" and {len(paths) - most} more" if len(paths) > most else ""
    )
    return f"{held}: {shown}"


def argument_names(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[str]:
    """A readable name for every flattened input leaf: ``x``, ``params['w']``, ``layers[0].b``."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        named = list(bound.arguments.items())
    except (TypeError, ValueError):
        named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    names: list[str] = []
    for arg_name, value in named:
        leaves = jax.tree_util.tree_flatten_with_path(value)[0]
        for path, _ in leaves:
            names.append(arg_name + jax.tree_util.keystr(path))
    return names


def graph_from_jaxpr(
    closed_jaxpr: Any,
    *,
    title: str,
    grad: bool = False,
    depth: int | None = None,
    budget: int = DEFAULT_BUDGET,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    explore: bool = False,
) -> m.Graph:
    """Draw an already traced ``ClosedJaxpr`` as a Graph (see module docstring);
    ``input_names``/``output_names`` label its inputs and outputs (``x``, ``∂loss/∂x``).

    The Graph's ``rebuild`` draws the program for the GraphExplorer (graph/explore.py);
    ``explore=True`` returns that first view (nested programs closed, long blocks as runs)
    and skips the budgeted drawing, which the explorer would not show.
    """
    from .explore import Explorer, Views

    tree = walk(closed_jaxpr.jaxpr)
    names = input_names if input_names and len(input_names) == len(tree.jaxpr.invars) else None
    names = names or [f"in{k}" for k in range(len(tree.jaxpr.invars))]
    explorer = Explorer(
        closed_jaxpr, tree, title=title, grad=grad, input_names=names, output_names=output_names
    )
    if explore:
        return explorer.graph(frozenset())
    # Layout time grows with edges as much as with nodes (a gradient's long residual
    # edges above all): past EDGE_BUDGET edges, draw again with a tighter node budget.
    node_budget = budget
    for _ in range(4):
        plan = _Plan(tree, depth=depth, budget=node_budget, input_names=names)
        emitter = _Emitter(plan, grad=grad)
        if output_names and len(output_names) == len(tree.jaxpr.outvars):
            emitter.output_names = output_names
        emitter.title = title
        emitter.program(tree, names)
        edges = tuple(dict.fromkeys(emitter.edges))
        if len(edges) <= EDGE_BUDGET or node_budget <= MIN_BUDGET:
            break
        node_budget = max(MIN_BUDGET, int(node_budget * EDGE_BUDGET / len(edges)))
    notes = tuple(plan.notes)
    if node_budget < budget:
        notes += (
            f"drawn with at most {node_budget} nodes rather than {budget}, to keep the "
            f"layout quick ({EDGE_BUDGET} edges at most)",
        )
    graph = assemble(tree, emitter, edges, closed_jaxpr, title=title, grad=grad, notes=notes)
    return dataclasses.replace(graph, rebuild=Views(explorer))


def assemble(
    tree: Block,
    emitter: _Emitter,
    edges: tuple[m.Edge, ...],
    closed_jaxpr: Any,
    *,
    title: str,
    grad: bool,
    notes: tuple[str, ...],
    n_equations: int | None = None,
) -> m.Graph:
    """The Graph of what ``emitter`` emitted: unused equations marked, loop carries added
    (``n_equations``: the program's, when the caller has counted them already)."""
    live: tuple[str, ...] = ()
    seeds: tuple[m.Edge, ...] = ()
    if grad:  # the forward value the report prints is live, its seed drawn next to it
        primal, seed = primal_and_seed(tree, closed_jaxpr)
        value, seed_node = emitter.var_node.get(primal), emitter.var_node.get(seed)
        if value is not None:
            live = (value,)
            if seed_node is not None and seed_node != value:
                seeds = (m.Edge(value, seed_node, m.SEEDS),)
    nodes = mark_unused(tuple(emitter.nodes), edges, live)
    return m.Graph(
        title=title,
        nodes=nodes,
        edges=edges + seeds + carry_edges(tree, {n.id for n in nodes}, emitter.var_node),
        clusters=tuple(emitter.clusters),
        notes=notes,
        n_equations=tree.n_equations if n_equations is None else n_equations,
        grad=grad,
        jaxpr=closed_jaxpr,
        var_node=emitter.var_node,
    )


# --------------------------------------------------------------------------- planning


def _all_items(block: Block) -> list[Item]:
    found: list[Item] = []
    for item in block.items:
        found.append(item)
        for sub in item.blocks:
            found.extend(_all_items(sub))
    return found


class _Plan:
    """What to draw: which nested programs collapse, which runs of equations group."""

    # Edges from a grouped argument (one node for hundreds of parameter arrays) cross the
    # whole budgeted drawing hundreds of times and are left out; the explorer's plan,
    # which draws a few dozen nodes, keeps them (to visible consumers only).
    keep_group_edges = False

    def __init__(
        self, tree: Block, *, depth: int | None, budget: int, input_names: list[str]
    ) -> None:
        self.collapsed: set[str] = set()
        self.io_groups: list[tuple[str, list[int]]] | None = None  # see _group_inputs
        self.segment_length: dict[str, int] = {}  # block prefix -> equations per segment
        self.notes: list[str] = []
        nested = [item for item in _all_items(tree) if item.blocks]
        if depth is not None:
            self.collapsed = {item.id for item in nested if item.depth > depth}
            if self.collapsed:
                self.notes.append(
                    f"{len(self._outermost(nested))} nested programs deeper than "
                    f"depth {depth} drawn as one node each"
                )
        io = _io_nodes(tree)
        if io > budget // 4:  # hundreds of parameter arrays: one node per argument
            self.io_groups = _group_inputs(input_names)
            io = len(self.io_groups) + len(tree.jaxpr.constvars) + 1
            self.notes.append(
                f"{len(tree.jaxpr.invars)} inputs drawn as {len(self.io_groups)} argument "
                f"nodes and {len(tree.jaxpr.outvars)} outputs as one, without their edges"
            )
        self.io = io
        total = self.drawn(tree) + io
        if total > budget:
            total = self._collapse(nested, total, budget)
        rows = max(20, int(budget * ROWS_PER_NODE_BUDGET))
        self._segment(tree, budget if total > budget else None, rows)

    def _collapse(self, nested: list[Item], total: int, budget: int) -> int:
        """Collapse nested programs, deepest first, then largest, until under budget."""
        by_budget: list[Item] = []
        for item in sorted(nested, key=lambda it: (-it.depth, -self._drawn_item(it), it.id)):
            if total <= budget:
                break
            if item.id in self.collapsed or self._inside_collapsed(item.id):
                continue
            total -= self._drawn_item(item) - 1
            self.collapsed.add(item.id)
            by_budget.append(item)
        if by_budget:
            kept = [it for it in by_budget if not self._inside_collapsed(it.id)]
            kinds = Counter(it.primitive for it in kept)
            listed = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in kinds.most_common())
            self.notes.append(
                f"{len(kept)} nested programs ({listed}) collapsed to stay under "
                f"{budget} nodes; use --depth or a larger --budget to open them"
            )
        return total

    def _outermost(self, nested: list[Item]) -> list[Item]:
        return [
            it for it in nested if it.id in self.collapsed and not self._inside_collapsed(it.id)
        ]

    def _inside_collapsed(self, item_id: str) -> bool:
        parts = item_id.split("/")
        return any("/".join(parts[:k]) in self.collapsed for k in range(1, len(parts)))

    def _drawn_item(self, item: Item) -> int:
        if not item.blocks or item.id in self.collapsed:
            return 1
        ports = len(item.eqn.outvars) + (1 if item.primitive == "cond" else 0)
        return ports + sum(len(b.jaxpr.invars) + self.drawn(b) for b in item.blocks)

    def drawn(self, block: Block) -> int:
        return sum(self._drawn_item(item) for item in block.items)

    def _segment(self, tree: Block, budget: int | None, rows: int) -> None:
        """Group the top level's runs of equations when the drawing would exceed the node
        ``budget`` (None: it does not) or be too tall to read (``rows``)."""
        n = len(tree.items)
        by_nodes = 1
        if budget is not None:
            # Inputs and outputs are always drawn; when they alone crowd the budget, a
            # quarter of it (at least one node: --budget 1 to 3) still goes to the equations.
            by_nodes = math.ceil(n / max(budget - self.io - 2, budget // 4, 1))
        by_rows = math.ceil(_longest_chain(tree) / rows)
        length = max(by_nodes, by_rows)
        if length <= 1:
            return
        self.segment_length[tree.prefix] = length
        why = f"{budget} nodes" if by_nodes >= by_rows else f"about {rows} rows"
        self.notes.append(
            f"{n} top-level equations grouped into runs of up to {length} to stay under "
            f"{why}; use a larger --budget or --text for every equation"
        )


def _longest_chain(tree: Block) -> int:
    """The longest chain of dependent top-level equations: the drawing's height in rows."""
    rank: dict[Any, int] = {}
    longest = 0
    for item in tree.items:
        here = 1 + max((rank.get(v, 0) for v in item.eqn.invars if not _is_literal(v)), default=0)
        for v in item.eqn.outvars:
            rank[v] = here
        longest = max(longest, here)
    return longest


def _is_literal(v: Any) -> bool:
    return isinstance(v, jcore.Literal)


def _group_inputs(names: list[str]) -> list[tuple[str, list[int]]]:
    """Input positions grouped by the top-level argument they belong to."""
    groups: dict[str, list[int]] = {}
    for k, name in enumerate(names):
        root = re.split(r"[\[.]", name, maxsplit=1)[0]
        groups.setdefault(root, []).append(k)
    return list(groups.items())


def _leaf_list(leaves: list[tuple[str, Any]], most: int = 12) -> str:
    """A grouped argument's leaves for its hover: ``params[0] f32[4,4], … (20 arrays)``."""
    if len(leaves) < 2:
        return ""
    shown = ", ".join(f"{name} {type_text(v.aval)}" for name, v in leaves[:most])
    return shown + (f", … ({len(leaves)} arrays)" if len(leaves) > most else "")


def _io_nodes(tree: Block) -> int:
    j = tree.jaxpr
    return len(j.invars) + len(j.constvars) + len(j.outvars)


# --------------------------------------------------------------------------- emission


def _phase(eqn: Any, inherited: str | None, grad: bool) -> str | None:
    if not grad:
        return None
    if "transpose" in name_stack(eqn):
        return m.BACKWARD
    return inherited or m.FORWARD


class _Emitter:
    def __init__(self, plan: _Plan, *, grad: bool) -> None:
        self.plan = plan
        self.grad = grad
        self.nodes: list[m.Node] = []
        self.edges: list[m.Edge] = []
        self.clusters: list[m.Cluster] = []
        self.var_node: dict[Any, str] = {}
        self.output_names: list[str] | None = None
        self.title = ""  # the program's function name: a single output is named by it
        self.producer: dict[Any, Any] = {}  # Var -> the equation that made it
        self.input_label: dict[str, str] = {}  # input node id -> its name
        # Var -> the name a reader knows it by: an argument, a nested program's parameter
        # or result (graph/names.py); labels such as ``h @ params['Wh']`` read it.
        self.var_name: dict[Any, str] = {}

    # -- helpers
    def _edge_from(self, var: Any, dst: str) -> None:
        if isinstance(var, jcore.Literal):
            return
        src = self.var_node.get(var)
        if src is not None and src != dst:
            self.edges.append(m.Edge(src, dst))

    def _produce(self, outvars: list[Any], node_id: str, eqn: Any = None) -> None:
        for v in outvars:
            if not isinstance(v, jcore.DropVar):
                self.var_node[v] = node_id
                if eqn is not None:
                    self.producer[v] = eqn

    def _boolean_index(self, eqn: Any) -> bool:
        """Whether a two-branch cond's index is a boolean turned to an int (lax.cond)."""
        if len(eqn.params.get("branches", ())) != 2:
            return False
        index = eqn.invars[0]
        if isinstance(index, jcore.Literal):
            return False
        made = self.producer.get(index)
        if made is None or made.primitive.name != "convert_element_type":
            return False
        source = made.invars[0]
        return str(getattr(source.aval, "dtype", "")) == "bool"

    def _operand_name(self, v: Any) -> str | None:
        """What a reader calls an operand: an argument's name, a literal's value."""
        if isinstance(v, jcore.Literal):
            return literal_text(v)
        return self.var_name.get(v)

    # -- the top level
    def program(self, tree: Block, input_names: list[str]) -> None:
        j = tree.jaxpr
        for k, v in enumerate(j.constvars):
            self.nodes.append(m.Node(f"c{k}", m.CONST, f"const {k}", types=(type_text(v.aval),)))
            self.var_node[v] = f"c{k}"
        groups = self.plan.io_groups or [(name, [k]) for k, name in enumerate(input_names)]
        for name, positions in groups:
            node_id = f"in{positions[0]}"
            types: tuple[str, ...]
            if len(positions) == 1:
                label, types = name, (type_text(j.invars[positions[0]].aval),)
            else:
                label, types = f"{name} ({len(positions)} arrays)", ()
            leaves = _leaf_list([(input_names[k], j.invars[k]) for k in positions])
            self.nodes.append(m.Node(node_id, m.INPUT, label, types=types, params=leaves))
            if len(positions) == 1:
                self.input_label[node_id] = name
                self.var_name[j.invars[positions[0]]] = name
            for k in positions:
                self.var_node[j.invars[k]] = node_id
        self.block(tree, cluster=None, phase=None)
        if self.plan.io_groups is not None:
            # Edges from argument groups and into the output group would cross the whole
            # drawing hundreds of times; the notes say they are left out.
            grouped = {f"in{positions[0]}" for _, positions in groups if len(positions) > 1}
            if not self.plan.keep_group_edges:
                self.edges = [e for e in self.edges if e.src not in grouped]
            if len(j.outvars) > 1:
                names = self.output_names or []
                roots = {name for name, _ in _group_inputs(names)}
                # A gradient's outputs are one argument's: ∂loss/∂params (20 arrays).
                label = (
                    f"{roots.pop()} ({len(j.outvars)} arrays)"
                    if len(roots) == 1 and len(names) == len(j.outvars)
                    else f"{len(j.outvars)} outputs"
                )
                leaves = _leaf_list(list(zip(names, j.outvars, strict=False)))
                self.nodes.append(m.Node("out0", m.OUTPUT, label, params=leaves))
                if self.plan.keep_group_edges:
                    for v in j.outvars:
                        self._edge_from(v, "out0")
                return
        own = self._program_results(tree.jaxpr, self.title)
        for k, v in enumerate(j.outvars):
            name = self.output_names[k] if self.output_names else own[k] or f"out{k}"
            label = f"{name} = {literal_text(v)}" if isinstance(v, jcore.Literal) else name
            self.nodes.append(m.Node(f"out{k}", m.OUTPUT, label, types=(type_text(v.aval),)))
            self._edge_from(v, f"out{k}")

    # -- a block's equations, possibly grouped into segments
    def block(self, block: Block, cluster: str | None, phase: str | None) -> None:
        length = self.plan.segment_length.get(block.prefix, 1)
        if length <= 1:
            for item in block.items:
                self.item(item, cluster, phase)
            return
        run: list[Item] = []
        run_phase: str | None = None
        for item in block.items:
            item_phase = _phase(item.eqn, phase, self.grad)
            if run and (len(run) >= length or item_phase != run_phase):
                self.segment(run, cluster, run_phase)
                run = []
            run.append(item)
            run_phase = item_phase
        if run:
            self.segment(run, cluster, run_phase)

    def segment(
        self, run: list[Item], cluster: str | None, phase: str | None, node_id: str = ""
    ) -> None:
        """``run`` as one SEGMENT node (``node_id``, by default ``e3-e9``)."""
        if len(run) == 1:
            self.item(run[0], cluster, phase)
            return
        first, last = run[0].id, run[-1].id
        node_id = node_id or f"{first}-{last.rsplit('/', 1)[-1]}"
        counts: Counter[str] = Counter()
        for item in run:
            counts.update(item.primitive_counts())
        produced: set[Any] = set()
        for item in run:
            for v in item.eqn.invars:
                if not isinstance(v, jcore.Literal) and v not in produced:
                    self._edge_from(v, node_id)
            produced.update(v for v in item.eqn.outvars if not isinstance(v, jcore.DropVar))
        n = sum(item.n_equations for item in run)
        top = counts.most_common(1)[0][0]
        self.nodes.append(
            m.Node(
                node_id,
                m.SEGMENT,
                f"{n} equations",
                cluster=cluster,
                primitive=top,
                types=tuple(type_text(v.aval) for v in run[-1].eqn.outvars),
                source=source_line(run[0].eqn),
                phase=phase,
                summary=_summary(counts),
                n_equations=n,
            )
        )
        for item in run:
            self._produce(item.eqn.outvars, node_id)

    # -- one equation
    def item(self, item: Item, cluster: str | None, inherited: str | None) -> None:
        eqn = item.eqn
        phase = _phase(eqn, inherited, self.grad)
        types = tuple(type_text(v.aval) for v in eqn.outvars)
        if not item.blocks or item.id in self.plan.collapsed:
            self._equation_node(item, cluster, phase, types)
            return
        label = cluster_label(item.primitive, eqn.params)
        self.clusters.append(
            m.Cluster(item.id, item.primitive, label, cluster, item.depth, item.n_equations)
        )
        if item.primitive == "cond":
            port = f"{item.id}/index"
            self.nodes.append(m.Node(port, m.PORT, "branch index", cluster=item.id, phase=phase))
            self._edge_from(eqn.invars[0], port)
        results = [f"{item.id}/out{k}" for k in range(len(eqn.outvars))]
        several = len(item.blocks) > 1
        port_names: dict[str, list[str | None]] = {}
        for sub in item.blocks:
            inner = item.id
            if several:
                inner = sub.prefix.rstrip("/")
                self.clusters.append(
                    m.Cluster(
                        inner,
                        item.primitive,
                        _role_label(item.primitive, sub.role, self._boolean_index(eqn)),
                        item.id,
                        item.depth,  # the branches are programs at the depth of their equation
                        sub.n_equations,
                    )
                )
            port_names[sub.prefix] = self._parameter_names(sub)
            for k, (v, fed_by) in enumerate(zip(sub.jaxpr.invars, sub.feeds, strict=True)):
                port = f"{sub.prefix}in{k}"
                known = port_names[sub.prefix][k]
                if known:
                    self.var_name[v] = known
                self.nodes.append(
                    m.Node(
                        port,
                        m.PORT,
                        known or f"in{k}",
                        cluster=inner,
                        types=(type_text(v.aval),),
                        phase=phase,
                    )
                )
                self.var_node[v] = port
                if fed_by is not None:
                    self._edge_from(fed_by, port)
            for k, v in enumerate(sub.jaxpr.constvars):
                port = f"{sub.prefix}c{k}"
                self.nodes.append(
                    m.Node(port, m.CONST, f"const {k}", cluster=inner, types=(type_text(v.aval),))
                )
                self.var_node[v] = port
            self.block(sub, inner, phase)
            if sub.gives_results:
                for v, result in zip(sub.jaxpr.outvars, results, strict=True):
                    self._edge_from(v, result)
        named = self._result_names(item, port_names)
        for k, (v, result) in enumerate(zip(eqn.outvars, results, strict=True)):
            if isinstance(v, jcore.DropVar):
                continue
            label = named[k] or f"out{k}"
            self.nodes.append(
                m.Node(result, m.PORT, label, cluster=item.id, types=(types[k],), phase=phase)
            )
            self.var_node[v] = result
            if named[k]:
                self.var_name[v] = label

    # -- names carried into and out of nested programs (graph/names.py)
    def _parameter_names(self, sub: Block) -> list[str | None]:
        """A nested program's parameters: its own names (``h``, ``x``), else the names of
        the outer values that feed them (a closed-over ``params['Wh']``)."""
        own = program_names(sub.jaxpr).args
        found: list[str | None] = []
        for k, fed_by in enumerate(sub.feeds):
            name = own[k] if own is not None and own[k] else None
            if name is None and fed_by is not None and not isinstance(fed_by, jcore.Literal):
                name = self.var_name.get(fed_by)
            found.append(name)
        return found

    def _program_results(self, jaxpr: Any, function: str | None = None) -> list[str | None]:
        """A program's results named by its function and their pytree paths (``f``,
        ``inner['s']``, ``step[1]``)."""
        names = program_names(jaxpr)
        function = names.function or function or None
        paths = names.results or (None,) * len(jaxpr.outvars)
        single = len(jaxpr.outvars) == 1
        return [result_name(function, path, single=single) for path in paths]

    def _result_names(
        self, item: Item, port_names: dict[str, list[str | None]] | None = None
    ) -> list[str | None]:
        """Names for a nested program's results: a scan's or while's carries keep the
        carry's name and a scan's stacked outputs say what they stack; other programs'
        results are named by the function (``inner['s']``), a jit's single one by its name."""
        eqn = item.eqn
        n = len(eqn.outvars)
        port_names = port_names or {}
        if item.primitive == "scan" and len(item.blocks) == 1:
            body = item.blocks[0]
            counts = scan_counts(eqn.params)
            if counts is None:
                return [None] * n
            consts, carries = counts
            params = port_names.get(body.prefix) or self._parameter_names(body)
            found = params[consts : consts + carries]
            outs = body.jaxpr.outvars
            for k in range(carries, n):
                inner = outs[k] if k < len(outs) else None
                what = self.var_name.get(inner) if inner is not None else None
                if what is None and inner is not None and inner in outs[:carries]:
                    what = found[list(outs[:carries]).index(inner)]
                found.append(f"stacked {what}" if what else None)
            return found
        if item.primitive == "while":
            bodies = [b for b in item.blocks if b.role == "body_jaxpr"]
            if not bodies:
                return [None] * n
            params = port_names.get(bodies[0].prefix) or self._parameter_names(bodies[0])
            skip = int(eqn.params.get("body_nconsts", 0))
            found = params[skip : skip + n]
            return found + [None] * (n - len(found))
        if not item.blocks:
            return [None] * n
        name = eqn.params.get("name")
        found = self._program_results(item.blocks[0].jaxpr, name if isinstance(name, str) else None)
        return found if len(found) == n else [None] * n

    def _equation_node(
        self, item: Item, cluster: str | None, phase: str | None, types: tuple[str, ...]
    ) -> None:
        eqn = item.eqn
        operands = [literal_text(v) if isinstance(v, jcore.Literal) else None for v in eqn.invars]
        label = item.primitive
        if any(o is not None for o in operands):
            label += " " + ", ".join(o if o is not None else "·" for o in operands)
        raw, params = label, param_summary(eqn.params)
        if params:
            raw += f" {params}"
        friendly = friendly_label(
            item.primitive,
            eqn.params,
            [v.aval for v in eqn.invars],
            [self._operand_name(v) for v in eqn.invars],
        )
        if friendly is not None:
            # The friendly label says all the parameters say; the raw form is on hover.
            label, params = friendly, ""
        collapsed = bool(item.blocks)
        self.nodes.append(
            m.Node(
                item.id,
                m.COLLAPSED if collapsed else m.EQUATION,
                cluster_label(item.primitive, eqn.params) if collapsed else label,
                cluster=cluster,
                primitive=item.primitive,
                types=types,
                source=source_line(eqn),
                params="" if collapsed else params,
                raw="" if collapsed else raw,
                scope=_scope(name_stack(eqn)),
                phase=phase,
                summary=_summary(item.primitive_counts()) if collapsed else "",
                n_equations=item.n_equations if collapsed else 1,
            )
        )
        for v in eqn.invars:
            self._edge_from(v, item.id)
        self._produce(eqn.outvars, item.id, eqn)
        if collapsed:  # its results keep their names for the labels that read them
            for v, name in zip(eqn.outvars, self._result_names(item), strict=False):
                if name and not isinstance(v, jcore.DropVar):
                    self.var_name[v] = name


def _scope(stack: str) -> str:
    """The named-scope path without JAX's transform wrappers:
    ``transpose(jvp(model/layer1))`` -> ``model/layer1``."""
    while (m_ := re.match(r"^\w+\((.*)\)$", stack)) is not None:
        stack = m_.group(1)
    return stack


def _role_label(primitive: str, role: str, boolean: bool = False) -> str:
    if role.startswith("branches["):
        k = role[len("branches[") : -1]
        if boolean and k in ("0", "1"):
            # lax.cond(pred, true_fun, false_fun) runs branches[1] when pred is true.
            return {"0": "false", "1": "true"}[k]
        return f"branch {k}"
    if primitive == "while":
        return {"cond_jaxpr": "while condition", "body_jaxpr": "while body"}.get(role, role)
    return role


def _summary(counts: Counter[str], most: int = 4) -> str:
    total = sum(counts.values())
    shown = ", ".join(
        f"{p}×{n}" for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:most]
    )
    more = len(counts) - most
    return f"{total} eqns: {shown}" + (f", +{more} more" if more > 0 else "")
