"""What a pytree node is, in the words of the library that made it.

Equinox modules, flax nnx objects and their Variables are pytrees whose class names are
the model's structure (``MLP > layers[0] > Linear > weight``). A haiku parameter dict is
flat, ``{'mlp/~/linear_0': {'w': ..., 'b': ...}}``: ``haiku_groups`` nests it by the
module path haiku wrote into its keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# flax nnx keeps bookkeeping (its graph state, static fields) under these keys
_HIDDEN_PREFIXES = ("_pytree__", "_object__")
MAX_VALUE_CHARS = 80


def library_of(node: Any) -> str:
    """``'equinox'``, ``'flax nnx'``, ``'haiku'`` or ``''`` for a node."""
    module = type(node).__module__ or ""
    if module == "builtins":  # dict, list, tuple: asked once per node of every tree
        return "haiku" if is_haiku_params(node) else ""
    if module.startswith("equinox"):
        return "equinox"
    if module.startswith("flax.nnx"):
        return "flax nnx"
    for cls in type(node).__mro__:
        m = cls.__module__ or ""
        if m.startswith("equinox"):
            return "equinox"
        if m.startswith("flax.nnx"):
            return "flax nnx"
    if is_haiku_params(node):
        return "haiku"
    return ""


def node_label(node: Any) -> str:
    """The class name, with the library for a model's own modules: ``Linear (equinox)``."""
    library = library_of(node)
    name = type(node).__name__
    if library == "haiku":
        return "haiku parameters"
    return f"{name} ({library})" if library else name


def is_hidden_key(key: str) -> bool:
    # asked of every path step: two plain tests, not a generator over the prefixes
    first, second = _HIDDEN_PREFIXES
    return first in key or second in key


def is_haiku_params(node: Any) -> bool:
    """A mapping of ``module/path -> {param name: array}``, as ``hk.transform`` returns."""
    if not isinstance(node, Mapping) or not node:
        return False
    if type(node).__module__.startswith("haiku") or type(node).__name__ == "FlatMap":
        return True
    keys = list(node)
    return (
        all(isinstance(k, str) for k in keys)
        and any("/" in k for k in keys)
        and all(isinstance(v, Mapping) for v in node.values())
    )


def haiku_groups(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{'mlp/~/linear_0': p}`` -> ``{'mlp': {'linear_0': p}}``: the module structure.
    Haiku writes a submodule as ``parent/~/child``; a plain ``/`` nests too."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        parts = [p for p in key.replace("/~/", "/").split("/") if p]
        here = out
        for part in parts[:-1]:
            here = here.setdefault(part, {})
        here[parts[-1] if parts else key] = (key, value)
    return out


def value_words(leaf: Any) -> tuple[str, str]:
    """A non-array leaf as what it is: ``('function', 'relu')``, ``('str', "'tanh'")``,
    ``('None', 'None')``; the repr bounded."""
    if leaf is None:
        return "None", "None"
    if callable(leaf) and hasattr(leaf, "__name__"):
        kind = "class" if isinstance(leaf, type) else "function"
        return kind, str(getattr(leaf, "__qualname__", leaf.__name__))
    text = repr(leaf)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 1] + "…"
    return type(leaf).__name__, text
