"""The only place that touches private JAX or papers over version differences.

Each entry is guarded: it checks that what it reaches for exists and falls back to
something public (or to "unknown") when a JAX release moves it. tests/test_jax_compat.py
exercises every entry on the installed JAX.
"""

from __future__ import annotations
