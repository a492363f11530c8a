"""How a long ``%bench`` tells the user it is working, without leaving frames behind.

In a notebook: a progress bar (``tqdm``'s widget, closed at the end; a reopened notebook's
"model not found" note for it is hidden by the result's own HTML, see ``bench_view``). In
a terminal or a script: one line when the measurement starts, never a redrawn bar (which a
terminal without cursor control, or a captured stream, prints frame after frame)::

    with Progress(rounds=7, seconds=12.0, name="f(x)") as p:
        for _ in range(7):
            ...
            p.advance()
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

SHOW_AFTER_S = 1.0  # a measurement shorter than this says nothing


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return False
    return getattr(get_ipython(), "kernel", None) is not None


class Progress:
    """A bar in a notebook, one line elsewhere, nothing for a short measurement."""

    def __init__(self, rounds: int, seconds: float, name: str, most: bool = False) -> None:
        """``most``: ``rounds`` is the most there may be (they stop once the median is
        known), said as "up to"."""
        self.rounds, self.seconds, self.name = rounds, seconds, name
        self.most = most
        self.bar: Any = None

    def __enter__(self) -> Progress:
        if self.seconds < SHOW_AFTER_S or self.rounds < 1:
            return self
        if _in_kernel():
            from tqdm.auto import tqdm  # only when a measurement is long enough to watch

            self.bar = tqdm(total=self.rounds, desc=f"%bench {self.name}", leave=False)
        else:
            most = ("up to ", " at most") if self.most else ("", "")
            sys.stderr.write(
                f"%bench {self.name}: measuring {most[0]}{self.rounds} rounds, "
                f"about {self.seconds:.0f} s{most[1]} …\n"
            )
            sys.stderr.flush()
        return self

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.close()
