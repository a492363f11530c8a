"""``%bench f(x)`` and ``%%profile``: where the time goes under asynchronous dispatch.

::

    %bench f(x)                   # first call, per-call time until ready, until it returns,
                                  # what unblocked timing claims, FLOP/s against this machine
    %bench -n 10 -r 5 f(x)        # 5 rounds of 10 calls instead of choosing like %timeit
                                  # (default: rounds until the median is known within ±2%)
    %bench --compare g(x) f(x)    # g measured interleaved with f, and the ratio
    %bench --explain f(x)         # ... with a timeline of a few calls (dispatch vs work)
    %bench --peak f(x)            # measure this machine's peak again first (else: once a
                                  # session, or this machine's kept peak, with its date)
    r = %bench -o f(x)            # the BenchResult

    %%profile                     # the cell under jax.profiler: a ProfileTimeline widget,
    for _ in range(10):           # the costliest XLA modules and ops, and the lines that
        loss = float(step(x))     # synced with the host (here: float(...), 10 times)

The plain-Python twins are ``jaxlab.bench`` and ``jaxlab.profile``.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..program import ProgramError, parse_call
from ._failures import failure_text, raised_in_jaxlab
from ._options import parse_options, split_options, top_level_spaces

_VALUED = frozenset({"-n", "-r", "--compare"})


def take_compare(line: str) -> tuple[str, str]:
    """``"--compare g(x, y) f(x)"`` → ``("g(x, y)", "f(x)")``: the compared call may hold
    spaces, so it runs to the first space outside brackets and quotes."""
    head, sep, rest = line.partition("--compare")
    if not sep or (head and not head.endswith(" ")):
        return "", line
    rest = rest.lstrip(" =")
    i = next(top_level_spaces(rest), None)
    if i is None:
        return rest, head.strip()
    return rest[:i], f"{head}{rest[i:]}".strip()


def _user_namespace(shell: Any) -> dict[str, Any]:
    return shell.user_ns if shell is not None else {}


@magics_class
class TimingMagics(Magics):
    @magic_arguments()
    @argument(
        "-n",
        dest="runs",
        type=int,
        metavar="RUNS",
        help="Calls per round (default: chosen as %%timeit does, so a round lasts 0.2 s).",
    )
    @argument(
        "-r",
        dest="repeats",
        type=int,
        default=None,
        metavar="REPEATS",
        help="Rounds (default: until the median is known within ±2%%, 3 to 7 rounds); the "
        "median is quoted.",
    )
    @argument("--compare", metavar="CALL", help="Another call, measured interleaved, e.g. g(x).")
    @argument(
        "--explain",
        action="store_true",
        help="Also draw a few calls: dispatch returning at once, the work behind it.",
    )
    @argument(
        "--peak",
        action="store_true",
        help="Measure this machine's peak FLOP/s and bytes/s again (alone, or before the call).",
    )
    @argument(
        "-o",
        dest="output",
        action="store_true",
        help="Return the BenchResult instead of displaying it.",
    )
    @argument("call", nargs="*", help="The call to measure, e.g. f(x).")
    @line_magic
    def bench(self, line: str = "") -> Any:
        """Measure a call as JAX runs it: ``%bench f(x)``, ``%bench --compare g(x) f(x)``."""
        from ..timing.bench import BenchError, CallFailed, bench_targets, target

        compare, rest = take_compare(line)
        options, source = split_options(rest, _VALUED - {"--compare"})
        args = parse_options(self.bench, options)
        if args.peak:
            from ..timing.peak import machine_peak

            peak = machine_peak(refresh=True)
            if not source and not compare:
                if args.output:
                    return peak
                print(_peak_text(peak))
                return None
        if not source:
            raise UsageError("%bench: give a call such as `%bench f(x)`")
        namespace = _user_namespace(self.shell)
        try:
            calls = [parse_call(source, namespace)]
            if compare:
                calls.append(parse_call(compare, namespace))
        except ProgramError as e:
            raise UsageError(f"%bench: {e}") from e
        try:
            targets = [target(c.fun, c.args, c.kwargs, c.source) for c in calls]
            result = bench_targets(
                targets[0],
                targets[1] if len(targets) > 1 else None,
                runs=args.runs,
                repeats=args.repeats,
                explain=args.explain,
            )
        except BenchError as e:
            raise UsageError(f"%bench: {e} (see %bench?)") from e
        except CallFailed as failed:  # the user's call raised: their error, with their line
            error = failed.error
            raise UsageError(failure_text(f"%bench: calling `{failed.name}`", error)) from error
        except Exception as e:
            if raised_in_jaxlab(e):  # a bug of jaxlab's: shown whole
                raise
            # the user's function raised: said once (it is not called again), with its line
            raise UsageError(failure_text(f"%bench: calling `{source}`", e)) from e
        if args.output:
            return result
        display(result)
        return None

    @magic_arguments()
    @argument(
        "--static",
        action="store_true",
        help="A static HTML view instead of the ProfileTimeline widget.",
    )
    @argument(
        "-o",
        dest="output",
        action="store_true",
        help="Return the ProfileResult instead of displaying it (the cell's value is dropped).",
    )
    @argument(
        "--graph",
        action="store_true",
        help="Also draw the program of the cell's most expensive jitted function with its "
        "profiled time per equation (a GraphExplorer; a static graph with --static).",
    )
    @cell_magic
    def profile(self, line: str, cell: str) -> Any:
        """Run the cell under ``jax.profiler.trace``: host and device timeline, JAX's
        compilations, the costliest XLA modules and ops, and the implicit device-to-host
        syncs with their lines."""
        from ..session.collector import collector_paused
        from ..timing.profile import ProfileError, profile

        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        args = parse_options(self.profile, line, cell=True)
        shell = self.shell
        if shell is None:
            raise UsageError("%%profile runs in an IPython shell")
        body, last = _compile_cell(shell, line, cell)
        namespace = shell.user_ns
        value = None
        try:
            # The cell's own error propagates as in a normal run, after the trace is closed
            # and its files removed; its traceback starts at the cell's line.
            with profile() as session:
                exec(body, namespace)
                if last is not None:
                    value = eval(last, namespace)
                _block_on(value, namespace, cell)
        except ProfileError as e:
            raise UsageError(f"%%profile: {e}") from e
        result = session.result
        # The views make thousands of records and no cycle: collections in the middle
        # would walk the kernel's whole heap (session/collector.py).
        with collector_paused():
            if args.graph and result is not None:
                _show_time_graph(result, static=args.static, namespace=namespace, cell=cell)
            if args.output:
                return result
            if args.static:
                display(result)
            else:
                from jaxlab.widgets import ProfileTimeline

                display(ProfileTimeline(result))
        return value


def _show_time_graph(result: Any, *, static: bool, namespace: Any, cell: str) -> None:
    """``%%profile --graph``: the costliest jitted function's program, its time drawn."""
    from ..timing.attribution import AttributionError

    name = result.costliest_function()
    if name is None:
        raise UsageError(
            "%%profile --graph: the cell ran no jitted function, so there is no program to "
            "draw its time on (jax.jit the function and call it in the cell)"
        )
    try:
        graph = result.graph(name, namespace=namespace, cell=cell)  # the cell's call of it
    except AttributionError as e:
        raise UsageError(f"%%profile --graph: {e}") from e
    if static:
        display(graph)
    else:
        from jaxlab.widgets import GraphExplorer

        display(GraphExplorer(graph))


# Statements a cell run by exec() cannot hold at its top level, and what to write instead.
_NOT_AT_TOP = {
    ast.Return: "`return` outside a function: the cell's last expression is its value",
    ast.Yield: "`yield` outside a function: put the generator in a def and profile a loop over it",
    ast.YieldFrom: "`yield from` outside a function: put it in a def and profile a loop over it",
    ast.Await: "`await` at the top of the cell: %%profile runs the cell synchronously; "
    "call asyncio.run(main()) in the cell instead",
    ast.AsyncFor: "`async for` at the top of the cell: %%profile runs the cell "
    "synchronously; put it in an async def and call asyncio.run(...) in the cell",
    ast.AsyncWith: "`async with` at the top of the cell: %%profile runs the cell "
    "synchronously; put it in an async def and call asyncio.run(...) in the cell",
    ast.Nonlocal: "`nonlocal` at the top of the cell: there is no enclosing function; "
    "use `global` or drop it",
}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _refuse_top_level(tree: ast.Module) -> None:
    """A UsageError for the first statement only a function body may hold (``return``,
    ``yield``, ``await``, ``nonlocal``), with its line as the user sees it."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, _SCOPES):
            continue  # a def's body may hold them (its decorators and defaults may not)
        for kind, why in _NOT_AT_TOP.items():
            if isinstance(node, kind):
                raise UsageError(f"%%profile: line {getattr(node, 'lineno', 0)}: {why}")
        if isinstance(node, ast.comprehension) and node.is_async:
            line = getattr(node.iter, "lineno", 0)
            raise UsageError(
                f"%%profile: line {line}: an `async for` comprehension at the top of the cell: "
                "%%profile runs the cell synchronously; put it in an async def and call "
                "asyncio.run(...) in the cell"
            )
        todo.extend(ast.iter_child_nodes(node))


def _profiler_call(tree: ast.Module) -> tuple[int, str] | None:
    """(line, what it does) of a call that starts or stops ``jax.profiler``'s trace."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, node.func.value
            profiler = (isinstance(owner, ast.Attribute) and owner.attr == "profiler") or (
                isinstance(owner, ast.Name) and owner.id == "profiler"
            )
            if name == "start_trace" or (name == "trace" and profiler):
                return node.lineno, "starts"
            if name == "stop_trace":
                return node.lineno, "stops"
    return None


def _cell_number(shell: Any) -> int:
    """The number IPython gave the running cell: the ``In[N]`` of the cell that called this
    magic (IPython has already moved ``execution_count`` on to the next cell)."""
    from ..explain.source import _cell_number as number_of

    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            number = number_of(frame.f_code.co_filename)
            if number is not None:
                return number
        frame = frame.f_back  # type: ignore[assignment]
    return int(shell.execution_count)


def _peak_text(peak: Any) -> str:
    from ..timing.bench_view import rate

    return (
        f"%bench --peak: {rate(peak.flops_s, 'FLOP/s')} (a {peak.matmul_n}² matmul), "
        f"{rate(peak.bytes_s, 'B/s')} (a streaming kernel of {peak.stream_bytes >> 20} MiB) "
        f"on {peak.platform}, {peak.conditions}"
    )


def _compile_cell(shell: Any, line: str, cell: str) -> tuple[Any, Any]:
    """The cell as (statements, last expression or None), compiled under IPython's name for
    the cell with the ``%%profile`` line counted as line 1, so syncs and tracebacks read
    ``In[5], line 3`` for the third line the user sees."""
    try:
        # IPython's transform tokenizes the cell first: a bad indent fails there already
        source = shell.transform_cell(cell)
        tree = ast.parse(source)
    except SyntaxError as e:
        raise UsageError(
            f"%%profile: the cell is not valid Python: {e.msg} (line {(e.lineno or 0) + 1})"
        ) from e
    ast.increment_lineno(tree, 1)  # below the %%profile line
    _refuse_top_level(tree)
    call = _profiler_call(tree)
    if call is not None:
        raise UsageError(
            f"%%profile: line {call[0]} {call[1]} jax.profiler's trace, which %%profile holds "
            "while the cell runs (JAX runs one trace at a time): run the cell without "
            "%%profile, or drop its own trace"
        )
    shown = f"%%profile {line}".rstrip() + "\n" + source
    filename = shell.compile.cache(shown, _cell_number(shell), raw_code=shown)
    last = None
    try:
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            expr = ast.Expression(tree.body.pop().value)
            last = compile(expr, filename, "eval")
        return compile(tree, filename, "exec"), last
    except SyntaxError as e:  # what the checks above did not foresee
        raise UsageError(f"%%profile: line {e.lineno}: {e.msg}") from e


def _block_on(value: Any, namespace: dict[str, Any], cell: str) -> None:
    """Wait for the cell's queued work (its value and the names it assigned) inside the
    trace, so the device spans are complete."""
    import jax

    names: set[str] = set()
    try:
        for node in ast.walk(ast.parse(cell)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    except SyntaxError:  # IPython syntax (a magic inside): the value alone is waited for
        pass
    leaves = [namespace.get(n) for n in names] + [value]
    arrays = [x for x in jax.tree_util.tree_leaves(leaves) if isinstance(x, jax.Array)]
    for array in arrays:
        try:
            array.block_until_ready()
        except Exception:  # deleted or donated: nothing left to wait for
            continue


MAGICS = (TimingMagics,)
