"""A magic's options: split from the call after them, and parsed with the magic's help.

``%jaxpr --depth 2 -o f(x, -1)``: argparse cannot tell where the options end, because
the call may hold spaces, dashes and ``=`` (``f(x, -1)``, ``g(b='x y')``). The options
are read one by one from the left; the first word that is not an option (or an option's
value) starts the call::

    split_options("--depth 2 -o f(x, -1)", frozenset({"--depth"}))
    # ("--depth 2 -o", "f(x, -1)")

``parse_options`` is ``IPython.core.magic_arguments.parse_argstring`` whose errors name
the magic and point at its help (``%jaxpr: unrecognized arguments: --x (see %jaxpr?)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Set
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

_OPTION = re.compile(r"\s*(-{1,2}[A-Za-z][\w-]*)(=\S*)?")
_VALUE = re.compile(r"\s*\S+")


def split_options(line: str, valued: Set[str]) -> tuple[str, str]:
    """``line`` as ``(options, call)``; ``valued`` names the options that take a value.

    >>> split_options("--wrt x,y -o f(x, -1)", {"--wrt"})
    ('--wrt x,y -o', 'f(x, -1)')
    """
    pos = 0
    while True:
        m = _OPTION.match(line, pos)
        # "-f(x)" (a negated call) is the call, not an option "-f"
        if m is None or (m.end() < len(line) and not line[m.end()].isspace()):
            break
        pos = m.end()
        if m.group(1) in valued and m.group(2) is None:  # "--depth 2", not "--depth=2"
            value = _VALUE.match(line, pos)
            if value is not None:
                pos = value.end()
    return line[:pos].strip(), line[pos:].strip()


def parse_options(magic: Callable[..., Any], options: str, *, cell: bool = False) -> Any:
    """``options`` parsed by ``magic``'s ``@argument`` declarations (a bound magic method).

    A bad option (or an unclosed quote) is a ``UsageError`` naming the magic (``%%name``
    for a cell magic's first line) and its help, ``%name?``.
    """
    name = magic.__name__
    shown = f"{'%%' if cell else '%'}{name}"
    try:
        return parse_argstring(magic, options)
    except UsageError as e:
        raise UsageError(f"{shown}: {e} (see %{name}?)") from e
    except ValueError as e:  # shlex: "No closing quotation", "No escaped character"
        raise UsageError(
            f"{shown}: the options `{options}` do not split into words ({e}); close the "
            f"quote or drop it (see %{name}?)"
        ) from e


def top_level_spaces(text: str) -> Iterator[int]:
    """The positions of ``text``'s whitespace outside brackets and quotes, where a line
    of magic arguments splits into whole expressions (``f(x, y) g(x)`` at 7)."""
    depth, quote = 0, ""
    for k, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[k - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch.isspace() and depth == 0:
            yield k
