"""``KeyLineage``: the session's PRNG key forest, live (``%keys``).

::

    from jaxlab.widgets import KeyLineage
    KeyLineage()          # follows jaxlab.key_lineage() while cells run

Seeds, then splits and fold_ins, then consumers with the sampler and its output shape;
reused keys in red; a click on a row shows where the key was made and consumed; a cell
filter. At most ``max_items`` rows (about 2,000): beyond that the forest is drawn by
call site with counts (see ``jaxlab.keys.tree``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import traitlets

from jaxlab.keys.record import KeyLineage as Lineage
from jaxlab.keys.record import key_lineage
from jaxlab.keys.tree import lineage_tree
from jaxlab.keys.view import lineage_html, lineage_text

from ._base import JaxlabWidget, Throttle


class KeyLineage(JaxlabWidget, static="key_lineage"):
    """A live view of a :class:`jaxlab.KeyLineage` record (the session's, by default)."""

    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    reuses = traitlets.List(traitlets.Dict()).tag(sync=True)
    summary = traitlets.Dict().tag(sync=True)
    max_items = traitlets.Int(2000).tag(sync=True)

    def __init__(self, lineage: Lineage | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lineage = lineage if lineage is not None else key_lineage()
        # a loop that splits keys sends at most four updates a second
        self._throttle = Throttle(self.refresh)
        self.refresh()
        self._unsubscribe = self._lineage.subscribe(self._changed)

    @property
    def lineage(self) -> Lineage:
        return self._lineage

    def refresh(self) -> None:
        """Send the lineage's current forest to the browser now."""
        forest = lineage_tree(self._lineage, self.max_items)
        items = [asdict(item) for item in forest.items]
        reuses = [
            {
                "key": r.key,
                "kind": r.kind,
                "message": r.message(),
                "first": r.first.where,
                "second": r.second.where,
            }
            for r in self._lineage.reuses
        ]
        cells = sorted({i["cell"] for i in items if i["cell"]}, key=_cell_order)
        with self.hold_sync():
            self.items = items
            self.reuses = reuses
            self.summary = {
                "keys": len(self._lineage.nodes),
                "events": len(self._lineage.events),
                "reuses": len(reuses),
                "hidden": forest.hidden,
                "by_site": forest.by_site,
                "dropped": self._lineage.dropped,
                "cells": cells,
            }

    def _changed(self) -> None:
        self._throttle.changed()

    def close(self) -> None:
        self._unsubscribe()
        self._throttle.cancel()
        super().close()

    def _static_html(self) -> str:
        return lineage_html(self._lineage, self.max_items)

    def _static_text(self) -> str:
        return lineage_text(self._lineage, self.max_items)


def _cell_order(cell: str) -> tuple[int, str]:
    digits = "".join(c for c in cell if c.isdigit())
    return (int(digits) if digits else 0, cell)
