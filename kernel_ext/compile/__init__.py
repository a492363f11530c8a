"""Compiling, observed: the phase report of one call, ``%%jit`` cells, lowered text, and
the session's compile log.

``report`` times trace, lower, compile and run of one call; ``cell`` compiles a cell as
one function of its free variables; ``lowered`` prints StableHLO and HLO. The compile log
is ``log`` (records and the bounded store), fed by ``capture`` (JAX's monitoring events
and cache-miss messages, read by ``messages``) and drawn by ``log_view``.

Inside the package imports run one way: ``messages`` and ``records`` at the bottom, the
store ``log`` on them, ``capture`` and ``log_view`` above the store. A ``CompileLog``
listens and draws itself with what this module hands down (``log.served_by``), so the
store never imports the modules above it.
"""

from . import log as _log
from .capture import start as _start
from .log_view import log_figure as _log_figure
from .log_view import log_html as _log_html
from .log_view import log_text as _log_text

_log.served_by(_log.Above(_start, _log_text, _log_html, _log_figure))
