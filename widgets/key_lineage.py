"""``KeyLineage``: the session's PRNG key forest, live (``%keys``).

::

    from jaxlab.widgets import KeyLineage
    KeyLineage()          # follows jaxlab.key_lineage() while cells run

Seeds, then splits and fold_ins, then consumers with the sampler and its output shape;
reused keys in red; a click on a row shows where the key was made and consumed; a cell
filter. At most ``max_items`` rows (about 2,000): beyond that the forest is drawn by
call site with counts, read from a table the lineage keeps per site while recording (an
update costs what the lines cost, not the keys), and a click on a site row asks the
kernel for its keys (``expanded`` -> ``detail``, newest 200). The saved twin is written
when the cell ends (``%keys`` registers that), not on every update.
"""

from __future__ import annotations

import contextlib
from typing import Any

import traitlets

from jaxlab.keys.record import KeyLineage as Lineage
from jaxlab.keys.record import key_lineage
from jaxlab.keys.tree import lineage_tree, site_detail
from jaxlab.keys.view import lineage_html, lineage_text

from ._base import JaxlabWidget, Throttle

SHOWN_REUSES = 20  # the newest reuses listed above the tree (all are counted)


class KeyLineage(JaxlabWidget, static="key_lineage"):
    """A live view of a :class:`jaxlab.KeyLineage` record (the session's, by default)."""

    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    reuses = traitlets.List(traitlets.Dict()).tag(sync=True)
    summary = traitlets.Dict().tag(sync=True)
    max_items = traitlets.Int(2000).tag(sync=True)
    # detail on demand: the page names a call-site row ("s3"), the kernel sends its keys
    expanded = traitlets.Unicode("").tag(sync=True, front_end=True)
    detail = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, lineage: Lineage | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lineage = lineage if lineage is not None else key_lineage()
        # a loop that splits keys sends at most four updates a second
        self._throttle = Throttle(self.refresh)
        self.refresh()
        self._unsubscribe = self._lineage.subscribe(self._changed)
        self.observe(self._expand, names="expanded")
        self._shell = _shell()
        if self._shell is not None:  # rewrite the saved twin when each cell ends
            self._shell.events.register("post_run_cell", self._cell_ended_event)

    @property
    def lineage(self) -> Lineage:
        return self._lineage

    def refresh(self) -> None:
        """Send the lineage's current forest to the browser now. Its cost is bounded by
        ``max_items`` rows: beyond that the per-site table kept while recording is read."""
        lineage = self._lineage
        forest = lineage_tree(lineage, self.max_items)
        items = [dict(vars(item)) for item in forest.items]  # asdict: 10x slower
        reuses = [
            {
                "key": r.key,
                "kind": r.kind,
                "message": r.message(),
                "first": r.first.where,
                "second": r.second.where,
            }
            for r in lineage.recent_reuses(SHOWN_REUSES)
        ]
        cells = sorted({i["cell"] for i in items if i["cell"]}, key=_cell_order)
        with self.hold_sync():
            self.items = items
            self.reuses = reuses
            self.summary = {
                "keys": lineage.size,
                "events": lineage.event_count,
                "reuses": lineage.reuse_count,
                "unseen": lineage.unseen,
                "hidden": forest.hidden,
                "by_site": forest.by_site,
                "dropped": lineage.dropped,
                "cells": cells,
            }
            if self.expanded:
                self._expand()

    def cell_ended(self) -> None:
        """The cell ended: the latest state now, and the saved twin rewritten once."""
        self._throttle.cancel()
        self.refresh()
        self.update_static()

    def _cell_ended_event(self, *_: Any) -> None:
        if self.comm is not None:
            self.cell_ended()

    def _expand(self, *_: Any) -> None:
        found = site_detail(self._lineage, self.expanded) if self.expanded else ()
        self.detail = [dict(vars(item)) for item in found]

    def _synced_change(self, change: dict[str, Any]) -> None:
        # The twin is rewritten when the cell ends (cell_ended), not on every update while
        # a loop records keys: at 30,000 keys a twin cost 125 ms per update.
        return

    def _changed(self) -> None:
        self._throttle.changed()

    def close(self) -> None:
        self._unsubscribe()
        self._throttle.cancel()
        if self._shell is not None:
            with contextlib.suppress(ValueError):
                self._shell.events.unregister("post_run_cell", self._cell_ended_event)
            self._shell = None
        super().close()

    def _static_html(self) -> str:
        return lineage_html(self._lineage, self.max_items)

    def _static_text(self) -> str:
        return lineage_text(self._lineage, self.max_items)


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _cell_order(cell: str) -> tuple[int, str]:
    digits = "".join(c for c in cell if c.isdigit())
    return (int(digits) if digits else 0, cell)
