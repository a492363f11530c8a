"""``%show`` and ``%memory``: arrays, pytrees and device memory you can see.

::

    %show params                 # the live ArrayView: tree, counts, flags, drawings
    %show --static field         # the static HTML view (no widget)
    %show --slice 4 volume       # a 3-D array drawn at volume[4, :, :]
    r = %show -o params          # the ShowRecord, not displayed
    %show on                     # JAX arrays and pytrees display as this view
    %show off                    # IPython's display again, exactly as it was

    %memory                      # device memory, live arrays by the line that made them
    r = %memory -o               # the MemoryReport, not displayed

Twins: ``jaxlab.show(x)``, which returns a handle with ``update``; ``jaxlab.memory()``.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ._options import parse_options, split_options


def _free_names(expr: str) -> list[str]:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise UsageError(f"%show: {expr!r} is not an expression: {e.msg}") from e
    bound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    return [n for n in dict.fromkeys(names) if n not in bound]


def _slice(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError as e:
        raise UsageError(
            f"%show: --slice takes indices separated by commas, e.g. --slice 4 or "
            f"--slice 0,3, not {text!r}"
        ) from e


def _range(text: str | None) -> tuple[float, float] | str | None:
    """``--range lo,hi`` (``--range=-1,1`` for a negative ``lo``) or ``--range first``."""
    if text is None or text.strip() == "first":
        return None if text is None else "first"
    from jaxlab.widgets.array_view import checked_range

    try:
        fixed = checked_range(tuple(float(p) for p in text.split(",")))
    except ValueError:
        fixed = None
    if not isinstance(fixed, tuple):
        raise UsageError(
            f"%show: --range takes lo,hi with lo < hi, e.g. --range 0,1 or --range=-1,1, "
            f"or --range first (fixed at the first frame's), not {text!r}"
        )
    return fixed


@magics_class
class ArrayMagics(Magics):
    @magic_arguments()
    @argument("--static", action="store_true", help="The static HTML view, not the widget.")
    @argument(
        "--slice",
        metavar="I,J",
        help="Leading indices of the drawn 2-D slice of a 3-D+ array, negative from the end "
        "(default: the middle).",
    )
    @argument(
        "--range",
        metavar="LO,HI",
        help="Fix the colours' range (--range=-1,1 for a negative LO), or 'first': fixed at "
        "the live view's first frame (default: the array's min and max).",
    )
    @argument("-o", dest="output", action="store_true", help="Return the ShowRecord.")
    @line_magic
    def show(self, line: str = "") -> Any:
        """Show an array or pytree: its paths, shapes, dtypes, devices, counts, bytes,
        NaN/Inf flags and statistics, and a drawing of its arrays. ``%show on`` makes this
        the display of JAX arrays and pytrees; ``%show off`` restores IPython's.

        Example: ``%show params``.
        """
        from ..arrays import formatter

        options, expr = split_options(line, frozenset({"--slice", "--range"}))
        args = parse_options(self.show, options)
        if expr in ("on", "off"):
            (formatter.turn_on if expr == "on" else formatter.turn_off)(self.shell)
            print(
                f"%show {expr}: JAX arrays and pytrees display as "
                + ("jaxlab's view" if expr == "on" else "IPython's default")
            )
            return None
        if not expr:
            raise UsageError("%show: name what to show, e.g. %show params (or %show on|off)")
        slice_at = _slice(args.slice)
        fixed = _range(args.range)
        value = self._evaluate(expr)
        from ..arrays.refusals import BadSlice, UnshowablePytree
        from ..arrays.show import checked_slice, live_view
        from ..arrays.tree import show_record

        try:  # walked and checked before anything is drawn: one refusal, nothing shown
            slice_at = checked_slice(value, expr, slice_at)
        except (UnshowablePytree, BadSlice) as e:
            raise UsageError(f"%show {expr}: {e}") from e
        if args.output:
            return show_record(value, expr, slice_at=slice_at)
        if args.static or getattr(self.shell, "kernel", None) is None:
            record = show_record(value, expr, slice_at=slice_at)
            if isinstance(fixed, tuple):
                from ..arrays.html import tree_html

                html = tree_html(record, lambda _path: fixed)
                display({"text/plain": record.text(), "text/html": html}, raw=True)
            else:
                display(record)
            return None
        live_view(value, expr, slice_at, rate=4.0, value_range=fixed)
        return None

    @magic_arguments()
    @argument("--top", type=int, default=20, metavar="N", help="Lines listed (default 20).")
    @argument("-o", dest="output", action="store_true", help="Return the MemoryReport.")
    @line_magic
    def memory(self, line: str = "") -> Any:
        """Show device memory in use (host memory on CPU), the live arrays, and which line
        of your code allocated them, largest first. Example: ``%memory``.
        """
        args = parse_options(self.memory, line)
        if args.top < 1:
            raise UsageError(f"%memory: --top takes a count of lines, 1 or more, not {args.top}")
        from ..arrays.memory import memory

        report = memory(top=args.top)
        if args.output:
            return report
        display(report)
        return None

    def _evaluate(self, expr: str) -> Any:
        ns = self.shell.user_ns if self.shell is not None else {}
        missing = [n for n in _free_names(expr) if n not in ns and not hasattr(builtins, n)]
        if missing:
            raise UsageError(
                f"%show: name {missing[0]!r} is not defined in the notebook; "
                f"run the cell that defines it first (in: %show {expr})"
            )
        try:
            return eval(compile(expr, "<%show>", "eval"), ns)  # the user's own expression
        except Exception as e:
            raise UsageError(f"%show {expr}: {type(e).__name__}: {e}") from e


def install(ip: Any) -> Any:
    """Unloading the extension turns ``%show on`` off."""
    from ..arrays import formatter

    return lambda: formatter.turn_off(ip)


MAGICS = (ArrayMagics,)
