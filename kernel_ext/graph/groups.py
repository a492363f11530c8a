"""Groups of equations by the structure the user wrote, for the GraphExplorer's boxes.

Evidence, in order: the name stack (``jax.named_scope``, flax linen's and haiku's module
paths, equinox's class names), then the user's function calls read from each equation's
traceback (a ``layer(h, w)`` called 20 times is 20 boxes named ``layer``), then, inside
one function, the iterations of a Python loop (lines that jump back) and its lines. Each
equation has a *path* of steps (scope components, then calls below the traced function);
a block is split at a level by consecutive equations whose step there is the same, and
a run of one call site is split into its call instances by the repetition of what they
hold. A group that would be the whole range is skipped for the next level.

>>> paths = [item_path(it.eqn) for it in block.items]                    # doctest: +SKIP
>>> [(p.lo, p.hi, p.name) for p in split_range(paths, phases, 0, 61)]    # doctest: +SKIP
[(0, 59, 'layer ×20'), (60, 61, 'line 8')]
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, NamedTuple

from .._jax_compat import Frame, equation_frames
from .walk import Memo, name_stack

_PACKAGE = str(Path(__file__).resolve().parents[1])  # jaxlab's own frames are not the user's
_LIBRARY = ("site-packages", "dist-packages", "<frozen", "/lib/python3")
INLINE_INSTANCES = 6  # more call instances than this: one "layer ×20" box that opens to them
# Calls alike of at most this many equations each, at least FOLD_INSTANCES of them (a
# ``jax.tree.map(lambda p, g: p - 0.1 * g, ...)``'s update of each parameter): one
# ``<lambda> ×6`` box that opens to them, not a row of six boxes of two equations (issue 34).
FOLD_EQUATIONS, FOLD_INSTANCES = 2, 3


class Step(NamedTuple):
    kind: str  # "scope" or "call"
    name: str  # the scope component, or the called function's name
    where: str  # a call's site, "file:line"; "" for a scope


class Path_(NamedTuple):
    steps: tuple[Step, ...]
    line: int  # the line, in the innermost user frame, that made the equation (0: unknown)
    function: str  # that frame's function


class Piece(NamedTuple):
    """Items ``lo..hi`` of a block drawn as one box named ``name``; ``then`` says how the
    box splits when opened: ("path", level), ("calls", level) or ("lines", level)."""

    lo: int
    hi: int
    name: str
    then: tuple[str, int]
    instance: int | None = None  # the call instance's number within its call site
    repeats: bool = False  # an instance identical to the site's first (a repeat)
    pieces: tuple[Piece, ...] = ()  # a range of many instances: the instances it opens to


def _user(frame: Frame) -> bool:
    return not any(part in frame.file for part in _LIBRARY)


def _strip(component: str) -> str:
    """``transpose(jvp(mlp`` and ``linear))`` -> ``mlp``, ``linear``."""
    return re.sub(r"^(\w+\()+|\)+$", "", component)


# (name stack, traceback) -> its path: a layer's equations, each time a Python loop calls
# it, have equal tracebacks (jaxlib compares their frames), and a path costs 50 µs to
# make (0.08 s of a 10,000-equation gradient's first view). Bounded, as walk's _LINES.
_PATHS = Memo()


def item_path(eqn: Any) -> Path_:
    """What the program says about where ``eqn`` came from (see module docstring)."""
    try:
        key = (name_stack(eqn), eqn.source_info.traceback)
        found = _PATHS.get(key)
    except (AttributeError, TypeError):  # no traceback, or one that cannot be hashed
        return _item_path(eqn)
    if found is None:
        found = _PATHS.keep(key, _item_path(eqn))
    return found


def _item_path(eqn: Any) -> Path_:
    scope = [_strip(c) for c in name_stack(eqn).split("/")]
    steps = [Step("scope", c, "") for c in scope if c]
    frames = equation_frames(eqn.source_info)
    # The user's frames below jaxlab's own (which trace the function), libraries left out.
    last_own = max((k for k, f in enumerate(frames) if f.file.startswith(_PACKAGE)), default=-1)
    user = [f for f in frames[last_own + 1 :] if _user(f)]
    for outer, inner in itertools.pairwise(user):
        # A function defined inside another is named as written (block, not f.<locals>.block).
        name = inner.function.rsplit(".<locals>.", 1)[-1]
        steps.append(Step("call", name, f"{outer.file}:{outer.line}"))
    line, function = (user[-1].line, user[-1].function) if user else (0, "")
    return Path_(tuple(steps), line, function)


def _period(sigs: list[Any]) -> int | None:
    """The shortest p < len that the sequence repeats with (its last copy may be cut)."""
    n = len(sigs)
    for p in range(1, n // 2 + 1):
        if all(sigs[i] == sigs[i + p] for i in range(n - p)):
            return p
    return None


def _instances(sigs: list[Any], lo: int) -> list[tuple[int, int]]:
    """A call site's run split into its calls: by the period of what the calls hold, else
    at each recurrence of the first equation's signature (a first call may differ)."""
    n = len(sigs)
    p = _period(sigs)
    if p is not None:
        return [(lo + a, lo + min(a + p, n) - 1) for a in range(0, n, p)]
    starts = [k for k in range(n) if sigs[k] == sigs[0]]
    if len(starts) < 2:
        return [(lo, lo + n - 1)]
    ends = [*starts[1:], n]
    sizes = [b - a for a, b in zip(starts, ends, strict=True)]
    if max(sizes) > 2 * min(sizes):  # not calls alike: one box
        return [(lo, lo + n - 1)]
    return [(lo + a, lo + b - 1) for a, b in zip(starts, ends, strict=True)]


def _signature(paths: list[Path_], primitives: list[str], k: int, level: int) -> Any:
    return (primitives[k], paths[k].steps[level + 1 :], paths[k].line)


def split_range(
    paths: list[Path_],
    primitives: list[str],
    backward: list[bool],
    lo: int,
    hi: int,
    then: tuple[str, int] = ("path", 0),
) -> list[Piece] | None:
    """Items ``lo..hi`` as the boxes the program's own structure makes, or None when it
    says nothing there (the caller then groups by size)."""
    kind, level = then
    while True:
        if kind == "none":
            return None
        if kind == "path":
            found = _by_path(paths, primitives, backward, lo, hi, level)
        elif kind == "calls":
            found = _by_call(paths, primitives, backward, lo, hi, level, inline=True)
        else:
            found = _by_lines(paths, primitives, backward, lo, hi, inline=kind == "loop")
        if found is None:
            return None
        if len(found) > 1:
            return found
        # One box the whole range: the next level says more.
        kind, level = found[0].then


def _cut(backward: list[bool], lo: int, hi: int, keys: list[Any]) -> list[tuple[int, int]]:
    """Consecutive items with one key and one phase (a box never crosses the two)."""
    runs: list[tuple[int, int]] = []
    start = lo
    for k in range(lo + 1, hi + 2):
        if k == hi + 1 or keys[k - lo] != keys[k - 1 - lo] or backward[k] != backward[k - 1]:
            runs.append((start, k - 1))
            start = k
    return runs


def _by_path(
    paths: list[Path_],
    primitives: list[str],
    backward: list[bool],
    lo: int,
    hi: int,
    level: int,
) -> list[Piece] | None:
    keys = [p.steps[level] if len(p.steps) > level else None for p in paths[lo : hi + 1]]
    if all(k is None for k in keys):
        return [Piece(lo, hi, "", ("lines", level))]
    pieces: list[Piece] = []
    for a, b in _cut(backward, lo, hi, keys):
        step = keys[a - lo]
        if step is None:
            found = _by_lines(paths, primitives, backward, a, b) or [
                Piece(a, b, "", ("lines", level))
            ]
            pieces.extend(found)
            continue
        calls = _by_call(paths, primitives, backward, a, b, level, inline=False)
        pieces.extend(calls)
    return pieces


def _by_call(
    paths: list[Path_],
    primitives: list[str],
    backward: list[bool],
    lo: int,
    hi: int,
    level: int,
    *,
    inline: bool,
) -> list[Piece]:
    """One call site's run: its calls, or one ``layer ×20`` box that opens to them."""
    step = paths[lo].steps[level]
    sigs = [_signature(paths, primitives, k, level) for k in range(lo, hi + 1)]
    # A scope entered again and again reads as one entry (eqx.nn.MLP's Linear layers all
    # say eqx.nn.Linear): one box, whose loop or calls show when it is opened.
    name = step.name
    inner = step.kind == "call" and _repeats_below(paths, lo, hi, level)
    calls = [(lo, hi)] if step.kind == "scope" or inner else _instances(sigs, lo)
    if inner:  # one call, holding the function called again and again: say which
        below = [_signature(paths, primitives, k, level + 1) for k in range(lo, hi + 1)]
        count = len(_instances(below, lo))
        if count > 1:
            name = f"{name} ({paths[lo].steps[level + 1].name} ×{count})"
    if len(calls) == 1:
        return [Piece(lo, hi, name, ("path", level + 1))]
    n = len(calls)
    first = sigs[: calls[0][1] - lo + 1]
    if not inline and (n > INLINE_INSTANCES or _small_repeats(sigs, calls, lo)):
        return [Piece(lo, hi, f"{name} ×{n}", ("calls", level))]
    found: list[Piece] = []
    for k, (a, b) in enumerate(calls):
        number = n - 1 - k if backward[lo] else k  # the backward pass runs the calls in reverse
        same = k > 0 and sigs[a - lo : b - lo + 1] == first
        found.append(Piece(a, b, name, ("path", level + 1), number, same))
    return found


def _small_repeats(sigs: list[Any], calls: list[tuple[int, int]], lo: int) -> bool:
    """Whether ``calls`` are at least ``FOLD_INSTANCES`` calls made of the same few
    equations (at most ``FOLD_EQUATIONS`` each): folded into one box, they read as the
    one step they are (the update of every parameter)."""
    if len(calls) < FOLD_INSTANCES or calls[0][1] - calls[0][0] + 1 > FOLD_EQUATIONS:
        return False
    first = sigs[: calls[0][1] - lo + 1]
    return all(sigs[a - lo : b - lo + 1] == first for a, b in calls)


def _repeats_below(paths: list[Path_], lo: int, hi: int, level: int) -> bool:
    """Whether every equation of the run is inside one and the same call one level down
    (``mlp`` calling ``layer`` from one line, in a loop): then what repeats is that call,
    and the run is one call of this level's function (``mlp``, opening to ``layer ×20``),
    not twenty calls of it."""
    below = {p.steps[level + 1] if len(p.steps) > level + 1 else None for p in paths[lo : hi + 1]}
    return len(below) == 1 and (step := next(iter(below))) is not None and step.kind == "call"


def _by_lines(
    paths: list[Path_],
    primitives: list[str],
    backward: list[bool],
    lo: int,
    hi: int,
    *,
    inline: bool = False,
) -> list[Piece] | None:
    """Equations made directly in one function, per phase: a Python loop's iterations
    (its lines jump back), else runs of one line. None when that groups nothing."""
    if not any(paths[k].line for k in range(lo, hi + 1)):
        return None
    pieces: list[Piece] = []
    for a, b in _cut(backward, lo, hi, [0] * (hi - lo + 1)):
        pieces += _loop(paths, primitives, backward[a], a, b, inline)
    # One equation a piece groups nothing, unless they are a loop's iterations to count.
    return pieces if inline or len(pieces) < hi - lo + 1 else None


def _loop(
    paths: list[Path_], primitives: list[str], back: bool, lo: int, hi: int, inline: bool
) -> list[Piece]:
    lines = [paths[k].line for k in range(lo, hi + 1)]
    jumps = [
        k
        for k in range(1, len(lines))
        if lines[k]
        and lines[k - 1]
        and (lines[k] > lines[k - 1] if back else lines[k] < lines[k - 1])
    ]
    if len(jumps) < 2:
        found: list[Piece] = []
        for run in _line_runs(paths, lo, hi):
            found += _one_line_loop(run, primitives, back, inline)
        return found
    head = lines[jumps[0]]
    # The loop's first iteration starts where its head line first appears.
    start = next(k for k in range(len(lines)) if lines[k] == head)
    body = set(lines[start : jumps[-1]])  # the last iteration ends where its lines do
    end = jumps[-1]
    while end + 1 < len(lines) and lines[end + 1] in body and lines[end + 1] != head:
        end += 1
    cuts = [start, *[j for j in jumps if j > start], end + 1]
    pieces = _line_runs(paths, lo, lo + start - 1) if start > 0 else []
    n = len(cuts) - 1
    if n > INLINE_INSTANCES and not inline:
        where = f"{paths[lo + start].function} line {min(lines[start : end + 1])}"
        pieces.append(Piece(lo + start, lo + end, f"loop ×{n} ({where})", ("loop", 0)))
        return pieces + _line_runs(paths, lo + end + 1, hi)
    for k in range(n):
        a, b = lo + cuts[k], lo + cuts[k + 1] - 1
        pieces.append(Piece(a, b, "iteration", ("lines", -1), n - 1 - k if back else k))
    return pieces + _line_runs(paths, lo + end + 1, hi)


def _line_runs(paths: list[Path_], lo: int, hi: int) -> list[Piece]:
    found: list[Piece] = []
    start = lo
    for k in range(lo + 1, hi + 2):
        if k == hi + 1 or paths[k].line != paths[start].line:
            line, function = paths[start].line, paths[start].function
            name = f"{function} line {line}" if line else ""
            found.append(Piece(start, k - 1, name, ("none", 0)))
            start = k
    return found


def _one_line_loop(run: Piece, primitives: list[str], back: bool, inline: bool) -> list[Piece]:
    """A run of one line that repeats itself (``for w in ws: h = jnp.tanh(h @ w)``): its
    iterations, told apart by what repeats; else the run as it is."""
    sigs = primitives[run.lo : run.hi + 1]
    p = _period(sigs)
    if p is None or len(sigs) < 4:
        return [run]
    n = -(-len(sigs) // p)
    if n > INLINE_INSTANCES and not inline:
        return [Piece(run.lo, run.hi, f"loop ×{n} ({run.name})", ("loop", 0))]
    return [
        Piece(run.lo + a, min(run.lo + a + p, run.hi + 1) - 1, "iteration", ("none", 0), k)
        for k, a in ((n - 1 - j if back else j, j * p) for j in range(n))
    ]
