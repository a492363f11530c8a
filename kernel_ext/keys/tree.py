"""The key forest a view draws: seeds, then what was derived, then consumers; bounded.

::

    forest = lineage_tree(key_lineage(), max_items=2000)
    forest.items[0]       # TreeItem(id="k0", parent=None, kind="key", label="seed", ...)
    forest.hidden         # items not drawn (over max_items)

Up to ``max_items`` keys and consumers, each is drawn, except that more than
``GROUP`` untouched sibling keys made by one call (``split(key, 10_000)``) are one item
with a count. Beyond that (or for chains deeper than ``MAX_DEPTH``) the forest is drawn
by call site: one item per line that made
keys (``split ×10000 at In[3], line 4``) and one per line that consumed them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .record import KeyEvent, KeyLineage, KeyNode

GROUP = 8  # more untouched siblings than this from one call are drawn as one item
KEY_BY_KEY = 500  # keys drawn one by one at most (beyond: one row per call site)
SITE_ROWS = 200  # the newest call sites drawn (older ones counted as not drawn)
MAX_DEPTH = 64  # a longer chain (`key, sub = split(key)` in a loop) is drawn by call site


@dataclass(frozen=True)
class TreeItem:
    """One row of the forest: a key (``k3``), a consumer (``e7``) or a group (``g0``)."""

    id: str
    parent: str | None
    kind: str  # key, consume, group
    label: str
    where: str
    code: str
    cell: str | None
    reused: bool
    count: int = 1
    traced: bool = False


@dataclass(frozen=True)
class Forest:
    items: tuple[TreeItem, ...]
    hidden: int  # items not drawn because of max_items
    by_site: bool  # drawn by call site (too many keys to draw one by one)


def _key_label(node: KeyNode) -> str:
    if node.origin == "split" and node.index is not None:
        return f"split [{node.index}]"
    if node.origin == "unknown":
        return "key of unknown origin"
    if node.origin == "traced":
        return "key inside a loop body (traced)"
    return node.origin


def _use_label(event: KeyEvent) -> str:
    shape = ",".join(str(s) for s in event.shape)
    text = f"{event.op} {event.dtype}[{shape}]"
    return text + " (each iteration)" if event.in_loop else text


def lineage_tree(lineage: KeyLineage, max_items: int = 2000) -> Forest:
    """The forest of ``lineage``: every key and consumer, or call sites when too many."""
    # Key by key only while small: its cost grows with the keys, and a view is redrawn
    # after every cell. Beyond that, per call site, from the table kept while recording.
    if lineage.size > min(max_items, KEY_BY_KEY) or lineage.event_count > 2 * KEY_BY_KEY:
        return site_forest(lineage, max_items)
    nodes = lineage.nodes
    events = lineage.events
    reused = {r.key for r in lineage.reuses}
    twins = lineage.same_seeds
    uses: dict[int, list[KeyEvent]] = defaultdict(list)
    for event in events:
        if event.kind == "consume" or event.op == "split":
            for used in event.inputs:
                uses[used].append(event)
    known = {n.id for n in nodes}
    children: dict[int | None, list[KeyNode]] = defaultdict(list)
    for node in nodes:
        children[node.parent if node.parent in known else None].append(node)
    items: list[TreeItem] = []
    stack: list[tuple[KeyNode, str | None, int]] = [(n, None, 0) for n in reversed(children[None])]
    while stack:
        node, parent, depth = stack.pop()
        if len(items) > max_items or depth > MAX_DEPTH:  # too many to draw one by one
            return _by_site(nodes, uses, reused, max_items)
        item_id = f"k{node.id}"
        twin = twins.get(node.id)
        items.append(
            TreeItem(
                item_id,
                parent,
                "key",
                _key_label(node) + (f" (same seed as {twin.where})" if twin else ""),
                node.site.where,
                node.site.code,
                node.site.cell,
                node.id in reused,
                1,
                node.traced,
            )
        )
        for event in uses.get(node.id, ()):
            if event.op != "split":
                items.append(_use_item(event, item_id, node.id in reused))
        quiet, loud = _partition(children.get(node.id, []), uses, children, reused)
        for group_event, members in quiet.items():
            first = members[0]
            items.append(
                TreeItem(
                    f"g{node.id}-{group_event}",
                    item_id,
                    "group",
                    f"{len(members)} more keys from {first.origin}",
                    first.site.where,
                    first.site.code,
                    first.site.cell,
                    False,
                    len(members),
                    first.traced,
                )
            )
        stack.extend((child, item_id, depth + 1) for child in reversed(loud))
    if len(items) > max_items:
        return _by_site(nodes, uses, reused, max_items)
    return Forest(tuple(items), 0, False)


def _use_item(event: KeyEvent, parent: str, reused: bool) -> TreeItem:
    site = event.site
    return TreeItem(
        f"e{event.index}-{parent}",
        parent,
        "consume",
        _use_label(event),
        site.where,
        site.code,
        site.cell,
        reused,
        1,
        event.traced,
    )


def _partition(kids, uses, children, reused):
    """Untouched siblings made by one call, grouped when there are more than GROUP."""
    by_event: dict[int | None, list[KeyNode]] = defaultdict(list)
    for kid in kids:
        if not uses.get(kid.id) and not children.get(kid.id) and kid.id not in reused:
            by_event[kid.event].append(kid)
    quiet = {e: m for e, m in by_event.items() if len(m) > GROUP}
    grouped = {k.id for m in quiet.values() for k in m}
    return quiet, [k for k in kids if k.id not in grouped]


def _by_site(nodes, uses, reused, max_items) -> Forest:
    """One item per line that made keys and per line that consumed them."""
    site_of_node = {n.id: (n.origin, n.site.where) for n in nodes}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    first: dict[tuple[str, str], KeyNode] = {}
    parent_site: dict[tuple[str, str], tuple[str, str] | None] = {}
    bad: set[tuple[str, str]] = set()
    for n in nodes:
        s = site_of_node[n.id]
        counts[s] += 1
        first.setdefault(s, n)
        up = site_of_node.get(n.parent) if n.parent is not None else None
        if up != s:  # a chain `key, sub = split(key)` stays on its own line
            parent_site.setdefault(s, up)
        if n.id in reused:
            bad.add(s)
    ids = {s: f"s{i}" for i, s in enumerate(counts)}
    # a parent is drawn before its children: follow parents, and break cycles at roots
    # (a loop, not a closure calling itself: that is a reference cycle per redraw)
    order: list[tuple[str, str]] = []
    placed: set[tuple[str, str]] = set()
    for start in counts:
        chain: list[tuple[str, str]] = []  # from `start` up to the first placed site
        at: tuple[str, str] | None = start
        while at is not None and at not in placed:
            chain.append(at)
            up = parent_site.get(at)
            if up is not None and (up not in counts or up in chain):
                parent_site[at] = None  # unknown parent, or a cycle: a root
                up = None
            at = up
        for s in reversed(chain):
            placed.add(s)
            order.append(s)
    items: list[TreeItem] = []
    use_counts: dict[tuple[str, str, tuple[str, str]], list[KeyEvent]] = defaultdict(list)
    for node_id, events in uses.items():
        for e in events:
            if e.op != "split" and node_id in site_of_node:
                use_counts[(e.op, e.site.where, site_of_node[node_id])].append(e)
    for s in order:
        n = first[s]
        up = parent_site.get(s)
        label = f"{_key_label(n).split(' [')[0]} ×{counts[s]}"
        items.append(
            TreeItem(
                ids[s],
                ids[up] if up is not None else None,
                "key",
                label,
                n.site.where,
                n.site.code,
                n.site.cell,
                s in bad,
                counts[s],
                n.traced,
            )
        )
        for (_op, where, owner), events in use_counts.items():
            if owner == s:
                e = events[0]
                items.append(
                    TreeItem(
                        f"u{len(items)}",
                        ids[s],
                        "consume",
                        f"{_use_label(e)} ×{len(events)}",
                        where,
                        e.site.code,
                        e.site.cell,
                        s in bad,
                        len(events),
                        e.traced,
                    )
                )
    hidden = max(0, len(items) - max_items)
    return Forest(tuple(items[:max_items]), hidden, True)


def site_forest(lineage: KeyLineage, max_items: int = 2000) -> Forest:
    """One item per line that made keys and per line that drew from them, read from the
    lineage's per-site table: the newest ``SITE_ROWS`` lines (a long session makes new
    lines with every cell), so a redraw costs the same in the ten-thousandth cell as in
    the tenth."""
    with lineage._lock:
        lineage._flush_all()
        # the newest sites: a long session makes new lines with every cell
        rows = lineage.sites.newest(max(1, min(max_items // 2, SITE_ROWS)))
        under = {row.key: list(lineage.sites.under.get(row.key, ())) for row in rows}
        older = len(lineage.sites.keys) - len(rows)
    by_key = {row.key: row for row in rows}
    order: list[Any] = []
    placed: set[Any] = set()
    for row in rows:  # a parent before its children; a cycle is broken at a root
        chain = []
        at: Any = row
        while at is not None and at.key not in placed and at not in chain:
            chain.append(at)
            at = by_key.get(at.parent) if at.parent is not None else None
        for r in reversed(chain):
            placed.add(r.key)
            order.append(r)
    items: list[TreeItem] = []
    drawn: set[str] = set()
    for row in order:
        origin, _ = row.key
        parent = by_key.get(row.parent) if row.parent is not None else None
        parent_id = parent.id if parent is not None and parent.id in drawn else None
        label = {"unknown": "key of unknown origin", "traced": "key inside a loop body"}.get(
            origin, origin
        )
        items.append(
            TreeItem(
                row.id, parent_id, "key", f"{label} ×{row.count}", row.site.where,
                row.site.code, row.site.cell, row.reused, row.count, row.traced,
            )
        )  # fmt: skip
        drawn.add(row.id)
        for use in under.get(row.key, ()):
            items.append(
                TreeItem(
                    use.id, row.id, "consume", f"{use.label} ×{use.count}", use.site.where,
                    use.site.code, use.site.cell, row.reused, use.count, use.traced,
                )
            )  # fmt: skip
    hidden = max(0, len(items) - max_items) + older  # older sites are not drawn
    return Forest(tuple(items[:max_items]), hidden, True)


def site_detail(lineage: KeyLineage, site_id: str, limit: int = 200) -> tuple[TreeItem, ...]:
    """The keys made at one call site of :func:`site_forest` (``"s3"``), each with its
    draws, at most ``limit`` of them, newest first: the detail a view asks for on demand."""
    with lineage._lock:
        lineage._flush_all()
        row = next((r for r in lineage.sites.keys.values() if r.id == site_id), None)
        if row is None:
            return ()
        origin, where = row.key
        found = []
        at = lineage.site_ids(where)
        nodes = lineage._nodes
        for node in reversed(range(nodes.base, nodes.next)):
            if nodes.value(node, 2) == origin and nodes.value(node, 6) in at:
                found.append(node)
                if len(found) >= limit:
                    break
        reused = {r.key for r in lineage._reuses}
        items: list[TreeItem] = []
        for node in found:
            record = lineage.node_record(node)
            item_id = f"k{node}"
            items.append(
                TreeItem(
                    item_id, None, "key", _key_label(record), record.site.where,
                    record.site.code, record.site.cell, node in reused, 1, record.traced,
                )
            )  # fmt: skip
            for index in lineage.consumer_ids(node):
                e = lineage._events.get(index)
                if e is not None and e[0] != "split":
                    items.append(_use_item(lineage.event_record(index), item_id, node in reused))
        return tuple(items)
