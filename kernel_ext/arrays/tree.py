"""Walk a pytree into ``TreeNode`` records: paths, per-subtree counts and bytes, NaN/Inf
flags at every level, and each array leaf's ``ArrayInfo``.

::

    r = show_record({"w": jnp.ones((2, 3)), "act": jax.nn.relu})
    r.root.params, r.root.bytes            # 6, 24
    r.root.find("['act']").value           # 'relu'

The walk follows JAX's own pytree registry one level at a time
(``tree_flatten_with_path`` with every child a leaf), so equinox modules, flax nnx objects
and any registered class show their own children under their own keys. It is bounded:
at most ``MAX_NODES`` nodes are made; the rest are counted, never dropped silently.

It is safe on values JAX itself cannot flatten: a container that holds itself, nesting
deeper than ``MAX_DEPTH``, a dict whose keys cannot be sorted, a registered node whose
flatten raises, a leaf whose ``__repr__`` raises. Each is found before anything below it
is flattened and raised as one ``UnshowablePytree`` naming the path and the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..session.collector import collector_paused
from .info import ArrayLeaf, array_infos, is_array_like
from .record import ArrayInfo, ShowRecord, TreeNode
from .refusals import UnshowablePytree, error_words, safe_repr, short_path
from .structure import haiku_groups, is_haiku_params, is_hidden_key, node_label, value_words

MAX_NODES = 20_000
MAX_DEPTH = 100  # containers inside containers; each level is a few Python frames
MAX_DRAWN = 4  # array leaves of a tree given a drawing in the static view
_PLAIN = (dict, list, tuple)


class _Walk:
    def __init__(self) -> None:
        self.nodes = 0
        self.hidden = 0
        self.leaves: list[ArrayLeaf] = []
        self.paths: list[str] = []  # each array leaf's path
        self.open: dict[int, str] = {}  # id -> path of each container being walked


def pytree_arrays(x: Any, name: str = "") -> list[tuple[str, Any]]:
    """``(path, array)`` of each array leaf of ``x``, walked as ``show_record`` walks it
    (no figures computed): raises ``UnshowablePytree`` where that walk would."""
    walk = _Walk()
    _walk(x, name, "", walk)
    return [(p, leaf.value) for p, leaf in zip(walk.paths, walk.leaves, strict=True)]


def show_record(
    x: Any, name: str = "", slice_at: tuple[int, ...] | None = None, draw: int = MAX_DRAWN
) -> ShowRecord:
    """Walk ``x`` (an array or any pytree) and compute every array leaf's figures;
    ``UnshowablePytree`` (a ``ValueError``) for a value JAX cannot walk."""
    with collector_paused():  # thousands of records, no cycle among them
        return _record(x, name, slice_at, draw)


def _record(x: Any, name: str, slice_at: tuple[int, ...] | None, draw: int) -> ShowRecord:
    walk = _Walk()
    shape = _walk(x, name or "", "", walk)
    infos = array_infos(walk.leaves, slice_at=slice_at, draw=draw)
    root = _freeze(shape, infos)
    notes: list[str] = []
    if walk.hidden:
        notes.append(f"{walk.hidden} more node(s) not walked (the view stops at {MAX_NODES})")
    if not walk.leaves and not root.children and root.array is None and not root.value:
        notes.append("an empty pytree: no leaves")
    copied = sum(i.sample.bytes if i.sample else 0 for i in infos) + sum(
        leaf.copied for leaf in walk.leaves
    )
    return ShowRecord(
        name=name, root=root, copied_bytes=copied, leaves=len(walk.leaves), notes=tuple(notes)
    )


# A node before its figures: (path, key, label, value, array-leaf index, children, hidden)
_Raw = tuple[str, str, str, str, int, list[Any], int]


def _walk(node: Any, path: str, key: str, walk: _Walk, depth: int = 0) -> _Raw:
    walk.nodes += 1
    if is_array_like(node):
        walk.leaves.append(ArrayLeaf(node))
        walk.paths.append(path)
        return (path, key, _array_label(node), "", len(walk.leaves) - 1, [], 0)
    if depth >= MAX_DEPTH:
        raise UnshowablePytree(
            path,
            f"nested {depth} containers deep, deeper than the view walks ({MAX_DEPTH}; JAX's "
            "own flatten fails near Python's recursion limit): show a part of it",
        )
    if _is_haiku(node, path):
        walk.open[id(node)] = path
        raw = _walk_groups(haiku_groups(node), path, key, node_label(node), walk, depth)
        del walk.open[id(node)]
        return raw
    children = _node_children(node, path)
    if children is None:
        kind, text = _leaf_words(node, path)
        return (path, key, kind, text, -1, [], 0)
    # a plain container's label is its type's name (node_label would ask haiku's test again)
    label = type(node).__name__ if type(node) in _PLAIN else node_label(node)
    if not children:
        label += " (empty)"
    out: list[_Raw] = []
    hidden = 0
    walk.open[id(node)] = path
    for child_key, child in children:
        if walk.nodes >= MAX_NODES:
            hidden += 1
            continue
        out.append(_child(child, path + child_key, child_key, walk, depth))
    del walk.open[id(node)]
    walk.hidden += hidden
    return (path, key, label, "", -1, out, hidden)


def _child(child: Any, path: str, key: str, walk: _Walk, depth: int) -> _Raw:
    """Walk a container's child, refused if it is a container being walked (a cycle)."""
    seen_at = walk.open.get(id(child))
    if seen_at is not None:
        raise UnshowablePytree(
            path,
            f"it is {short_path(seen_at)} itself: the pytree contains itself (a cycle), "
            "which JAX cannot flatten: show a part of it without the cycle",
        )
    return _walk(child, path, key, walk, depth + 1)


def _is_haiku(node: Any, path: str) -> bool:
    try:
        return is_haiku_params(node)
    except Exception as e:  # a mapping whose keys or values cannot be read
        reason = f"reading this {type(node).__name__} raised {error_words(e)}"
        raise UnshowablePytree(path, reason) from e


def _node_children(node: Any, path: str) -> list[tuple[str, Any]] | None:
    """``_children``, its failures named: a dict's keys JAX cannot sort, a registered
    node's flatten that raises."""
    try:
        return _children(node)
    except Exception as e:
        unsortable = _unsortable_keys(node)
        if unsortable is not None:
            keys = ", ".join(safe_repr(k) for k in list(node)[:4])
            reason = (
                f"its keys ({keys}{', …' if len(node) > 4 else ''}) cannot be sorted "
                f"({unsortable}), and JAX flattens a dict in the order of its sorted keys: "
                "use keys of one type"
            )
        else:
            reason = (
                f"flattening this {type(node).__name__} (a pytree node registered with JAX) "
                f"raised {error_words(e)}"
            )
        raise UnshowablePytree(path, reason) from e


def _unsortable_keys(node: Any) -> str | None:
    """Why a dict's keys cannot be sorted, or None (not a dict, or they can)."""
    if not isinstance(node, dict):
        return None
    try:
        sorted(node)
    except Exception as e:
        return error_words(e)
    return None


def _leaf_words(node: Any, path: str) -> tuple[str, str]:
    try:
        return value_words(node)
    except Exception as e:
        reason = f"this {type(node).__name__}'s __repr__ raised {error_words(e)}"
        raise UnshowablePytree(path, reason) from e


def _walk_groups(
    groups: dict[str, Any],
    path: str,
    key: str,
    label: str,
    walk: _Walk,
    depth: int,
    root: str = "",
) -> _Raw:
    """Haiku's flat dict drawn as its module tree; each module keeps its real path
    (``root['mlp/~/linear_0']``); a group's path names its prefix (``root mlp/``)."""
    root = root or path
    out: list[_Raw] = []
    for part, entry in groups.items():
        walk.nodes += 1
        if isinstance(entry, tuple):  # (the flat key, that module's parameters)
            flat_key, params = entry
            child_path = f"{root}[{flat_key!r}]"
            kids = [
                _child(v, f"{child_path}[{k!r}]", f"[{k!r}]", walk, depth + 1)
                for k, v in params.items()
            ]
            out.append((child_path, part, "haiku module", "", -1, kids, 0))
        else:
            group = _walk_groups(entry, f"{path} {part}/", part, "haiku module", walk, depth, root)
            out.append(group)
    return (path, key, label, "", -1, out, 0)


def _children(node: Any) -> list[tuple[str, Any]] | None:
    """The node's children with their path steps, or None for a leaf that is not an array."""
    import jax

    if node is None:
        return None
    kind = type(node)
    # the plain containers as JAX flattens them (dict keys sorted), without a flatten each
    if kind is list or kind is tuple:
        return [(f"[{i}]", child) for i, child in enumerate(node)]
    if kind is dict and all(type(k) is str for k in node):
        return [(f"[{k!r}]", node[k]) for k in sorted(node) if not is_hidden_key(f"[{k!r}]")]
    asked: list[Any] = []

    def one_level(c: Any) -> bool:
        # the node itself once, every child a leaf: one level, even for a node whose
        # flatten returns the node itself (asked again, it is a leaf)
        if c is node and not asked:
            asked.append(c)
            return False
        return True

    flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=one_level)
    if len(flat) == 1 and flat[0][0] == () and flat[0][1] is node:
        return None  # a leaf of the registry: a function, a string, a number
    out = []
    for key_path, child in flat:
        step = jax.tree_util.keystr(key_path)
        if not is_hidden_key(step):
            out.append((step, child))
    return out


def _array_label(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return "numpy array"
    if isinstance(x, np.generic):
        return "numpy scalar"
    name = type(x).__name__
    return "array" if name in ("ArrayImpl", "Array") else name


def _freeze(raw: _Raw, infos: list[ArrayInfo]) -> TreeNode:
    path, key, label, value, index, children, hidden = raw
    if index >= 0:
        info = infos[index]
        nan = info.stats.nan if info.stats else 0
        inf = info.stats.inf if info.stats else 0
        return TreeNode(path, key, label, info.size, info.nbytes, nan, inf, array=info)
    kids = tuple(_freeze(c, infos) for c in children)
    return TreeNode(
        path=path,
        key=key,
        label=label,
        params=sum(k.params for k in kids),
        bytes=sum(k.bytes for k in kids),
        nan=sum(k.nan for k in kids),
        inf=sum(k.inf for k in kids),
        value=value,
        children=kids,
        hidden=hidden,
    )
