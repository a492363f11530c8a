"""Keys known by their object: a key unpacked from an eager split (``key, sub = split(key)``)
is noted by its split and index, its data unread, and means exactly what it means when
read: the same records, and every reuse told at once."""

from __future__ import annotations

import gc
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import jax
import numpy as np
import pytest

from jaxlab import JaxlabWarning, key_lineage, track_keys
from jaxlab.keys import events

pytestmark = pytest.mark.usefixtures("fresh_lineage")


def loop(steps: int) -> None:
    key = jax.random.key(7)
    for i in range(steps):
        key, sub = jax.random.split(key)
        jax.random.normal(sub, (3,))
        if i % 3 == 0:
            jax.random.uniform(jax.random.fold_in(key, i))  # by data, between the tokens


@contextmanager
def notes_by_token(known: bool = True) -> Iterator[list[bool]]:
    """Each call's answer to "noted by its token?" (the wrappers bind the lineage's
    method when tracking starts: start it inside); not ``known``, every key is read
    instead, as before tokens."""
    lineage, by_token = key_lineage(), []
    note_kid = lineage.note_kid

    def counted(*args):
        by_token.append(known and note_kid(*args))
        return by_token[-1]

    lineage.note_kid = counted
    try:
        yield by_token
    finally:
        del lineage.note_kid


def lineage_of(steps: int, known: bool) -> dict:
    lineage = key_lineage()
    lineage.clear()
    with notes_by_token(known) as by_token, track_keys():
        loop(steps)
    return {**lineage.to_dict(), "by token": sum(by_token)}


def test_keys_known_by_their_split_give_the_records_their_data_gives():
    steps = 4 * events.UNREAD_SPLITS
    known, read = lineage_of(steps, True), lineage_of(steps, False)
    assert known.pop("by token") > steps  # the loop's draws and splits took the token path
    assert read.pop("by token") == 0
    assert known == read
    nodes = known["nodes"]
    assert len(nodes) == 1 + 2 * steps + len(range(0, steps, 3))
    assert all(n["data"] for n in nodes)  # every key's data, read when its split was


def test_a_split_unpacked_is_held_only_until_its_batched_read():
    """A split's keys are read a few splits after it, together with the splits before
    (read at once, the buffer would wait for JAX): the lineage holds the split's array
    until then, and no longer, and its keys' data is in the records."""
    with track_keys():
        key, _ = jax.random.split(jax.random.key(2))  # its keys known by object
        out = jax.random.split(key)  # noted by token, its array unread
        held = weakref.ref(out)
        a, b = out
        del out
        gc.collect()
        assert held() is not None  # waits for the batched read
        key = a
        for _ in range(events.UNREAD_SPLITS + 1):
            key, sub = jax.random.split(key)
            jax.random.normal(sub)
        gc.collect()
        assert held() is None
        jax.random.normal(b)
    made = {n["data"] for n in key_lineage().to_dict()["nodes"]}
    assert {bytes(np.asarray(jax.random.key_data(k))).hex() for k in (a, b)} <= made


def drawn_twice_by_one_object():
    key = jax.random.key(0)
    for _ in range(3):
        key, sub = jax.random.split(key)
        jax.random.normal(sub)
    jax.random.normal(sub)  # sub again


def a_split_unpacked_twice():
    key, _ = jax.random.split(jax.random.key(1))  # a noted split: its keys known unpacked
    out = jax.random.split(key)
    a, _ = out
    c, _ = out  # the same key again, another object
    jax.random.normal(a)
    jax.random.normal(c)


def taken_by_index_then_unpacked():
    key, _ = jax.random.split(jax.random.key(2))
    out = jax.random.split(key)
    jax.random.normal(out[0])  # read by its data (indexing is not watched)
    a, _ = out
    jax.random.normal(a)  # the same key, known by its split: not a fresh one


def copied_to_another_object():
    key, _ = jax.random.split(jax.random.key(3))
    a, _ = jax.random.split(key)
    jax.random.normal(a)
    jax.random.normal(jax.device_put(a))  # its data, another object


@pytest.mark.parametrize(
    "program",
    [drawn_twice_by_one_object, a_split_unpacked_twice, taken_by_index_then_unpacked,
     copied_to_another_object],
)  # fmt: skip
def test_a_reuse_of_a_key_known_by_its_split_is_told_at_once(program):
    with track_keys(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        program()  # the warning comes while the program runs, not when tracking ends
        told = [str(w.message) for w in caught if issubclass(w.category, JaxlabWarning)]
    assert len(told) == 1 and "reused" in told[0]
    assert len(key_lineage().reuses) == 1


def test_the_watch_is_on_only_while_tracking():
    cls = type(jax.random.key(0))
    jax_own = cls.__iter__
    with track_keys():
        assert cls.__iter__ is not jax_own
        assert cls.__iter__.__wrapped__ is jax_own
    assert cls.__iter__ is jax_own


def test_unpacking_is_unchanged_for_the_user():
    out = jax.random.split(jax.random.key(4), 3)
    with track_keys():
        key, _ = jax.random.split(jax.random.key(5))
        noted = jax.random.split(key, 3)
        watched = [np.asarray(jax.random.key_data(k)) for k in noted]
        assert len(key_lineage().kids) >= 3  # the watch took these keys (not JAX's own path)
        assert [type(k) for k in noted] == [type(k) for k in out]
        with pytest.raises(TypeError, match="0-d key array"):
            iter(jax.random.key(6))  # JAX's own error, from JAX's own method
    plain = [np.asarray(jax.random.key_data(k)) for k in noted]  # JAX's own iteration again
    assert np.array_equal(np.stack(watched), np.asarray(jax.random.key_data(noted)))
    assert len(plain) == len(watched) == 3
    assert all(np.array_equal(a, b) for a, b in zip(plain, watched, strict=True))


def test_keys_known_beyond_the_bound_are_read_and_mean_the_same(monkeypatch):
    monkeypatch.setattr(events, "MAX_KIDS", 6)  # a loop that keeps its keys for later
    with track_keys():
        key = jax.random.key(12)
        kept = []
        for _ in range(10):
            key, sub = jax.random.split(key)
            kept.append(sub)
        assert len(key_lineage().kids) <= 6 + 2
        for sub in kept:  # known by object or read: the same keys, none reused
            jax.random.normal(sub)
    lineage = key_lineage()
    assert lineage.reuses == ()
    assert len(lineage.nodes) == 1 + 2 * 10
    draws = [e for e in lineage.events if e.op == "normal"]
    assert len(draws) == 10 and len({e.inputs for e in draws}) == 10


# Samplers whose own code splits, loops or draws again (JAX's internals, not jax.random's
# namespace): a draw from a key known by its split runs JAX's function unpaused.
DRAWS = [
    ("normal", ((3,),)), ("uniform", ((2,),)), ("bernoulli", (0.3, (4,))),
    ("randint", ((3,), 0, 9)), ("categorical", (jax.numpy.zeros(5),)),
    ("choice", (7, (3,))), ("permutation", (6,)), ("gamma", (2.0, (3,))),
    ("beta", (2.0, 3.0)), ("dirichlet", (jax.numpy.ones(3),)), ("poisson", (3.0, (2,))),
    ("t", (4.0, (2,))), ("truncated_normal", (-1.0, 1.0, (2,))),
    ("multivariate_normal", (jax.numpy.zeros(2), jax.numpy.eye(2))),
    ("orthogonal", (3,)), ("ball", (2,)), ("binomial", (5, 0.5)),
]  # fmt: skip


def draws(key: jax.Array) -> list:
    found = []
    for name, args in DRAWS:
        key, sub = jax.random.split(key)
        found.append(getattr(jax.random, name)(sub, *args))
    return found


def test_each_sampler_drawn_from_a_key_known_by_its_split_is_one_event():
    plain = draws(jax.random.key(20))
    with notes_by_token() as by_token, track_keys():
        tracked = draws(jax.random.key(20))
    # every call took the short path but one: the seed's split (recorded at once, the
    # seed known by its object; its keys are then known by their token as a noted split's)
    assert sum(by_token) == 2 * len(DRAWS) - 1
    assert all(np.array_equal(a, b) for a, b in zip(plain, tracked, strict=True))
    ops = [e.op for e in key_lineage().events]
    assert ops == ["key"] + [op for name, _ in DRAWS for op in ("split", name)]
    assert key_lineage().reuses == ()
    assert len(key_lineage().nodes) == 1 + 2 * len(DRAWS)


def pairs(steps: int, seed: int = 3) -> None:
    key = jax.random.key(seed)
    for _ in range(steps):
        key, sub = jax.random.split(key)
        jax.random.normal(sub, (3,))


def test_a_cell_run_again_from_one_seed_is_noted_by_token_and_its_keys_are_new():
    """The second run of a loop from the same seed: every key's data was consumed by the
    first run, so none is noted by data; its keys are known by their splits' tokens all the
    same (no read each), they are new keys (no reuse), and a reuse in it is still told."""
    key_lineage().clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with notes_by_token() as first, track_keys():
            pairs(30)
        with notes_by_token() as again, track_keys():
            pairs(30)
    lineage = key_lineage()
    assert lineage.reuses == ()
    assert sum(again) == 2 * 30 - 1 and sum(first) == sum(again)  # all but the seed's split
    assert len([e for e in lineage.events if e.op == "split"]) == 60
    draws = [e for e in lineage.events if e.op == "normal"]
    assert len({e.inputs for e in draws}) == 60  # 60 draws, 60 keys
    with pytest.warns(JaxlabWarning, match="normal"), track_keys():
        key = jax.random.key(3)
        for _ in range(3):
            key, sub = jax.random.split(key)
        jax.random.normal(sub, (2,))
        jax.random.normal(sub, (2,))
    assert len(key_lineage().reuses) == 1


def test_a_loop_run_twice_by_token_gives_the_records_its_data_gives():
    """Records made in line for keys known by their token (an eager loop's every call,
    its second run from the same seed too) are those the general way makes from data."""
    found = []
    for known in (True, False):
        key_lineage().clear()
        with notes_by_token(known) as by_token, track_keys():
            pairs(4 * events.UNREAD_SPLITS)
            jax.random.normal(jax.random.key(9))  # recorded by data: the noted made first
            pairs(4 * events.UNREAD_SPLITS)
        found.append({**key_lineage().to_dict(), "by token": sum(by_token)})
    known, read = found
    assert known.pop("by token") == 2 * (2 * 4 * events.UNREAD_SPLITS - 1)
    assert read.pop("by token") == 0
    assert known == read
    assert known["reuses"] == []


def test_records_by_token_past_the_caps_are_those_its_data_gives(monkeypatch):
    """Past the store's caps the oldest keys and events are forgotten alike, whichever
    way the records were made (a 100,000-pair cell runs past them)."""
    from jaxlab.keys import store

    monkeypatch.setattr(store, "MAX_NODES", 60)
    monkeypatch.setattr(store, "MAX_EVENTS", 50)
    found = []
    for known in (True, False):
        key_lineage().clear()
        with notes_by_token(known) as by_token, track_keys():
            pairs(80)
        found.append({**key_lineage().to_dict(), "by token": sum(by_token)})
    known, read = found
    assert known.pop("by token") > 100 and read.pop("by token") == 0
    assert known == read
    assert known["dropped"] > 0 and len(known["nodes"]) <= 60 and len(known["events"]) <= 50


def site_rows() -> list[tuple]:
    table = key_lineage().sites
    rows = [*table.keys.values(), *table.uses.values()]
    under = {parent: [r.id for r in found] for parent, found in table.under.items()}
    return [(r.id, r.key, r.count, r.label, r.parent, r.reused, r.site) for r in rows] + [under]


def test_the_site_table_counts_records_made_in_line_as_it_counts_those_made_from_data():
    """The per-site table (what large views draw) counts a call recorded in line, on the
    row the table made for its first call, as it counts one recorded from its data: the
    same rows, in the same order, with the same counts (past the caps too)."""
    found = []
    for known in (True, False):
        key_lineage().clear()
        with notes_by_token(known) as by_token, track_keys():
            loop(4 * events.UNREAD_SPLITS)
            pairs(3 * events.UNREAD_SPLITS)
            jax.random.normal(jax.random.key(9))  # recorded by data: the noted made first
            pairs(3 * events.UNREAD_SPLITS)
            key_lineage().to_dict()  # read: every noted call recorded
        found.append((site_rows(), sum(by_token)))
    (known, by_token), (read, none) = found
    assert by_token > 8 * events.UNREAD_SPLITS and none == 0
    assert known == read
    counts = {row[1]: row[2] for row in known[:-1]}
    normals = sum(n for key, n in counts.items() if key[0] == "normal")
    assert normals == 10 * events.UNREAD_SPLITS + 1  # (and the one of key 9)
