"""Reading key lineage: the records made when someone reads, and the counts a view asks
for without making them.

Reading first records what was noted and replays the compiled calls waiting (the
records are made as if made when called).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from .events import KeyRecorder
from .model import KeyEdge, KeyEvent, KeyNode, KeyReuse
from .site import Site


class KeyReader(KeyRecorder):
    """The store, read: nodes, edges, events and reuses as records, and their counts."""

    @property
    def nodes(self) -> tuple[KeyNode, ...]:
        with self._lock:
            self._flush_all()
            if self._node_cache is None:
                self._node_cache = tuple(self.node_record(i) for i in self._nodes)
            return self._node_cache

    @property
    def edges(self) -> tuple[KeyEdge, ...]:
        return tuple(KeyEdge(n.parent, n.id, n.origin) for n in self.nodes if n.parent is not None)

    @property
    def events(self) -> tuple[KeyEvent, ...]:
        with self._lock:
            self._flush_all()
            if self._event_cache is None:
                self._event_cache = tuple(self.event_record(i) for i in self._events)
            return self._event_cache

    @property
    def reuses(self) -> tuple[KeyReuse, ...]:
        with self._lock:
            self._flush_all()
            return tuple(self._reuses)

    @property
    def unseen(self) -> int:
        """Keys of unknown origin: made before tracking began, or returned by compiled code
        that ran unseen (a function compiled before tracking began)."""
        with self._lock:
            self._flush_all()
            return self.sites.unknown

    @property
    def same_seeds(self) -> dict[int, Site]:
        """Keys made from the same seed as an earlier key (not a reuse: a separate key that
        draws the same numbers): node -> where the earlier one was made."""
        with self._lock:
            self._flush_all()
            return dict(self._same_seed)

    @property
    def size(self) -> int:
        """How many keys are held now (without making their records)."""
        with self._lock:
            self._flush_all()
            return len(self._nodes)

    @property
    def event_count(self) -> int:
        with self._lock:
            self._flush_all()
            return len(self._events)

    @property
    def reuse_count(self) -> int:
        with self._lock:
            self._flush_all()
            return len(self._reuses)

    def recent_reuses(self, count: int) -> tuple[KeyReuse, ...]:
        """The newest ``count`` reuses."""
        with self._lock:
            self._flush_all()
            return tuple(list(self._reuses)[-count:])

    @property
    def dropped(self) -> int:
        """Nodes (and calls of compiled functions) forgotten to keep the store bounded."""
        with self._lock:
            self._flush_all()
            return self._dropped

    def consumers(self, node: int) -> tuple[KeyEvent, ...]:
        with self._lock:
            self._flush_all()
            found = [i for i in self.consumer_ids(node) if i in self._events]
            return tuple(self.event_record(i) for i in found)

    def find(self, data: np.ndarray | bytes) -> KeyNode | None:
        """The node whose key data this is (the newest, if cloned)."""
        raw = data if isinstance(data, bytes) else np.asarray(data).tobytes()
        with self._lock:
            self._flush_all()
            ids = self._lookup(raw)
            return next((n for n in self.nodes if n.id == ids[-1]), None) if ids else None

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-serialisable data."""
        nodes = self.nodes
        return {
            "nodes": [asdict(n) for n in nodes],
            "events": [asdict(e) for e in self.events],
            "reuses": [{**asdict(r), "kind": r.kind} for r in self.reuses],
            "dropped": self.dropped,
        }
