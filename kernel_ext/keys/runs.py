"""The records of an eager loop's noted calls, a run at a time.

``key, sub = split(key)`` then a draw from ``sub``, in a loop: every call after the first is
noted by a token (the split that made its key, the key's index there) and its records are
made when the lineage is next read (``KeyRecorder._record_noted``). This module makes them
for a run of such calls at once: one pass over the run that finds each call's key (by
arithmetic on the tokens: no look-up of key data) and writes its event, and a split's two
keys; then the maps from keys to the events that consumed them, the data consumed and the
per-site table, each updated once for the whole run. The records are those the call-by-call
way makes, in the same order, with the same numbers (``tests/test_key_runs.py`` compares
the two on the same calls).

A run ends at the first call that is not such a call (a key read by its data, a split into
other than two keys, a key forgotten or consumed already): the call-by-call way records it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import store as _store
from .calls import DTYPE_NAMES, data_bytes, dtype_name
from .store import _NOTE, _TOKENS

CHUNK = 1024  # calls recorded together at most
_TWO = (2,)  # a split's shape: two keys


def record_run(
    recorder: Any, noted: list[Any], at: int, firsts: dict[int, int], rows: dict[Any, Any],
    aval: str, shapes: dict[Any, Any], shared: Any,
) -> int:  # fmt: skip
    """Make the records of the run of token calls that starts at ``at`` in ``noted`` (an
    eager loop's draws, and its splits into two keys); returns where in ``noted`` the run
    ended (``at`` when the call there is not one). ``firsts``: where in ``noted`` a split
    is -> its first key's node, read and written; ``rows``: the site table's rows by
    (op, site, the key's origin, its site), read and written; ``aval``: the dtype a draw is
    noted with; ``shapes`` and ``shared``: one tuple per shape."""
    end = min(len(noted), at + CHUNK * _NOTE)
    nodes, events = recorder._nodes, recorder._events
    node_rows, event_rows = nodes.flat, events.flat
    # past a cap the oldest tenth is forgotten, as the call-by-call way forgets it: right
    # after the call that went past (the run ends with that call)
    most_events, most_nodes = _store.MAX_EVENTS * 8, _store.MAX_NODES * 8
    consumed, site_ids, site_id_of = recorder._consumed_by, recorder._site_ids, recorder._site_id
    base, names = nodes.base, DTYPE_NAMES
    made = base + len(node_rows) // 8  # the node the next key made gets
    first_made, first_event = made, events.base + len(event_rows) // 8
    index = first_event
    used: list[int] = []  # each call's key (its node), in order
    keys: list[tuple[Any, ...]] = []  # each call's site-table row key, in order
    splits = 0
    j = at
    while j < end:
        op, raw, impl, site, shape, dtype, _, out = noted[j : j + _NOTE]
        if type(raw) is not int:
            break
        split = dtype is None
        if split and (shape != 2 or type(shape) is not int):
            break  # a split into other than two keys: the call-by-call way
        if not split and dtype is not aval:
            break
        t = raw % _TOKENS
        first = firsts.get(t // 16 * 8)
        if first is None:
            break
        node = first + t % 16
        if node < base or node in consumed:
            break  # forgotten, or used already: known by its data
        site_id = site_ids.get(id(site))
        if site_id is None:
            site_id = site_id_of(site)
        at_node = (node - base) * 8  # its key's row: data, origin, site
        origin, made_at = node_rows[at_node + 2], node_rows[at_node + 6]
        if split:
            event_rows += (op, "derive", node, _TWO, "key", site_id, False, False)
            blob = out if type(out) is bytes else data_bytes([out])[0]
            width = len(blob) // 2
            noted[j + 7] = (blob, width)  # for the tokens of its keys
            firsts[j] = made
            made += 2
            splits += 1
            node_rows += (
                blob[:width], impl, op, node, 0, index, site_id, False,
                blob[width:], impl, op, node, 1, index, site_id, False,
            )  # fmt: skip
        else:
            kind_shape = shape.shape
            event_rows += (
                op, "consume", node, shapes.get(kind_shape) or shared(kind_shape),
                names.get(shape.dtype) or dtype_name(shape.dtype), site_id, False, False,
            )  # fmt: skip
        used.append(node)
        keys.append((op, site_id, origin, made_at))
        index += 1
        j += _NOTE
        if len(event_rows) > most_events or len(node_rows) > most_nodes:
            break
    if j == at:
        return at
    _consumed(recorder, used, first_event, first_made, node_rows, base)
    _count_rows(recorder, keys, first_event, rows)
    if len(event_rows) > most_events:
        recorder._drop_events()
    if len(node_rows) > most_nodes:
        recorder._forget(max(1, _store.MAX_NODES // 10))
    return j


def _consumed(
    recorder: Any, used: list[int], first_event: int, first_made: int, node_rows: list[Any],
    base: int,
) -> None:  # fmt: skip
    """Each used key consumed by its call's event: the maps and the data consumed, at once."""
    consumers, consumed = recorder._consumers, recorder._consumed_by
    events = range(first_event, first_event + len(used))
    consumed.update(zip(used, events, strict=True))
    fresh = [node >= first_made for node in used]
    if all(fresh):  # keys made in this run: consumed by nothing else yet
        consumers.update(zip(used, events, strict=True))
    else:
        for node, event in zip(used, events, strict=True):
            _store._add_one(consumers, node, event)
    recorder._consumed_data.update(
        data for data in (node_rows[(node - base) * 8] for node in used) if data
    )


def _count_rows(
    recorder: Any, keys: list[tuple[Any, ...]], first_event: int, rows: dict[Any, Any]
) -> None:
    """The per-site table told of the run's calls: a row made by its first call (as the
    call-by-call way makes it), then counted once for the rest."""
    sites = recorder._site_list
    for key, calls in Counter(keys).items():
        op, site_id, origin, made_at = key
        split = op == "split"  # (a split is noted as "split"; a draw by its sampler's name)
        each = 2 if split else 1
        row = rows.get(key)
        if row is None:
            up = (origin, sites[made_at].where)
            first = first_event + keys.index(key)
            row = recorder._table_row(rows, split, op, sites[site_id], up, first, each)
            rows[key] = row
            calls -= 1
        row.count += each * calls
