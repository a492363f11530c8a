"""Nested programs as steps: a scan's body stepped iteration by iteration (up to a limit),
and a ``custom_vjp``'s backward rule, inlined by JAX into the transposed program, gathered
into one step that names the user's rule (its equations kept as the step's substeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
from jax.extend import core as jcore

from ..graph.port_names import position
from ..program.static_leaves import split_static
from .record import BACKWARD, Step, short

__all__ = [
    "ITERATIONS",
    "custom_rules",
    "gather_custom",
    "loop_record",
    "scan_runs",
    "shown_iterations",
    "stepped",
]

ITERATIONS = 5  # a scan's iterations stepped one by one; past them, one chosen iteration


def shown_iterations(length: int, reverse: bool, iteration: int | None) -> list[int]:
    """The iterations of a scan body stepped, in the order the scan runs them: every one
    up to ``ITERATIONS``; past that the one ``iteration`` chosen (the player's control,
    ``grad_steps(..., iteration=k)``), else the first ``ITERATIONS`` run."""
    order = list(range(length - 1, -1, -1)) if reverse else list(range(length))
    if length <= ITERATIONS:
        return order
    if iteration is not None:
        return [min(max(int(iteration), 0), length - 1)]
    return order[:ITERATIONS]


def loop_record(name: str, length: int, shown: list[int]) -> dict[str, Any]:
    """A long scan as the player's iteration control reads it."""
    return {"name": name, "length": int(length), "shown": [int(t) for t in shown]}


def scan_runs(ev: Any) -> list[tuple[int, int, int, bool]]:
    """Runs of consecutive evaluation steps inside one scan body run per iteration:
    (first, end, length, reverse)."""
    runs: list[tuple[int, int, int, bool]] = []
    k = 0
    steps = ev.steps
    while k < len(steps):
        st = steps[k]
        stacked = [s for s in st.outputs if s in ev.iterations]
        if not stacked or "/" not in st.node_id:
            k += 1
            continue
        prefix = st.node_id.rsplit("/", 1)[0] + "/"
        end = k
        while end < len(steps) and steps[end].node_id.startswith(prefix):
            end += 1
        scan = next((s for s in steps[end:] if s.node_id == prefix[:-1]), None)
        reverse = bool(scan.eqn.params.get("reverse", False)) if scan is not None else False
        runs.append((k, end, ev.iterations[stacked[0]], reverse))
        k = end
    return runs


def stepped(
    ev: Any, layout: Any, iteration: int | None, loops: list[Any], notes: list[str]
) -> Iterator[tuple[int, int | None]]:
    """The evaluation steps to record, in order, each with the scan iteration it is shown
    at (None outside a scan body): a body's run repeated for each iteration stepped; a
    long scan adds its control's record to ``loops`` and says which were stepped in
    ``notes`` (reverse and forward mode alike)."""
    runs = {first: (end, length, rev) for first, end, length, rev in scan_runs(ev)}
    k = 0
    while k < len(ev.steps):
        end, length, rev = runs.get(k, (k + 1, 0, False))
        shown: list[int | None] = list(shown_iterations(length, rev, iteration))
        if length > ITERATIONS:
            loop = (layout.box(ev.steps[k].node_id) or [ev.steps[k].node_id.split("/")[0]])[-1]
            loops.append(loop_record(loop, length, [t for t in shown if t is not None]))
            said = ", ".join(str(t) for t in shown)
            notes.append(
                f"{loop}: {len(shown)} of {length} iterations stepped ({said}); "
                "choose another with the player's iteration control"
            )
        for t in shown if length else [None]:
            for j in range(k, end):
                yield j, t
        k = end


def custom_rules(
    fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> dict[tuple[str, int, int], str]:
    """Where the primal program calls a ``custom_vjp`` (file, line, column) -> the name
    of the user's backward rule."""
    split = split_static(fun, tuple(args), dict(kwargs))
    try:
        closed = jax.make_jaxpr(split.fun)(*split.args, **split.kwargs)
    except Exception:  # traced already by the gradient: a failure here names nothing
        return {}
    found: dict[tuple[str, int, int], str] = {}

    def visit(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("custom_vjp_call", "custom_vjp_call_jaxpr"):
                bwd = eqn.params.get("bwd")
                rule = getattr(getattr(bwd, "f", bwd), "__name__", None) or "bwd"
                where = position(eqn)
                if where is not None:
                    found[where] = rule
            for sub in jcore.jaxprs_in_params(eqn.params):
                visit(sub)

    visit(closed.jaxpr)
    return found


def jvp_rules(closed: Any) -> dict[tuple[str, str], str]:
    """The user's custom_jvp rules a gradient program runs: (file, function) -> its name,
    read off each custom_jvp call's innermost user frame (the rule called the function)."""
    from .._jax_compat import equation_frames

    found: dict[tuple[str, str], str] = {}
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name != "custom_jvp_call":
            continue
        frames = [f for f in equation_frames(eqn.source_info) if _user_file(f.file)]
        if len(frames) >= 2:
            found[(frames[-1].file, frames[-1].function)] = frames[-1].function
    return found


def rule_positions(ev: Any, rules: dict[tuple[str, str], str], first: int) -> dict[Any, str]:
    """Where the backward steps written inside a custom_jvp rule are -> the rule's name."""
    from .._jax_compat import equation_frames

    found: dict[Any, str] = {}
    for st in ev.steps[first:]:
        frames = [f for f in equation_frames(st.eqn.source_info) if _user_file(f.file)]
        if frames and (frames[-1].file, frames[-1].function) in rules:
            where = position(st.eqn)
            if where is not None:
                found[where] = rules[(frames[-1].file, frames[-1].function)]
    return found


def _user_file(file: str) -> bool:
    return not any(part in file for part in ("site-packages", "dist-packages", "/jax/", "<frozen"))


def gather_custom(
    steps: list[Step], where: list[Any], rules: dict[tuple[str, int, int], str]
) -> list[Step]:
    """Backward steps written at a custom_vjp's call (its rule's equations) gathered into
    one step: the cotangent arriving, the rule by name, the cotangent leaving."""
    if not rules:
        return steps
    out: list[Step] = []
    k = 0
    while k < len(steps):
        st = steps[k]
        rule = rules.get(where[k]) if st.kind == BACKWARD else None
        if rule is None:
            out.append(st)
            k += 1
            continue
        end = k
        while end < len(steps) and steps[end].kind == BACKWARD and where[end] == where[k]:
            end += 1
        group = steps[k:end]
        made = {n for s in group for n in s.names_out}
        arriving = [
            (n, v)
            for s in group
            for n, v in zip(s.names_in, s.operands, strict=False)
            if n not in made and _is_cotangent(n)
        ]
        last = group[-1]
        ct_names = ", ".join(dict.fromkeys(n for n, _ in arriving)) or "·"
        lhs = ", ".join(last.names_out)
        result = ", ".join(short(v) for v in last.cotangent_out)
        numbers = ", ".join(short(v) for _, v in dict(arriving).items())
        out.append(
            Step(
                index=0,
                kind=BACKWARD,
                equation=f"custom rule {rule}",
                rule=f"{lhs} = {rule}(residuals, {ct_names})  (your custom rule)",
                text=f"{lhs} = {rule}(residuals, {numbers}) = {result}",
                node=st.node,
                box=list(st.box),
                primitive="custom_rule",
                cotangent_in=[v for _, v in dict(arriving).items()],
                cotangent_out=list(last.cotangent_out),
                values_in=[v for s in group for v in s.values_in],
                names_in=list(dict(arriving)),
                names_out=list(last.names_out),
                operands=[v for _, v in arriving],
                of=group[0].of,
                substeps=group,
                source=st.source,
                top=st.top,
            )
        )
        k = end
    return out


def _is_cotangent(name: str) -> bool:
    return (
        name.startswith("∂")
        or "\u0304" in name
        or any(ch in name for ch in "āēīōūȳǖ")
        or name.startswith("δ")
    )


BIG = 2000  # a program with more equations is stepped box by box at its top level
_CHUNK = 50  # top-level equations a box holds where the program's structure says nothing


def by_top_level(steps: list[Step], jaxpr: Any) -> tuple[list[Step], str]:
    """The steps of a large program gathered into one step per box of the user's
    top-level structure (graph/groups: scopes, calls, loop iterations; else runs of
    ``_CHUNK`` equations), each box's equations its substeps; and a note saying so."""
    from ..graph.groups import item_path, split_range

    eqns = list(jaxpr.eqns)
    top = [s.top for s in steps]
    kinds = {t: s.kind for s, t in zip(steps, top, strict=True)}
    backward = [kinds.get(k) == BACKWARD for k in range(len(eqns))]
    pieces: list[tuple[int, int, str]] = []
    paths = [item_path(e) for e in eqns]
    primitives = [e.primitive.name for e in eqns]
    try:
        found = split_range(paths, primitives, backward, 0, len(eqns) - 1)
    except Exception:  # the structure unread: boxes by size
        found = None
    if found:  # a box of many calls (``layer ×20``) stepped one call at a time
        for p in found:
            inner = None
            if p.hi - p.lo >= _CHUNK:
                try:
                    inner = split_range(paths, primitives, backward, p.lo, p.hi, p.then)
                except Exception:
                    inner = None
            if inner and len(inner) > 1:
                pieces += [(q.lo, q.hi, _named(q)) for q in inner]
            elif p.hi - p.lo >= 4 * _CHUNK:  # one long box: runs of _CHUNK equations
                ends = [(lo, min(lo + _CHUNK - 1, p.hi)) for lo in range(p.lo, p.hi + 1, _CHUNK)]
                pieces += [(lo, hi, f"{p.name}, equations {lo}–{hi}") for lo, hi in ends]
            else:
                pieces.append((p.lo, p.hi, _named(p)))
    else:
        pieces = [
            (
                lo,
                min(lo + _CHUNK, len(eqns)) - 1,
                f"equations {lo}–{min(lo + _CHUNK, len(eqns)) - 1}",
            )
            for lo in range(0, len(eqns), _CHUNK)
        ]
    out: list[Step] = []
    for lo, hi, name in pieces:
        group = [s for s, t in zip(steps, top, strict=True) if lo <= t <= hi]
        if not group:
            continue
        for kind in dict.fromkeys(s.kind for s in group):  # a box split at the phase change
            part = [s for s in group if s.kind == kind]
            first, last = part[0], part[-1]
            label = _held_by(part, name)
            out.append(
                Step(
                    index=0,
                    kind=kind,
                    equation=label,
                    rule=f"{label}: {len(part)} equations ({last.rule})",
                    text=f"{label}: {len(part)} {kind} equations, ending {last.text}",
                    node=first.node,
                    box=[label],
                    primitive="box",
                    values_in=list(first.values_in),
                    values_out=list(last.values_out),
                    cotangent_in=list(first.cotangent_in),
                    cotangent_out=list(last.cotangent_out),
                    names_in=list(first.names_in),
                    names_out=list(last.names_out),
                    operands=list(first.operands),
                    substeps=part,
                    source=first.source,
                )
            )
    note = (
        f"over {BIG} equations: stepped box by box at the program's top level "
        f"({len(out)} boxes), each box's equations its substeps"
    )
    return out, note


def _held_by(part: list[Step], name: str) -> str:
    """A box of equations by number (``equations 0–3``) named after the box holding most
    of its steps (``jit diffeqsolve, equations 0–3``) where one holds nine in ten."""
    if not name.startswith("equations "):
        return name
    counts: dict[str, int] = {}
    for s in part:
        if s.box:
            counts[s.box[0]] = counts.get(s.box[0], 0) + 1
    best = max(counts, key=lambda b: counts[b], default=None)
    if best is None or 10 * counts[best] < 9 * len(part):
        return name
    return f"{best}, {name}"


def _named(piece: Any) -> str:
    """``layer 3``: a call instance by its number; any other box by its name."""
    return f"{piece.name} {piece.instance}" if piece.instance is not None else str(piece.name)
