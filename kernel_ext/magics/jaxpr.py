"""``%jaxpr f(x, y)``: the program JAX traces from a call, as a graph or as text.

::

    %jaxpr f(x, w)               # the jaxpr as a graph (nested programs as clusters)
    %jaxpr --grad f(x, w)        # the program of jax.grad(f), forward and backward coloured
    %jaxpr --depth 1 f(x, w)     # nested programs below depth 1 drawn as one node each
    %jaxpr --text f(x, w)        # JAX's pretty-printed jaxpr, coloured
    %jaxpr --stablehlo f(x, w)   # what jax.jit(f) lowers to
    %jaxpr --hlo f(x, w)         # what XLA compiled
    %jaxpr --diff f(x) g(x)      # two programs matched: added, removed, changed marked
    g = %jaxpr -o f(x, w)        # the Graph (or text object), not displayed

The call is traced, never run. Its plain-Python twins are ``jaxlab.jaxpr_graph``,
``jaxlab.graph.text.jaxpr_text``, ``jaxlab.stablehlo_text``, ``jaxlab.hlo_text`` and
``jaxlab.diff``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..explain.trace_failure import is_non_array_argument, needs_concrete_value
from ..program import Call, ProgramError, parse_call
from ._failures import failure_text, raised_in_jaxlab
from ._options import parse_options, split_options, top_level_spaces
from ._progress import watching

# Options that take a value: the call expression starts after the last option (and value).
_VALUED = frozenset({"--depth", "--budget", "--open", "--cost"})
# `--cost f(x)`: the call comes next (its first word has a bracket), so FLOPs are meant;
# `--cost flop f(x)` stays a (misspelt) measure, refused with the list
_BARE_COST = re.compile(r"(?<!\S)--cost(?=\s+[^\s(=]*\()")


@magics_class
class JaxprMagics(Magics):
    @magic_arguments()
    @argument("--text", action="store_true", help="JAX's pretty-printed jaxpr, coloured.")
    @argument("--stablehlo", action="store_true", help="The StableHLO that jax.jit lowers to.")
    @argument("--hlo", action="store_true", help="The HLO module XLA compiles (after fusion).")
    @argument("--grad", action="store_true", help="The program of jax.grad(f) instead of f.")
    @argument(
        "--diff",
        action="store_true",
        help="Two calls, f(x) g(y): their programs matched, what was added, removed or "
        "changed marked (jaxlab.diff).",
    )
    @argument(
        "--static",
        action="store_true",
        help="The static SVG rather than the GraphExplorer (the default in a live notebook).",
    )
    @argument(
        "--depth",
        type=int,
        default=None,
        metavar="N",
        help="Draw nested programs below depth N as one node.",
    )
    @argument(
        "--open",
        default=None,
        metavar="WHAT",
        help="Open these boxes in the GraphExplorer, with what holds them: nested "
        "programs by primitive or function name, or the calls and scopes a box is named "
        "for, separated by commas (--open scan,hamiltonian, --open shard_map), or every "
        "nested program to a depth (--open 2).",
    )
    @argument(
        "--cost",
        default=None,
        metavar="WHAT",
        help="FLOPs, bytes or transcendentals per equation drawn on the program (--cost "
        "flops, --cost bytes; --cost alone: flops): from the compiled program, loops "
        "counted by their trip counts (jaxlab.equation_costs).",
    )
    @argument(
        "--budget",
        type=int,
        default=None,
        metavar="N",
        help="Most nodes to draw (default 400); beyond it, collapse.",
    )
    @argument(
        "-o", dest="output", action="store_true", help="Return the result instead of displaying it."
    )
    @argument("call", nargs="*", help="The call to trace, e.g. f(x, y): traced, never run.")
    @line_magic
    def jaxpr(self, line: str = "") -> Any:
        """Show the jaxpr JAX traces from a call such as ``f(x, y)``, as a graph or as text.

        Example: ``%jaxpr --grad loss(params, batch)``.
        """
        options, source = split_options(_BARE_COST.sub("--cost flops", line), _VALUED)
        args = parse_options(self.jaxpr, options)
        views = [name for name in ("text", "stablehlo", "hlo") if getattr(args, name)]
        if len(views) > 1:
            raise UsageError(f"%jaxpr: choose one of --{' / --'.join(views)}, not several")
        for name, least in (("depth", 0), ("budget", 1)):
            value = getattr(args, name)
            if value is not None and value < least:
                raise UsageError(f"%jaxpr: --{name} must be {least} or more, not {value}")
        if args.open is not None and (views or args.static or args.output or args.diff):
            raise UsageError(
                "%jaxpr: --open chooses what the GraphExplorer opens; the static drawing "
                "(--static, -o, --text, --diff) opens every nested program already (--depth N "
                "closes those below N)"
            )
        if args.cost is not None:
            from ..timing.equation_cost import MEASURES

            if views or args.diff:
                other = f"--{views[0]}" if views else "--diff"
                raise UsageError(f"%jaxpr: --cost draws on the graph; leave out {other}")
            if args.cost not in MEASURES:
                raise UsageError(
                    f"%jaxpr: --cost takes one of {', '.join(MEASURES)}, not {args.cost!r}"
                )
        if args.diff:
            if views:
                raise UsageError(f"%jaxpr: --diff compares graphs; leave out --{views[0]}")
            return self._diff(source, args)
        try:
            call = parse_call(source, self.shell.user_ns if self.shell is not None else {})
        except ProgramError as e:
            raise UsageError(f"%jaxpr: {e}") from e
        if args.cost is not None:
            return self._cost(call, args)
        # Shown in the GraphExplorer: only its first view is built (a big program's whole
        # budgeted drawing would be built for nothing).
        explore = not (views or args.static or args.output) and _live()
        with watching("%jaxpr", f"tracing `{call.source}`"), _users_errors(call):
            result = _trace(call, args, views[0] if views else "graph", explore=explore)
        if args.output:
            return result
        if args.open is not None:
            display(_opened(result, args.open))
            return None
        display(_explorable(result) if not (views or args.static) else result)
        return None

    def _cost(self, call: Any, args: Any) -> Any:
        """``%jaxpr --cost flops f(x)``: the compiled program's costs per equation, drawn."""
        from ..timing.attribution import AttributionError
        from ..timing.equation_cost import equation_costs

        fun = call.fun
        if args.grad:
            import jax

            fun = jax.grad(fun)
        compiling = watching("%jaxpr", f"compiling `{call.source}` for its costs")
        with compiling, _users_errors(call, "%jaxpr --cost", AttributionError):
            result = equation_costs(fun, *call.args, measure=args.cost, **call.kwargs)
        if args.output:
            return result
        if args.open is not None:
            display(_opened(result.graph, args.open))
            return None
        display(result.graph if args.static else _explorable(result.graph))
        return None

    def _diff(self, source: str, args: Any) -> Any:
        """``%jaxpr --diff f(x) g(y)``: both calls traced, their programs matched."""
        from ..graph.diff import AFTER, BEFORE, diff

        namespace = self.shell.user_ns if self.shell is not None else {}
        try:
            calls = [parse_call(text, namespace) for text in split_calls(source)]
        except ProgramError as e:
            raise UsageError(f"%jaxpr --diff: {e}") from e
        graphs = []
        for call in calls:
            with watching("%jaxpr", f"tracing `{call.source}`"), _users_errors(call):
                graphs.append(_trace(call, args, "graph", explore=True))
        result = diff(graphs[0], graphs[1], titles=(calls[0].source, calls[1].source))
        if args.output:
            return result
        if args.static or not _live():
            display(result)
            return None
        from jaxlab.widgets import GraphExplorer

        display(GraphExplorer(result.graph(explore=True), opened=[BEFORE, AFTER]))
        return None


def split_calls(source: str) -> tuple[str, str]:
    """``"f(x) jax.checkpoint(f)(x)"`` -> ``("f(x)", "jax.checkpoint(f)(x)")``: the line cut
    at the first space outside brackets where both sides are calls."""
    import ast

    text = source.strip()
    for k in top_level_spaces(text):
        left, right = text[:k].strip(), text[k:].strip()
        try:
            nodes = [ast.parse(part, mode="eval").body for part in (left, right)]
        except SyntaxError:
            continue
        if all(isinstance(node, ast.Call) for node in nodes):
            return left, right
    raise ProgramError(
        f"--diff takes two calls separated by a space, e.g. `%jaxpr --diff f(x) g(x)` or "
        f"`%jaxpr --diff f(x) jax.checkpoint(f)(x)`; got `{text}`"
        if text
        else "--diff takes two calls, e.g. `%jaxpr --diff f(x) g(x)`"
    )


def _live() -> bool:
    """A live notebook: a kernel with a front end that runs widgets, and anywidget."""
    if getattr(get_ipython(), "kernel", None) is None:
        return False
    try:
        import jaxlab.widgets  # noqa: F401
    except ImportError:  # anywidget missing: the static view still draws
        return False
    return True


def _explorable(graph: Any) -> Any:
    """The GraphExplorer of ``graph`` in a live notebook (a kernel with a front end that
    runs widgets); the Graph itself (its static SVG) anywhere else."""
    from ..graph.model import Graph

    if not isinstance(graph, Graph) or not _live():
        return graph
    from jaxlab.widgets import GraphExplorer

    return GraphExplorer(graph)


def _opened(graph: Any, what: str) -> Any:
    """The GraphExplorer of ``graph`` with the nested programs ``what`` names open (the
    Graph itself where no widget can be shown: its static drawing opens them all)."""
    from ..graph.explore import Views

    words = [w.strip() for w in what.split(",") if w.strip()]
    views = graph.rebuild
    if not words or not isinstance(views, Views):
        return _explorable(graph)
    ids = views.explorer.boxes_to_open(words)
    if not ids:
        kinds = sorted(
            {
                views.explorer.where[i][0].items[views.explorer.where[i][1]].primitive
                for i in views.explorer.nested
            }
        )
        have = ", ".join(kinds) if kinds else "none"
        raise UsageError(
            f"%jaxpr: --open {what}: no nested program of this one is named so (it has: "
            f"{have}); name a primitive, a function or a depth (--open 1)"
        )
    if not _live():
        return graph
    from jaxlab.widgets import GraphExplorer

    return GraphExplorer(graph, opened=ids)


def _trace(call: Call, args: Any, view: str, explore: bool = False) -> Any:
    from ..graph.build import DEFAULT_BUDGET, call_graph

    fun, kwargs = call.fun, call.kwargs
    if view == "graph":
        # Inputs named as the call line names its arguments (`sharded`, not the `block`
        # of the shard_map'd function inside).
        return call_graph(
            fun,
            call.args,
            kwargs,
            grad=args.grad,
            depth=args.depth,
            budget=args.budget or DEFAULT_BUDGET,
            explore=explore,
            arg_names=call.arg_names,
            kwarg_names=call.kwarg_names,
        )
    import jax

    from ..program.static_leaves import split_static

    title = f"grad({call.fun_name})" if args.grad else call.fun_name
    # Non-array leaves (a module's activation function) are held static, as in the graph.
    split = split_static(fun, call.args, kwargs)
    target = jax.grad(split.fun) if args.grad else split.fun
    if view == "text":
        from ..graph.text import jaxpr_text

        return jaxpr_text(jax.make_jaxpr(target)(*split.args, **split.kwargs), title)
    from ..compile.lowered import hlo_text, stablehlo_text

    lowered = stablehlo_text if view == "stablehlo" else hlo_text
    return lowered(target, *split.args, **split.kwargs)


# --------------------------------------------------------------------------- failures


def _static_hint(call: Call, error: BaseException) -> str:
    """The argument JAX blames made static in the user's own %jaxpr call."""
    from ..explain.finding import blamed_parameter
    from ..program.static_leaves import call_with_bound

    # The parameter JAX blames, bound in the user's own call; a placeholder only when
    # JAX names none of the function's parameters.
    name = blamed_parameter(call.fun, error)
    rewritten = call_with_bound(call.source, call.fun, name) if name else None
    return (
        f"`%jaxpr {rewritten}` (each new value of `{name}` traces again)"
        if rewritten
        else f"`%jaxpr functools.partial({call.fun_source}, NAME=value)(...)` (NAME: the "
        "argument that line reads)"
    )


def _concrete_hint(call: Call, error: BaseException) -> str:
    static = _static_hint(call, error)
    return (
        "JAX traces with abstract values, so Python cannot branch on them or turn them into "
        "numbers. For a branch that depends on a value use "
        "`jax.lax.cond(pred, f_true, f_false, x)` or `jnp.where`; for a loop "
        f"`jax.lax.fori_loop` / `jax.lax.while_loop`; or make the argument static: {static}."
    )


@contextmanager
def _users_errors(call: Call, prefix: str = "%jaxpr", *said: type[Exception]) -> Iterator[None]:
    """The user's input (a ``ProgramError``, or one of ``said``: already worded with its
    fix) and the user's program failing under JAX become a UsageError with the user's
    line; a bug of ours is shown whole rather than blamed on the user's program."""
    expected: tuple[type[Exception], ...] = (ProgramError, *said)
    try:
        yield
    except expected as e:
        raise UsageError(f"{prefix}: {e}") from e
    except Exception as e:
        if raised_in_jaxlab(e):
            raise
        raise UsageError(describe_trace_failure(call, e)) from e


def describe_trace_failure(call: Call, error: BaseException) -> str:
    """A short explanation of why tracing ``call`` failed: the error, where, and the fix."""
    # Non-array leaves are held static before tracing; JAX still refuses them where the
    # user's own jax.jit receives them.
    bad = non_array_argument(call) if is_non_array_argument(error) else None
    if bad is not None:
        arg_name, where, value = bad
        shown = _shown(value)
        if hasattr(call.fun, "lower"):  # the user's jax.jit receives the leaf itself
            return (
                f"%jaxpr: argument `{where}` of `{call.source}` is a {type(value).__name__} "
                f"({shown}), and `{call.fun_source}` is compiled by jax.jit, which traces "
                "arrays and numbers only.\nTrace the plain function (jaxlab holds such leaves "
                "static), wrap it with `eqx.filter_jit`, or mark the argument static in jax.jit."
            )
        return (
            f"%jaxpr: argument `{where}` of `{call.source}` is a {type(value).__name__} "
            f"({shown}); JAX traces arrays and numbers only.\nBind it before tracing, e.g. "
            f"`%jaxpr functools.partial({call.fun_source}, {arg_name}=...)(...)`, or pass an array."
        )
    from ..explain.explanation import explain

    explained = explain(error)
    if explained is not None:
        # One format for every explained error: what happened, your line, the fix, the
        # docs, as the same error under jax.jit reads (errors are explained there too).
        text = f"%jaxpr: tracing `{call.source}` failed.\n{explained}"
        if needs_concrete_value(error):
            text += "\n  static     " + _static_hint(call, error).replace("`", "")
        return text
    text = failure_text(f"%jaxpr: tracing `{call.source}`", error)
    if needs_concrete_value(error):
        text += "\n" + _concrete_hint(call, error)
    elif isinstance(error, TypeError | AttributeError):
        held = non_array_argument(call)
        if held is not None:  # say that it reached the program as it is, not as an array
            _, where, value = held
            text += (
                f"\nArgument `{where}` is a {type(value).__name__} ({_shown(value)}): not an "
                "array, so it was held static and reached the function as it is."
            )
    return text


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def non_array_argument(call: Call) -> tuple[str, str, Any] | None:
    """The first argument leaf JAX cannot trace (a string, an object): its argument's name,
    the leaf's path (``params['w']``) and the leaf itself."""
    import jax

    from ..program.leaves import is_array_input, jax_accepts

    try:
        named = list(inspect.signature(call.fun).bind(*call.args, **call.kwargs).arguments.items())
    except (TypeError, ValueError):
        named = [(f"arg{i}", a) for i, a in enumerate(call.args)] + list(call.kwargs.items())
    for arg_name, value in named:
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            if not jax_accepts(leaf, is_array_input):
                return arg_name, arg_name + jax.tree_util.keystr(path), leaf
    return None


MAGICS = (JaxprMagics,)
