"""Magics of the `errors` family (not written yet)."""

MAGICS: tuple[type, ...] = ()
