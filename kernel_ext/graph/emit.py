"""Emitting the Graph model: nodes, edges and clusters for what ``_Plan`` chose to show
(``_Emitter``), with the forward and backward phases, labels and segment summaries.
:mod:`jaxlab.graph.build` runs it; :mod:`jaxlab.graph.explore` emits its views with it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import jax.extend.core as jcore

from . import model as m
from .labels import (
    cluster_label,
    friendly_label,
    literal_text,
    operand_text,
    param_summary,
    type_text,
)
from .plan import _group_inputs, _Plan
from .value_names import Naming, unnamed
from .walk import Block, Item, name_stack, source_line


def _phase(eqn: Any, inherited: str | None, grad: bool) -> str | None:
    if not grad:
        return None
    if "transpose" in name_stack(eqn):
        return m.BACKWARD
    return inherited or m.FORWARD


class _Emitter(Naming):
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
        # A scan equation -> its body's parameter names and its results' names: what the
        # backward pass's scan that reverses it is named after (graph/port_names.py).
        self.scan_names: dict[int, tuple[list[str | None], list[str | None]]] = {}
        self.siblings: dict[str, tuple[Block, int]] = {}  # item id -> its block, its index

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
            for k in positions:
                self.var_node[j.invars[k]] = node_id
                # A grouped leaf keeps its own name for the labels that read it (x @ W[3]).
                self.var_name[j.invars[k]] = name if len(positions) == 1 else input_names[k]
        self._index(tree)
        # A value the program returns is known by its output's name inside it too (a cond
        # whose result f returns: f; a backward scan's result: ∂f/∂W).
        outputs = self.output_names or self._program_results(j, self.title)
        for v, returned in zip(j.outvars, outputs, strict=False):
            if returned and not isinstance(v, jcore.Literal) and v not in self.var_name:
                self.var_name[v] = returned
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
            port_names[sub.prefix] = self._parameter_names(sub, item)
            self._name_carry_results(item, sub, port_names[sub.prefix])
            grouped = _port_groups(port_names[sub.prefix])
            hovers = _group_hovers(grouped, port_names[sub.prefix], sub.jaxpr.invars)
            for k, (v, fed_by) in enumerate(zip(sub.jaxpr.invars, sub.feeds, strict=True)):
                port = f"{sub.prefix}in{grouped.get(k, (k, ''))[0]}"
                known = port_names[sub.prefix][k]
                if known:
                    self.var_name[v] = known
                if k not in grouped or grouped[k][0] == k:
                    self.nodes.append(
                        m.Node(
                            port,
                            m.PORT,
                            grouped[k][1] if k in grouped else known or unnamed(v),
                            cluster=inner,
                            types=() if k in grouped else (type_text(v.aval),),
                            params=hovers.get(k, ""),
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
        grouped = _port_groups(named)
        hovers = _group_hovers(grouped, named, eqn.outvars)
        if grouped:  # the body's results run into the one port of their argument
            moved = {results[k]: results[first] for k, (first, _) in grouped.items()}
            self.edges = [
                m.Edge(e.src, moved[e.dst], e.kind) if e.dst in moved else e for e in self.edges
            ]
        for k, (v, result) in enumerate(zip(eqn.outvars, results, strict=True)):
            if isinstance(v, jcore.DropVar):
                continue
            label = named[k] or self.var_name.get(v) or unnamed(v)
            if k in grouped:  # one of an argument's many arrays: one port for them all
                result = results[grouped[k][0]]
                if grouped[k][0] == k:
                    self.nodes.append(
                        m.Node(
                            result,
                            m.PORT,
                            grouped[k][1],
                            cluster=item.id,
                            params=hovers.get(k, ""),
                            phase=phase,
                        )
                    )
            else:
                self.nodes.append(
                    m.Node(result, m.PORT, label, cluster=item.id, types=(types[k],), phase=phase)
                )
            self.var_node[v] = result
            self.producer[v] = eqn
            if named[k]:
                self.var_name[v] = label
        if item.primitive == "scan" and len(item.blocks) == 1:
            self.scan_names[id(eqn)] = (port_names[item.blocks[0].prefix], named)

    def _equation_node(
        self, item: Item, cluster: str | None, phase: str | None, types: tuple[str, ...]
    ) -> None:
        eqn = item.eqn
        literal = [isinstance(v, jcore.Literal) for v in eqn.invars]
        label = item.primitive
        if any(literal):
            # Literals as typed; the other operands by name where they have one (add i, 1).
            label += " " + ", ".join(operand_text(self._operand_name(v)) for v in eqn.invars)
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
        assigned = self._assigned(item) if not collapsed else None
        if assigned is not None:
            self.var_name.setdefault(eqn.outvars[0], assigned)
        if collapsed:  # its results keep their names for the labels that read them
            for v, name in zip(eqn.outvars, self._result_names(item), strict=False):
                if name and not isinstance(v, jcore.DropVar):
                    self.var_name[v] = name


# A nested program's parameters or results in a row wider than this (px at 14 px titles,
# graph_layout's box widths) are drawn one port per argument: ``params (6 arrays)``.
PORT_ROW_PX = 1000


def _port_groups(names: list[str | None]) -> dict[int, tuple[int, str]]:
    """Positions of ports drawn as one per argument -> (the first position, its label),
    when the row of ports would be wider than ``PORT_ROW_PX``; {} to draw each one.
    Only arguments of several arrays group (``params['layers'][0]['W']``, ...)."""
    row = sum(min(max(len(n or "") * 8.5 + 22, 60), 440) + 18 for n in names)
    if row <= PORT_ROW_PX:
        return {}
    roots: dict[str, list[int]] = {}
    for k, name in enumerate(names):
        if name:
            root = re.split(r"[\[.]", name, maxsplit=1)[0]
            if root != name:
                roots.setdefault(root, []).append(k)
    return {
        k: (ks[0], f"{root} ({len(ks)} arrays)")
        for root, ks in roots.items()
        if len(ks) > 1
        for k in ks
    }


def _group_hovers(
    grouped: dict[int, tuple[int, str]], names: list[str | None], values: list[Any]
) -> dict[int, str]:
    """Each grouped port's leaves for its hover, by its first position: the port reads
    ``∂params (3 arrays)``, its hover ``∂params['W'] f32[4,4], ∂params['U'] …``."""
    members: dict[int, list[tuple[str, Any]]] = {}
    for k, (first, _) in grouped.items():
        members.setdefault(first, []).append((names[k] or "", values[k]))
    return {first: _leaf_list(leaves) for first, leaves in members.items()}


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


def _leaf_list(leaves: list[tuple[str, Any]], most: int = 12) -> str:
    """A grouped argument's leaves for its hover: ``params[0] f32[4,4], … (20 arrays)``."""
    if len(leaves) < 2:
        return ""
    shown = ", ".join(f"{name} {type_text(v.aval)}" for name, v in leaves[:most])
    return shown + (f", … ({len(leaves)} arrays)" if len(leaves) > most else "")
