"""Records numbered in the order made, held flat: one list of values, ``width`` per record.

The key lineage holds tens of thousands of keys and events. As a dict of tuples each
record was an object the garbage collector tracked until its first pass over it, and
forgetting the oldest was one dict deletion each. Here a record is ``width`` values in
one list (no object per record: a tracked loop's cell end makes none that survive), a
record's number is its place plus ``base``, and the oldest are forgotten together, by one
slice deletion. Read as a dict of tuples would be (``in``, ``get``, ``[]``, iteration in
order), for the readers that are not on a hot path; the hot path reads ``flat`` itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Rows:
    """Records ``base``, ``base + 1``, ... of ``width`` values each, in ``flat``."""

    __slots__ = ("base", "flat", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self.base = 0  # the number of the oldest record held
        self.flat: list[Any] = []

    def __len__(self) -> int:
        return len(self.flat) // self.width

    @property
    def next(self) -> int:
        """The number the next record gets."""
        return self.base + len(self.flat) // self.width

    def __contains__(self, number: object) -> bool:
        return type(number) is int and 0 <= number - self.base < len(self.flat) // self.width

    def get(self, number: Any, default: Any = None) -> Any:
        if number not in self:
            return default
        at = (number - self.base) * self.width
        return tuple(self.flat[at : at + self.width])

    def __getitem__(self, number: int) -> tuple[Any, ...]:
        record = self.get(number)
        if record is None:
            raise KeyError(number)
        return record

    def value(self, number: int, column: int) -> Any:
        """One value of a held record (its ``column``-th)."""
        return self.flat[(number - self.base) * self.width + column]

    def add(self, number: int, record: tuple[Any, ...]) -> None:
        """Record ``number``, which must be the next (records are numbered in order)."""
        if number != self.next or len(record) != self.width:
            raise ValueError(f"record {number} added where record {self.next} comes next")
        self.flat += record

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.base, self.next))

    def drop(self, count: int) -> range:
        """The oldest ``count`` records forgotten; returns their numbers."""
        count = min(count, len(self))
        gone = range(self.base, self.base + count)
        del self.flat[: count * self.width]
        self.base += count
        return gone
