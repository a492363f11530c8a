"""The records ``%show`` draws: a tree of ``TreeNode`` with ``ArrayInfo`` at its array leaves.

Records are plain frozen dataclasses (JSON-serialisable through ``asdict``); the views
(``html``, ``draw``) read them, tests assert on them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass(frozen=True)
class ArrayStats:
    """An array's figures. Over the finite values: ``min``, ``max``, ``mean``, ``std``
    (None when there is none); counts over all values. Complex arrays: of the magnitude;
    booleans: ``mean`` is the share of True. ``computed_on`` says where: ``"device"``
    (a JAX reduction on the array's own devices) or ``"host copy"`` (a small array already
    copied for its table, reduced with NumPy)."""

    size: int
    nan: int
    inf: int
    zero: int
    finite: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    computed_on: str

    @property
    def all_nan(self) -> bool:
        return self.size > 0 and self.nan == self.size

    def words(self) -> str:
        """One line: ``min -1.2, max 3.4, mean 0.01, std 1.0; 2 NaN``."""
        if self.size == 0:
            return "empty: no values"
        if self.finite == 0:
            what = "all NaN" if self.all_nan else "no finite value"
            return f"{what} ({self.nan} NaN, {self.inf} Inf of {self.size})"
        parts = [
            f"min {_num(self.min)}, max {_num(self.max)}, mean {_num(self.mean)}, "
            f"std {_num(self.std)}"
        ]
        flags = [f"{n} {w}" for n, w in ((self.nan, "NaN"), (self.inf, "Inf")) if n]
        flags.append(f"{self.zero} zero")
        return "; ".join([*parts, ", ".join(flags)])


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


@dataclass(frozen=True)
class Sample:
    """What was copied to the host to draw: ``values`` (nested lists, at most
    ``sample.MAX_CELLS`` numbers), the original index each axis of it came from (``start``,
    ``step`` per drawn axis) and the ``bytes`` copied. ``slice_at`` fixes the leading axes
    of a 3-D+ array (the drawn 2-D slice)."""

    values: Any  # list (1-D) or list of lists (2-D); complex as [re, im] pairs
    kind: str  # "float", "integer", "boolean", "complex"
    steps: tuple[int, ...]  # every step-th element along each drawn axis
    slice_at: tuple[int, ...]  # fixed indices of the leading axes (3-D and more)
    bytes: int
    # the whole array's first NaN and Inf, found where it lives (only for an array whose
    # figures count one): ("NaN", (7, 42)), ..., so a strided sample still marks them
    not_finite: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Shard:
    """One block of a sharded array on one device: which device (and process) holds which
    block, its bytes, and whether this process holds it (``here``; False: held by another
    process, drawn from the sharding but never read). ``copies`` is how many devices hold
    the same block (1: partitioned only; more: replicated)."""

    device: int
    process: int
    index: tuple[tuple[int, int], ...]  # (start, stop) per array axis
    bytes: int
    here: bool
    copies: int = 1

    @property
    def replicated(self) -> bool:
        return self.copies > 1

    def index_text(self) -> str:
        """``[0:2, 0:8]``: the block as a slice of the whole array."""
        return "[" + ", ".join(f"{a}:{b}" for a, b in self.index) + "]"


@dataclass(frozen=True)
class ShardLayout:
    """Where a sharded array lives. ``mesh_shape`` names the mesh's axes and sizes (``()``
    when the sharding has no mesh), ``mesh_devices`` the device id at each mesh position
    (row-major, as ``mesh.devices`` holds them), ``axis_mesh`` which mesh axes split each
    array axis (``()`` for a whole axis); the array is replicated over ``replicated_over``.
    ``shards`` lists every device's block, this process's and the others' alike."""

    shape: tuple[int, ...]
    mesh_shape: tuple[tuple[str, int], ...]  # axis name and size; () when not a mesh
    spec: str  # the PartitionSpec as written, or the sharding's repr
    replicated_axes: tuple[int, ...]  # array axes not split
    partitioned_axes: tuple[int, ...]
    shards: tuple[Shard, ...]
    axis_mesh: tuple[tuple[str, ...], ...] = ()  # per array axis: the mesh axes splitting it
    replicated_over: tuple[str, ...] = ()  # mesh axes along which every block is repeated
    mesh_devices: tuple[int, ...] = ()  # device ids in mesh order (row-major)
    processes: int = 1

    @property
    def devices(self) -> int:
        return len(self.shards)

    @property
    def blocks(self) -> int:
        """Distinct blocks (devices holding the same block count once)."""
        return len({s.index for s in self.shards})

    @property
    def elsewhere(self) -> tuple[Shard, ...]:
        """The shards other processes hold."""
        return tuple(s for s in self.shards if not s.here)

    def shard_on(self, device: int) -> Shard | None:
        return next((s for s in self.shards if s.device == device), None)

    def words(self) -> str:
        """``8 devices on mesh x=4, y=2, P('x', None): axis 0 split over x, replicated over
        y; 4 blocks of 64 B per device``."""
        from .words import format_bytes

        where = f"{self.devices} devices"
        if self.mesh_shape:
            where += " on mesh " + ", ".join(f"{n}={k}" for n, k in self.mesh_shape)
        parts = [f"{where}, {self.spec}"]
        split = [
            f"axis {i} split over " + (m[0] if len(m) == 1 else f"({', '.join(m)})")
            for i, m in enumerate(self.axis_mesh)
            if m
        ]
        if split:
            parts.append(", ".join(split))
        elif self.shape:
            parts.append("no axis split")
        if self.replicated_over:
            parts.append("replicated over " + ", ".join(self.replicated_over))
        elif self.blocks < self.devices:
            parts.append(f"each block on {self.devices // max(self.blocks, 1)} devices")
        sizes = sorted({s.bytes for s in self.shards})
        each = format_bytes(sizes[0]) if len(sizes) == 1 else "uneven bytes"
        parts.append(f"{self.blocks} block(s), {each} per device")
        if self.elsewhere:
            parts.append(
                f"{len(self.elsewhere)} shard(s) held by other processes "
                f"({self.processes} processes)"
            )
        return "; ".join(parts)


@dataclass(frozen=True)
class ArrayInfo:
    """One array leaf: what it is, where it lives, its figures and its drawn sample."""

    shape: tuple[int, ...]
    dtype: str
    weak: bool
    kind: str  # "float", "integer", "boolean", "complex", "key", "other"
    size: int
    nbytes: int
    devices: tuple[str, ...]
    sharding: str
    state: str  # "live", "deleted", "abstract" (no values: ShapeDtypeStruct, tracer)
    stats: ArrayStats | None = None
    sample: Sample | None = None
    layout: ShardLayout | None = None
    note: str = ""  # why something is missing ("deleted or donated: its values are gone")

    @functools.cached_property
    def line(self) -> str:
        """``html.array_line(self)``, made once: the tree, the rows and the twin each print
        it (a 714-layer tree: 1,428 lines, not 4,284)."""
        return _above.array_line(self)

    @property
    def has_nan(self) -> bool:
        return bool(self.stats and self.stats.nan)

    @property
    def has_inf(self) -> bool:
        return bool(self.stats and self.stats.inf)


@dataclass(frozen=True)
class TreeNode:
    """A node of the walked pytree. ``path`` is the leaf path as Python indexes it
    (``['encoder'][2].W``); ``label`` what the node is (``Linear``, ``dict``, ``str``).
    ``params``/``bytes``/``nan``/``inf`` are summed over the subtree, so a NaN deep in a
    tree is flagged on every node above it."""

    path: str
    key: str  # the last step of the path, as drawn
    label: str
    params: int
    bytes: int
    nan: int
    inf: int
    array: ArrayInfo | None = None
    value: str = ""  # a non-array leaf, as repr shows it (bounded)
    children: tuple[TreeNode, ...] = ()
    hidden: int = 0  # children not walked (a bound), counted

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def find(self, path: str) -> TreeNode | None:
        """The node at ``path`` (as printed), or None."""
        # a full walk: haiku's module groups are not prefixes of their leaves' paths
        return next((n for n in self.nodes() if n.path == path), None)

    def first_array(self) -> TreeNode | None:
        """The first array leaf, depth first (the one a view draws unless told)."""
        return next((n for n in self.nodes() if n.array is not None), None)

    def walk(self) -> list[TreeNode]:
        """Every node, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out

    def nodes(self) -> Iterator[TreeNode]:
        """Every node, depth first, one at a time: a search stops where it finds (the
        first array of a 714-layer tree is its third node, not after its 2,143rd)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def count(self) -> int:
        """How many nodes the subtree holds."""
        return 1 + sum(child.count() for child in self.children)


@dataclass(frozen=True)
class ShowRecord:
    """What ``%show expr`` shows: the walked tree, the name it was given, and the bytes the
    whole view copied to the host."""

    name: str
    root: TreeNode
    copied_bytes: int
    leaves: int
    notes: tuple[str, ...] = field(default=())

    def text(self) -> str:
        from ..session.collector import collector_paused

        with collector_paused():
            return _above.tree_text(self)

    def html(self) -> str:
        from ..session.collector import collector_paused

        with collector_paused():  # a string per node, no cycle among them
            return _above.tree_html(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


class Above(NamedTuple):
    """What the records take from ``html``, which imports them: an array's one-line
    summary and a tree's text and HTML."""

    array_line: Callable[[ArrayInfo], str]  # html.array_line
    tree_text: Callable[[ShowRecord], str]  # html.tree_text
    tree_html: Callable[[ShowRecord], str]  # html.tree_html


_above: Above  # set by served_by when arrays/__init__ runs, before any record is drawn


def served_by(above: Above) -> None:
    """Called once by ``arrays/__init__`` (which any import of the package runs first):
    the drawings every record uses, so this module never imports its renderer."""
    global _above
    _above = above
