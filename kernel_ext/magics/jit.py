"""``%jit f(x)`` and ``%%jit``: compile phase by phase, or a whole cell as one function.

::

    %jit f(x, w)                  # trace, lower, compile, first and steady-state run
    %jit --static n f(x, n=3)     # n is a static argument (by name; a number for a position)
    %jit --stablehlo f(x, w)      # ... with the StableHLO text (--hlo: XLA's optimised HLO)
    r = %jit -o f(x, w)           # the CompileReport, not displayed

    %%jit                         # the cell as one compiled function of what it reads
    y = jnp.tanh(x @ w)
    y.sum()

A ``%%jit`` cell's array inputs are traced, its Python scalars, strings and callables
are static; it recompiles only for new shapes, dtypes or static values, and says why.
The plain-Python twins are ``jaxlab.compile_report`` and ``jaxlab.jit_cell``.
"""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..compile.cell import cell_jit
from ..explain.finding import blamed_parameter
from ..explain.trace_failure import is_non_array_argument, needs_concrete_value, returns_non_array
from ..program import Call, ProgramError, parse_call
from ..program.static_leaves import filter_jit_target, resolve_static
from ._failures import failure_text
from ._options import parse_options, split_options
from ._progress import watching

_VALUED = frozenset({"--static"})
_CELL_OPTIONS: dict[str, tuple[Any, tuple[str, ...]]] = {}  # %%jit's first lines, read


def _static_names(text: str | None, magic: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    bad = [n for n in names if not (n.isidentifier() or _is_position(n))]
    if bad:
        raise UsageError(
            f"{magic}: --static takes names separated by commas (`--static n,mode`), not {bad[0]!r}"
        )
    return names


def _is_position(name: str) -> bool:
    return name.lstrip("-").isdigit()


@magics_class
class JitMagics(Magics):
    @magic_arguments()
    @argument(
        "--static",
        metavar="NAMES",
        help="Static arguments (line: argument names or positions; cell: input names), "
        "comma-separated.",
    )
    @argument("--stablehlo", action="store_true", help="Line form: also show the StableHLO.")
    @argument("--hlo", action="store_true", help="Line form: also show XLA's optimised HLO.")
    @argument(
        "-q", "--quiet", action="store_true", help="Cell form: no note when the cell compiles."
    )
    @argument(
        "-o",
        dest="output",
        action="store_true",
        help="Return the result object (CompileReport / CellRun) instead of displaying it.",
    )
    @argument("call", nargs="*", help="Line form: the call to compile and run, e.g. f(x, y).")
    @line_cell_magic
    def jit(self, line: str = "", cell: str | None = None) -> Any:
        """Compile with a phase report (``%jit f(x)``), or run a cell compiled (``%%jit``).

        Example: ``%jit --static n f(x, n=3)``; a cell starting with ``%%jit --static n``.
        """
        if cell is not None:
            args, static = self._cell_options(line)
            return self._cell(cell, args, static)
        options, source = split_options(line, _VALUED)
        args = parse_options(self.jit, options)
        return self._report(source, args, _static_names(args.static, "%jit"))

    def _cell_options(self, line: str) -> tuple[Any, tuple[str, ...]]:
        """A cell's first line read into its options and static names, once per line: a
        cell run again and again has the same line, and argparse was half of what the
        magic added to each run (benchmarks/jit_overhead.py)."""
        known = _CELL_OPTIONS.get(line)
        if known is not None:
            return known
        args = parse_options(self.jit, line, cell=True)
        static = _static_names(args.static, "%%jit")
        if args.call:
            raise UsageError(
                f"%%jit takes options only on its first line, not {' '.join(args.call)!r} "
                "(the cell itself is the program)"
            )
        if args.stablehlo or args.hlo:
            raise UsageError(
                "%%jit: --stablehlo / --hlo belong to %jit f(x); for a cell, define a "
                "function and use `%jit --hlo f(x)`"
            )
        if len(_CELL_OPTIONS) >= 64:  # (lines typed by hand: a few)
            _CELL_OPTIONS.clear()
        _CELL_OPTIONS[line] = (args, static)  # read only: the namespace is never changed
        return args, static

    def _report(self, source: str, args: Any, static: tuple[str, ...]) -> Any:
        from ..compile.report import compile_report

        if not source:
            raise UsageError("%jit: give a call such as `%jit f(x)` (or use %%jit on a cell)")
        namespace = self.shell.user_ns if self.shell is not None else {}
        try:
            call = parse_call(source, namespace)
        except ProgramError as e:
            raise UsageError(f"%jit: {e}") from e
        nums = tuple(int(n) for n in static if _is_position(n))
        names = tuple(n for n in static if not _is_position(n))
        show = tuple(v for v in ("stablehlo", "hlo") if getattr(args, v))
        if filter_jit_target(call.fun) is not None and static:
            raise UsageError(
                f"%jit: `{call.fun_source}` is wrapped by equinox.filter_jit, which holds every "
                "non-array argument static already; drop --static (or pass an array for what "
                "should be traced)"
            )
        if hasattr(call.fun, "trace") and static:
            raise UsageError(
                f"%jit: `{call.fun_source}` is already jitted, so its static arguments were "
                "fixed by jax.jit; drop --static or pass the plain function"
            )
        try:
            resolve_static(call.fun, nums, names)
        except ValueError as e:
            raise UsageError(f"%jit --static: {e}") from e
        with watching("%jit", f"compiling `{call.source}`"):
            try:
                report = compile_report(
                    call.fun,
                    *call.args,
                    static_argnums=nums,
                    static_argnames=names,
                    show=show,
                    **call.kwargs,
                )
            except Exception as e:
                raise UsageError(_describe_failure(call, e)) from e
        if args.output:
            return report
        display(report)
        return None

    def _cell(self, source: str, args: Any, static: tuple[str, ...]) -> Any:
        namespace = self.shell.user_ns if self.shell is not None else {}
        # no notice: a %%jit cell may run for long on purpose; an interrupt still ends cleanly
        with watching("%%jit", "running the cell", notice=False):
            try:
                value, run = cell_jit().run(source, namespace, static, record=args.output)
            except ProgramError as e:
                raise UsageError(f"%%jit: {e}") from e
        if args.output:
            return run
        if run is not None and run.compiled and not args.quiet:
            display(run)
        return value


def _describe_failure(call: Call, error: BaseException) -> str:
    """Why compiling ``call`` failed: the error, the user's line, and the usual fix."""
    text = failure_text(f"%jit: compiling `{call.source}`", error)
    if needs_concrete_value(error):
        # The parameter JAX blames, so the command offered is one that works.
        name = blamed_parameter(call.fun, error)
        static = (
            f"`%jit --static {name} {call.source}` (each new value of `{name}` compiles again)"
            if name
            else f"`%jit --static NAME {call.source}` (NAME: the argument that line reads; "
            "each new value compiles again)"
        )
        text += (
            "\nJAX traces with abstract values, so Python cannot branch or loop on them. Use "
            "`jax.lax.cond` / `jnp.where` for a branch, `jax.lax.fori_loop` for a loop, or "
            f"mark the argument static: {static}."
        )
    elif is_non_array_argument(error) and hasattr(call.fun, "trace"):
        # Only the user's own jax.jit sees non-array leaves: jaxlab holds them static.
        text += (
            f"\n`{call.fun_source}` is compiled by jax.jit, which traces arrays only: pass the "
            "plain function (jaxlab holds non-array leaves static), wrap it with "
            "`eqx.filter_jit`, or give jax.jit static_argnames for that argument."
        )
    elif is_non_array_argument(error):
        path = re.search(r"at path (\w+)", str(error))
        name = path.group(1) if path else "NAME"
        text += f"\nA non-array argument must be static: `%jit --static {name} {call.source}`."
    elif returns_non_array(error):
        text += "\nA jitted function returns arrays only: keep strings and other objects out."
    elif type(error).__name__ == "TraceContextError":  # flax nnx: state changed in the call
        text += (
            "\nThe call changes the state of a flax nnx module it closes over (RNG counts, "
            "batch statistics), which jax.jit cannot write back. Run it in a %%jit cell, "
            f"which writes the module's changes back (`%%jit` then `y = {call.source}`), "
            "or pass the module as an argument, or compile it with nnx.jit."
        )
    return text


MAGICS = (JitMagics,)
