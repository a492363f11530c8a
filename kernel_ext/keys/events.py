"""Recording key lineage: the wrappers' calls, noted or recorded, and compiled calls
replayed into the store.

Consuming a key means what it means to ``jax_debug_key_reuse``: ``split`` and every
sampler consume it, ``fold_in`` and ``clone`` do not. A key consumed a second time is a
:class:`~jaxlab.keys.model.KeyReuse`.

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
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .calls import Call, data_bytes, dtype_name
from .model import KeyReuse
from .replay import replay
from .runs import record_run
from .site import Site
from .store import (
    _AVAL,
    _GONE,
    _NOTE,
    _NOTED_LIMIT,
    _TOKENS,
    EAGER_KEYS,
    MAX_REUSES,
    KeyStore,
    _add_one,
    _shared,
)
from .store import _Pending as _Pending

MAX_CALLS = 10_000  # calls of compiled functions waiting to be replayed
UNREAD_SPLITS = 16  # a noted split's keys are read this many splits on, half at a time
_RECORDED = "<recorded split>"  # a split recorded when called, in _noted for its keys' tokens
MAX_KIDS = 4096  # keys known by their split's index (beyond, the dead are dropped)


def _row(held: tuple[bytes, int], i: int) -> bytes:
    """Key ``i``'s data of a split's keys held as (their bytes, each key's width)."""
    blob, width = held
    return blob[i * width : (i + 1) * width]


class KeyRecorder(KeyStore):
    """The store, filled: what the ``jax.random`` wrappers, the compiled calls and the
    traces tell it, and the reuses found, for the caller to warn about."""

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
                node, raw = self._next_node - 1, rows[0].tobytes()
                twin = self._root_data.get(raw)  # the newest key made before from this seed
                if twin is not None and twin in self._single_roots:
                    self._same_seed[node] = self.site_of_node(twin)
                self._root(node, raw)
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
                if lazy and not traced and len(shape) == 1 and 0 < shape[0] <= EAGER_KEYS:
                    self._known_split(impl, site, shape[0], out)
        self._notify()
        return found

    def _known_split(self, impl: str, site: Site, count: int, out: Any) -> None:
        """A split just recorded (nothing noted before it: noted calls are recorded first)
        whose keys are known by object once unpacked, as a noted split's are: a cell run
        again from one seed (its keys' data consumed before, so never noted by data) then
        notes its loop's calls as the first run did, with no read of their data. Its entry
        in ``_noted`` only holds the keys for their tokens; it records nothing."""
        if self._calls or self._noted or len(self._noted) >= _NOTED_LIMIT:
            return
        self._noted += (_RECORDED, None, impl, site, count, None, self._last_pending, out)
        self._noted_split(0, count, out)

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

    def _consumed(self, op, rows, impl, shape, dtype, site, traced, obj, node=None) -> list[Any]:
        inputs = self._inputs(rows, impl, site, traced, obj) if node is None else [node]
        event = self._event(op, "consume", tuple(inputs), shape, dtype, site, traced)
        return self._consume(inputs, event)

    def _derived(
        self, op, parents, children, impl, site, traced, obj, out, shape, node=None
    ) -> list[Any]:
        inputs = self._inputs(parents, impl, site, traced, obj) if node is None else [node]
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
            replay(self, self._calls.popleft())

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
        known by object when unpacked, and their data read a few splits later, in a batch
        (computed by then: no wait for JAX)."""
        if 0 < count <= EAGER_KEYS:
            self._outs[id(out)] = at
        unread = self._unread
        unread.append(at + 7)
        if len(unread) > UNREAD_SPLITS:
            self._read_unread()

    def _read_unread(self) -> None:
        """The older half of the unread splits' keys read, at once (fewer calls): the
        lineage holds a split's array until then, never longer."""
        noted, outs, unread = self._noted, self._outs, self._unread
        old = [unread.popleft() for _ in range(UNREAD_SPLITS // 2)]  # (none read yet)
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
        records need of ``out`` is kept as it comes (its aval: shape and dtype), named when the
        records are made. The wrappers call this on every draw: it is written for speed."""
        token = known[1]
        with self._lock:
            noted = self._noted
            if token < self._data_from or self._calls or len(noted) >= _NOTED_LIMIT:
                return False  # a call noted by data since (of its data?), or calls waiting
            # no reference to the key: nothing made here outlives the call (each object
            # that survives brings the garbage collector's next full pass nearer)
            if count is None:  # its abstract value: JAX's own, one per shape and dtype
                try:
                    noted += (op, token, known[2], site, out.aval, _AVAL, None, None)
                except AttributeError:  # not an array (no sampler of JAX's returns one)
                    return False
            elif type(count) is int:  # (_noted_split, in line)
                at = len(noted)
                noted += (op, token, known[2], site, count, None, None, out)
                if 0 < count <= EAGER_KEYS:
                    self._outs[id(out)] = at
                unread = self._unread
                unread.append(at + 7)
                if len(unread) > UNREAD_SPLITS:
                    self._read_unread()
            else:  # a split into an array of keys: its shape is read
                return False
        if self._subscribers:
            self._notify()
        return True

    def unpacked(self, array: Any, keys: Iterator[Any]) -> Iterator[Any]:
        """``array``, a key array, is being unpacked into ``keys`` (JAX's iterator of them):
        when it is a noted split's result unpacked for the first time, each key is known by
        its object from now on, as that split's i-th key, and a call given it needs no read
        of its data (the keys of a second unpacking are read: a use of both is a reuse).
        The split's keys' data is read later, with the next unread splits' (``_read_unread``):
        read now, the buffer would first wait for JAX to compute it (measured on CPU, about
        8 µs a split at once against 3 µs a few splits later)."""
        at = self._outs.pop(id(array), None)
        if at is None:
            return keys
        # no lock: a token of a _noted that ended meanwhile is below _data_from when used
        base, noted, kids = self._token_base, self._noted, self.kids
        if at + 7 >= len(noted) or noted[at + 7] is not array:  # recorded since
            return keys
        made = tuple(keys)
        if len(kids) > MAX_KIDS:
            self.drop_dead_kids()
        token, impl = base + 2 * at, noted[at + 2]  # + the index (at: a multiple of _NOTE, < 16)
        for i, key in enumerate(made):
            kids[id(key)] = (weakref.ref(key), token + i, impl)
        self._by_token = True
        return iter(made)

    def drop_dead_kids(self) -> None:
        """The keys known by their token that died, forgotten (a loop's keys die as it
        goes on); when most live, all (those are then read when used: slower, correct)."""
        kids = self.kids
        with self._lock:  # (no other thread clears it while it is walked)
            for dead in [i for i, k in kids.items() if k[0]() is None]:
                del kids[dead]  # in place: the wrappers hold this dict
            if len(kids) > MAX_KIDS // 2:
                kids.clear()

    def _record_noted(self) -> None:
        """Make the records of the noted calls, in order, as if made when called. A call of
        a key known by its token (neither forgotten nor used: an eager loop's every call)
        is recorded here, in line: its event, and a split's keys, one node each, with no
        look-up of its key and no wait in ``_pending``; its row of the site table counted
        on the row itself once the table has made it. Any other call goes through
        ``_derived``/``_consumed`` with its key's data."""
        noted, self._noted = self._noted, []
        self._unread.clear()
        self._outs.clear()
        self.kids.clear()
        self._by_token = False
        self._token_base += _TOKENS
        self._data_from = self._token_base - 1
        # where in `noted` a split is -> its first key's node: a key known by its token is
        # that split's i-th key, found with no look-up of its data (a flat walk, in order)
        firsts: dict[int, int] = {}
        nodes, consumed = self._nodes, self._consumed_by
        rows: dict[tuple[Any, ...], Any] = {}  # (op, site, key's origin, its site) -> table row
        resume = 0  # where the last run of token calls recorded at once ended
        for at in range(0, len(noted), _NOTE):
            if at < resume:
                continue
            if type(noted[at + 1]) is int and not self._pending:  # a loop's calls: at once
                resume = record_run(self, noted, at, firsts, rows)
                if resume > at:
                    continue
            op, raw, impl, site, shape, dtype, ref, out = noted[at : at + _NOTE]
            if op is _RECORDED:  # a split recorded when called: its keys' data, for tokens
                blob = out if isinstance(out, bytes) else data_bytes([out])[0]
                noted[at + 7] = np.frombuffer(blob, np.uint8).reshape(shape, -1)
                if ref is not None:
                    rows.clear()  # (the table may forget rows when it makes one)
                    self._flush()  # its keys made (their data read now, once)
                    if ref.first >= 0:
                        firsts[at] = ref.first
                continue
            if dtype is _AVAL:  # a draw noted by its result's abstract value
                shape, dtype = shape.shape, shape.dtype
            split, node = dtype is None, None
            if split:  # (noted by its count: its keys' shape)
                shape = (shape,) if type(shape) is int else _shared(shape)
            else:
                shape = _shared(shape)
            if type(raw) is int:  # a key's token: key t % 16 of the split noted at t // 16 * 8
                t = raw % _TOKENS
                where, i = t // 16 * 8, t % 16
                first = firsts.get(where)
                node = None if first is None else first + i
                if node is not None and (node < nodes.base or node in consumed):
                    node = None  # forgotten, or used: known by its data
                held = noted[where + 7]  # its keys read by now: rows, or (bytes, width)
                raw = held[i].tobytes() if type(held) is not tuple else _row(held, i)
                obj = None  # known by its data: the newest key of that data not yet used
            else:
                obj = ref()
                obj = _GONE if obj is None else obj  # "a key object", one never seen again
            rows.clear()  # (the table may forget rows when the general way makes one)
            if split:  # `out`, its keys (or their data, read already)
                blob = out if isinstance(out, bytes) else data_bytes([out])[0]
                count = math.prod(shape)
                out = noted[at + 7] = np.frombuffer(blob, np.uint8).reshape(count, -1)
                made = out if len(shape) == 1 else None  # one row each: made at once
                found = self._derived(op, raw, made, impl, site, False, obj, out, shape, node)
                if made is not None and self._last_pending is not None:
                    first = self._last_pending.first
                    if first >= 0:
                        firsts[at] = first
            else:
                dtype = dtype if type(dtype) is str else dtype_name(dtype)
                found = self._consumed(op, raw, impl, shape, dtype, site, False, obj, node)
            self._unwarned.extend(found)  # none: data consumed before is never noted
        if noted:
            self._event_cache = self._node_cache = None

    def _table_row(self, rows: dict[Any, Any], split: bool, op: str, site: Site, up: Any,
                   index: int, count: int) -> Any:  # fmt: skip
        """The site table told of a call recorded in line (as ``_made``/``_count_use``
        tell it) and its row returned, for the next calls of that row to count on. A new
        key row may make the table forget old ones: the rows kept are then dropped."""
        table = self.sites
        if split:
            before = len(table.keys)
            table.made((op, site.where), site, False, up, count)
            if len(table.keys) != before:  # a new row (and maybe old ones forgotten)
                rows.clear()
            return table.keys[(op, site.where)]
        key = (op, site.where, up)
        table.used(key, self._events[index], site)
        return table.uses[key]

    # ----------------------------------------------------------------- reuses to warn
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

    def take_unwarned(self) -> list[KeyReuse]:
        """Reuses found in compiled calls since the last time this was asked (the caller
        warns: after a jitted call, or when the cell ends)."""
        with self._lock:
            self._flush_all()
            found = self._unwarned[:MAX_REUSES]
            self._unwarned = []
            return found
