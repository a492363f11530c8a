"""The records of key lineage and the session's bounded store of them.

A key is a node, identified by its key data (two keys with the same data draw the same
numbers, whatever made them); an event is one call of a ``jax.random`` function that
created, derived or consumed keys, with the user's line that made it::

    lineage = key_lineage()
    lineage.nodes      # (KeyNode(id=0, origin="seed", ...), KeyNode(id=1, origin="split", ...))
    lineage.edges      # (KeyEdge(parent=0, child=1, op="split"), ...)
    lineage.reuses     # (KeyReuse(key=1, first=Site("In[3], line 4"), second=..., ...),)

Consuming a key means what it means to ``jax_debug_key_reuse``: ``split`` and every
sampler consume it, ``fold_in`` and ``clone`` do not. A key consumed a second time is a
:class:`KeyReuse`. The keys a split makes are materialised only when someone looks or
asks for one of them (a jitted loop may split thousands per call): until then they are
kept as one array of key data per event.

An eager draw or split of one key that cannot be a reuse (its data was never consumed,
its object is not one known by identity, no compiled call waits to be replayed) is only
noted: its records are made, in order, when someone reads the lineage or when a call
that needs them comes (an eager loop pays for the reuse check, not for the records).
A key unpacked from a noted split (``key, sub = split(key)``, its first unpacking) is
known by its object until it is used: its draw or split is noted by a token (that split,
its index) with no read of its data, and a second use of it, or a key of unknown origin
while such notes wait, is recorded with its data at once (a reuse is still told at once).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .calls import Call, data_bytes, dtype_name, rows_of
from .identity import other_key
from .model import KeyEdge as KeyEdge
from .model import KeyEvent as KeyEvent
from .model import KeyNode as KeyNode
from .model import KeyReuse as KeyReuse
from .site import Site
from .sites import SiteTable

MAX_NODES = 50_000  # beyond this the oldest keys are forgotten (counted in .dropped)
MAX_EVENTS = 50_000
MAX_REUSES = 1_000
MAX_CALLS = 10_000  # calls of compiled functions waiting to be replayed
EAGER_KEYS = 16  # a split into at most this many keys is materialised at once
MAX_NOTED = MAX_EVENTS  # eager draws and splits noted, their records not made yet
UNREAD_SPLITS = 16  # a noted split's keys are read once this many later ones are noted
MAX_KIDS = 4096  # keys known by their split's index (beyond, the dead are dropped)
_GONE = object()  # stands for a noted key's object that died before its record was made
_NOTE = 8  # values per noted call in KeyLineage._noted
_NOTED_LIMIT = MAX_NOTED * _NOTE  # values in KeyLineage._noted
_TOKENS = 1 << 32  # tokens of one KeyLineage._noted (above 2 * _NOTED_LIMIT)
_SHAPES: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple per shape, shared


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


def _shared(shape: tuple[int, ...]) -> tuple[int, ...]:
    """One tuple per shape, however many calls are noted with it."""
    found = _SHAPES.get(shape)
    if found is None and len(_SHAPES) < 4096:
        found = _SHAPES[shape] = shape
    return shape if found is None else found


# Internally a node is a tuple (raw data, impl, origin, parent, index, event, site, traced)
# and an event a KeyEvent's fields after its index, each site as its place in the
# lineage's list of sites: tuples cost a tenth of a frozen dataclass to make, and an eager
# split makes three. The records are made when read.
_Node = tuple[bytes, str, str, "int | None", "int | None", "int | None", int, bool]


class KeyLineage:
    """The session's key forest: nodes, edges, events and reuses (bounded)."""

    _node_cache: tuple[KeyNode, ...] | None
    _event_cache: tuple[KeyEvent, ...] | None
    _unwarned: list[KeyReuse]

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._subscribers: list[Callable[[], None]] = []
        self.clear()

    # ----------------------------------------------------------------- reading
    @property
    def nodes(self) -> tuple[KeyNode, ...]:
        with self._lock:
            self._flush_all()
            if self._node_cache is None:
                self._node_cache = tuple(self.node_record(i) for i in self._nodes)
            return self._node_cache

    @property
    def edges(self) -> tuple[KeyEdge, ...]:
        return tuple(KeyEdge(n.parent, n.id, n.origin) for n in self.nodes if n.parent is not None)

    @property
    def events(self) -> tuple[KeyEvent, ...]:
        with self._lock:
            self._flush_all()
            if self._event_cache is None:
                self._event_cache = tuple(self.event_record(i) for i in self._events)
            return self._event_cache

    @property
    def reuses(self) -> tuple[KeyReuse, ...]:
        with self._lock:
            self._flush_all()
            return tuple(self._reuses)

    def first_warning(self, reuse: KeyReuse) -> bool:
        """Whether this pair of lines is warned about for the first time (then noted)."""
        pair = (reuse.first.where, reuse.second.where)
        with self._lock:
            if pair in self._warned:
                return False
            if len(self._warned) > MAX_REUSES:
                self._warned.clear()
            self._warned.add(pair)
            return True

    def unwarned(self, reuses: list[KeyReuse]) -> None:
        """Reuses found where nobody can warn now (a callback inside a compiled program)."""
        if reuses:
            with self._lock:
                self._unwarned.extend(reuses)

    @property
    def unseen(self) -> int:
        """Keys of unknown origin: made before tracking began, or returned by compiled code
        that ran unseen (a function compiled before tracking began)."""
        with self._lock:
            self._flush_all()
            return self.sites.unknown

    def take_unwarned(self) -> list[KeyReuse]:
        """Reuses found in compiled calls since the last time this was asked (the caller
        warns: after a jitted call, or when the cell ends)."""
        with self._lock:
            self._flush_all()
            found = self._unwarned[:MAX_REUSES]
            self._unwarned = []
            return found

    @property
    def same_seeds(self) -> dict[int, Site]:
        """Keys made from the same seed as an earlier key (not a reuse: a separate key that
        draws the same numbers): node -> where the earlier one was made."""
        with self._lock:
            self._flush_all()
            return dict(self._same_seed)

    @property
    def size(self) -> int:
        """How many keys are held now (without making their records)."""
        with self._lock:
            self._flush_all()
            return len(self._nodes)

    @property
    def event_count(self) -> int:
        with self._lock:
            self._flush_all()
            return len(self._events)

    @property
    def reuse_count(self) -> int:
        with self._lock:
            self._flush_all()
            return len(self._reuses)

    def recent_reuses(self, count: int) -> tuple[KeyReuse, ...]:
        """The newest ``count`` reuses."""
        with self._lock:
            self._flush_all()
            return tuple(list(self._reuses)[-count:])

    @property
    def dropped(self) -> int:
        """Nodes (and calls of compiled functions) forgotten to keep the store bounded."""
        with self._lock:
            self._flush_all()
            return self._dropped

    def consumers(self, node: int) -> tuple[KeyEvent, ...]:
        with self._lock:
            self._flush_all()
            found = [i for i in self.consumer_ids(node) if i in self._events]
            return tuple(self.event_record(i) for i in found)

    def find(self, data: np.ndarray | bytes) -> KeyNode | None:
        """The node whose key data this is (the newest, if cloned)."""
        raw = data if isinstance(data, bytes) else np.asarray(data).tobytes()
        with self._lock:
            self._flush_all()
            ids = self._lookup(raw)
            return next((n for n in self.nodes if n.id == ids[-1]), None) if ids else None

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-serialisable data."""
        nodes = self.nodes
        return {
            "nodes": [asdict(n) for n in nodes],
            "events": [asdict(e) for e in self.events],
            "reuses": [{**asdict(r), "kind": r.kind} for r in self.reuses],
            "dropped": self.dropped,
        }

    def clear(self) -> None:
        """Forget every key and event (tracking stays as it was)."""
        with self._lock:
            self._nodes: dict[int, _Node] = {}
            # The records hold a site by its place in this list: a tuple of atomic values
            # only is one the garbage collector stops tracking (a Site in it kept every
            # record tracked: the full pass came sooner, 70 ms of a cell's end here)
            self._site_list: list[Site] = []
            self._site_ids: dict[int, int] = {}  # id(a Site held in _site_list) -> place
            self._by_data: dict[bytes, int | list[int]] = {}
            self._pending: list[_Pending] = []
            self._calls: deque[Call] = deque()
            self._events: dict[int, tuple[Any, ...]] = {}
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
            self._next_node = 0
            self._next_event = 0
            self._dropped = 0
            self._node_cache = None
            self._event_cache = None
        self._notify()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after each change; returns the unsubscribe."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _notify(self) -> None:
        if getattr(self, "_subscribers", None):
            for callback in list(self._subscribers):
                callback()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        from .view import lineage_html, lineage_text

        return {"text/plain": lineage_text(self), "text/html": lineage_html(self)}

    # ----------------------------------------------------------------- recording
    def created(
        self, op: str, rows: np.ndarray, impl: str, site: Site, traced: bool, obj: Any = None
    ) -> None:
        """Keys made from a seed or from key data (``key``, ``PRNGKey``, ``wrap_key_data``);
        ``obj``, the key array made (a single key is known by its object from now on)."""
        with self._lock:
            self._flush_calls()
            event = self._event(op, "create", (), rows.shape[:-1], "key", site, traced)
            origin = "wrap" if op == "wrap_key_data" else "seed"
            self._add(_Pending(event, [None], rows, impl, origin, site, traced))
            if len(rows) == 1 and obj is not None:  # flushed at once (EAGER_KEYS)
                node = self._next_node - 1
                earlier = self._by_data.get(rows[0].tobytes())
                twin = earlier[-2] if isinstance(earlier, list) and len(earlier) > 1 else None
                if twin is not None and twin in self._single_roots:
                    self._same_seed[node] = self.site_of_node(twin)
                self._single_roots.add(node)
                self._remember(obj, node)
        self._notify()

    def derived(
        self,
        op: str,
        parents: np.ndarray | bytes,
        children: np.ndarray | None,
        impl: str,
        site: Site,
        traced: bool,
        obj: Any = None,
        out: Any = None,
        shape: tuple[int, ...] = (),
    ) -> list[KeyReuse]:
        """``split`` (consumes its key), ``fold_in`` and ``clone`` (do not); ``obj`` and
        ``out``, the key arrays given and made, when they are the user's objects. A split's
        ``children`` may be None: their data is read from ``out`` (of key shape ``shape``)
        when someone needs it, so recording does not wait for JAX to compute them."""
        with self._lock:
            lazy = op == "split" and children is None and out is not None
            if lazy and self._note(op, parents, impl, site, shape, None, traced, obj, out):
                found: list[KeyReuse] = []
            else:
                self._flush_calls()
                found = self._derived(op, parents, children, impl, site, traced, obj, out, shape)
        self._notify()
        return found

    def consumed(
        self,
        op: str,
        rows: np.ndarray | bytes,
        impl: str,
        shape: tuple[int, ...],
        dtype: str,
        site: Site,
        traced: bool,
        obj: Any = None,
    ) -> list[KeyReuse]:
        """A sampler drew from these keys (``obj``: the key array it was given); ``rows``,
        their data as rows of words, or one key's data as bytes."""
        with self._lock:
            if self._note(op, rows, impl, site, shape, dtype, traced, obj, None):
                found: list[KeyReuse] = []
            else:
                self._flush_calls()
                found = self._consumed(op, rows, impl, shape, dtype, site, traced, obj)
        self._notify()
        return found

    def _consumed(self, op, rows, impl, shape, dtype, site, traced, obj) -> list[Any]:
        inputs = self._inputs(rows, impl, site, traced, obj)
        event = self._event(op, "consume", tuple(inputs), shape, dtype, site, traced)
        return self._consume(inputs, event)

    def _derived(self, op, parents, children, impl, site, traced, obj, out, shape) -> list[Any]:
        inputs = self._inputs(parents, impl, site, traced, obj)
        made = children.shape[:-1] if children is not None else shape
        event = self._event(op, "derive", tuple(inputs), made, "key", site, traced)
        found = self._consume(inputs, event) if op == "split" else []
        # a split's children all descend from its one key; fold_in and clone pair up
        owners: list[int | None] = list(inputs) if op != "split" else [inputs[0]]
        later = out if children is None else None
        self._add(_Pending(event, owners, children, impl, op, site, traced, later))
        if children is not None and len(children) == 1 and out is not None and op != "split":
            self._remember(out, self._next_node - 1)  # a clone shares its key's data
        return found

    def called(self, call: Call) -> None:
        """A compiled function was called: replayed on its template when someone looks."""
        with self._lock:
            self._calls.append(call)
            if len(self._calls) > MAX_CALLS:
                self._calls.popleft()
                self._dropped += 1
        self._notify()

    def traced_node(self, origin: str, parent: int | None, site: Site, event: int | None) -> int:
        """A key seen only while tracing (no data: it lived inside the compiled program)."""
        with self._lock:
            if self._noted:
                self._flush_calls()
            return self._new_node(b"", "", origin, parent, None, event, site, True)

    def traced_event(
        self,
        op: str,
        kind: str,
        inputs: tuple[int, ...],
        shape: tuple[int, ...],
        dtype: str,
        site: Site,
        reused: Iterable[tuple[int, int]] = (),
    ) -> int:
        """An event inside a loop body, recorded once when traced; ``reused`` are
        (node, earlier event) pairs the tracer saw consumed twice in one trace."""
        with self._lock:
            self._flush_calls()
            index = self._event(op, kind, inputs, shape, dtype, site, True, in_loop=True)
            for node in inputs:
                _add_one(self._consumers, node, index)
                if kind == "consume":
                    self._count_use(node, index)
            for node, earlier in reused:
                self._reuse(node, earlier, index)
        self._notify()
        return index

    # ----------------------------------------------------------------- compiled calls
    def _flush_all(self) -> None:
        self._flush_calls()
        self._flush()

    def _flush_calls(self) -> None:
        if self._noted:  # noted calls came first: none is noted while a call waits
            self._record_noted()
        while self._calls:  # (a loop: a replay may record calls of its own)
            self._replay(self._calls.popleft())

    def _replay(self, call: Call) -> None:
        from .replay import replay

        replay(self, call)

    # ----------------------------------------------------------------- noted calls
    def _note(self, op, raw, impl, site, shape, dtype, traced, obj, out) -> bool:
        """Note one eager draw (``dtype``) or split (``out``, its keys) of one key for
        later, when nothing is learnt from recording it now; False: record it now."""
        if (
            traced or obj is None or not isinstance(raw, bytes) or self._calls
            or raw in self._consumed_data  # consumed before: maybe a reuse, told at once
            or self._by_token  # keys known by their token: is this one's data theirs?
            or self._object_node(obj) is not None  # known by identity (a seed's own key)
            or len(self._noted) >= _NOTED_LIMIT
        ):  # fmt: skip
            return False
        try:  # the object, not kept alive: only needed if it is used again
            ref = weakref.ref(obj)
        except TypeError:
            return False
        at = len(self._noted)
        shape = _shared(shape)
        # flat, no container per call: fewer objects for the garbage collector to walk
        self._noted += (op, raw, impl, site, shape, dtype, ref, out)
        self._consumed_data.add(raw)
        self._data_from = self._token_base + 2 * at
        if out is not None:
            self._noted_split(at, shape[0] if len(shape) == 1 else 0, out)
        return True

    def _noted_split(self, at: int, count: int, out: Any) -> None:
        """A split into ``count`` keys (0: not one row of them) noted at ``at``: its keys
        known by object when unpacked, and their data read a few splits later (computed by
        then)."""
        if 0 < count <= EAGER_KEYS:
            self._outs[id(out)] = at
        unread = self._unread
        unread.append(at + 7)
        if len(unread) > UNREAD_SPLITS:
            self._read_unread()

    def _read_unread(self) -> None:
        """The older half of the unread splits' keys read, at once (fewer calls)."""
        noted, outs, unread = self._noted, self._outs, self._unread
        old = [unread.popleft() for _ in range(UNREAD_SPLITS // 2)]
        arrays = [noted[i] for i in old]
        for where, blob in zip(old, data_bytes(arrays), strict=True):
            noted[where] = blob  # holds nothing of the key array
        for array in arrays:  # (most were unpacked: out already)
            outs.pop(id(array), None)

    def note_kid(
        self, op: str, known: tuple[Any, int, str], site: Site, out: Any, count: Any
    ) -> bool:
        """Note an eager draw or a split (``count``, the number of keys it made; None for
        a draw) of a key unpacked from a noted split, ``known`` (its entry in ``kids``,
        taken out) and its data unread: a loop's common case. False when it may be a reuse
        (the caller then records it with its data, and a reuse is told at once). What the
        records need of ``out`` is kept as it comes (its shape, its dtype), named when the
        records are made. The wrappers call this on every draw: it is written for speed."""
        token = known[1]
        with self._lock:
            noted = self._noted
            if token < self._data_from or self._calls or len(noted) >= _NOTED_LIMIT:
                return False  # a call noted by data since (of its data?), or calls waiting
            # no reference to the key: nothing made here outlives the call (each object
            # that survives brings the garbage collector's next full pass nearer)
            if count is None:
                try:
                    noted += (op, token, known[2], site, out.shape, out.dtype, None, None)
                except AttributeError:  # not an array (no sampler of JAX's returns one)
                    return False
            elif type(count) is int:
                at = len(noted)
                noted += (op, token, known[2], site, count, None, None, out)
                self._noted_split(at, count, out)
            else:  # a split into an array of keys: its shape is read
                return False
        if self._subscribers:
            self._notify()
        return True

    def unpacked(self, array: Any, keys: Iterator[Any]) -> Iterator[Any]:
        """``array``, a key array, is being unpacked into ``keys`` (JAX's iterator of them):
        when it is a noted split's result unpacked for the first time, each key is known by
        its object from now on, as that split's i-th key, and a call given it needs no read
        of its data (the keys of a second unpacking are read: a use of both is a reuse)."""
        at = self._outs.pop(id(array), None)
        if at is None:
            return keys
        # no lock: a token of a _noted that ended meanwhile is below _data_from when used
        base, noted, kids = self._token_base, self._noted, self.kids
        if at + 7 >= len(noted) or noted[at + 7] is not array:  # recorded since
            return keys
        made = tuple(keys)
        if len(kids) > MAX_KIDS:  # the dead out (a loop's keys die as it goes on)
            with self._lock:  # (no other thread clears it while it is walked)
                for dead in [i for i, k in kids.items() if k[0]() is None]:
                    del kids[dead]  # in place: the wrappers hold this dict
                if len(kids) > MAX_KIDS // 2:
                    kids.clear()  # (those keys are then read when used: slower, correct)
        token, impl = base + 2 * at, noted[at + 2]  # + the index (at: a multiple of _NOTE, < 16)
        for i, key in enumerate(made):
            kids[id(key)] = (weakref.ref(key), token + i, impl)
        self._by_token = True
        return iter(made)

    def _record_noted(self) -> None:
        """Make the records of the noted calls, in order, as if made when called."""
        noted, self._noted = self._noted, []
        self._unread.clear()
        self._outs.clear()
        self.kids.clear()
        self._by_token = False
        self._token_base += _TOKENS
        self._data_from = self._token_base - 1
        for at in range(0, len(noted), _NOTE):
            op, raw, impl, site, shape, dtype, ref, out = noted[at : at + _NOTE]
            shape = (shape,) if type(shape) is int else _shared(shape)  # (a split's count)
            if type(raw) is int:  # a key's token: key t % 16 of the split noted at t // 16 * 8
                t = raw % _TOKENS
                raw = noted[t // 16 * 8 + 7][t % 16].tobytes()  # (its keys read by now)
                obj = None  # known by its data: the newest key of that data not yet used
            else:
                obj = ref()
                obj = _GONE if obj is None else obj  # "a key object", one never seen again
            if dtype is None:  # a split: `out`, its keys (or their data, read already)
                blob = out if isinstance(out, bytes) else data_bytes([out])[0]
                count = math.prod(shape)
                out = noted[at + 7] = np.frombuffer(blob, np.uint8).reshape(count, -1)
                found = self._derived(op, raw, None, impl, site, False, obj, out, shape)
            else:
                dtype = dtype if type(dtype) is str else dtype_name(dtype)
                found = self._consumed(op, raw, impl, shape, dtype, site, False, obj)
            self._unwarned.extend(found)  # none: data consumed before is never noted

    # ----------------------------------------------------------------- internals
    def _event(self, op, kind, inputs, shape, dtype, site, traced, in_loop=False) -> int:
        index = self._next_event
        self._next_event += 1
        site_id = self._site_id(site)
        self._events[index] = (op, kind, inputs, tuple(shape), dtype, site_id, traced, in_loop)
        self._event_cache = None
        if len(self._events) > MAX_EVENTS:
            for old in list(self._events)[: max(1, MAX_EVENTS // 10)]:
                del self._events[old]
        return index

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
        return self._site_list[self._nodes[node][6]]

    def node_record(self, node: int) -> KeyNode:
        """A held node as a record."""
        n = self._nodes[node]
        return KeyNode(node, n[0].hex(), *n[1:6], self._site_list[n[6]], n[7])

    def event_record(self, index: int) -> KeyEvent:
        """A held event as a record."""
        op, kind, inputs, shape, dtype, site, traced, in_loop = self._events[index]
        where = self._site_list[site]
        return KeyEvent(index, op, kind, inputs, shape, dtype, where, traced, in_loop)

    def _add(self, pending: _Pending) -> None:
        self._pending.append(pending)
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
            self._made(p.origin, p.site, p.traced, parent, count)  # once, with the count
            for i in range(count):
                self._node(
                    blob[i * width : (i + 1) * width], p.impl, p.origin, parent,
                    i if split else None, p.event, p.site, p.traced,
                )  # fmt: skip

    def _lookup(self, raw: bytes) -> list[int]:
        if self._pending:  # the newest keys first: an older key of the same data may be
            self._flush()  # one a cell that ran before made (a cell run twice, one seed)
        ids = self._by_data.get(raw)
        if ids is None:
            return []
        return [ids] if isinstance(ids, int) else ids

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
            self._single_roots.add(node)
            self._remember(obj, node)
            return node
        if not ids:  # made before tracking began, or where jaxlab could not see
            node = self._new_node(raw, impl, "unknown", None, None, None, site, traced)
            if obj is not None:
                self._single_roots.add(node)
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
        node = self._next_node
        self._next_node += 1
        self._nodes[node] = (raw, impl, origin, parent, index, event, self._site_id(site), traced)
        self._node_cache = None
        if raw:  # one node per data, a list only for clones (fewer objects to make)
            _add_one(self._by_data, raw, node)
        if len(self._nodes) > MAX_NODES:
            self._forget(max(1, MAX_NODES // 10))
        return node

    def _forget(self, count: int) -> None:
        old = list(self._nodes)[:count]
        for node in old:
            raw = self._nodes.pop(node)[0]
            self._consumers.pop(node, None)
            self._consumed_by.pop(node, None)
            self._single_roots.discard(node)
            self._same_seed.pop(node, None)
            ids = self._by_data.get(raw)
            if isinstance(ids, list) and node in ids:
                ids.remove(node)  # (none left: out, as one is when held as an int)
            if ids == node or ids == []:
                del self._by_data[raw]
        self._dropped += len(old)
        if len(self._consumed_data) > MAX_NODES + MAX_NOTED:  # the forgotten keys' data out
            held = (self._nodes[n][0] for n in self._consumed_by if n in self._nodes)
            noted = (raw for raw in self._noted[1::_NOTE] if type(raw) is bytes)
            self._consumed_data = {*held, *noted}

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


_SESSION = KeyLineage()


def key_lineage() -> KeyLineage:
    """The session's key lineage (empty until ``track_keys()`` or ``%keys on``).

    Example::

        with jaxlab.track_keys():
            k1, k2 = jax.random.split(jax.random.key(0))
            jax.random.normal(k1, (3,))
        jaxlab.key_lineage().nodes    # the seed and its two children
    """
    return _SESSION
