"""What a magic says when the user's program fails under it.

Shared by the magic families: whether an exception is a bug of jaxlab's (shown whole) or
of the program (told as a ``UsageError``), and the short account of the latter::

    failure_text("%jit: compiling `f(x)`", error)
    # "%jit: compiling `f(x)` failed with TypeError: unsupported operand ...
    #    at line 3 of `f`: `return x @ w`"

The user's line is found as the error explanations find it (``explain_source``).
"""

from __future__ import annotations

import os
import traceback

from ..explain.source import user_frames, user_line
from ..explain.trace_failure import first_line

_JAXLAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def raised_in_jaxlab(error: BaseException) -> bool:
    """Whether ``error`` was raised by jaxlab's own code (its innermost frame is ours)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_JAXLAB_DIR)


def failure_text(doing: str, error: BaseException) -> str:
    """``"{doing} failed with {type}: {first line}"``, then the user's innermost line."""
    text = f"{doing} failed with {type(error).__name__}: {first_line(error)}"
    frames = user_frames(error.__traceback__)
    if frames:
        line = user_line(*frames[-1])
        code = f": `{line.text}`" if line.text else ""
        text += f"\n  at line {line.lineno} of `{line.function}`{code}"
    return text
