"""An eager loop's token calls recorded a run at a time (``keys/runs``) make the records,
the reuses and the per-site table that recording every call by its key's data makes."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import pytest
from test_keys_unpacked import notes_by_token, pairs

from jaxlab import JaxlabWarning, key_lineage, track_keys
from jaxlab.keys import events, runs, store

pytestmark = pytest.mark.usefixtures("fresh_lineage")


def three_ways(steps: int) -> None:
    key = jax.random.key(4)
    for _ in range(steps):
        key, a, b = jax.random.split(key, 3)
        jax.random.uniform(a, (2,))
        jax.random.randint(b, (4,), 0, 9)


def nested(steps: int) -> None:
    key = jax.random.key(5)
    for _ in range(steps):
        key, sub = jax.random.split(key)
        first, second = jax.random.split(sub)
        jax.random.normal(second, (1,))  # (the second key used first)
        jax.random.bernoulli(first)


def a_reuse(steps: int) -> None:
    key = jax.random.key(6)
    for step in range(steps):
        key, sub = jax.random.split(key)
        jax.random.normal(sub, (3,))
        if step == steps // 2:
            jax.random.normal(sub, (3,))  # the same key again


def lineage_of(program: Callable[[int], None], steps: int, by_token: bool) -> dict:
    lineage = key_lineage()
    lineage.clear()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", JaxlabWarning)
        with notes_by_token(by_token) as tokens, track_keys():
            program(steps)
    return {**observed(said), "by token": sum(tokens)}


def observed(said: list) -> dict:
    """What a program's tracking left: the lineage's records, its reuses, the warnings
    (``said``) and the per-site table's rows."""
    lineage = key_lineage()
    table = lineage.sites
    return {
        **lineage.to_dict(),
        "reuses": [
            (r.first.where, r.second.where, r.first_op, r.second_op) for r in lineage.reuses
        ],
        "said": [str(w.message) for w in said],
        "keys table": [(r.key, r.count, r.parent, r.reused) for r in table.keys.values()],
        "uses table": [(r.key, r.count, r.label) for r in table.uses.values()],
    }


def counting_runs(monkeypatch) -> list[int]:
    """The calls each run recorded at once (a run of none: not one)."""
    found: list[int] = []
    record_run = runs.record_run

    def counted(recorder, noted, at, *rest):
        end = record_run(recorder, noted, at, *rest)
        found.append((end - at) // store._NOTE)
        return end

    monkeypatch.setattr(events, "record_run", counted)
    return found


@pytest.mark.parametrize("program", [pairs, three_ways, nested, a_reuse])
def test_a_run_at_a_time_makes_the_records_each_call_by_its_data_makes(program, monkeypatch):
    recorded = counting_runs(monkeypatch)
    by_token = lineage_of(program, 40, True)
    assert by_token.pop("by token") > 40 and max(recorded) > 40  # runs, and long ones
    by_data = lineage_of(program, 40, False)
    assert by_data.pop("by token") == 0
    assert by_token == by_data
    if program is a_reuse:
        assert len(by_token["reuses"]) == 1 and by_token["said"]


@pytest.mark.parametrize("program", [pairs, nested])
def test_past_the_caps_a_run_forgets_at_the_call_the_call_by_call_way_does(program, monkeypatch):
    monkeypatch.setattr(store, "MAX_NODES", 50)
    monkeypatch.setattr(store, "MAX_EVENTS", 35)
    recorded = counting_runs(monkeypatch)
    by_token = lineage_of(program, 60, True)
    by_data = lineage_of(program, 60, False)
    assert sum(recorded) > 60 and by_token["dropped"] > 50
    by_token.pop("by token"), by_data.pop("by token")
    assert by_token == by_data


def test_a_key_given_twice_within_a_run_is_left_to_the_call_by_call_way():
    """Tokens are used once (the wrappers take a key's token out when it is used); were
    one found twice, the run stops before the second, which is then recorded by data."""
    assert runs._first_again([4, 5, 6, 5, 7]) == 3
    assert runs._first_again([4, 5, 6]) == 3


def mixed(seed: int) -> Callable[[int], None]:
    """A program drawn at random (from ``seed``): splits into two to four keys unpacked,
    draws, a fold-in now and then, a key drawn from twice now and then, fresh seeds."""
    import random

    def program(steps: int) -> None:
        pick = random.Random(seed)
        keys = [jax.random.key(seed)]
        for _ in range(steps):
            newest = pick.random() < 0.9  # (mostly the newest key, as a loop's)
            key = keys.pop() if newest or len(keys) < 2 else keys.pop(pick.randrange(len(keys)))
            move = pick.random()
            if move < 0.55:
                keys.extend(jax.random.split(key, pick.choice((2, 2, 3, 4))))
            elif move < 0.95:
                jax.random.normal(key, (2,))
            elif move < 0.97:
                keys.append(jax.random.fold_in(key, 7))
            else:
                jax.random.uniform(key)
                jax.random.uniform(key)  # (a reuse)
                keys.append(jax.random.key(pick.randrange(1000)))
            if not keys:
                keys.append(jax.random.key(seed + 1))

    return program


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_random_program_recorded_a_run_at_a_time_is_recorded_as_by_its_data(seed):
    program = mixed(seed)
    by_token, by_data = lineage_of(program, 200, True), lineage_of(program, 200, False)
    assert by_token.pop("by token") > 40 and by_data.pop("by token") == 0
    assert by_token["reuses"] and by_token == by_data
