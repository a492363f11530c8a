"""The lineage records: a key, an event, an edge, a reuse (frozen, JSON-serialisable).

::

    KeyNode(id=1, data="5901206b...", impl="threefry2x32", origin="split", parent=0,
            index=0, event=1, site=Site("In[3], line 2", ...), traced=False)
    KeyReuse(key=1, first=Site("In[3], line 3"), second=Site("In[3], line 4"),
             first_op="normal", second_op="uniform", traced=False).kind  # "consumed twice"
"""

from __future__ import annotations

from dataclasses import dataclass

from .site import Site


@dataclass(frozen=True)
class KeyNode:
    """One key. ``data`` is its key data in hex ("" for a key seen only while tracing a
    loop body); ``origin`` is how it was made: seed, wrap, split, fold_in, clone,
    unknown (made before tracking began, or by code jaxlab did not see) or traced."""

    id: int
    data: str
    impl: str
    origin: str
    parent: int | None
    index: int | None  # its position in the parent's split
    event: int | None  # the KeyEvent that made it
    site: Site
    traced: bool


@dataclass(frozen=True)
class KeyEvent:
    """One call of a ``jax.random`` function: ``kind`` is create, derive or consume."""

    index: int
    op: str
    kind: str
    inputs: tuple[int, ...]
    shape: tuple[int, ...]  # the sample's shape (a consumer) or the keys' shape
    dtype: str
    site: Site
    traced: bool  # inside jit/vmap/scan: recorded by a callback (or once, while tracing)
    in_loop: bool = False  # inside a loop body: one event stands for every iteration


@dataclass(frozen=True)
class KeyEdge:
    parent: int
    child: int
    op: str


@dataclass(frozen=True)
class KeyReuse:
    """A key consumed twice: where it was consumed first and where again."""

    key: int
    first: Site
    second: Site
    first_op: str
    second_op: str
    traced: bool

    @property
    def kind(self) -> str:
        return "used after split" if self.first_op == "split" else "consumed twice"

    def message(self) -> str:
        return (
            f"key {self.key} reused ({self.kind}): {self.second_op} at {self.second.where} "
            f"uses a key already consumed by {self.first_op} at {self.first.where}. "
            "Split it first: `key, sub = jax.random.split(key)`."
        )
