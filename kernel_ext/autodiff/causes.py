"""Why a derivative can differ from its function's finite differences, in words, for the
note under a FAILED check: what the program itself does on purpose, found in its jaxpr.

* ``stop_gradient``: the value depends on an input along a path the derivative leaves
  out by design (a target network, a straight-through trick), so the two must disagree;
* custom derivative rules written outside JAX (``custom_vjp clip``): they may differ from
  the true derivative on purpose (clipping, straight-through estimators), or by mistake.

JAX's own rules (``jax.nn.relu``'s ``custom_jvp``, ``logsumexp``) are JAX's tested
derivatives and are never named: a FAILED note that blamed "custom_jvp relu" where a
``stop_gradient`` cut the path sent people to the wrong line (issue 33)::

    failure_notes(jax.make_jaxpr(loss)(params))
    # ['the function stops its derivative with stop_gradient at In[4], line 3 (loss): ...']
"""

from __future__ import annotations

from typing import Any

from jax.extend import core as jcore


def failure_notes(closed: Any) -> list[str]:
    """The notes that explain a FAILED check of the program ``closed`` (a ClosedJaxpr)."""
    stops, rules = derivative_cuts(closed.jaxpr)
    notes = []
    if stops:
        shown = ", ".join(stops[:3]) + (f" and {len(stops) - 3} more" if len(stops) > 3 else "")
        notes.append(
            f"the function stops its derivative with stop_gradient ({shown}): jax.grad "
            "leaves that path out on purpose and finite differences of the value do not, "
            "so the check fails there even where every rule is right"
        )
    if rules:
        notes.append(
            f"the function has custom derivative rules ({', '.join(rules)}): a custom rule "
            "may differ from the true derivative on purpose (clipping, straight-through "
            "estimators), and then the check fails"
        )
    return notes


def derivative_cuts(jaxpr: Any) -> tuple[list[str], list[str]]:
    """``(stop_gradient sites, custom rules written outside JAX)`` in ``jaxpr`` and the
    programs nested in it, each named once: ``"In[4], line 3 (loss)"``,
    ``"custom_vjp clip"``."""
    stops: list[str] = []
    rules: list[str] = []

    def walk(program: Any) -> None:
        for eqn in program.eqns:
            name = eqn.primitive.name
            if name == "stop_gradient":
                where = _line(eqn) or "a line of the function"
                if where not in stops:
                    stops.append(where)
            elif name.startswith("custom_") and not _from_jax(eqn):
                kind = "custom_vjp" if "vjp" in name else "custom_jvp"
                label = f"{kind} {_rule_name(eqn)}".strip()
                if label not in rules:
                    rules.append(label)
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jaxpr)
    return stops, rules


def _line(eqn: Any) -> str | None:
    from ..graph.walk import source_line

    return source_line(eqn)


def _source(eqn: Any) -> str:
    """Where the rule's function is defined: ``"relu at .../jax/_src/nn/functions.py:72"``."""
    program = eqn.params.get("call_jaxpr")
    info = getattr(getattr(program, "jaxpr", program), "debug_info", None)
    return str(getattr(info, "func_src_info", "") or "")


def _from_jax(eqn: Any) -> bool:
    """A rule JAX itself defines (jax.nn's relu, silu, logsumexp ...)."""
    where = _source(eqn).replace("\\", "/")
    return "/jax/_src/" in where or "/jax/nn/" in where


def _rule_name(eqn: Any) -> str:
    """The decorated function's name: custom_jvp_call may carry it, and both calls'
    programs say it in their debug info (``"clip at <string>:3"``)."""
    if eqn.params.get("name"):
        return str(eqn.params["name"])
    return _source(eqn).split(" at ", 1)[0]
