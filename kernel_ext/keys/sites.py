"""The lineage per call site, kept up to date as keys are recorded (a view of a large
lineage costs what the number of lines costs, not what the number of keys costs).

::

    table = SiteTable()
    table.made(("split", "In[3], line 4"), site, traced, parent_site)  # a key made there
    table.used(("normal", "In[3], line 5", ("split", "In[3], line 4")), event)
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


@dataclass
class SiteTable:
    keys: dict[SiteKey, SiteRow] = field(default_factory=dict)
    uses: dict[UseKey, SiteRow] = field(default_factory=dict)

    def made(self, key: SiteKey, site: Any, traced: bool, parent: SiteKey | None) -> None:
        row = self.keys.get(key)
        if row is None:
            row = self.keys[key] = SiteRow(f"s{len(self.keys)}", key, 0, site, traced)
        row.count += 1
        if row.parent is None and parent is not None and parent != key:
            row.parent = parent  # a chain `key, sub = split(key)` stays on its own row

    def used(self, key: UseKey, event: tuple[Any, ...]) -> None:
        """A draw: ``event`` is the lineage's event tuple (op, kind, inputs, shape, dtype,
        site, traced, in_loop); its label is made once per row."""
        row = self.uses.get(key)
        if row is None:
            op, _, _, shape, dtype, site, traced, in_loop = event
            label = f"{op} {dtype}[{','.join(str(s) for s in shape)}]"
            label += " (each iteration)" if in_loop else ""
            row = self.uses[key] = SiteRow(f"u{len(self.uses)}", key, 0, site, traced, label)
        row.count += 1

    def reused(self, key: SiteKey | None) -> None:
        if key is not None and key in self.keys:
            self.keys[key].reused = True
