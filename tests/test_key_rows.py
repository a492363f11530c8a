"""The key lineage's flat records (``jaxlab.keys.rows.Rows``): numbered in order, read as a
dict of tuples would be, the oldest forgotten together."""

from __future__ import annotations

import pytest

from jaxlab.keys.rows import Rows


def test_records_are_numbered_in_order_and_read_back():
    rows = Rows(3)
    for number in range(5):
        rows.add(number, (f"r{number}", number * 10, None))
    assert len(rows) == 5 and rows.next == 5
    assert rows[2] == ("r2", 20, None)
    assert rows.value(4, 1) == 40
    assert list(rows) == [0, 1, 2, 3, 4]


def test_a_record_out_of_order_is_refused():
    rows = Rows(2)
    rows.add(0, ("a", 1))
    with pytest.raises(ValueError, match="record 1 comes next"):
        rows.add(2, ("b", 2))
    with pytest.raises(ValueError):
        rows.add(1, ("b",))  # not its width
    assert len(rows) == 1


def test_the_oldest_are_forgotten_together_and_the_numbering_goes_on():
    rows = Rows(2)
    for number in range(10):
        rows.add(number, (number, -number))
    assert list(rows.drop(4)) == [0, 1, 2, 3]
    assert rows.base == 4 and len(rows) == 6 and rows.next == 10
    assert 3 not in rows and 4 in rows and 9 in rows and 10 not in rows
    assert rows.get(3) is None and rows.get(5) == (5, -5)
    with pytest.raises(KeyError):
        rows[3]
    assert rows.value(5, 1) == -5
    rows.add(10, (10, -10))
    assert list(rows.drop(100)) == list(range(4, 11))  # at most what is held
    assert len(rows) == 0 and rows.next == 11


def test_only_numbers_are_held():
    rows = Rows(1)
    rows.add(0, ("x",))
    rows.add(1, ("y",))
    assert None not in rows and "0" not in rows and True not in rows and -1 not in rows
    assert rows.get(None) is None
