"""Where the session keeps the traced programs of the user's functions.

The compile log (``compile/log``) keeps the last two traced programs of each of the
user's jitted functions and registers itself here as the session's keeper; capabilities
that read them (``graph/diff``'s ``recompile_diff``, ``timing``'s ``%%profile --graph``)
ask :func:`kept_programs` and never import ``compile/``::

    keeper = kept_programs()
    pair = keeper.programs("step") if keeper is not None else None
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ProgramKeeper", "keep_programs_in", "kept_programs"]


class ProgramKeeper(Protocol):
    """What keeps traced programs (a ``CompileLog``)."""

    def programs(self, name: str) -> tuple[Any, Any] | None:
        """The last two programs (``ClosedJaxpr``) of function ``name``, older first."""
        ...

    def last_program(self, name: str) -> Any:
        """The last program of function ``name`` kept, or None."""
        ...


_KEEPER: ProgramKeeper | None = None


def keep_programs_in(keeper: ProgramKeeper) -> None:
    """Make ``keeper`` the session's keeper of traced programs (the session's log)."""
    global _KEEPER
    _KEEPER = keeper


def kept_programs() -> ProgramKeeper | None:
    """The session's keeper of traced programs, or None when none was made."""
    return _KEEPER
