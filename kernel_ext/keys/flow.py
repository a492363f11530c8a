"""Static key flow: follow keys through a jaxpr and report reuse without running anything.

::

    def f(key):
        x = jax.random.normal(key, (3,))
        return x + jax.random.uniform(key, (3,))       # the same key again

    flow = key_flow(f, jax.random.key(0))
    flow.reuses     # (KeyReuse(first=Site("f.py, line 2"), second=Site("f.py, line 3")),)

Each key in the program gets an identity: an argument, a seed, or a child of another key
(``split`` then index ``i``, ``fold_in``, ``clone``). Indexing a split with the same
static index twice gives the same identity; a dynamic index gives a fresh one (no false
alarms). Consumption follows ``jax_debug_key_reuse``: ``random_bits`` (every sampler)
and ``random_split`` consume, ``fold_in`` and ``clone`` do not. Legacy ``uint32`` keys are
followed through ``random_wrap``/``random_unwrap``. Sub-programs are entered: ``jit``
(a sampler's own ``jit[name=_normal]`` names the consumer), ``cond`` (branches are
alternatives), ``scan`` and ``while_loop`` (a key from outside consumed in the body is
consumed on every iteration; a consumed carry returned unchanged is reused next time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import jax
from jax.extend import core, source_info_util

from .._jax_compat import scan_counts
from .model import KeyReuse
from .site import OWN_CODE, Site, is_user, site_of
from .switch import DERIVERS, SAMPLERS, paused

_SUMMARY = re.compile(r"^(.*?):(\d+)(?::\d+)? \((.*)\)$")
_SAME = {
    "squeeze",
    "reshape",
    "copy",
    "copy_p",
    "convert_element_type",
    "broadcast_in_dim",
    "device_put",
    "sharding_constraint",
    "optimization_barrier",
    "random_unwrap",
}
_NAMED = set(SAMPLERS) | set(DERIVERS) | {"normal_real", "uniform", "randint", "gamma_impl"}


@dataclass(frozen=True)
class FlowKey:
    """A key of the program: ``origin`` is argument, seed, wrap, split, fold_in, clone,
    index (a slice of a split), scan slice or unknown."""

    id: int
    origin: str
    parent: int | None
    site: Site
    detail: str = ""


@dataclass(frozen=True)
class FlowUse:
    key: int
    op: str
    site: Site
    in_loop: bool


@dataclass(frozen=True)
class KeyFlow:
    """What :func:`key_flow` found: the program's keys, their uses and the reuses."""

    name: str
    keys: tuple[FlowKey, ...]
    uses: tuple[FlowUse, ...]
    reuses: tuple[KeyReuse, ...]

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": _above.text(self), "text/html": _above.html(self)}


class Above(NamedTuple):
    """What a :class:`KeyFlow` takes from the module above it, which imports it:
    ``view``'s text and HTML."""

    text: Callable[[KeyFlow], str]  # view.flow_text
    html: Callable[[KeyFlow], str]  # view.flow_html


_above: Above  # set by served_by when keys/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``keys/__init__`` (which any import of the package runs first):
    the drawings every KeyFlow uses."""
    global _above
    _above = above


@dataclass
class _State:
    keys: list[FlowKey] = field(default_factory=list)
    uses: list[FlowUse] = field(default_factory=list)
    reuses: list[KeyReuse] = field(default_factory=list)
    consumed: dict[int, FlowUse] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)  # key -> loop depth it was made at
    memo: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # legacy keys are plain data until wrapped: an inner program's variable names the
    # outer one it was passed (and the loop depth that one lives at)
    alias: dict[Any, Any] = field(default_factory=dict)
    var_level: dict[Any, int] = field(default_factory=dict)
    # the user's line of the call that traced the jaxpr: an equation with no user or
    # library frame in its traceback is named after it
    call_site: Site | None = None

    def enter(self, inner: Sequence[Any], outer: Sequence[Any], level: int) -> None:
        for i, o in zip(inner, outer, strict=False):
            if isinstance(o, core.Var):
                root = self.alias.get(o, o)
                self.alias[i] = root
                self.var_level.setdefault(root, level)

    def new(self, origin: str, parent: int | None, site: Site, level: int, detail: str = "") -> int:
        ident = len(self.keys)
        self.keys.append(FlowKey(ident, origin, parent, site, detail))
        self.depth[ident] = level
        return ident

    def child(self, parent: int, how: tuple[Any, ...], site: Site, level: int) -> int:
        memo = (parent, *how)
        if memo not in self.memo:
            self.memo[memo] = self.new(str(how[0]), parent, site, level, str(how[1:]))
        return self.memo[memo]

    def consume(self, key: int, op: str, site: Site, level: int, repeats: bool) -> None:
        use = FlowUse(key, op, site, level > 0)
        self.uses.append(use)
        earlier = self.consumed.get(key)
        if earlier is not None:
            self.reuses.append(KeyReuse(key, earlier.site, site, earlier.op, op, True))
        else:
            self.consumed[key] = use
        if earlier is None and repeats and self.depth.get(key, 0) < level:
            # made outside the loop, consumed inside: every iteration draws the same numbers
            self.reuses.append(KeyReuse(key, site, site, op, op, True))


def key_flow(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> KeyFlow:
    """Follow the keys of ``fun(*args, **kwargs)`` through its jaxpr; nothing runs.

    Example: ``jaxlab.key_flow(f, jax.random.key(0)).reuses``.
    """

    def traced(*a: Any, **k: Any) -> Any:  # a new function: JAX's trace cache for `fun`
        return fun(*a, **k)  # is neither read (tracked) nor filled (untracked) here

    from ..session.work import jaxlab_work

    with paused(), jaxlab_work():  # jaxlab's trace: neither tracked nor the user's work
        closed = jax.make_jaxpr(traced)(*args, **kwargs)
    return flow_of_jaxpr(closed, getattr(fun, "__name__", type(fun).__name__))


def flow_of_jaxpr(closed: Any, name: str, call_site: Site | None = None) -> KeyFlow:
    """The key flow of a jaxpr already traced (``jax.make_jaxpr``, ``jit(f).trace``);
    ``call_site``, the user's line of the call that traced it, names an equation whose
    traceback holds no user frame."""
    state = _State(call_site=call_site)
    jaxpr = closed.jaxpr
    env: dict[Any, int] = {}
    for i, var in enumerate(jaxpr.invars):
        if _is_key(var.aval):
            env[var] = state.new("argument", None, Site(f"argument {i}", None, ""), 0)
    _walk(jaxpr, env, state, None, 0, False)
    return KeyFlow(name, tuple(state.keys), tuple(state.uses), tuple(state.reuses))


# jaxlab's own code and JAX's: never the line a key was used at
_NOT_LIBRARY = (*OWN_CODE, str(Path(jax.__file__).resolve().parent))


def _is_key(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _site(eqn: Any, state: _State) -> Site:
    """The user's line of an equation: its innermost frame of user code. JAX's traceback
    ends at the function being traced: a library's own jitted function (diffrax's
    Brownian tree) holds no user frame, and the innermost library line is named; where
    there is none either (JAX's own function jitted), the line of the call that traced it.
    Never one of jaxlab's own lines.

    JAX's own summary skips only JAX's frames; a jaxpr traced while tracking was on has
    jaxlab's wrappers between JAX and the user, so the frames are read here.
    """
    frames = getattr(getattr(eqn.source_info, "traceback", None), "frames", None) or ()
    for frame in frames:  # innermost first
        if is_user(frame.file_name):
            return site_of(frame.file_name, frame.line_num)
    for frame in frames:
        if not frame.file_name.startswith(_NOT_LIBRARY):
            return site_of(frame.file_name, frame.line_num)
    if state.call_site is not None:
        return state.call_site
    text = source_info_util.summarize(eqn.source_info)
    match = _SUMMARY.match(text)
    return site_of(match.group(1), int(match.group(2))) if match else Site(text, None, "")


def _inner(jaxpr: Any) -> Any:
    return jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr


def _walk(
    jaxpr: Any,
    env: dict[Any, int],
    state: _State,
    named: tuple[str, Site] | None,
    level: int,
    repeats: bool,
) -> list[int | None]:
    """Walk one jaxpr with ``env`` (var -> key identity); returns the outputs' identities."""
    for eqn in jaxpr.eqns:
        ins = [env.get(v) if isinstance(v, core.Var) else None for v in eqn.invars]
        outs = _equation(eqn, ins, env, state, named, level, repeats)
        for var, ident in zip(eqn.outvars, outs, strict=False):
            if ident is not None:
                env[var] = ident
    return [env.get(v) if isinstance(v, core.Var) else None for v in jaxpr.outvars]


def _equation(eqn, ins, env, state, named, level, repeats) -> Sequence[int | None]:
    name = eqn.primitive.name
    site, op = (named[1], named[0]) if named else (_site(eqn, state), "")
    key = ins[0] if ins else None
    if name == "random_seed":
        return [state.new("seed", None, site, level)]
    if name == "random_wrap":
        if key is None:  # legacy key data seen for the first time: one identity per value
            root = state.alias.get(eqn.invars[0], eqn.invars[0])
            key = state.child(-1, ("wrap", id(root)), site, state.var_level.get(root, level))
            env[eqn.invars[0]] = key
        return [key]
    if name == "random_bits" or name == "random_gamma":
        if key is not None:
            state.consume(key, op or name, site, level, repeats)
        return [None]
    if name == "random_split" and key is not None:
        state.consume(key, "split", site, level, repeats)
        return [state.new("split", key, site, level)]
    if name in ("random_fold_in", "random_clone") and key is not None:
        return [state.new(name[len("random_") :], key, site, level)]
    if name in _SAME:
        return ins[: len(eqn.outvars)]
    if name == "unstack" and key is not None:
        return [state.child(key, ("index", i), site, level) for i in range(len(eqn.outvars))]
    if name == "slice" and key is not None:
        return [state.child(key, ("index", tuple(eqn.params["start_indices"])), site, level)]
    if name in ("dynamic_slice", "gather", "dynamic_index_in_dim") and key is not None:
        literal = all(isinstance(v, core.Literal) for v in eqn.invars[1:])
        if literal:
            where = tuple(str(v.val) for v in eqn.invars[1:])
            return [state.child(key, ("index", where), site, level)]
        return [state.new("index", key, site, level, "dynamic")]
    if name == "cond":
        return _cond(eqn, ins, state, named, level, repeats)
    if name in ("scan", "while"):
        return _loop(eqn, ins, state, named, level)
    sub = _subjaxpr(eqn)
    if sub is not None:
        jit_name = str(eqn.params.get("name", "")).lstrip("_")
        inner_named = named or ((jit_name, _site(eqn, state)) if jit_name in _NAMED else None)
        inner_env = {v: i for v, i in zip(sub.invars, ins, strict=False) if i is not None}
        state.enter(sub.invars, eqn.invars, level)
        return _walk(sub, inner_env, state, inner_named, level, repeats)
    if any(i is not None for i in ins):  # anything else that makes keys from keys
        return [
            state.new("unknown", key, site, level) if _is_key(v.aval) else None for v in eqn.outvars
        ]
    return [None] * len(eqn.outvars)


def _subjaxpr(eqn: Any) -> Any:
    for value in eqn.params.values():
        if isinstance(value, core.ClosedJaxpr | core.Jaxpr):
            inner = _inner(value)
            if len(inner.invars) == len(eqn.invars):
                return inner
    return None


def _cond(eqn, ins, state, named, level, repeats) -> list[int | None]:
    before = dict(state.consumed)
    merged: dict[int, FlowUse] = {}
    results = []
    for branch in eqn.params["branches"]:
        state.consumed = dict(before)  # branches are alternatives: one runs
        inner = _inner(branch)
        env = {v: i for v, i in zip(inner.invars, ins[1:], strict=False) if i is not None}
        state.enter(inner.invars, eqn.invars[1:], level)
        results.append(_walk(inner, env, state, named, level, repeats))
        merged.update(state.consumed)
    state.consumed = merged
    return [
        r[0] if all(x[i] == r[0] for x in results) else None
        for i, r in enumerate(zip(*results, strict=False))
    ]


def _loop(eqn, ins, state, named, level) -> list[int | None]:
    p = eqn.params
    inner_level = level + 1
    if eqn.primitive.name == "scan":
        body = _inner(p["jaxpr"])
        n_consts, n_carry = scan_counts(p)
        repeats = p["length"] > 1
        state.enter(body.invars[:n_consts], eqn.invars[:n_consts], level)
        env: dict[Any, int] = {}
        for j, (var, ident) in enumerate(zip(body.invars, ins, strict=False)):
            if ident is None:
                continue
            if j < n_consts:
                env[var] = ident
            elif j < n_consts + n_carry:
                env[var] = state.new("carry", ident, _site(eqn, state), inner_level)
            else:
                env[var] = state.new("scan slice", ident, _site(eqn, state), inner_level)
        carry_in = [env.get(v) for v in body.invars[n_consts : n_consts + n_carry]]
        outs = _walk(body, env, state, named, inner_level, repeats)
        _carry_reuse(state, carry_in, outs[:n_carry], repeats, _site(eqn, state))
        return [*outs[:n_carry], *[None] * (len(outs) - n_carry)]
    body = _inner(p["body_jaxpr"])
    n_consts, n_cond = p["body_nconsts"], p["cond_nconsts"]
    body_ins = ins[n_cond : n_cond + n_consts] + ins[n_cond + n_consts :]
    state.enter(body.invars[:n_consts], eqn.invars[n_cond : n_cond + n_consts], level)
    env = {}
    for j, (var, ident) in enumerate(zip(body.invars, body_ins, strict=False)):
        if ident is not None:
            origin = "carry" if j >= n_consts else None
            env[var] = state.new(origin, ident, _site(eqn, state), inner_level) if origin else ident
    carry_in = [env.get(v) for v in body.invars[n_consts:]]
    outs = _walk(body, env, state, named, inner_level, True)
    _carry_reuse(state, carry_in, outs, True, _site(eqn, state))
    return list(outs)


def _carry_reuse(state, carry_in, carry_out, repeats, site) -> None:
    """A carried key consumed in the body and passed on unchanged is consumed again next time."""
    for k_in, k_out in zip(carry_in, carry_out, strict=False):
        if repeats and k_in is not None and k_in == k_out and k_in in state.consumed:
            use = state.consumed[k_in]
            state.reuses.append(KeyReuse(k_in, use.site, use.site, use.op, use.op, True))
