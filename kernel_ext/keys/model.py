"""The lineage records: a key, an event, an edge, a reuse (frozen, JSON-serialisable).

::

    KeyNode(id=1, data="5901206b...", impl="threefry2x32", origin="split", parent=0,
            index=0, event=1, site=Site("In[3], line 2", ...), traced=False)
    KeyReuse(key=1, first=Site("In[3], line 3"), second=Site("In[3], line 4"),
             first_op="normal", second_op="uniform", traced=False).kind  # "consumed twice"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .site import Site, is_user


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

    @property
    def name(self) -> str:
        """The user's name for the key, read from the line that reused it ("" if none)."""
        return key_name(self.second.code, self.second_op) or key_name(
            self.first.code, self.first_op
        )

    @property
    def in_library(self) -> bool:
        """Both uses are in a library's code, none in the user's (diffrax's Brownian tree
        derives the same keys again on purpose, for the same noise at the same time): both
        sites are a library's lines, or both were reached through one (``Site.via``)."""
        return all(
            s.via or (s.filename and not is_user(s.filename)) for s in (self.first, self.second)
        )

    def message(self) -> str:
        """What happened, where, and the fix that fits the case (plain text, no markup)."""
        if self.in_library:
            first, second = (
                f"{s.via} (called from {s.where})" if s.via else s.where
                for s in (self.first, self.second)
            )
            head = f"a key is used twice inside a library ({self.first_op} at {first}, "
            if not (self.first.via and self.second.via):  # only the library's lines known
                return head + (
                    f"{self.second_op} at {second}), not in your code: a library that derives "
                    "its keys again on purpose (diffrax's VirtualBrownianTree does, for the "
                    "same noise at the same time) reuses them by design; if it is not one, "
                    "the key your code gives it is the one to check."
                )
            return head + (
                f"{self.second_op} at {second}): either the library derives its keys again "
                "on purpose (diffrax's VirtualBrownianTree does, for the same noise at the "
                "same time: nothing to fix), or your code gives it one key twice (give each "
                "call its own: k1, k2 = jax.random.split(key), or a split per iteration in "
                "a loop)."
            )
        name = self.name or "the key"
        key = self.name or "key"
        head = f"{name} is reused ({self.kind}): "
        if self.first.where == self.second.where and self.first_op == self.second_op:
            return head + (
                f"{self.second_op} at {self.second.where} draws from the same key each time "
                "it runs (every iteration of a loop, or each run of the line), so every draw "
                "gets the same numbers. Split per iteration (key, sub = jax.random.split(key) "
                "in the loop, then draw from sub), or split once into as many keys as there "
                "are draws (keys = jax.random.split(key, n))."
            )
        if self.first_op == "split":
            return head + (
                f"it was split at {self.first.where} and {self.second_op} at "
                f"{self.second.where} uses it again. After a split, use the keys the split "
                f"gave (for example {key}, sub = jax.random.split({key}), then draw from sub)."
            )
        return head + (
            f"{self.first_op} at {self.first.where} and {self.second_op} at "
            f"{self.second.where} draw from the same key, so they get the same random "
            "numbers. Split before the draws, into as many keys as there are draws "
            f"(k1, k2 = jax.random.split({key})), and give each draw its own key; "
            f"splitting {name} now would not do, it is already consumed."
        )


_IDENT = r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?"


def key_name(code: str, op: str) -> str:
    """The first argument of ``op(...)`` in a line of code, if it is a name::

    key_name("x = jax.random.normal(k_noise, (3,))", "normal")   # "k_noise"
    """
    if not code or not op:
        return ""
    found = re.search(rf"\b{re.escape(op)}\(\s*(?:key\s*=\s*)?({_IDENT})\s*[,)]", code)
    return found.group(1) if found else ""


def plural(count: int, word: str) -> str:
    """``plural(1, "reuse")`` is "1 reuse", ``plural(2, "reuse")`` "2 reuses"."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
