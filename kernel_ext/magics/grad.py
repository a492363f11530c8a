"""Magics of the `grad` family (not written yet)."""

MAGICS: tuple[type, ...] = ()
