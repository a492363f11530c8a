"""``%compile_log``: every compilation of the session, live.

::

    %compile_log              # the live CompileMonitor widget
    %compile_log --static     # an HTML table and a matplotlib chart (no widget)
    %compile_log --static --all   # the chart draws JAX's and libraries' functions too
    %compile_log --clear      # forget what was logged so far
    log = %compile_log -o     # the CompileLog itself

While the extension is loaded, :func:`install` keeps jaxlab's ``jax.monitoring``
listeners on (JAX's config and logging stay the user's) and times each cell so the log
can tell compiling from the rest of the cell; ``%unload_ext`` takes the listeners and
the cell clock off and detaches every live view of the log. Its plain-Python twin is
``jaxlab.compile_log()``.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import Image, display

from ..compile.capture import WHERE, start
from ..compile.log import CompileLog, compile_log
from ._options import parse_options


@magics_class
class CompileLogMagics(Magics):
    @magic_arguments()
    @argument("--static", action="store_true", help="An HTML table and a chart, not the widget.")
    @argument("--clear", action="store_true", help="Forget every compilation logged so far.")
    @argument("--last", type=int, default=50, metavar="N", help="Compilations in the chart.")
    @argument(
        "--all",
        dest="all_functions",
        action="store_true",
        help="The chart draws JAX's eager operations and libraries' functions too.",
    )
    @argument(
        "-o", dest="output", action="store_true", help="Return the CompileLog, do not display."
    )
    @line_magic
    def compile_log(self, line: str = "") -> Any:
        """Show every compilation of the session: phases, cache hits, why it recompiled.

        Example: ``%compile_log`` (live widget) or ``%compile_log --static``.
        """
        args = parse_options(self.compile_log, line)
        if args.last < 1:
            raise UsageError(f"%compile_log: --last must be a positive number, not {args.last}")
        log = compile_log()
        if args.clear:
            log.clear()
            return None
        if args.output:
            return log
        if args.static:
            display(log)
            figure = log.plot(last=args.last, mine_only=not args.all_functions)
            display(Image(data=_png(figure), format="png"))
            return None
        display(_monitor(log))
        return None


_MONITOR: Any = None  # the session log's CompileMonitor, shared by every display


def _monitor(log: CompileLog) -> Any:
    """One live widget for the log: displaying it again adds a view, not another subscriber."""
    from jaxlab.widgets import CompileMonitor

    global _MONITOR
    # made anew when never made, closed by the user or by an unload, or watching another log
    if (
        _MONITOR is None
        or _MONITOR.comm is None
        or _MONITOR.log is not log
        or not _MONITOR.subscribed
    ):
        _MONITOR = CompileMonitor(log)
    return _MONITOR


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    # "tight": the figure grows to its reasons, however long, and no wider
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return buffer.getvalue()


class _CellClock:
    """Times each cell and tells the log, so it can split the user's compiling and
    jaxlab's own work from the rest of the cell."""

    def __init__(self, log: CompileLog) -> None:
        self.log = log
        self.started: tuple[float, float, float] | None = None

    def pre_run_cell(self, *args: Any) -> None:
        self.started = (time.perf_counter(), self.log.compile_s, self.log.jaxlab_work_s)

    def post_run_cell(self, *args: Any) -> None:
        if self.started is None:
            return
        t0, compiled_before, jaxlab_before = self.started
        self.started = None
        self.log.add_cell_time(
            time.perf_counter() - t0,
            self.log.compile_s - compiled_before,
            self.log.jaxlab_work_s - jaxlab_before,
        )


def _detach_views(log: CompileLog) -> None:
    # Only when a view was ever made: unloading imports no widget code.
    monitors = sys.modules.get("jaxlab.widgets.compile_monitor")
    if monitors is not None:
        monitors.detach_all(log)


def _cell_namer(ip: Any) -> Callable[[str], str | None] | None:
    # IPython names its cell files ("/tmp/ipykernel_1/123.py" or "<ipython-input-3-...>");
    # its compiler maps them back to "In[3]".
    fmt = getattr(getattr(ip, "compile", None), "format_code_name", None)
    if fmt is None:
        return None

    def name(filename: str) -> str | None:
        found = fmt(filename)
        return found[1] if found else None

    return name


def install(ip: Any) -> Callable[[], None]:
    """Listen to JAX for the session's log and time cells; returns the undo."""
    log = compile_log()
    stop = start(log)
    previous_namer = WHERE.cell_namer
    WHERE.cell_namer = _cell_namer(ip)
    clock = _CellClock(log)
    ip.events.register("pre_run_cell", clock.pre_run_cell)
    ip.events.register("post_run_cell", clock.post_run_cell)

    def undo() -> None:
        ip.events.unregister("pre_run_cell", clock.pre_run_cell)
        ip.events.unregister("post_run_cell", clock.post_run_cell)
        WHERE.cell_namer = previous_namer
        _detach_views(log)
        stop()

    return undo


MAGICS = (CompileLogMagics,)
