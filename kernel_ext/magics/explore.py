"""``%explore``: sliders on a compiled function, with its sensitivities drawn live.

::

    %explore sim(theta0=0.3, g=(1.0, 20.0), length=1.0)   # g's range given, others chosen
    %explore --leaves model_energy(params, a=1.5)           # params' float leaves as sliders
    %explore --x ts --target data sim(k=0.5)                # a curve against ts; "fit" to data
    view = %explore -o sim(g=9.81)                          # the Exploration, not displayed

Twin: ``jaxlab.explore(sim, theta0=0.3, g=(1.0, 20.0), length=1.0)``.
"""

from __future__ import annotations

import ast
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..explain.trace_failure import needs_concrete_value
from ..program import ProgramError, parse_call, parse_expression
from ._failures import failure_text, raised_in_jaxlab
from ._options import parse_options, split_options

_VALUED = frozenset({"--x", "--target", "--loss"})


def _value(text: str | None, namespace: dict[str, Any], option: str) -> Any:
    if text is None:
        return None
    try:
        node = parse_expression(text)
        code = compile(ast.Expression(body=node), "<jaxlab explore>", "eval")
        return eval(code, dict(namespace))
    except ProgramError as e:
        raise UsageError(f"%explore {option}: {e}") from e
    except Exception as e:
        raise UsageError(
            f"%explore {option}: evaluating `{text}` raised {type(e).__name__}: {e}"
        ) from e


def _widget(view: Any) -> Any:
    """The live ``Explorer`` when the widgets are there, else the exploration itself."""
    try:
        from jaxlab.widgets.explorer import Explorer
    except ImportError:  # a kernel without the widgets: the record's own display
        return view
    return Explorer(view)


@magics_class
class ExploreMagics(Magics):
    @magic_arguments()
    @argument(
        "--leaves", action="store_true", help="Sliders for the float leaves of pytree arguments."
    )
    @argument("--x", metavar="EXPR", help="The abscissa of a 1-D output (an array).")
    @argument("--target", metavar="EXPR", help="Data to fit the sliders to (the 'fit' button).")
    @argument("--loss", metavar="EXPR", help="loss(output, target) -> scalar for the fit.")
    @argument("-o", dest="output", action="store_true", help="Return the Exploration.")
    @line_magic
    def explore(self, line: str = "") -> Any:
        """Sliders on a compiled function: each float argument a slider (``g=(1.0, 20.0)``
        or ``g=(0.1, 10.0, "log")`` gives its range), bools checkboxes, ints and strings
        static (a change compiles again), arrays fixed. The answer is drawn by its kind
        with its derivative along the moved slider; a scalar's every sensitivity as a bar.

        Example: ``%explore sim(theta0=0.3, g=(1.0, 20.0), length=1.0)``.
        """
        from ..explore import ExploreError
        from ..explore.exploration import explore_call

        options, source = split_options(line, _VALUED)
        args = parse_options(self.explore, options)
        if not source:
            raise UsageError(
                "%explore: give a call such as `%explore sim(theta0=0.3, g=(1.0, 20.0))`"
            )
        namespace = self.shell.user_ns if self.shell is not None else {}
        x = _value(args.x, namespace, "--x")
        target = _value(args.target, namespace, "--target")
        loss = _value(args.loss, namespace, "--loss")
        try:
            call = parse_call(source, namespace)
        except ProgramError as e:
            raise UsageError(f"%explore: {e}") from e
        try:
            view = explore_call(
                call.fun, call.args, call.kwargs, x=x, target=target, loss=loss, leaves=args.leaves
            )
        except ExploreError as e:
            raise UsageError(f"%explore: {e}") from e
        except Exception as e:
            if raised_in_jaxlab(e) and not needs_concrete_value(e):
                raise
            text = failure_text(f"%explore: compiling `{source}`", e)
            if needs_concrete_value(e):
                text += (
                    "\nThe sliders are traced, so Python cannot branch or loop on them: use "
                    "`jnp.where` / `jax.lax.cond` for a branch, or pass that argument as an "
                    "int (static: each value compiles again)."
                )
            raise UsageError(text) from e
        if args.output:
            return view
        display(_widget(view))
        return None


MAGICS = (ExploreMagics,)
