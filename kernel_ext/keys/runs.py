"""The records of an eager loop's noted calls, a run at a time.

``key, sub = split(key)`` then a draw from ``sub``, in a loop: every call after the first is
noted by a token (the split that made its key, the key's index there) and its records are
made when the lineage is next read (``KeyRecorder._record_noted``). This module makes them
for a run of such calls at once, column by column: each call's key found by NumPy
arithmetic on the tokens (no look-up of key data), then the event rows, the split's keys'
rows, the maps from keys to the events that consumed them, the data consumed and the
per-site table, each written once for the whole run. The records are those the
call-by-call way makes, in the same order, with the same numbers; past a cap the oldest are
forgotten after the same call (``tests/test_key_runs.py`` compares the two).

A run ends at the first call that is not such a call (a key read by its data, a split into
more than ``EAGER_KEYS`` keys, a key forgotten or consumed already): the call-by-call way
records it, by the key's data.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain, repeat
from typing import Any

import numpy as np

from . import store as _store
from .calls import DTYPE_NAMES, data_bytes, dtype_name
from .store import _AVAL, _NOTE, _SHAPES, _TOKENS, EAGER_KEYS, _shared

CHUNK = 1024  # calls recorded together at most


def record_run(
    recorder: Any, noted: list[Any], at: int, firsts: dict[int, int], rows: dict[Any, Any]
) -> int:
    """Make the records of the run of token calls that starts at ``at`` in ``noted`` (an
    eager loop's draws, and its splits into a few keys); returns where in ``noted`` the run
    ended (``at`` when the call there is not one). ``firsts``: where in ``noted`` a split
    is -> its first key's node, read and written; ``rows``: the site table's rows by
    (op, site, the key's origin, its site), read and written."""
    stop = min(len(noted), at + CHUNK * _NOTE)
    raws, counts = noted[at + 1 : stop : _NOTE], noted[at + 4 : stop : _NOTE]
    dtypes = noted[at + 5 : stop : _NOTE]
    few = EAGER_KEYS  # a split into at most this many keys: its keys known by their tokens
    fits = [  # a token; a draw, or a split into a few keys
        type(raw) is int and (dtype is _AVAL or (dtype is None and type(c) is int and 0 < c <= few))
        for raw, c, dtype in zip(raws, counts, dtypes, strict=True)
    ]  # fmt: skip
    n = fits.index(False) if False in fits else len(fits)
    if n == 0:
        return at
    nodes, events = recorder._nodes, recorder._events
    node_rows, event_rows = nodes.flat, events.flat
    base, made = nodes.base, nodes.base + len(node_rows) // 8  # (made: the next key's node)
    made_n = np.array(
        [c if d is None else 0 for c, d in zip(counts[:n], dtypes[:n], strict=True)], np.int64
    )
    made_first = made + np.cumsum(made_n) - made_n  # each split's first key's node
    tokens = np.array(raws[:n], np.int64) % _TOKENS
    where, kid = tokens // 16 * 8, tokens % 16  # the split's place in noted, the key's index
    inside = (where - at) // _NOTE  # that split among these calls (below 0: before them)
    found = np.full(n, -1, np.int64)
    ok = (inside >= 0) & (inside < np.arange(n))
    ok[ok] &= made_n[inside[ok]] > kid[ok]
    found[ok] = made_first[inside[ok]] + kid[ok]
    consumed = recorder._consumed_by
    for k in np.flatnonzero(inside < 0).tolist():  # a split recorded before them (a few)
        first = firsts.get(int(where[k]))
        node = -1 if first is None else first + int(kid[k])
        if node >= base and node not in consumed:
            found[k] = node
    bad = np.flatnonzero(found < 0)
    n = int(bad[0]) if len(bad) else n
    if len(set(found[:n].tolist())) < n:  # a key used twice (a token is used once): a reuse,
        n = _first_again(found[:n].tolist())  # told by the call-by-call way
    # past a cap the oldest tenth is forgotten right after the call that went past, as the
    # call-by-call way forgets it: the run ends with that call
    held_events = len(event_rows) // 8 + np.arange(1, n + 1)
    held_nodes = len(node_rows) // 8 + np.cumsum(made_n[:n])
    past = np.flatnonzero((held_events > _store.MAX_EVENTS) | (held_nodes > _store.MAX_NODES))
    n = int(past[0]) + 1 if len(past) else n
    if n == 0:
        return at
    end = at + n * _NOTE
    used = found[:n].tolist()
    ops, impls = noted[at:end:_NOTE], noted[at + 2 : end : _NOTE]
    site_ids, site_id_of = recorder._site_ids, recorder._site_id
    sids = [
        i if (i := site_ids.get(id(site))) is not None else site_id_of(site)
        for site in noted[at + 3 : end : _NOTE]
    ]
    first_event = events.base + len(event_rows) // 8
    counts = counts[:n]
    splits = np.flatnonzero(made_n[:n]).tolist()
    if splits:  # their keys, one node each, as the call-by-call way makes them
        _made(recorder, noted, at, splits, counts, ops, impls, sids, used, first_event)
        firsts.update(
            zip([at + k * _NOTE for k in splits], made_first[splits].tolist(), strict=True)
        )
    names = DTYPE_NAMES
    event_rows += chain.from_iterable(zip(
        ops,
        ["consume" if d is _AVAL else "derive" for d in dtypes[:n]],
        used,
        [(c,) if type(c) is int else _SHAPES.get(c.shape) or _shared(c.shape) for c in counts],
        ["key" if type(c) is int else names.get(c.dtype) or dtype_name(c.dtype)
         for c in counts],
        sids, repeat(False, n), repeat(False, n), strict=False,
    ))  # fmt: skip
    at_nodes = [(node - base) * 8 for node in used]
    origins = [node_rows[i + 2] for i in at_nodes]
    made_ats = [node_rows[i + 6] for i in at_nodes]
    _consumed(recorder, used, first_event, made, [node_rows[i] for i in at_nodes])
    each = [c if type(c) is int else 0 for c in counts]  # a split's keys; a draw: 0
    _count_rows(recorder, list(zip(ops, sids, origins, made_ats, each, strict=True)),
                first_event, rows)  # fmt: skip
    if len(event_rows) > _store.MAX_EVENTS * 8:
        recorder._drop_events()
    if len(node_rows) > _store.MAX_NODES * 8:
        recorder._forget(max(1, _store.MAX_NODES // 10))
    return end


def _first_again(used: list[int]) -> int:
    """Where in ``used`` a node comes for the second time."""
    seen: set[int] = set()
    for k, node in enumerate(used):
        if node in seen:
            return k
        seen.add(node)
    return len(used)


def _made(
    recorder: Any, noted: list[Any], at: int, splits: list[int], counts: list[Any],
    ops: list[str], impls: list[str], sids: list[int], used: list[int], first_event: int,
) -> None:  # fmt: skip
    """The keys of the run's splits (at ``splits`` among its calls), one node row each:
    data, impl, op, parent, index, event, site, traced."""
    outs = [noted[at + k * _NOTE + 7] for k in splits]
    unread = [i for i, out in enumerate(outs) if type(out) is not bytes]
    if unread:  # (the last few splits, not read in a batch yet: read now, together)
        for i, blob in zip(unread, data_bytes([outs[i] for i in unread]), strict=True):
            outs[i] = blob
    node_rows = recorder._nodes.flat
    for k, blob in zip(splits, outs, strict=True):
        count = counts[k]
        width = len(blob) // count
        noted[at + k * _NOTE + 7] = (blob, width)  # for the tokens of its keys
        op, impl, node, event, site = ops[k], impls[k], used[k], first_event + k, sids[k]
        for i in range(count):
            data = blob[i * width : (i + 1) * width]
            node_rows += (data, impl, op, node, i, event, site, False)


def _consumed(recorder: Any, used: list[int], first_event: int, made: int, data: list[Any]) -> None:
    """Each used key consumed by its call's event (``data``, each key's): the maps and the
    data consumed, at once. Keys from ``made`` on were made in this run: used by nothing
    else yet."""
    consumers, consumed = recorder._consumers, recorder._consumed_by
    events = range(first_event, first_event + len(used))
    consumed.update(zip(used, events, strict=True))
    older = [k for k, node in enumerate(used) if node < made]  # (a few: the run's first)
    held = [consumers.get(used[k]) for k in older]
    consumers.update(zip(used, events, strict=True))
    for k, before in zip(older, held, strict=True):
        if before is not None:  # its earlier consumers kept, this one added
            consumers[used[k]] = before
            _store._add_one(consumers, used[k], first_event + k)
    consumed_data = recorder._consumed_data
    consumed_data.update(data)
    consumed_data.discard(b"")  # (a traced key's: no data)
    consumed_data.discard(None)


def _count_rows(
    recorder: Any, keys: list[tuple[Any, ...]], first_event: int, rows: dict[Any, Any]
) -> None:
    """The per-site table told of the run's calls, ``keys`` (op, site, the key's origin, its
    site, the number of keys a split made, 0 for a draw): a row made by its first call (as the
    call-by-call way makes it), then counted once for the rest."""
    sites = recorder._site_list
    for key, calls in Counter(keys).items():
        op, site_id, origin, made_at, count = key
        split = count > 0
        cached = (op, site_id, origin, made_at)
        each = count if split else 1
        row = rows.get(cached)
        if row is None:
            up = (origin, sites[made_at].where)
            first = first_event + keys.index(key)
            row = recorder._table_row(rows, split, op, sites[site_id], up, first, each)
            rows[cached] = row
            calls -= 1
        row.count += each * calls
