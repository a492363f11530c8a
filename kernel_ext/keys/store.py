"""The bounded store of key lineage: what is held, and how it stays bounded.

A key is a node, identified by its key data (two keys with the same data draw the same
numbers, whatever made them); an event is one call of a ``jax.random`` function that
created, derived or consumed keys. The keys a split makes are materialised only when
someone looks or asks for one of them (a jitted loop may split thousands per call):
until then they are kept as one array of key data per event (:class:`_Pending`).

Beyond ``MAX_NODES`` keys the oldest are forgotten (counted in ``dropped``), beyond
``MAX_EVENTS`` events the oldest go, and ``MAX_REUSES`` reuses are kept. The store is
filled by :class:`~jaxlab.keys.events.KeyRecorder` (above it) and read through
:class:`~jaxlab.keys.queries.KeyReader`; ``record.KeyLineage`` is the three together.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .calls import Call, rows_of
from .identity import other_key
from .model import KeyEvent, KeyNode, KeyReuse
from .rows import Rows
from .site import Site
from .sites import SiteTable

MAX_NODES = 50_000  # beyond this the oldest keys are forgotten (counted in .dropped)
MAX_EVENTS = 50_000
MAX_REUSES = 1_000
EAGER_KEYS = 16  # a split into at most this many keys is materialised at once
MAX_NOTED = MAX_EVENTS  # eager draws and splits noted, their records not made yet
_GONE = object()  # stands for a noted key's object that died before its record was made
_NOTE = 8  # values per noted call in KeyStore._noted
_NOTED_LIMIT = MAX_NOTED * _NOTE  # values in KeyStore._noted
_TOKENS = 1 << 32  # tokens of one KeyStore._noted (above 2 * _NOTED_LIMIT)
_AVAL = "<aval>"  # a noted draw's dtype: its shape is its result's aval (shape and dtype)
_SHAPES: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple per shape, shared


def _shared(shape: tuple[int, ...]) -> tuple[int, ...]:
    """One tuple per shape, however many calls are noted with it."""
    found = _SHAPES.get(shape)
    if found is None and len(_SHAPES) < 4096:
        found = _SHAPES[shape] = shape
    return shape if found is None else found


@dataclass(slots=True)
class _Pending:
    event: int
    parents: list[int | None]  # one per key, or one for all (a split)
    rows: np.ndarray | None  # (n, words) key data; None: read from `source` when needed
    impl: str
    origin: str
    site: Site
    traced: bool
    source: Any = None  # the key array a split made (its data read later: no stall)
    first: int = -1  # its first key's node, once made (the others follow it)


def _add_one(found: dict[Any, int | list[int]], key: Any, value: int) -> None:
    """``value`` added to ``key``'s values: one as an int, more as a list (most have one:
    no list each to make, or for the garbage collector to track)."""
    held = found.get(key)
    if held is None:
        found[key] = value
    elif isinstance(held, int):
        found[key] = [held, value]
    else:
        held.append(value)


# Internally a node is a row of 8 values (raw data, impl, origin, parent, index, event,
# site, traced) and an event one of a KeyEvent's fields after its index (op, kind, inputs,
# shape, dtype, site, traced, in_loop), each site as its place in the store's list of
# sites and one input as itself (more as a tuple): held flat (:class:`Rows`), nothing per
# key for the garbage collector to walk, the oldest forgotten by the chunk. The records
# are made when read.
_WIDTH = 8


class KeyStore:
    """What the session's key lineage holds: nodes, events, reuses and what is noted or
    waiting to be replayed, bounded; the internals that add to it."""

    _node_cache: tuple[KeyNode, ...] | None
    _event_cache: tuple[KeyEvent, ...] | None
    _unwarned: list[KeyReuse]

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._subscribers: list[Callable[[], None]] = []
        self.clear()

    def clear(self) -> None:
        """Forget every key and event (tracking stays as it was)."""
        with self._lock:
            self._nodes = Rows(_WIDTH)
            # The records hold a site by its place in this list: a tuple of atomic values
            # only is one the garbage collector stops tracking (a Site in it kept every
            # record tracked: the full pass came sooner, 70 ms of a cell's end here)
            self._site_list: list[Site] = []
            self._site_ids: dict[int, int] = {}  # id(a Site held in _site_list) -> place
            # key data -> its held nodes (one as an int, more as a list, oldest first), for
            # the nodes below _indexed: brought up to date when asked (_data_index)
            self._by_data: dict[bytes, int | list[int]] = {}
            self._indexed = 0
            self._root_data: dict[bytes, int] = {}  # key data -> its newest single root
            self._pending: list[_Pending] = []
            self._last_pending: _Pending | None = None
            self._calls: deque[Call] = deque()
            self._events = Rows(_WIDTH)
            # node -> the events that consumed it: one as an int, more as a list (a loop's
            # keys are used once: no list each for the garbage collector to track)
            self._consumers: dict[int, int | list[int]] = {}
            self._consumed_by: dict[int, int] = {}  # node -> first consuming event
            # the data of every key consumed (held or noted): data not in it is no reuse
            self._consumed_data: set[bytes] = set()
            self._noted: list[Any] = []  # eager calls whose records are not made yet
            self._unread: deque[int] = deque()  # where in _noted a split's unread keys are
            # A noted split's keys are known by object once unpacked (key, sub = split(key)),
            # each by a token, base + 2 * (where its split is in _noted) + its index, base
            # changing whenever _noted starts again: id(the split's result, unread and not
            # unpacked yet) -> where; id(a key) -> (weak reference, token, impl), taken out
            # when the key is used (a second use is read)
            self._outs: dict[int, int] = {}
            self.kids: dict[int, tuple[weakref.ref[Any], int, str]] = getattr(self, "kids", {})
            self.kids.clear()  # the same dict for the session: the wrappers look in it
            self._by_token = False  # keys known by their token: is a key read one of theirs?
            self._token_base = getattr(self, "_token_base", 0) + _TOKENS  # of _noted's positions
            # no token below this is noted: a call noted by data since, or an older _noted's
            self._data_from = self._token_base - 1
            # id(key array) -> (weak reference, node): a single key known by its object
            self._objects: dict[int, tuple[weakref.ref[Any], int]] = {}
            self._single_roots: set[int] = set()  # one key made from a seed (or unseen)
            self._same_seed: dict[int, Site] = {}  # node -> where its seed's twin was made
            self._reuses: deque[KeyReuse] = deque(maxlen=MAX_REUSES)
            self._unwarned = []  # found replaying compiled calls
            self.sites = SiteTable()  # per call site, kept current (large views read it)
            self._warned: set[tuple[str, str]] = set()  # pairs of lines warned about
            self._dropped = 0
            self._node_cache = None
            self._event_cache = None
        self._notify()

    @property
    def _next_node(self) -> int:
        """The number the next key gets (numbered in order: an interrupt leaves no gap)."""
        return self._nodes.next

    @property
    def _next_event(self) -> int:
        return self._events.next

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after each change; returns the unsubscribe."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _notify(self) -> None:
        if getattr(self, "_subscribers", None):
            for callback in list(self._subscribers):
                callback()

    # ----------------------------------------------------------------- internals
    def _event(self, op, kind, inputs, shape, dtype, site, traced, in_loop=False) -> int:
        index = self._events.next
        site_id = self._site_id(site)
        one = inputs[0] if len(inputs) == 1 else inputs  # (one input: no tuple held)
        self._events.add(index, (op, kind, one, tuple(shape), dtype, site_id, traced, in_loop))
        self._event_cache = None
        if len(self._events) > MAX_EVENTS:
            self._drop_events()
        return index

    def _drop_events(self) -> None:
        """The oldest tenth of the events out, together."""
        self._events.drop(max(1, MAX_EVENTS // 10))

    def consumer_ids(self, node: int) -> list[int]:
        """The events that consumed a node, in order (their indices)."""
        found = self._consumers.get(node)
        return [] if found is None else [found] if isinstance(found, int) else list(found)

    def _site_id(self, site: Site) -> int:
        """The place of ``site`` in the records' list of sites (added when new)."""
        found = self._site_ids.get(id(site))
        if found is None:
            found = self._site_ids[id(site)] = len(self._site_list)
            self._site_list.append(site)  # held: its id is no other's meanwhile
        return found

    def site_ids(self, where: str) -> set[int]:
        """The places of the sites of a line (``In[3], line 4``) in the list of sites, as
        a held node's tuple has them (its 7th value)."""
        return {i for i, site in enumerate(self._site_list) if site.where == where}

    def site_of_node(self, node: int) -> Site:
        """Where a held node was made."""
        return self._site_list[self._nodes.value(node, 6)]

    def node_record(self, node: int) -> KeyNode:
        """A held node as a record."""
        raw, impl, origin, parent, index, event, site, traced = self._nodes[node]
        return KeyNode(
            node, raw.hex(), impl, origin, parent, index, event, self._site_list[site], traced
        )

    def event_record(self, index: int) -> KeyEvent:
        """A held event as a record."""
        op, kind, inputs, shape, dtype, site, traced, in_loop = self._events[index]
        where = self._site_list[site]
        inputs = inputs if type(inputs) is tuple else (inputs,)
        return KeyEvent(index, op, kind, inputs, shape, dtype, where, traced, in_loop)

    def _add(self, pending: _Pending) -> None:
        self._pending.append(pending)
        self._last_pending = pending
        small = pending.rows is not None and len(pending.rows) <= EAGER_KEYS
        if small or len(self._pending) > 256:
            self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for p in pending:
            if p.rows is None:  # a split's keys: computed by now (or waited for here)
                p.rows = rows_of(p.source)
                p.source = None
            # one copy of the data, sliced per key: numpy row views cost more than the keys
            width = (p.rows.shape[-1] if p.rows.ndim else 1) * p.rows.itemsize
            blob = p.rows.tobytes()
            count = len(blob) // width
            if len(p.parents) != 1:  # fold_in or clone of several keys: a parent each
                for i in range(count):
                    self._new_node(
                        blob[i * width : (i + 1) * width], p.impl, p.origin, p.parents[i],
                        None, p.event, p.site, p.traced,
                    )  # fmt: skip
                continue
            parent, split = p.parents[0], p.origin == "split"
            p.first = self._next_node
            self._made(p.origin, p.site, p.traced, parent, count)  # once, with the count
            for i in range(count):
                self._node(
                    blob[i * width : (i + 1) * width], p.impl, p.origin, parent,
                    i if split else None, p.event, p.site, p.traced,
                )  # fmt: skip

    def _lookup(self, raw: bytes) -> list[int]:
        if self._pending:  # the newest keys first: an older key of the same data may be
            self._flush()  # one a cell that ran before made (a cell run twice, one seed)
        ids = self._data_index().get(raw)
        if ids is None:
            return []
        return [ids] if isinstance(ids, int) else ids

    def _data_index(self) -> dict[bytes, int | list[int]]:
        """Key data -> its held nodes, brought up to date. Made when asked, not as keys are
        made: an eager loop's keys are mostly forgotten before anyone looks one up by data."""
        nodes, by_data = self._nodes, self._by_data
        flat, base, width = nodes.flat, nodes.base, _WIDTH
        for node in range(max(self._indexed, base), nodes.next):
            raw = flat[(node - base) * width]
            if raw:  # (a traced key has none)
                _add_one(by_data, raw, node)
        self._indexed = nodes.next
        return by_data

    def _root(self, node: int, raw: bytes) -> None:
        """``node`` is a single key known by its object (a seed's, or of unknown origin)."""
        self._single_roots.add(node)
        self._root_data[raw] = node

    def _inputs(
        self, rows: np.ndarray | bytes, impl: str, site: Site, traced: bool, obj: Any
    ) -> list[int]:
        if isinstance(rows, bytes):
            return [self._node_for(rows, impl, site, traced, obj)]
        if len(rows) == 1:
            return [self._node_for(rows[0].tobytes(), impl, site, traced, obj)]
        return [self._node_for(row.tobytes(), impl, site, traced) for row in rows]

    def _remember(self, obj: Any, node: int) -> None:
        """``obj`` (one key's array) is ``node``: known by identity, before its data."""
        if obj is _GONE:
            return
        try:
            ref = weakref.ref(obj)
        except TypeError:
            return
        if len(self._objects) > MAX_NODES:  # drop the dead and the forgotten
            known = self._nodes
            live = self._objects.items()
            self._objects = {i: (r, n) for i, (r, n) in live if r() is not None and n in known}
        self._objects[id(obj)] = (ref, node)

    def _object_node(self, obj: Any) -> int | None:
        """The node of a key known by its object, if it is that object still (an id of
        an object that died may be another's now)."""
        hit = self._objects.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj and hit[1] in self._nodes else None

    def _node_for(self, raw: bytes, impl: str, site: Site, traced: bool, obj: Any = None) -> int:
        """The node of one key: its object if known, else its data. Two objects made from
        one seed are two keys (same data, separate draws intended: no reuse between them)."""
        if obj is not None:
            node = self._object_node(obj)
            if node is not None:
                return node
        ids = self._lookup(raw)
        if ids and (obj is not None or ids[-1] in self._consumed_by) and other_key(self, ids, obj):
            node = self._new_node(raw, impl, "unknown", None, None, None, site, traced)
            self._same_seed[node] = self.site_of_node(ids[-1])
            self._root(node, raw)
            self._remember(obj, node)
            return node
        if not ids:  # made before tracking began, or where jaxlab could not see
            node = self._new_node(raw, impl, "unknown", None, None, None, site, traced)
            if obj is not None:
                self._root(node, raw)
                self._remember(obj, node)
            return node
        for node in reversed(ids):  # a clone shares its data: the newest not yet consumed
            if node not in self._consumed_by:
                return node
        return ids[-1]

    def _new_node(self, raw, impl, origin, parent, index, event, site, traced) -> int:
        node = self._node(raw, impl, origin, parent, index, event, site, traced)
        self._made(origin, site, traced, parent, 1)
        return node

    def _made(self, origin: str, site: Site, traced: bool, parent: int | None, count: int) -> None:
        """The per-site table: ``count`` keys made at ``site`` from ``parent``."""
        up = self._nodes.get(parent) if parent is not None else None
        parent_site = (up[2], self._site_list[up[6]].where) if up else None
        self.sites.made((origin, site.where), site, traced, parent_site, count)

    def _node(self, raw, impl, origin, parent, index, event, site, traced) -> int:
        """A node, without the site table (:meth:`_made` is told, once per group)."""
        node = self._nodes.next
        self._nodes.add(
            node, (raw, impl, origin, parent, index, event, self._site_id(site), traced)
        )
        self._node_cache = None
        if len(self._nodes) > MAX_NODES:
            self._forget(max(1, MAX_NODES // 10))
        return node

    def _forget(self, count: int) -> None:
        nodes, consumers, consumed = self._nodes, self._consumers, self._consumed_by
        roots, same, by_data = self._single_roots, self._same_seed, self._by_data
        raws = nodes.flat[: count * _WIDTH : _WIDTH]  # (their data: each row's first value)
        old, indexed = nodes.drop(count), self._indexed
        pop_consumers, pop_consumed = consumers.pop, consumed.pop
        for node in old:  # (every node made is forgotten here in a long session: kept lean)
            pop_consumers(node, None)
            pop_consumed(node, None)
        if roots or same:  # (seeds' keys: a few)
            for node, raw in zip(old, raws, strict=True):
                if node in roots:
                    roots.discard(node)
                    if self._root_data.get(raw) == node:
                        del self._root_data[raw]
                same.pop(node, None)
        seen = max(0, min(len(old), indexed - old.start))  # those in the data index
        for node, raw in zip(old[:seen], raws[:seen], strict=True):
            ids = by_data.get(raw)
            if ids == node:
                del by_data[raw]
            elif type(ids) is list and node in ids:
                ids.remove(node)
                if not ids:  # (none left: out, as one is when held as an int)
                    del by_data[raw]
        self._indexed = max(indexed, nodes.base)
        self._dropped += len(old)
        if len(self._consumed_data) > MAX_NODES + MAX_NOTED:  # the forgotten keys' data out
            flat, base, width = nodes.flat, nodes.base, _WIDTH  # (Rows' own calls: per key)
            top = len(flat) // width
            held = [flat[(n - base) * width] for n in consumed if 0 <= n - base < top]
            noted = [raw for raw in self._noted[1::_NOTE] if type(raw) is bytes]
            data = self._consumed_data  # in place: a caller recording noted calls holds it
            data.clear()
            data.update(held, noted)

    def _count_use(self, node: int, event: int) -> None:
        """The per-site table's draw row (splits are counted as the keys they make)."""
        e, n = self._events.get(event), self._nodes.get(node)
        if e is None or n is None or e[0] == "split":
            return
        sites = self._site_list
        site = sites[e[5]]
        self.sites.used((e[0], site.where, (n[2], sites[n[6]].where)), e, site)

    def _consume(self, inputs: Iterable[int], event: int) -> list[KeyReuse]:
        found = []
        for node in inputs:
            self._count_use(node, event)
            _add_one(self._consumers, node, event)
            earlier = self._consumed_by.get(node)
            if earlier is None:
                self._consumed_by[node] = event
                held = self._nodes.get(node)
                if held is not None and held[0]:
                    self._consumed_data.add(held[0])
            else:
                found.append(self._reuse(node, earlier, event))
        return found

    def _reuse(self, node: int, earlier: int, event: int) -> KeyReuse:
        first, second = self._events.get(earlier), self._events[event]
        reuse = KeyReuse(
            node,
            self._site_list[first[5]] if first else Site.unknown(),
            self._site_list[second[5]],
            first[0] if first else "?",
            second[0],
            second[6],
        )
        self._reuses.append(reuse)
        n = self._nodes.get(node)
        self.sites.reused((n[2], self._site_list[n[6]].where) if n else None)
        return reuse
