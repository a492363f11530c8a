"""Magics of the `jit` family (not written yet)."""

MAGICS: tuple[type, ...] = ()
