"""Magics of the `devices` family (not written yet)."""

MAGICS: tuple[type, ...] = ()
