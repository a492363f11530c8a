"""``ArrayView``: an array or pytree, live (``%show``, ``jaxlab.show``).

::

    from jaxlab.widgets import ArrayView
    view = ArrayView(params, name="params")
    view.update(new_params)      # redraws in place, at most ``rate`` times a second

The tree of paths with counts, bytes and NaN/Inf flags; a click on an array leaf draws
it (a line, or a heat map with values on hover); a 3-D+ array's slice is chosen with a
control per leading axis, and the kernel sends that slice's bounded sample. The static
twin (the saved notebook's view) is the ``ShowRecord``'s HTML of the latest state.
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from typing import Any

import numpy as np
import traitlets

from jaxlab.arrays.draw import (
    ValueRange,
    drawn_range,
    marked_cells,
    not_finite_legend,
    sample_caption,
    sample_range_words,
    sample_values,
)
from jaxlab.arrays.html import first_flagged, flags, tree_html
from jaxlab.arrays.record import ShardLayout, ShowRecord, TreeNode
from jaxlab.arrays.sample import held_array
from jaxlab.arrays.tree import show_record
from jaxlab.session.collector import collector_paused

from ._base import JaxlabWidget, LatestRedraw

MAX_ROWS = 3000  # tree rows sent to the page; the rest counted

_log = logging.getLogger(__name__)


class ArrayView(JaxlabWidget, static="array_view"):
    """A live view of an array or pytree; :meth:`update` redraws it in place."""

    name = traitlets.Unicode("").tag(sync=True)
    # the kernel makes every row: no per-row validation (a 714-layer tree has 2,143 rows)
    rows: traitlets.List[Any] = traitlets.List(traitlets.Any()).tag(
        sync=True, to_json=lambda rows, _: rows_json(rows)
    )
    drawing = traitlets.Dict().tag(sync=True, to_json=lambda d, _: drawing_json(d))
    footer = traitlets.Unicode("").tag(sync=True)
    updates = traitlets.Int(0).tag(sync=True)
    # the page chooses which leaf to draw and, for 3-D+, the slice of its leading axes
    selected = traitlets.Unicode("").tag(sync=True, front_end=True)
    slice_at = traitlets.List(traitlets.Int()).tag(sync=True, front_end=True)

    def __init__(
        self,
        value: Any = None,
        name: str = "",
        rate: float = 4.0,
        value_range: ValueRange | str | None = None,
        **kwargs: Any,
    ):
        super().__init__(name=name, **kwargs)
        self._value = value
        # the colours' range: None re-fits it to each frame's array; (lo, hi) fixes it;
        # "first" fixes each leaf's at its first frame's (``_first``), so a fade shows
        self._range_rule = checked_range(value_range)
        self._first: dict[str, ValueRange] = {}
        self._record: ShowRecord | None = None
        self.last_error = ""  # why the latest value was not drawn, if it was not
        self._redraws = LatestRedraw(self._redraw, interval=1.0 / rate)
        self._redraws.now()
        self.observe(self._choose, names=["selected", "slice_at"])

    @property
    def record(self) -> ShowRecord:
        assert self._record is not None
        return self._record

    def update(self, value: Any) -> None:
        """Show ``value``: redrawn on a timer thread once ``1/rate`` s have passed since the
        last redraw began, the latest value then; between redraws a call only keeps the
        value, so a loop that calls it every step is slowed by the redraws alone."""
        self._value = value
        self._redraws.changed()

    def flush(self) -> None:
        """Redraw the latest value now, on this thread (a loop ended)."""
        self._redraws.now()

    def _redraw(self) -> None:
        """Draw the latest value; one that cannot be drawn (a pytree that holds itself, a
        slice its array no longer has) keeps the last drawing and says why in the footer,
        since the redraw may run on the timer thread, where an error would reach nobody."""
        try:
            with collector_paused():  # the record, a row per node and their JSON: no cycles
                self._draw_record()
        except (ValueError, TypeError, IndexError) as e:
            if self._record is None:  # nothing drawn yet: the caller made the view with it
                raise
            _log.warning("ArrayView %r could not draw the latest value", self.name, exc_info=True)
            self.last_error = f"the latest value is not drawn ({e}); the view shows the last one"
            self.footer = self.last_error  # a synced change: the twin says it too
        else:
            self.last_error = ""

    def _draw_record(self) -> None:
        record = show_record(self._value, self.name, draw=1, slice_at=self._slice())
        self._record = record
        rows = tree_rows(record.root)
        if not self.selected or record.root.find(self.selected) is None:
            first = first_flagged(record.root) or record.root.first_array()
            selected = first.path if first is not None else ""
        else:
            selected = self.selected
        with self.twin_once(), self.hold_sync():  # `updates` always changes: one twin
            self.rows = rows
            self.footer = "; ".join(record.notes)
            self.selected = selected
            self.drawing = self._drawing(selected)
            self.updates += 1

    def _slice(self) -> tuple[int, ...] | None:
        return tuple(self.slice_at) if self.slice_at else None

    def _choose(self, *_: Any) -> None:
        """The page chose a leaf or a slice: draw it. A choice that cannot be drawn (the
        page can send any path or indices) is logged and the drawing kept, never raised
        into the output (ipywidgets would print the traceback there)."""
        with self._redraws.drawing:  # not beside a redraw on the timer thread
            if self._record is None:
                return
            try:
                drawing = self._drawing(self.selected)
            except Exception:
                _log.warning(
                    "ArrayView could not draw %r at %r for the page",
                    self.selected,
                    self.slice_at,
                    exc_info=True,
                )
                return
            self.drawing = drawing

    def _drawing(self, path: str) -> dict[str, Any]:
        record = self._record
        node = record.root.find(path) if record is not None and path else None
        if node is None or node.array is None:
            return {}
        info = node.array
        if info.sample is None or tuple(info.sample.slice_at) != (self._slice() or ()):
            redone = show_record(self._leaf(path), path, slice_at=self._slice(), draw=1)
            info = redone.root.array or info
        sample = None
        if info.sample is not None:  # as JSON will carry it: tuples become lists
            # shallow: the values are JSON lists already (asdict's deep copy of a 160 x 160
            # sample was most of a redraw's cost)
            sample = {
                f.name: list(v) if isinstance(v, tuple) else v
                for f in fields(info.sample)
                for v in (getattr(info.sample, f.name),)
            }
        lo_hi, fixed = self._range(path, info)
        # the sample read back to numbers once, and only where it says more than the
        # figures: a NaN/Inf to find, or a part (strided, sliced) or fixed range to compare
        smp, st = info.sample, info.stats
        flagged = st is None or bool(st.nan or st.inf)
        partial = smp is not None and (fixed or smp.slice_at or any(k > 1 for k in smp.steps))
        values = sample_values(smp) if smp is not None and (flagged or partial) else None
        words = ""
        if values is not None and partial and lo_hi is not None and info.kind != "complex":
            words = sample_range_words(values, lo_hi)
        return {
            "path": path,
            "shape": list(info.shape),
            "line": info.line,
            "kind": info.kind,
            "sample": sample,
            "caption": sample_caption(info) if info.sample is not None else info.note,
            "shards": _shards_payload(info.layout),
            # the colours' range (the whole array's, or fixed), what the sample spans when
            # that differs, and where its NaN/Inf are
            "range": list(lo_hi) if lo_hi is not None else None,
            "range_fixed": fixed,
            "sample_range": words,
            "legend": not_finite_legend(info, values) if flagged else "",
            "marks": [list(c) for c in marked_cells(info, values)] if flagged else [],
        }

    def _range(self, path: str, info: Any) -> tuple[ValueRange | None, bool]:
        """``(lo, hi)`` of the leaf's colours and whether it is fixed (by the rule)."""
        rule = self._range_rule
        if isinstance(rule, tuple):
            return rule, True
        if info.sample is None or info.kind in ("boolean", "complex"):
            return None, False
        now = drawn_range(info)
        if rule != "first" or now is None:
            return now, False
        return self._first.setdefault(path, now), True

    def range_of(self, path: str) -> ValueRange | None:
        """The fixed range of the leaf at ``path`` (None: fitted to its array)."""
        rule = self._range_rule
        return rule if isinstance(rule, tuple) else self._first.get(path)

    def _leaf(self, path: str) -> Any:
        """The array at ``path`` in the current value (its drawing asked again)."""
        import jax

        for key_path, leaf in jax.tree_util.tree_flatten_with_path(self._value)[0]:
            if self.name + jax.tree_util.keystr(key_path) == path:
                return leaf
        return self._value

    def close(self) -> None:
        self._redraws.close()
        super().close()

    def _static_html(self) -> str:
        from jaxlab.session.collector import collector_paused

        with collector_paused():
            return tree_html(self.record, self.range_of if self._range_rule else None)

    def _static_text(self) -> str:
        return self.record.text()


def checked_range(value_range: Any) -> ValueRange | str | None:
    """``None``, ``"first"`` or ``(lo, hi)`` with finite ``lo < hi``; anything else is a
    ``ValueError`` naming what was given and what is taken."""
    if value_range is None or value_range == "first":
        return value_range
    try:
        if isinstance(value_range, str):
            raise ValueError(value_range)
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        lo = hi = float("nan")
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(
            f"range={value_range!r}: give (lo, hi), two finite numbers with lo < hi, "
            f'or "first" (fixed at the first frame\'s range)'
        )
    return (lo, hi)


def rows_json(rows: list[dict[str, Any]]) -> memoryview:
    """The rows as the comm carries them: one buffer of their JSON text, which the page
    parses. As a list, ipywidgets walks every row and value for binary parts before the
    kernel writes the same JSON anyway (a 714-layer tree: twice the time of the text)."""
    return memoryview(json.dumps(rows, separators=(",", ":")).encode())


def drawing_json(drawing: dict[str, Any]) -> dict[str, Any]:
    """The drawing as the comm carries it: a float sample's values as one buffer of
    little-endian float64 (``values``, with ``dims``, its shape), not nested lists.
    ipywidgets walks every list of a state for binary parts and the kernel writes every
    number as JSON text: a 160 x 160 sample was most of a redraw's cost. The page reads
    the buffer back into the same nested arrays, NaN and Inf as numbers."""
    sample = drawing.get("sample")
    if not sample or sample.get("kind") != "float" or not isinstance(sample["values"], list):
        return drawing  # integers stay exact as JSON; complex pairs and scalars are few
    values = held_array(sample["values"])  # as take_sample made it, else read back
    if values is None or values.dtype != np.float64:
        values = np.asarray(sample["values"], dtype="<f8")  # "NaN", "Inf" words read back
    wire = {**sample, "values": memoryview(values.tobytes()), "dims": list(values.shape)}
    return {**drawing, "sample": wire}


def _shards_payload(layout: ShardLayout | None) -> dict[str, Any] | None:
    """Which device holds which block, as the page lists it (None: one device)."""
    if layout is None:
        return None
    return {
        "words": layout.words(),
        "mesh": [list(axis) for axis in layout.mesh_shape],
        "devices": [
            {
                "device": s.device,
                "process": s.process,
                "index": s.index_text(),
                "bytes": s.bytes,
                "here": s.here,
                "copies": s.copies,
            }
            for s in layout.shards
        ],
    }


def tree_rows(root: TreeNode) -> list[dict[str, Any]]:
    """The tree as rows for the page: depth first, with depth, counts and flags."""
    rows: list[dict[str, Any]] = []

    def add(node: TreeNode, depth: int) -> None:
        if len(rows) >= MAX_ROWS:
            return
        rows.append(
            {
                "path": node.path,
                "key": node.key or node.path or "value",
                "label": node.label,
                "depth": depth,
                "leaf": node.is_leaf,
                "array": node.array is not None,
                "line": node.array.line if node.array is not None else node.value,
                "params": node.params,
                "bytes": node.bytes,
                "flags": flags(node),
                "more": node.hidden,
            }
        )
        for child in node.children:
            add(child, depth + 1)

    add(root, 0)
    return rows
