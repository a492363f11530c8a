"""Magics of the `compile_log` family (not written yet)."""

MAGICS: tuple[type, ...] = ()
