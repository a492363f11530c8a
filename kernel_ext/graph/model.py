"""The Graph model: what a jaxpr looks like as nodes, edges and nested clusters.

The model knows nothing of graphviz: ``render.py`` turns it into DOT and SVG, and
``overlay.py`` draws data on it; both import this module, and ``graph/__init__`` hands
their functions down (:func:`served_by`), so the model never imports them. Ids are
stable paths, never ``id()``, so the same program always gives the same model:

* top-level inputs ``in0, in1, ...``, constants ``c0, ...``, outputs ``out0, ...``;
* equation ``i`` of a block ``e{i}``; the block of a nested program inside equation
  ``e3`` has the prefix ``e3/`` when the equation holds one program, ``e3/0/``,
  ``e3/1/`` ... when it holds several (cond branches, while's cond and body);
* a nested block's parameters are ports ``<prefix>in{k}``, the enclosing equation's
  results are ports ``e3/out{k}``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

# Node kinds.
INPUT = "input"  # an argument of the program
CONST = "const"  # a constant captured by the program
EQUATION = "eqn"  # one primitive application
OUTPUT = "output"  # a result of the program
PORT = "port"  # a parameter or result of a nested program (inside its cluster)
COLLAPSED = "collapsed"  # a nested program drawn as one node
SEGMENT = "segment"  # a run of consecutive equations drawn as one node

FORWARD = "forward"
BACKWARD = "backward"

# Node roles in gradient graphs (Node.role).
FIXED = "fixed"  # an argument not differentiated: named, greyed, no adjoint
SEED = "seed"  # the seed cotangent ∂loss/∂loss = 1


@dataclass(frozen=True)
class ValueSummary:
    """A value small enough to print: a scalar, or a shape with mean/min/max."""

    shape: tuple[int, ...]
    dtype: str
    mean: float
    min: float
    max: float
    scalar: float | None = None  # set when the value has one element
    # Inside a scan body: the value is one per iteration, stacked (shape[0] iterations).
    iterations: int | None = None

    def text(self) -> str:
        if self.scalar is not None:
            return f"{self.scalar:.4g}"
        return f"μ {self.mean:.3g} [{self.min:.3g}, {self.max:.3g}]"


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    label: str  # the primitive's name, or the variable's role ("x", "in0", "out0")
    cluster: str | None = None  # id of the innermost drawn cluster holding it
    primitive: str | None = None  # equations, collapsed clusters and segments
    types: tuple[str, ...] = ()  # output types, e.g. ("f32[3,4]",)
    source: str | None = None  # the user's line, e.g. "model.py:12 (loss)"
    params: str = ""  # a short summary of the equation's parameters
    phase: str | None = None  # FORWARD / BACKWARD in gradient programs
    summary: str = ""  # collapsed clusters and segments: what they hold
    n_equations: int = 0  # collapsed clusters and segments: equations inside
    value: ValueSummary | None = None
    adjoint: ValueSummary | None = None
    residual: bool = False  # a forward value the backward pass keeps
    role: str = ""  # FIXED / SEED for such inputs of gradient graphs
    raw: str = ""  # equations: the primitive and parameters as JAX prints them (for hover)
    unused: bool = False  # an equation whose results reach no output (greyed, marked)
    scope: str = ""  # equations: the jax.named_scope path they ran under ("layer1/attn")
    # A badge that links this node to nodes of other graphs with the same tag, drawn in
    # the tag's colour (render.tag_colour): residual "r3" in %grad --split's programs.
    tag: str = ""
    # Two programs compared (graph/diff.py): "added", "removed", "changed", or "holds" for
    # a collapsed program or a run of equations that holds a difference.
    diff: str = ""
    # An overlay's value (graph/overlay.py): the user's number for this equation, or what
    # a closed box holds summed; NaN: given but no value. None: not part of the overlay.
    overlay: float | None = None

    @property
    def shape(self) -> str | None:
        """The first output's type, e.g. ``"f32[3,4]"``."""
        return self.types[0] if self.types else None

    @property
    def dtype(self) -> str | None:
        return self.types[0].split("[", 1)[0] if self.types else None


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str = ""  # CARRY: a loop's carry, from the body's result back to its parameter;
    # SEEDS: a gradient's forward value to its seed


CARRY = "carry"
# From a gradient program's forward value to the seed ∂f/∂f = 1 that differentiates it.
SEEDS = "seeds"


@dataclass(frozen=True)
class Cluster:
    """A nested program drawn as a box: an inner jit, a cond branch, a scan body..."""

    id: str
    primitive: str  # the equation's primitive: "jit", "cond", "scan", "while", ...
    label: str  # e.g. "scan ×10", "cond branch 1", "while body"
    parent: str | None
    depth: int  # 1 for a program nested in the top level
    n_equations: int  # equations inside, nested ones included
    diff: str = ""  # two programs compared (graph/diff.py): as Node.diff, "holds" mostly


@dataclass(frozen=True)
class Graph:
    """A jaxpr as a graph model; render with :meth:`to_dot` / :meth:`to_svg`.

    >>> g = jaxpr_graph(lambda x: jnp.sin(x) * 2, 1.0)   # doctest: +SKIP
    >>> [n.primitive for n in g.equations]               # doctest: +SKIP
    ['sin', 'mul']
    """

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...]
    notes: tuple[str, ...] = ()  # what the drawing left out and why ("3 clusters collapsed")
    n_equations: int = 0  # equations of the whole program, nested ones included
    grad: bool = False
    jaxpr: Any = field(default=None, compare=False, repr=False)  # the ClosedJaxpr drawn
    # jaxpr Var -> id of the node that produces it (at any depth); for annotators.
    var_node: Mapping[Any, str] = field(default_factory=dict, compare=False, repr=False)
    # The same program drawn for another set of opened ids (nested programs, runs of
    # equations): what the GraphExplorer draws, built for the visible part only. Set by
    # the producers (jaxpr_graph, gradient_graph, annotated graphs); see graph/explore.py.
    rebuild: Callable[[frozenset[str]], Graph] | None = field(
        default=None, compare=False, repr=False
    )
    # The opened set this Graph is the explorer's view for (None: the budgeted drawing).
    view_of: frozenset[str] | None = field(default=None, compare=False, repr=False)
    # An overlay drawn on the nodes (graph/overlay.py; Node.overlay holds the values): its
    # name and unit, the scale of this view (min, max), the program's total, whether some
    # value is negative, the keys that matched nothing, the values by id over the program.
    overlay_name: str = ""
    overlay_unit: str = ""
    overlay_range: tuple[float, float] = (0.0, 0.0)
    overlay_total: float = 0.0
    overlay_signed: bool = False
    overlay_unmatched: tuple[str, ...] = ()
    overlay_values: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)

    # ---------------------------------------------------------------- queries
    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def equations(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == EQUATION)

    def primitives(self) -> Counter[str]:
        """How often each primitive is drawn as an equation node."""
        return Counter(n.primitive for n in self.equations if n.primitive)

    def cluster_primitives(self) -> Counter[str]:
        return Counter(c.primitive for c in self.clusters)

    # ---------------------------------------------------------------- overlays
    def overlay(self, data: Mapping[str, float], name: str = "", unit: str = "") -> Graph:
        """This Graph with ``data`` drawn on it as a colour scale, keyed by equation id
        (``e12``, ``e3/e1``), source line (``"In[4], line 3"``) or box (``e3``); see
        ``graph/overlay.py``.

        >>> g.overlay({"e1": 2.0, "In[4], line 3": 1.5}, name="time", unit="ms")  # doctest: +SKIP
        """
        return _above.overlay(self, data, name=name, unit=unit)

    def overlay_from_adjoints(self) -> Graph:
        """The adjoints drawn (``%grad --graph``, ``values=True``) as an overlay: each
        node's largest adjoint magnitude, ``max(abs(min), abs(max))``."""
        return _above.overlay_from_adjoints(self)

    def overlay_ranked(self, most: int = 10) -> list[Any]:
        """The overlay's largest equations (``Ranked`` records: id, primitive, source,
        value, share), over the whole program, largest first."""
        return _above.ranked(self, most)

    # ---------------------------------------------------------------- renderings
    def to_dot(self) -> str:
        return _above.to_dot(self)

    def to_svg(self, timeout: float | None = None) -> str:
        """Lay out with Graphviz's ``dot``; raises ``RenderError`` when it cannot."""
        return _above.to_svg(self, timeout=timeout)

    def to_text(self) -> str:
        """The pretty-printed jaxpr this graph draws (without terminal colour codes), its
        arguments called by the names drawn (``x``, ``params['w']``)."""
        from .text import jaxpr_text

        if self.jaxpr is None:
            return self.title
        return jaxpr_text(self.jaxpr, names=self.input_names()).text

    def input_names(self) -> list[str] | None:
        """The drawn name of each argument of the program, in order; None when they are
        not drawn one node each (hundreds grouped by argument)."""
        invars = getattr(getattr(self.jaxpr, "jaxpr", None), "invars", None)
        if invars is None:
            return None
        named = {n.id: n.label for n in self.nodes if n.kind == INPUT}
        names = [named.get(f"in{k}") for k in range(len(invars))]
        if any(name is None for name in names):
            return None
        return [name for name in names if name is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "nodes": [asdict(n) for n in self.nodes],
            "edges": [asdict(e) for e in self.edges],
            "clusters": [asdict(c) for c in self.clusters],
            "notes": list(self.notes),
            "n_equations": self.n_equations,
            "grad": self.grad,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def describe(self) -> str:
        """One line: what is drawn."""
        drawn = sum(n.kind in (EQUATION, COLLAPSED, SEGMENT) for n in self.nodes)
        text = (
            f"{self.title}: {self.n_equations} equations, {len(self.nodes)} nodes "
            f"({drawn} operations), {len(self.clusters)} clusters"
        )
        return text + "".join(f"\n  {note}" for note in self.notes)

    def __repr__(self) -> str:
        return f"<Graph {self.describe()}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return _above.mimebundle(self)


class Above(NamedTuple):
    """What a :class:`Graph` takes from the modules above it, which import it:
    ``render``'s DOT, SVG and display, ``overlay``'s data drawn on it."""

    to_dot: Callable[[Graph], str]  # render.graph_to_dot
    to_svg: Callable[..., str]  # render.graph_to_svg(graph, timeout=)
    mimebundle: Callable[[Graph], dict[str, Any]]  # render.graph_mimebundle
    overlay: Callable[..., Graph]  # overlay.overlay(graph, data, name=, unit=)
    overlay_from_adjoints: Callable[[Graph], Graph]  # overlay.overlay_from_adjoints
    ranked: Callable[[Graph, int], list[Any]]  # overlay.ranked


_above: Above  # set by served_by when graph/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``graph/__init__`` (which any import of the package runs
    first): the drawings every Graph uses."""
    global _above
    _above = above
