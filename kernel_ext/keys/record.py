"""The records of key lineage and the session's bounded store of them.

A key is a node, identified by its key data (two keys with the same data draw the same
numbers, whatever made them); an event is one call of a ``jax.random`` function that
created, derived or consumed keys, with the user's line that made it::

    lineage = key_lineage()
    lineage.nodes      # (KeyNode(id=0, origin="seed", ...), KeyNode(id=1, origin="split", ...))
    lineage.edges      # (KeyEdge(parent=0, child=1, op="split"), ...)
    lineage.reuses     # (KeyReuse(key=1, first=Site("In[3], line 4"), second=..., ...),)

:class:`KeyLineage` is three modules' work: ``store`` (what is held, bounded), ``events``
(recording and noting, compiled calls replayed) and ``queries`` (reading). It draws
itself with what ``keys/__init__`` hands down (:func:`served_by`), so no record imports
``view``, which imports the records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .model import KeyEdge as KeyEdge
from .model import KeyEvent as KeyEvent
from .model import KeyNode as KeyNode
from .model import KeyReuse as KeyReuse
from .queries import KeyReader


class KeyLineage(KeyReader):
    """The session's key forest: nodes, edges, events and reuses (bounded)."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": _above.text(self), "text/html": _above.html(self)}


class Above(NamedTuple):
    """What a :class:`KeyLineage` takes from the module above it, which imports it:
    ``view``'s text and HTML."""

    text: Callable[[KeyLineage], str]  # view.lineage_text
    html: Callable[[KeyLineage], str]  # view.lineage_html


_above: Above  # set by served_by when keys/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``keys/__init__`` (which any import of the package runs first):
    the drawings every KeyLineage uses."""
    global _above
    _above = above


_SESSION = KeyLineage()


def key_lineage() -> KeyLineage:
    """The session's key lineage (empty until ``track_keys()`` or ``%keys on``).

    Example::

        with jaxlab.track_keys():
            k1, k2 = jax.random.split(jax.random.key(0))
            jax.random.normal(k1, (3,))
        jaxlab.key_lineage().nodes    # the seed and its two children
    """
    return _SESSION
