"""``%grad f(x)`` and ``%%grad``: gradients you can see.

::

    %grad loss(params, x)                  # value and gradient w.r.t. the first argument
    %grad --wrt w,b loss(x, w, b)          # ... w.r.t. arguments by name (--argnums 1,2)
    %grad --check loss(params, x)          # ... with a finite-difference check
    %grad --graph loss(params, x)          # ... with the annotated gradient graph below
    %grad --graph --static loss(params, x) # ... drawn as a static SVG, not the explorer
    %grad f(x)                             # a non-scalar output gives its Jacobian
    %grad --hessian f(x)                   # the Hessian (--hvp v: Hessian-vector product)
    %grad --split f(x)                     # primal, linearized (JVP), transposed (VJP)
    %grad --steps f(x, w)                  # the chain rule played one equation a step
    %grad --steps --jvp f(x, w)            # ... in forward mode (tangents, jax.jvp)
    r = %grad -o loss(params, x)           # the GradReport, not displayed

    %%grad --wrt w,b                       # the cell's last expression, differentiated
    y = jnp.tanh(x @ w + b)                # w.r.t. notebook variables: stores grad_w,
    ((y - t) ** 2).mean()                  # grad_b and the report as _grad

In a live notebook ``--graph`` shows the graph in the GraphExplorer (clusters that open,
search, hover), as ``%jaxpr`` does; ``--static``, a terminal and ``-o`` keep the static SVG
(and a saved notebook shows the explorer's static twin). ``--steps`` shows the
StepsPlayer in a live notebook; a terminal shows the walk's drawing and text, ``-o``
returns the GradSteps.

The plain-Python twins are ``jaxlab.grad_report``, ``jaxlab.grad_split`` and
``jaxlab.grad_cell``.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..program import Call, ProgramError, parse_call, parse_expression
from ._failures import failure_text, raised_in_jaxlab
from ._options import parse_options, split_options
from ._progress import watching

_VALUED = frozenset({"--wrt", "--argnums", "--mode", "--hvp"})
_LINE_ONLY = ("argnums", "has_aux", "hessian", "hvp", "split", "steps", "jvp")


@magics_class
class GradMagics(Magics):
    @magic_arguments()
    @argument("--wrt", metavar="NAMES", help="Differentiate w.r.t. these arguments (x,y).")
    @argument("--argnums", metavar="NUMS", help="... or these positions (0,1); default 0.")
    @argument("--has-aux", action="store_true", help="f returns (value, aux).")
    @argument("--check", action="store_true", help="Check against finite differences.")
    @argument("--mode", choices=("fwd", "rev"), help="Jacobian mode (default: the cheaper one).")
    @argument("--hessian", action="store_true", help="The Hessian (scalar outputs).")
    @argument("--hvp", metavar="V", help="The Hessian-vector product with V.")
    @argument("--jacobian", action="store_true", help="%%grad: allow a non-scalar result.")
    @argument("--graph", action="store_true", help="Show the annotated gradient graph.")
    @argument("--split", action="store_true", help="Primal, linearized and transposed programs.")
    @argument("--steps", action="store_true", help="Play the chain rule one equation a step.")
    @argument("--jvp", action="store_true", help="With --steps: forward mode (tangents).")
    @argument(
        "--static",
        action="store_true",
        help="With --graph: the static SVG rather than the GraphExplorer (a live notebook's).",
    )
    @argument(
        "-o", dest="output", action="store_true", help="Return the result instead of displaying it."
    )
    @argument("call", nargs="*", help="The call to differentiate, e.g. loss(params, x).")
    @line_cell_magic
    def grad(self, line: str = "", cell: str | None = None) -> Any:
        """Value and derivative of a call (``%grad f(x)``) or of a cell's last expression
        (``%%grad``), with an optional finite-difference check and gradient graph.

        Example: ``%grad --wrt w --check loss(x, w)``.
        """
        options, source = split_options(line, _VALUED)
        args = parse_options(self.grad, options, cell=cell is not None)
        ns = self.shell.user_ns if self.shell is not None else {}
        magic, what = ("%grad", f"`{source}`") if cell is None else ("%%grad", "the cell")
        if args.static and not args.graph:
            raise UsageError(f"{magic}: --static chooses how --graph draws; add --graph")
        calls: list[Call] = []  # the line's parsed call (its arguments evaluated once)
        with watching(magic, f"differentiating {what}"):
            try:
                result = (
                    _line(args, source, ns, calls)
                    if cell is None
                    else _cell(args, source, cell, ns)
                )
            except UsageError:
                raise
            except ProgramError as e:  # GradError too: the user's input, already explained
                raise UsageError(f"{magic}: {e}") from e
            except Exception as e:
                if raised_in_jaxlab(e):
                    raise  # a bug of ours: show it whole rather than blame the user's program
                raise UsageError(failure_text(f"{magic}: differentiating {what}", e)) from e
        if args.output:
            return result
        views = _views(result, static=args.static)
        if cell is None and len(views) == 2:  # the live explorer: its steps on a click
            views.append(_steps_button(args, calls[0]))
        for shown in views:
            display(shown)
        return None


def _views(result: Any, static: bool) -> list[Any]:
    """What to display: the report with its graph inside (static SVG), or in a live
    notebook the report's table and then the graph's GraphExplorer, as ``%jaxpr`` shows;
    for ``--steps`` the StepsPlayer in a live notebook, the walk's drawing and text
    anywhere else."""
    from ..autodiff.record import GradReport
    from ..steps.record import GradSteps
    from .jaxpr import _explorable  # one rule for explorer vs static, shared with %jaxpr

    if isinstance(result, GradSteps):  # --steps: the player, where a front end runs it
        return [_player(result)]
    graph = getattr(result, "graph", None)
    if static or not isinstance(result, GradReport) or graph is None:
        return [result]
    explorer = _explorable(graph)
    if explorer is graph:  # no live front end (or no anywidget): the static SVG inside
        return [result]
    return [dataclasses.replace(result, graph=None), explorer]


def _line(args: Any, source: str, ns: dict[str, Any], calls: list[Call]) -> Any:
    """``%grad f(x)``: the report (or the split) for one call. Raises what ``grad`` words."""
    from ..autodiff.report import report_for_call
    from ..autodiff.split import split_for_call

    if args.jacobian:
        raise UsageError(
            "%grad: --jacobian is for %%grad cells; %grad f(x) gives the "
            "Jacobian of a non-scalar output by itself"
        )
    if args.wrt and args.argnums:
        raise UsageError("%grad: choose arguments by --wrt or by --argnums, not both")
    call = parse_call(source, ns)
    calls.append(call)
    hvp = _evaluate(args.hvp, ns, "--hvp") if args.hvp else None
    choose = {"wrt": args.wrt} if args.wrt else {"argnums": args.argnums or 0}
    if args.steps or args.jvp:
        return _steps(args, call, choose)
    if args.split:
        _refuse_with_split(args)
        return split_for_call(
            call.fun,
            call.args,
            _no_clash(call),
            **choose,
            arg_names=call.arg_names,
            kwarg_names=call.kwarg_names,
        )
    return report_for_call(
        call.fun,
        call.args,
        call.kwargs,
        **choose,
        has_aux=args.has_aux,
        check=args.check,
        mode=args.mode,
        hessian=args.hessian,
        hvp=hvp,
        graph=args.graph,
        arg_names=call.arg_names,
        kwarg_names=call.kwarg_names,
    )


# What --split cannot do beside its three programs, and why (each refused, never dropped).
_NOT_WITH_SPLIT = (
    ("hessian", "--hessian", "the split shows reverse mode's programs of the first derivative"),
    ("hvp", "--hvp", "the split shows reverse mode's programs of the first derivative"),
    ("check", "--check", "the check tests a derivative's numbers, the split shows programs"),
    ("graph", "--graph", "the split draws its own three graphs"),
    ("mode", "--mode", "the split is reverse mode by definition"),
    ("has_aux", "--has-aux", "the split linearizes the whole output"),
)


def _refuse_with_split(args: Any) -> None:
    """--split beside an option it would ignore: a UsageError that says why and what to run."""
    for name, option, why in _NOT_WITH_SPLIT:
        if getattr(args, name):
            raise UsageError(
                f"%grad: --split and {option} do not go together ({why}); run "
                f"`%grad {option} ...` and `%grad --split ...` as two lines"
            )


# What --steps cannot do beside its walk, and why (each refused, never dropped).
_NOT_WITH_STEPS = (
    ("split", "--split", "the steps walk the gradient program themselves"),
    ("hessian", "--hessian", "the steps play the first derivative"),
    ("hvp", "--hvp", "the steps play the first derivative"),
    ("check", "--check", "the check tests numbers, the steps show how they are made"),
    ("graph", "--graph", "the steps draw the program they walk"),
    ("mode", "--mode", "choose forward mode with --jvp"),
    ("has_aux", "--has-aux", "the steps differentiate the whole output"),
    ("static", "--static", "the steps have their own player"),
)


def _steps(args: Any, call: Call, choose: dict[str, Any]) -> Any:
    """``%grad --steps [--jvp] f(x, w)``: the GradSteps of the call."""
    if args.jvp and not args.steps:
        raise UsageError(
            "%grad: --jvp plays forward mode with --steps; write `%grad --steps --jvp ...`"
        )
    for name, option, why in _NOT_WITH_STEPS:
        if getattr(args, name):
            raise UsageError(f"%grad: --steps and {option} do not go together ({why})")
    return _walk(call, choose, "forward" if args.jvp else "reverse")


def _walk(call: Call, choose: dict[str, Any], mode: str) -> Any:
    """The GradSteps of ``call`` (``--steps``, and the button under ``--graph``)."""
    from ..steps.entry import steps_for_call

    return steps_for_call(
        call.fun,
        call.args,
        call.kwargs,
        **choose,
        mode=mode,
        arg_names=call.arg_names,
        kwarg_names=call.kwarg_names,
    )


def _steps_button(args: Any, call: Call) -> Any:
    """Under ``--graph``'s explorer: a button that plays the same call's chain rule (the
    values the magic ran with)."""
    from jaxlab.widgets.steps_button import steps_button

    choose = {"wrt": args.wrt} if args.wrt else {"argnums": args.argnums or 0}
    return steps_button(lambda: _walk(call, choose, "reverse"))


def _player(result: Any) -> Any:
    """The steps' player widget in a live notebook; the record (its drawing and text)
    anywhere else."""
    from .jaxpr import _live

    if not _live():
        return result
    try:
        from jaxlab.widgets import StepsPlayer
    except ImportError:  # no widget front end installed: the record's own view
        return result
    return StepsPlayer(result)


def _no_clash(call: Call) -> dict[str, Any]:
    clash = {"argnums", "wrt"} & set(call.kwargs)
    if clash:
        raise UsageError(
            f"%grad --split: {call.fun_source} takes a keyword named "
            f"`{sorted(clash)[0]}`; bind it first with functools.partial"
        )
    return call.kwargs


def _cell(args: Any, source: str, cell: str, ns: dict[str, Any]) -> Any:
    """``%%grad``: the cell's report; stores the gradients in ``ns`` once all is computed."""
    from ..autodiff.cell import grad_cell

    used = [f"--{name.replace('_', '-')}" for name in _LINE_ONLY if getattr(args, name)]
    if used or source:
        what = ", ".join(used) if used else f"`{source}`"
        raise UsageError(
            f"%%grad takes --wrt, --check, --jacobian, --mode, --graph, --static and -o, "
            f"not {what}: "
            "the cell's last expression is what it differentiates"
        )
    result = grad_cell(
        cell,
        ns,
        wrt=args.wrt,
        jacobian=args.jacobian,
        check=args.check,
        mode=args.mode,
        graph=args.graph,
    )
    # Only now, with everything computed, does the namespace change.
    ns.update(result.updates())
    return result.report


def _evaluate(text: str, ns: dict[str, Any], option: str) -> Any:
    try:
        node = parse_expression(text)
        return eval(compile(ast.Expression(body=node), "<jaxlab option>", "eval"), dict(ns))
    except ProgramError as e:
        raise UsageError(f"%grad {option}: {e}") from e
    except Exception as e:
        raise UsageError(
            f"%grad {option} {text}: evaluating it raised {type(e).__name__}: {e}"
        ) from e


MAGICS = (GradMagics,)
