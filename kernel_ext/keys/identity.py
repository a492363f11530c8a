"""Which key a call used: by its object when jaxlab has one, never by its data alone for a
key that existed before tracking began.

Two objects of one seed hold the same data and are two keys (JAX's ``jax_debug_key_reuse``
follows objects too). A key jaxlab sees made (a seed, a split's child) has a node per
object, so matching by data finds one not yet used. A key that existed before tracking
gets a node only when first seen; when only its data is known (a callback inside a
program compiled before tracking, several keys in one array), a second use of that data
is told as another key of the same data (a same-seed note), not as a reuse, unless the
program itself shows that one object was used twice::

    k1, k2 = jax.random.key(2), jax.random.key(2)   # before %keys on
    f(k1); f(k2)      # f compiled before tracking: two keys of one seed, no reuse
    g(k1)             # g (compiled before too) draws twice from it: a reuse (one tracer)
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .rows import Rows


class Held(Protocol):
    """What :func:`other_key` reads of the store (``store.KeyStore``, which imports this
    module and hands itself in)."""

    _single_roots: set[int]  # single keys known by their object (a seed's, or unseen)
    _consumed_by: dict[int, int]  # node -> the first event that consumed it
    _nodes: Rows  # node -> its row (raw data, impl, origin, parent, ...)


# Given as a call's key object: "the key this program consumed before, in this call" (the
# same tracer consumed twice while tracing). Not weak-referenceable: never remembered.
SAME_AS_BEFORE = object()
_TRACER_MEMORY = 4096  # tracers consumed while tracing, remembered weakly


def other_key(lineage: Held, ids: list[int], obj: Any) -> bool:
    """Whether the key of a call (``obj``, its object; None: known by data only) is
    another key than the held nodes ``ids`` of its data (oldest first)."""
    if obj is SAME_AS_BEFORE:
        return False
    newest = ids[-1]
    if obj is not None:  # another object of a single key known by its object
        return newest in lineage._single_roots
    used = lineage._consumed_by
    if any(node not in used for node in ids):  # one of them is unused: that one
        return False
    held = lineage._nodes.get(newest)  # a root of unknown origin: existed before tracking
    return held is not None and held[2] == "unknown" and held[3] is None


_USED: dict[int, weakref.ref[Any]] = {}


def used_before(key: Any) -> bool:
    """Whether this key (a tracer, while tracing code without a template) was consumed
    before in its trace: its callback then names the same key (:data:`SAME_AS_BEFORE`)."""
    seen = _USED.get(id(key))
    if seen is not None and seen() is key:
        return True
    if len(_USED) > _TRACER_MEMORY:  # the dead out (traces end), in place
        for dead in [i for i, ref in _USED.items() if ref() is None]:
            del _USED[dead]
        if len(_USED) > _TRACER_MEMORY // 2:
            _USED.clear()
    with contextlib.suppress(TypeError):  # not weak-referenceable: not known by identity
        _USED[id(key)] = weakref.ref(key)
    return False


def forget_uses() -> None:
    """Tracking switched off: no trace goes on."""
    _USED.clear()
