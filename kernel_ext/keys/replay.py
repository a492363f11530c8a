"""Calls of compiled functions replayed into the lineage, when someone reads it.

Each call noted by :class:`~jaxlab.keys.jit.TrackedJit` is replayed on the template its
trace wrote: the keys it was given (their data, read now), one node per key the function
derived (without data: it lived inside the program), one event per draw (a reuse found
here is warned about when the cell ends), and the keys it returned, children of the key
it was given; one it drew from (or split) inside the call is returned spent, so a later
draw from it is a reuse.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .calls import Call, Ref, rows_of
from .site import Site
from .store import _add_one

if TYPE_CHECKING:
    from .store import KeyStore


def replay(self: KeyStore, call: Call) -> None:
    """Replay one call of a compiled function on its template, into ``self``."""
    template, site = call.template, call.site
    args = dict(call.args)
    arg_nodes: dict[int, list[int]] = {}
    op_nodes: dict[int, list[int]] = {}
    loose: dict[int, list[int]] = {}

    def nodes_of(ref: Ref | None, op_site: Site) -> list[int]:
        if ref is None:
            return []
        kind, j = ref
        if kind == "op":
            return op_nodes.get(j, [])
        if kind == "arg" and j in args:
            if j not in arg_nodes:  # one key is known by its object, as an eager call's
                rows = rows_of(args[j])
                one = args[j] if len(rows) == 1 else None  # (several: by their data)
                arg_nodes[j] = [self._node_for(r.tobytes(), "", op_site, True, one) for r in rows]
            return arg_nodes[j]
        if j not in loose:  # a key from a loop carry or a closure: known only as traced
            loose[j] = [self._new_node(b"", "", "traced", None, None, None, op_site, True)]
        return loose[j]

    spent: dict[int, int] = {}  # node -> the event of this call that consumed it
    for j, op in enumerate(template.ops):
        inputs = nodes_of(op.source, op.site)
        event = self._event(
            op.op, op.kind, tuple(inputs), op.shape, op.dtype, op.site, True, op.in_loop
        )
        if op.kind == "consume" or op.op == "split":
            self._unwarned.extend(self._consume(inputs, event))
            for node in inputs:
                spent.setdefault(node, event)
        if op.kind != "consume":
            parent = inputs[0] if inputs else None
            op_nodes[j] = [self._new_node(b"", "", op.op, parent, None, event, op.site, True)]
    if template.reuses:  # once per trace: what the static flow of its jaxpr found
        seen = {(r.first.lineno, r.second.lineno) for r in self._reuses}
        for reuse in template.reuses:
            if (reuse.first.lineno, reuse.second.lineno) not in seen:
                self._reuses.append(replace(reuse, key=-1))  # no node: a program's key
                self._unwarned.append(self._reuses[-1])
        template.reuses = []
    for leaf, key in call.outs:  # keys it returned: known by their data from now on
        ref = template.outputs.get(leaf)
        owners = nodes_of(ref, site) if ref is not None else []
        if not owners:
            owners = next(iter(arg_nodes.values()), [])
        parent = owners[0] if owners else None
        # the key returned is the one the template's node stands for (an op's result, a
        # tracer of its own): consumed inside the call, it is returned spent
        used = spent.get(parent) if ref is not None and ref[0] != "arg" and parent else None
        for row in rows_of(key):
            raw = row.tobytes()
            if raw not in self._data_index():
                node = self._new_node(
                    raw, "", f"returned by {template.name}", parent, None, None, site, True
                )
                if used is not None:  # a later draw from it is a reuse, told at once
                    self._consumed_by[node] = used
                    _add_one(self._consumers, node, used)
                    self._consumed_data.add(raw)
