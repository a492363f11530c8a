"""The lineage per call site, kept up to date as keys are recorded (a view of a large
lineage costs what the number of lines costs, not what the number of keys costs).

::

    table = SiteTable()
    table.made(("split", "In[3], line 4"), site, traced, parent_site)  # a key made there
    table.used(("normal", "In[3], line 5", ("split", "In[3], line 4")), event, site)
    table.rows()    # SiteRow(id="s0", count=10_000, ...) in the order they were first seen

A key's call site is (how it was made, the line): a loop that splits a key 10,000 times
is one row with a count, and the draws from those keys one row under it. The counts are
of everything recorded (keys later forgotten to keep the store bounded included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SiteKey = tuple[str, str]  # (origin, where)
UseKey = tuple[str, str, SiteKey]  # (op, where, the site of the keys it drew from)


@dataclass
class SiteRow:
    """One call site: ``id`` ("s3" for keys made there, "u7" for draws made there)."""

    id: str
    key: Any
    count: int
    site: Any  # the first Site recorded there
    traced: bool
    label: str = ""  # a draw's label ("normal float32[3]")
    parent: SiteKey | None = None  # the site its keys descend from (keys only)
    reused: bool = False


MAX_SITES = 20_000  # beyond this the oldest sites are forgotten (every cell is new lines)


@dataclass
class SiteTable:
    keys: dict[SiteKey, SiteRow] = field(default_factory=dict)
    uses: dict[UseKey, SiteRow] = field(default_factory=dict)
    under: dict[SiteKey, list[SiteRow]] = field(default_factory=dict)  # draws per key site
    unknown: int = 0  # keys of unknown origin recorded (made before tracking, or unseen)
    _next: int = 0  # row ids are never reused, so a page's "expanded" stays meaningful

    def made(
        self, key: SiteKey, site: Any, traced: bool, parent: SiteKey | None, count: int = 1
    ) -> None:
        """``count`` keys made at one site, from keys made at ``parent``."""
        row = self.keys.get(key)
        if row is None:
            self._next += 1
            row = self.keys[key] = SiteRow(f"s{self._next}", key, 0, site, traced)
            if len(self.keys) > MAX_SITES:
                self._forget()
        row.count += count
        if key[0] == "unknown":
            self.unknown += count
        if row.parent is None and parent is not None and parent != key:
            row.parent = parent  # a chain `key, sub = split(key)` stays on its own row

    def used(self, key: UseKey, event: tuple[Any, ...], site: Any) -> None:
        """A draw at ``site``: ``event`` is the lineage's event tuple (op, kind, inputs,
        shape, dtype, its site's place, traced, in_loop); its label is made once per row."""
        row = self.uses.get(key)
        if row is None:
            op, _, _, shape, dtype, _, traced, in_loop = event
            label = f"{op} {dtype}[{','.join(str(s) for s in shape)}]"
            label += " (each iteration)" if in_loop else ""
            self._next += 1
            row = self.uses[key] = SiteRow(f"u{self._next}", key, 0, site, traced, label)
            self.under.setdefault(key[2], []).append(row)
        row.count += 1

    def newest(self, count: int) -> list[SiteRow]:
        """The ``count`` call sites that made keys most recently first seen (oldest first)."""
        rows: list[SiteRow] = []
        for key in reversed(self.keys):
            rows.append(self.keys[key])
            if len(rows) >= count:
                break
        return rows[::-1]

    def _forget(self) -> None:
        old = list(self.keys)[: MAX_SITES // 2]
        for key in old:
            del self.keys[key]
            for row in self.under.pop(key, ()):
                self.uses.pop(row.key, None)

    def reused(self, key: SiteKey | None) -> None:
        if key is not None and key in self.keys:
            self.keys[key].reused = True
