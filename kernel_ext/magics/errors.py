"""The `errors` family: JAX's common errors explained where they happen, and ``%jax_nans``.

``install(ip)`` puts an exception handler into IPython (``set_custom_exc``). For an error
that jaxlab can explain (see ``jaxlab.explain``) it prints the explanation above a
traceback shortened to the user's own frames; everything else, and any error inside the
explainer itself, gets IPython's normal traceback. The exception itself is never touched:
its type and message end the traceback, ``sys.last_value`` holds it and ``%tb`` shows it
in full. IPython keeps one custom handler, so the previous one is saved, still called for
the errors it was registered for, and put back on unload.

::

    %jax_nans on         # jax_debug_nans: stop at the first NaN, explained
    %jax_nans off
    %jax_nans            # the current state
    state = %jax_nans on -o

The twins are ``jaxlab.explain(exc)`` and ``jaxlab.debug_nans(True)``.
"""

from __future__ import annotations

import functools
import logging
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..explain.explanation import explain
from ..explain.nans import NanCheck, debug_nans
from ..explain.source import is_user_file
from ._options import parse_options

log = logging.getLogger(__name__)

_ON = frozenset({"on", "true", "yes", "1"})
_OFF = frozenset({"off", "false", "no", "0"})


@dataclass
class _Session:
    """What loading changed in one shell, to put back on unload."""

    nans_at_load: bool
    nans_switched: bool = False


_sessions: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------- the handler
def _entries(tb: types.TracebackType | None) -> Iterator[types.TracebackType]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _is_user(tb: types.TracebackType) -> bool:
    return is_user_file(tb.tb_frame.f_code.co_filename)


def short_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without library frames after the first user frame.

    Frames before it (IPython's own ``run_code``) stay, so IPython's offsets still apply.
    New traceback objects are made: the exception's own ``__traceback__`` is untouched.
    """
    frames = list(_entries(tb))
    users = [i for i, t in enumerate(frames) if _is_user(t)]
    if not users:
        return frames[0] if frames else None
    first = users[0]
    keep = frames[:first] + [frames[i] for i in users]
    result: types.TracebackType | None = None
    for t in reversed(keep):
        result = types.TracebackType(result, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return result


def _remember(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """What IPython's own showtraceback records, so %tb and %debug see the original."""
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value


def _normal(
    shell: Any,
    previous: tuple[tuple[type, ...], Callable[..., Any]],
    etype: type[BaseException],
    value: BaseException,
    tb: Any,
    tb_offset: int | None,
) -> None:
    """Exactly what IPython would have done without us (or the previous handler)."""
    previous_types, previous_handler = previous
    if previous_types and issubclass(etype, previous_types):
        previous_handler(etype, value, tb, tb_offset)
        return None
    # a cell that does not parse has no frames of its own
    running = not issubclass(etype, SyntaxError) or any(map(_is_user, _entries(tb)))
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=running)
    return None


def handle(
    shell: Any,
    etype: type[BaseException],
    value: BaseException,
    tb: Any,
    tb_offset: int | None = None,
    *,
    previous: tuple[tuple[type, ...], Callable[..., Any]] = ((), lambda *a: None),
) -> list[str] | None:
    """IPython's custom exception handler: the explanation above a short traceback."""
    stb: list[str] | None = None
    try:
        explanation = explain(value)
        if explanation is not None:
            short = shell.InteractiveTB.structured_traceback(
                etype, value, short_traceback(tb), tb_offset=tb_offset
            )
            stb = [*explanation.lines(), *short]
    except Exception:  # the explainer failed: the user still gets the normal traceback
        log.debug("jaxlab could not explain %s", etype.__name__, exc_info=True)
    if stb is None:
        _normal(shell, previous, etype, value, tb, tb_offset)
        return None
    _remember(etype, value, tb)
    shell._showtraceback(etype, value, stb)  # ipykernel sends it with the real ename/evalue
    if shell.call_pdb:
        shell.debugger(force=True)
    return stb


def install(ip: Any) -> Callable[[], None]:
    """Put the explaining handler in; the returned undo puts back what was there."""
    previous = (ip.custom_exceptions, ip.CustomTB)
    session = _Session(nans_at_load=debug_nans().enabled)
    _sessions[ip] = session
    ours: tuple[type, ...] = (BaseException,)
    ip.set_custom_exc(ours, functools.partial(handle, previous=previous))

    def undo() -> None:
        if ip.custom_exceptions is ours:  # someone who came later keeps their handler
            ip.custom_exceptions, ip.CustomTB = previous
        if session.nans_switched:
            debug_nans(session.nans_at_load)
        _sessions.pop(ip, None)

    return undo


# --------------------------------------------------------------------------- %jax_nans
@magics_class
class ErrorMagics(Magics):
    @magic_arguments()
    @argument("state", nargs="?", help="`on` or `off`; without it, show the current state.")
    @argument("-o", dest="output", action="store_true", help="Return the NanCheck record.")
    @line_magic
    def jax_nans(self, line: str = "") -> NanCheck | None:
        """Switch JAX's NaN checker (``jax_debug_nans``) on or off.

        With it on, the first NaN stops the program with the primitive and the line that
        made it, explained. Unloading jaxlab restores the setting it found. Example:
        ``%jax_nans on``.
        """
        rest = " ".join(word for word in line.split() if word != "-o")
        if len(rest.split()) > 1:  # `%jax_nans f(x, y)`: a call is not a state
            raise UsageError(f"%jax_nans takes `on` or `off`, not `{rest}`")
        args = parse_options(self.jax_nans, line)
        enabled: bool | None = None
        if args.state is not None:
            word = args.state.lower()
            if word not in _ON | _OFF:
                raise UsageError(f"%jax_nans takes `on` or `off`, not `{args.state}`")
            enabled = word in _ON
            session = _sessions.get(self.shell)
            if session is not None:
                session.nans_switched = True
        state = debug_nans(enabled)
        if args.output:
            return state
        display(state)
        return None


MAGICS = (ErrorMagics,)
