"""Where a step sits in the drawing: the node it lights (its own, or the closed box or
collapsed node holding it), the boxes around it, its label and the user's line, all read
off the Graph the step's program is drawn as.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from ..graph import model as m

__all__ = ["Layout"]

_WRAPS = re.compile(r"^(\w+\()+|\)+$")  # transpose(jvp(block)) -> block, as graph/groups
_PACKAGE = str(Path(__file__).resolve().parents[1])  # jaxlab's own frames
_LIBRARY = ("site-packages", "dist-packages", "<frozen", "/lib/python3")
_JAX = ("/jax/", "/jaxlib/")  # JAX's own callables (jnp.add, a custom_vjp) are no module


class Layout:
    """Node ids and labels of one drawing (a Graph) for the interpreter's node ids."""

    def __init__(self, graph: m.Graph, ev: Any) -> None:
        self.graph = graph
        self.nodes = {n.id: n for n in graph.nodes}
        self.clusters = {c.id: c for c in graph.clusters}

    def node(self, node_id: str, eqn: Any = None) -> str:
        """The node this id lights: itself if drawn, else the nearest drawn box around it:
        a collapsed box by its node id (its <title>), an open one by its element id; in a
        drawing that runs equations together, the run (segment) holding ``eqn``."""
        if node_id not in self.nodes and eqn is not None:
            for var in eqn.outvars:
                held = self.graph.var_node.get(var)
                if held in self.nodes and "/" not in node_id:
                    return held
        parts = node_id.split("/")
        for k in range(len(parts), 0, -1):
            here = "/".join(parts[:k])
            if here in self.nodes:
                return here
            if here in self.clusters and k < len(parts):
                return f"clusterbox_{here}"
        return node_id

    def box(self, node_id: str) -> list[str]:
        """The boxes holding the equation, outermost first (``scope block``, ``jit inner``,
        ``cond branch 1``): the named scopes of the top-level equation holding it, then the
        drawing's boxes."""
        parts = node_id.split("/")
        found = self._scopes(parts[0]) or self._module(parts[0])
        for k in range(1, len(parts)):
            here = "/".join(parts[:k])
            if here in self.clusters:
                found.append(self.clusters[here].label)
            elif not parts[k - 1].isdigit() and k < len(parts) - 1 and parts[k].isdigit():
                continue  # a cond's branch: named with its number below
            elif here in self.nodes:
                found.append(self.nodes[here].label)
        return found

    def _scopes(self, head: str) -> list[str]:
        """``jax.named_scope``'s names over top-level equation ``head`` (``e4``), outermost
        first; a transposed or linearized equation keeps its scope's name (``transpose(jvp(
        block))`` is ``block``)."""
        from ..graph.walk import name_stack

        eqn = self._top(head)
        if eqn is None:
            return []
        names = [_WRAPS.sub("", c) for c in name_stack(eqn).split("/")]
        return [f"scope {n}" for n in names if n]

    def _module(self, head: str) -> list[str]:
        """``module Linear``: the library module (a class's ``__call__``, flax's, a
        library's) the user's code called to make top-level equation ``head``, read off
        its frames; none where the user's own code made it."""
        from .._jax_compat import equation_frames

        eqn = self._top(head)
        if eqn is None:
            return []
        frames = equation_frames(eqn.source_info)
        own = max((k for k, f in enumerate(frames) if f.file.startswith(_PACKAGE)), default=-1)
        for caller, called in itertools.pairwise(frames[own + 1 :]):
            library = any(part in called.file for part in _LIBRARY)
            library = library and not any(p in called.file for p in _JAX)  # a ufunc, a rule
            user = not any(part in caller.file for part in _LIBRARY)
            if user and library and called.function.endswith(".__call__"):
                owner = called.function.rsplit(".", 2)[-2]
                public = owner and owner[0] != "_" and owner != "<locals>"  # not a wrapper
                return [f"module {owner}"] if public else []
        return []

    def _top(self, head: str) -> Any:
        closed = getattr(self.graph, "jaxpr", None)
        eqns = getattr(getattr(closed, "jaxpr", None), "eqns", None)
        if not eqns or head[:1] != "e" or not head[1:].isdigit() or int(head[1:]) >= len(eqns):
            return None
        return eqns[int(head[1:])]

    def label(self, step: Any) -> str:
        n = self.nodes.get(step.node_id)
        if n is not None and n.kind == m.EQUATION:
            return n.label
        return str(step.eqn.primitive.name)

    def source(self, node_id: str) -> str:
        n = self.nodes.get(node_id)
        return (n.source or "") if n is not None else ""
