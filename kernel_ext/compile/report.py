"""Compile a call phase by phase and report what each phase cost and what XLA made of it.

``compile_report`` goes through JAX's ahead-of-time stages, timing each: ``trace``
(Python → jaxpr), ``lower`` (jaxpr → StableHLO), ``compile`` (XLA optimises and emits
code), then one first run and a steady-state run with every output blocked::

    r = jaxlab.compile_report(f, x, w)
    r.trace_s, r.lower_s, r.compile_s, r.steady_s
    r.flops, r.bytes_accessed, r.temp_bytes, r.equations, r.hlo_instructions
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import html
import inspect
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._jax_compat import cost_analysis
from ..session.work import jaxlab_work, results_unseen
from .capture import COMPILE, LOWER, TRACE
from .cell_inputs import nnx_of
from .collectives import Collective, collectives
from .log_view import PHASES, seconds
from .loop_costs import loops_counted_whole
from .messages import short_type

STEADY_RUNS = (3, 100)  # at least / at most this many steady-state runs ...
STEADY_BUDGET_S = 0.25  # ... within about this much time
_HLO_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S", re.M)


@dataclass(frozen=True)
class CompileReport:
    """Trace, lower, compile and run times of one call, with XLA's cost and memory analysis.

    >>> r = jaxlab.compile_report(f, x)
    >>> r.compile_s > 0, r.flops, r.equations, r.hlo_instructions
    (True, 50.0, 2, 6)
    """

    fun_name: str
    signature: tuple[str, ...]  # the traced arguments, e.g. ("f32[3,3]", "f32[3]")
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    trace_s: float
    lower_s: float
    compile_s: float
    first_run_s: float  # the compiled executable's first call, outputs blocked
    steady_s: float  # median of the steady-state runs, outputs blocked
    steady_runs: int
    cached: tuple[str, ...]  # phases JAX answered from its own caches (nothing recompiled)
    flops: float
    transcendentals: float
    bytes_accessed: float
    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    generated_code_bytes: int
    equations: int  # jaxpr equations before optimisation (nested programs included)
    hlo_instructions: int  # HLO instructions after XLA's optimisation (fusions included)
    static_leaves: tuple[str, ...] = ()  # non-array leaves held static ("m.activation")
    notes: tuple[str, ...] = ()  # what jaxlab did to compile the call (eqx.filter_jit...)
    loops_note: str = ""  # loop bodies multiplied by their trip counts, or counted once
    # the communication XLA inserted for a sharded call (collective-permute, all-reduce...)
    collectives: tuple[Collective, ...] = ()
    stablehlo: str = field(repr=False, default="")
    hlo: str = field(repr=False, default="")
    show: tuple[str, ...] = ()  # texts to display with the report: "stablehlo", "hlo"
    value: Any = field(repr=False, compare=False, default=None)  # the call's result

    @property
    def compile_total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.steady_s if self.steady_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (without the texts and the result value)."""
        skip = {"stablehlo", "hlo", "value"}
        data = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip
        }
        data["collectives"] = [dataclasses.asdict(c) for c in self.collectives]
        return data

    def _rows(self) -> list[tuple[str, str]]:
        def phase(name: str, value: float) -> str:
            return duration(value) + (" (cached)" if name in self.cached else "")

        rows = [
            ("trace", phase("trace", self.trace_s)),
            ("lower", phase("lower", self.lower_s)),
            ("compile", phase("compile", self.compile_s)),
            ("first run", duration(self.first_run_s)),
            (f"steady state (median of {self.steady_runs})", duration(self.steady_s)),
            ("FLOPs", f"{self.flops:,.0f}"),
            ("transcendentals", f"{self.transcendentals:,.0f}"),
            ("bytes accessed", f"{self.bytes_accessed:,.0f}"),
            (
                "memory: arguments / outputs / temporaries / code",
                f"{self.argument_bytes:,} / {self.output_bytes:,} / {self.temp_bytes:,} / "
                f"{self.generated_code_bytes:,} bytes",
            ),
            ("jaxpr equations → HLO instructions", f"{self.equations} → {self.hlo_instructions}"),
        ]
        if self.collectives:
            moved = sum(c.bytes for c in self.collectives)
            each = _listed([c.words() for c in self.collectives], most=4)
            rows.append(
                (
                    "communication XLA added",
                    f"{moved:,} bytes a device in {len(self.collectives)} collectives: {each}",
                )
            )
        if self.static_leaves:
            rows.append(("held static (not arrays)", _listed(self.static_leaves)))
        if self.loops_note:
            rows.append(("loops", self.loops_note))
        rows += [("note", note) for note in self.notes]
        return rows

    def _title(self) -> str:
        static = ""
        if self.static_argnums or self.static_argnames:
            names = [*map(str, self.static_argnums), *self.static_argnames]
            static = f", static {', '.join(names)}"
        return f"jit({self.fun_name})({', '.join(self.signature)}{static})"

    def __str__(self) -> str:
        lines = [self._title()]
        lines += [f"  {k}: {v}" for k, v in self._rows()]
        if self.steady_s > 0 and self.first_run_s > 0:
            lines.append(
                f"  compiling cost {self.compile_total_s / self.steady_s:,.0f} steady-state runs"
            )
        for name in self.show:
            lines += ["", f"--- {name}", getattr(self, name)]
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        total = self.compile_total_s or 1.0
        values = (self.trace_s, self.lower_s, self.compile_s)
        bar = "".join(
            f'<span title="{n} {html.escape(duration(v))}" style="display:inline-block;height:10px;'
            f'width:{300 * v / total:.1f}px;background:{c}"></span>'
            for (n, c), v in zip(PHASES, values, strict=True)
        )
        # The bar's key, with each phase's share: a colour alone says nothing to a reader.
        key = " ".join(
            f'<span style="white-space:nowrap"><span style="display:inline-block;width:10px;'
            f'height:10px;background:{c}"></span> {n} {100 * v / total:.0f}%</span>'
            for (n, c), v in zip(PHASES, values, strict=True)
        )
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:right'>{html.escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        cost = ""
        if self.steady_s > 0 and self.first_run_s > 0:
            runs = self.compile_total_s / self.steady_s
            cost = f"<p style='margin:4px 0'>compiling cost {runs:,.0f} steady-state runs</p>"
        texts = "".join(
            f"<details open><summary>{n}</summary><pre>{html.escape(getattr(self, n))}</pre>"
            "</details>"
            for n in self.show
        )
        body = (
            f"<div class='jaxlab-compile-report'><b><code>{html.escape(self._title())}</code></b>"
            f"<div style='margin:4px 0'>{bar}<div style='font-size:90%'>trace + lower + "
            f"compile = {html.escape(duration(self.compile_total_s))}: {key}</div></div>"
            f"<table>{rows}</table>{cost}{texts}</div>"
        )
        return {"text/plain": str(self), "text/html": body}


def duration(s: float) -> str:
    """``seconds`` with a floor: a time below a microsecond reads "< 1 µs", not "0 µs"."""
    return "< 1 µs" if s < 1e-6 else seconds(s)


def _listed(items: Sequence[str], most: int = 6) -> str:
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")


@contextlib.contextmanager
def _phases_seen() -> Iterator[set[str]]:
    """The JAX compile events this thread reports while the block runs (a cache hit
    reports none)."""
    import jax.monitoring as monitoring

    seen: set[str] = set()
    me = threading.get_ident()

    def listener(event: str, duration_secs: float, **kwargs: str | int) -> None:
        if threading.get_ident() == me:
            seen.add(event)

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        monitoring.unregister_event_duration_listener(listener)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def count_equations(jaxpr: Any) -> int:
    """Equations of a jaxpr and of every program nested in its equations' parameters."""
    from jax.extend.core import jaxprs_in_params

    eqns = getattr(jaxpr, "eqns", None)
    if eqns is None:  # a ClosedJaxpr
        eqns = jaxpr.jaxpr.eqns
    return sum(1 + sum(count_equations(j) for j in jaxprs_in_params(e.params)) for e in eqns)


def count_hlo_instructions(hlo_text: str) -> int:
    """Instructions in an HLO module's text (every computation, fusion bodies included)."""
    return len(_HLO_INSTRUCTION.findall(hlo_text))


def _normalise_static(
    static_argnums: int | Sequence[int], static_argnames: str | Sequence[str]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    return nums, names


def _called_module(fun: Any) -> bool:
    """Whether ``fun`` is a model called as a function (``mlp(x)``): an object, not a
    function or a jitted one, whose class defines ``__call__`` and which holds arrays as a
    pytree (an equinox module) or is a flax nnx module."""
    import jax

    if inspect.isroutine(fun) or isinstance(fun, functools.partial) or hasattr(fun, "trace"):
        return False
    if not inspect.isfunction(inspect.getattr_static(type(fun), "__call__", None)):
        return False
    if nnx_of(fun) is not None:
        return True
    return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(fun))


def _code_of(fun: Any) -> Any:
    """The code object that runs when JAX traces ``fun`` (a jitted function's, a partial's
    function's, a callable object's ``__call__``), or None."""
    while True:
        fun = inspect.unwrap(fun)
        if isinstance(fun, functools.partial):
            fun = fun.func
        else:
            break
    code = getattr(fun, "__code__", None)
    if code is None:
        # A callable object (an equinox module): its class's call method runs.
        method = inspect.getattr_static(type(fun), "__call__", None)
        code = getattr(method, "__code__", None)
    return code


@contextlib.contextmanager
def _code_started(code: Any) -> Iterator[list[bool] | None]:
    """Whether ``code`` starts running inside the block: ``[True]`` once it has. JAX runs
    the user's function only when its trace is not cached, so this tells a cached trace
    (JAX reports a tracing event either way). None where Python cannot watch one code
    object (before 3.12's ``sys.monitoring``) or no tool id is free."""
    monitoring = getattr(sys, "monitoring", None)
    tool = None
    if monitoring is not None and code is not None:
        tool = next((t for t in (5, 4, 3) if monitoring.get_tool(t) is None), None)
    if monitoring is None or tool is None:
        yield None
        return
    started = [False]

    def on_start(code_: Any, offset: int) -> None:
        started[0] = True

    event = monitoring.events.PY_START
    monitoring.use_tool_id(tool, "jaxlab")
    try:
        monitoring.register_callback(tool, event, on_start)
        monitoring.set_local_events(tool, code, event)
        yield started
    finally:
        monitoring.set_local_events(tool, code, 0)
        monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)


def compile_report(
    fun: Callable[..., Any],
    *args: Any,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    show: Sequence[str] = (),
    **kwargs: Any,
) -> CompileReport:
    """Trace, lower and compile ``fun(*args, **kwargs)`` with ``jax.jit``, timing each phase.

    ``fun`` may already be jitted (then its own static arguments apply). A function
    wrapped by ``eqx.filter_jit`` is reported on the function it wraps, with every
    non-array leaf static as filter_jit holds it; for any other function, leaves JAX
    cannot trace (an equinox module's activation) are held static and named in
    ``.static_leaves``. Phases that JAX answered from its caches (the same function and
    types compiled before) are listed in ``.cached``; their times are the cache lookup's.

    >>> r = jaxlab.compile_report(f, x, static_argnames="n", n=3)
    >>> r.trace_s > 0 and r.lower_s > 0 and r.compile_s > 0
    True
    """
    import jax

    from ..program.static_leaves import filter_jit_target, resolve_static, split_static

    if not callable(fun):
        raise TypeError(f"compile_report needs a function, not a {type(fun).__name__}")
    nums, names = _normalise_static(static_argnums, static_argnames)
    given = (nums, names)  # as the user wrote them, for the report's title
    notes: tuple[str, ...] = ()
    target = filter_jit_target(fun)
    if target is not None:
        notes = (
            "compiled as equinox.filter_jit compiles it: the function it wraps, with its "
            "arrays traced and every other leaf static",
        )
    elif hasattr(fun, "trace") and hasattr(fun, "lower") and (nums or names):
        raise ValueError(
            f"{getattr(fun, '__name__', 'the function')} is already jitted: its static "
            "arguments were fixed by jax.jit; pass the plain function instead"
        )
    plain = target if target is not None else fun
    if _called_module(plain):  # its class's call, the module an argument: traced as arrays
        # (jax.jit of the module itself hashes its arrays; an nnx module's state changes
        # inside the trace, RNG counts, statistics), and the user's module left as it was
        plain, args = type(plain).__call__, (plain, *args)
        nums = tuple(n + 1 for n in nums)
    if hasattr(plain, "trace") and hasattr(plain, "lower"):
        jitted, split = plain, None
    else:
        nums, names = resolve_static(plain, nums, names)
        split = split_static(
            plain, args, kwargs, keep=(*nums, *names), numbers_static=target is not None
        )
        jitted = jax.jit(split.fun, static_argnums=nums, static_argnames=names)
        args, kwargs = split.args, split.kwargs
    bad = set(show) - {"stablehlo", "hlo"}
    if bad:
        raise ValueError(f"show= takes 'stablehlo' and 'hlo', not {sorted(bad)}")

    with _phases_seen() as seen, _code_started(_code_of(plain)) as started:
        traced, trace_s = _timed(lambda: jitted.trace(*args, **kwargs))
        lowered, lower_s = _timed(traced.lower)
        compiled, compile_s = _timed(lowered.compile)
    if started is not None and not started[0]:
        seen.discard(TRACE)  # JAX reports a tracing event for a cached trace too
    phases = (("trace", TRACE), ("lower", LOWER), ("compile", COMPILE))
    cached = tuple(name for name, event in phases if event not in seen)

    # The jitted call reuses what the stages compiled (no second compilation): the runs
    # time the path a user's own call takes.
    def run() -> Any:
        return jax.block_until_ready(jitted(*args, **kwargs))

    with results_unseen():  # a report of the call: its random draws are not the user's
        value, first_run_s = _timed(run)
    if split is not None:  # leaves JAX cannot return (a model's activation) put back
        value = split.outputs.rebuild(value)
    runs: list[float] = []
    budget_end = time.perf_counter() + STEADY_BUDGET_S
    with jaxlab_work():  # the runs after the user's first are jaxlab's (keys not drawn)
        while len(runs) < STEADY_RUNS[1] and (
            len(runs) < STEADY_RUNS[0] or time.perf_counter() < budget_end
        ):
            runs.append(_timed(run)[1])

    # XLA counts a loop's body once: the costs are multiplied by the jaxpr's trip counts
    whole = loops_counted_whole(traced.jaxpr, cost_analysis(compiled))
    costs = whole.costs
    memory = compiled.memory_analysis()
    hlo = compiled.as_text() or ""
    return CompileReport(
        fun_name=getattr(fun, "__name__", None) or type(fun).__name__,
        signature=tuple(short_type(a) for a in jax.tree_util.tree_leaves(traced.in_avals)),
        static_argnums=given[0],
        static_argnames=given[1],
        trace_s=trace_s,
        lower_s=lower_s,
        compile_s=compile_s,
        first_run_s=first_run_s,
        steady_s=statistics.median(runs),
        steady_runs=len(runs),
        cached=cached,
        flops=costs.get("flops", 0.0),
        transcendentals=costs.get("transcendentals", 0.0),
        bytes_accessed=costs.get("bytes accessed", 0.0),
        argument_bytes=int(getattr(memory, "argument_size_in_bytes", 0)),
        output_bytes=int(getattr(memory, "output_size_in_bytes", 0)),
        temp_bytes=int(getattr(memory, "temp_size_in_bytes", 0)),
        generated_code_bytes=int(getattr(memory, "generated_code_size_in_bytes", 0)),
        equations=count_equations(traced.jaxpr),
        hlo_instructions=count_hlo_instructions(hlo),
        collectives=collectives(hlo),
        static_leaves=split.static_paths if split is not None else (),
        notes=notes,
        loops_note=whole.note,
        stablehlo=lowered.as_text(),
        hlo=hlo,
        show=tuple(show),
        value=value,
    )
