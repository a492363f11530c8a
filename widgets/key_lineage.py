"""``KeyLineage``: the session's PRNG key forest, live (``%keys``).

::

    from jaxlab.widgets import KeyLineage
    KeyLineage()          # follows jaxlab.key_lineage() while cells run

Seeds, then splits and fold_ins, then consumers with the sampler and its output shape;
reused keys in red; a click on a row shows where the key was made and consumed; a cell
filter. At most ``max_items`` rows (about 2,000): beyond that the forest is drawn by
call site with counts, read from a table the lineage keeps per site while recording (an
update costs what the lines cost, not the keys), and a click on a site row asks the
kernel for its keys (``expanded`` -> ``detail``, newest 200).

What travels. The view is sent what changed, never a copy of itself: a change of the
lineage is a flag (:class:`~jaxlab.widgets._throttle.Throttle`), and at most four times a
second the ticker's thread, or the end of a cell, sends a *patch*: the rows that are new
or changed, the ids of the rows gone, the order of the rows when it changed, the summary,
and the reuses when they changed (a custom message ``{"kind": "patch", "rev", "base",
...}``). The page applies a patch whose ``base`` is the revision it holds and asks for
the whole state (``{"kind": "sync"}``) otherwise (a view drawn later, a page reloaded).
The synced trait ``state`` holds the state the widget was made with; the page keeps its
copy of it current, so a notebook saved with its widget state saves the latest. The saved
twin is written when a cell that changed the lineage ends, from the same forest, at most
``TWIN_ROWS`` rows.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import traitlets

from jaxlab.keys.record import KeyLineage as Lineage
from jaxlab.keys.record import key_lineage
from jaxlab.keys.tree import Forest, TreeItem, lineage_tree, site_detail
from jaxlab.keys.view import forest_lineage_html, forest_lineage_text

from ._base import JaxlabWidget
from ._throttle import Throttle

SHOWN_REUSES = 20  # the newest reuses listed above the tree (all are counted)
TWIN_ROWS = 100  # rows of the saved twin (the live view draws up to max_items)


class KeyLineage(JaxlabWidget, static="key_lineage"):
    """A live view of a :class:`jaxlab.KeyLineage` record (the session's, by default)."""

    # the state the widget was made with; patches bring the page's copy up to date
    state = traitlets.Dict().tag(sync=True)
    max_items = traitlets.Int(2000).tag(sync=True)
    # detail on demand: the page names a call-site row ("s3"), the kernel sends its keys
    expanded = traitlets.Unicode("").tag(sync=True, front_end=True)
    detail = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, lineage: Lineage | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lineage = lineage if lineage is not None else key_lineage()
        self._sent: dict[str, TreeItem] = {}  # the rows the page holds, by id
        self._order: tuple[str, ...] = ()
        self._reuses: list[dict[str, Any]] = []
        self._summary: dict[str, Any] = {}
        self._forest: Forest | None = None
        self._rev = 0
        self._twin_stale = True  # the lineage changed since the twin was written
        self._lock = threading.Lock()  # the kernel's copy of the page's state
        # a loop that splits keys sends at most four patches a second, from the ticker
        self._throttle = Throttle(self._push)
        self._update()  # the first state goes in the trait, not in a patch
        self.state = self._full()
        self._unsubscribe = self._lineage.subscribe(self._throttle.changed)
        self.observe(self._expand, names="expanded")
        self.on_msg(self._page_message)
        self._shell = _shell()
        if self._shell is not None:  # rewrite the saved twin when each cell ends
            self._shell.events.register("post_run_cell", self._cell_ended_event)

    @property
    def lineage(self) -> Lineage:
        return self._lineage

    @property
    def items(self) -> list[dict[str, Any]]:
        """The rows the view draws (parents before their children)."""
        with self._lock:
            return [dict(vars(self._sent[i])) for i in self._order]

    @property
    def reuses(self) -> list[dict[str, Any]]:
        """The newest reuses listed above the tree."""
        return list(self._reuses)

    @property
    def summary(self) -> dict[str, Any]:
        """Counts: keys, events, reuses, keys of unknown origin, rows not drawn, ..."""
        return dict(self._summary)

    @property
    def rev(self) -> int:
        """The revision of the state last sent (one more with each patch)."""
        return self._rev

    def refresh(self) -> None:
        """Send what changed in the lineage to the browser now (on this thread)."""
        self._throttle.flush()

    def cell_ended(self) -> None:
        """The cell ended: the latest state now, and the saved twin rewritten once if the
        lineage changed."""
        if self._throttle.pending:
            self._throttle.flush()
        if self._twin_stale:
            self._twin_stale = False
            self.update_static()

    def _push(self) -> None:
        """Send the page a patch of what changed (nothing when nothing did). Runs on the
        ticker's thread or the caller's, one at a time."""
        patch = self._update()
        if patch is not None:
            self.send(patch)
            if self.expanded:
                self._expand()

    def _update(self) -> dict[str, Any] | None:
        """Bring the kernel's copy of the page's state up to the lineage; the patch."""
        lineage = self._lineage
        forest = lineage_tree(lineage, self.max_items)
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
        cells = sorted({i.cell for i in forest.items if i.cell}, key=_cell_order)
        summary = {
            "keys": lineage.size,
            "events": lineage.event_count,
            "reuses": lineage.reuse_count,
            "unseen": lineage.unseen,
            "hidden": forest.hidden,
            "by_site": forest.by_site,
            "dropped": lineage.dropped,
            "cells": cells,
        }
        rows = {item.id: item for item in forest.items}
        order = tuple(rows)
        with self._lock:
            changed = [item for i, item in rows.items() if self._sent.get(i) != item]
            gone = [i for i in self._sent if i not in rows]
            same = not changed and not gone and order == self._order
            if same and reuses == self._reuses and summary == self._summary:
                return None  # nothing to send
            patch: dict[str, Any] = {
                "kind": "patch",
                "base": self._rev,
                "rev": self._rev + 1,
                "rows": [dict(vars(item)) for item in changed],
                "gone": gone,
                "summary": summary,
            }
            if order != self._order:
                patch["order"] = list(order)
            if reuses != self._reuses:
                patch["reuses"] = reuses
            self._sent, self._order, self._forest = rows, order, forest
            self._reuses, self._summary = reuses, summary
            self._rev += 1
            self._twin_stale = True
        return patch

    def _full(self) -> dict[str, Any]:
        """The whole state, as the ``state`` trait and a full patch hold it."""
        with self._lock:
            return {
                "rev": self._rev,
                "items": [dict(vars(self._sent[i])) for i in self._order],
                "reuses": list(self._reuses),
                "summary": dict(self._summary),
            }

    def _page_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """What a view asks: the whole state (``sync``) or a site's keys (``expand``)."""
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        if kind == "sync":
            full = self._full()
            self.send({"kind": "patch", "base": None, **full, "rows": full.pop("items")})
        elif kind == "expand" and isinstance(content.get("id"), str):
            self.expanded = content["id"][:64]

    def _cell_ended_event(self, *_: Any) -> None:
        if self.comm is not None:
            self.cell_ended()

    def _expand(self, *_: Any) -> None:
        found = site_detail(self._lineage, self.expanded) if self.expanded else ()
        self.detail = [dict(vars(item)) for item in found]

    def _synced_change(self, change: dict[str, Any]) -> None:
        # The twin is rewritten when a cell ends (cell_ended), not on every update while
        # a loop records keys: at 30,000 keys a twin cost 125 ms per update.
        return

    def close(self) -> None:
        self._unsubscribe()
        self._throttle.cancel()
        if self._shell is not None:
            with contextlib.suppress(ValueError):
                self._shell.events.unregister("post_run_cell", self._cell_ended_event)
            self._shell = None
        super().close()

    def _twin_forest(self) -> Forest:
        forest = self._forest or lineage_tree(self._lineage, self.max_items)
        cut = len(forest.items) - TWIN_ROWS
        if cut <= 0:
            return forest
        return Forest(forest.items[:TWIN_ROWS], forest.hidden + cut, forest.by_site)

    def _static_html(self) -> str:
        return forest_lineage_html(self._lineage, self._twin_forest())

    def _static_text(self) -> str:
        return forest_lineage_text(self._lineage, self._twin_forest())


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _cell_order(cell: str) -> tuple[int, str]:
    digits = "".join(c for c in cell if c.isdigit())
    return (int(digits) if digits else 0, cell)
