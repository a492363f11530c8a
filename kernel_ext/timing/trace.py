"""A ``jax.profiler`` trace (the ``.xplane.pb`` file) → host and device spans, in-process.

``jax.profiler.ProfileData`` reads the file JAX wrote; the spans kept are

* host ``dispatch``: a jitted function called from Python (``PjitFunction(f)`` on the
  ``python`` thread), from the call until it returned. A ``PjitFunction`` event inside
  another is a call made while the outer one was being traced (``jnp.tanh`` inside
  ``f``): part of tracing, not a dispatch;
* JAX's own work on a first call, named for the function called (``f``): ``trace``
  (from the call until lowering began: tracing to a jaxpr and JAX's checks), ``lower``
  (``lower_sharding_computation``: jaxpr → StableHLO) and ``compile``
  (``backend_compile_and_load``: XLA's compile);
* host ``sync``: an implicit device-to-host transfer the sync recorder annotated
  (``jaxlab-sync#7``), named by its sequence number;
* device ``module``: one run of a compiled XLA program (``jit_f``); on a CPU, where XLA
  emits no module events, the span from its first to its last op of one run;
* device ``op``: one XLA operation (a fusion, a dot, ``wrapped_tanh``) of a module.

::

    spans = read_spans(path)
    [s.name for s in spans if s.kind == "dispatch"]     # ["f", "f", "g"]
    [(s.kind, s.name) for s in spans if s.lane == "jax"]  # [("trace", "f"), ("lower", "f"), ...]
"""

from __future__ import annotations

import re
import warnings
from typing import Any, NamedTuple

_DISPATCH = re.compile(r"^(?:PjitFunction|PmapFunction)\((.*)\)$")
_MODULE_RUN = re.compile(r"^(.*?)(?:\(\d+\))?$")  # GPU modules read "jit_f(12)"
SYNC_PREFIX = "jaxlab-sync#"  # the sync recorder's TraceAnnotation names
# The Python thread's line: "python" on a CPU host, "python3" beside a TPU's runtime (read
# off a trace recorded on a TPU v5e with JAX 0.10.2: tests/data/tpu_v5e.xplane.pb.gz).
_PYTHON_LINES = ("python", "python3")

# JAX's own annotated steps of a first call (jax.profiler.annotate_function in jax/_src),
# by the names JAX 0.10 and 0.12 give them. Tracing has no event of its own there: it is
# read as the call's time before lowering began.
_PHASES = {
    "lower_sharding_computation": "lower",
    "lower_mesh_computation": "lower",
    "backend_compile": "compile",
    "backend_compile_and_load": "compile",
}
PHASE_KINDS = ("trace", "lower", "compile")
# The python thread's own bookkeeping (JAX's and XLA's host steps, the compiler's passes):
# skipped without reading their stats, the slow part of reading an event.
_HOST_WORK = (
    "ParseArguments",
    "PythonRefManager",
    "shard_args",
    "Handle ",
    "Wait for",
    "Common",
    "Cpu",
    "ThreadpoolListener",
    "ThunkExecutor",
    "AllocateOutput",
    "ExecuteReplicated",
    "batched_copy",
    "end: ",
    "HLO passes",
    "np.asarray",
)


class Span(NamedTuple):
    """One interval of the timeline, in seconds from the start of the trace. (A named
    tuple: a long loop's trace makes tens of thousands, and a frozen dataclass took about
    five times as long to build.)"""

    lane: str  # "host", "jax" (tracing, lowering, compiling) or "device"
    kind: str  # "dispatch", "sync", "trace", "lower", "compile", "module" or "op"
    name: str
    start_s: float
    duration_s: float
    module: str = ""  # for an op: the XLA module it belongs to

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def _op_stats(event: Any) -> tuple[str | None, Any]:
    """The event's ``hlo_module`` (None: not an XLA op) and ``run_id``. Reading stats is
    the slow part of reading a trace, so it stops once both are found."""
    module, run = None, None
    try:
        for key, value in event.stats:
            if key == "hlo_module":
                module = str(value)
            elif key == "run_id":
                run = value
            if module is not None and run is not None:
                break
    except Exception:  # a stat of a type ProfileData cannot convert
        pass
    return module, run


# (kind, name, start_ns, duration_ns, module, run)
_Raw = tuple[str, str, float, float, str, Any]


def _raw_spans(data: Any) -> tuple[list[_Raw], list[_Raw]]:
    """The python thread's events that matter (dispatches, phases, syncs) and the device
    spans (modules, ops), as raw tuples."""
    # Python 3.12 warns that jaxlib's stats type has no __module__: not the user's concern.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _read_events(data)


def _read_events(data: Any) -> tuple[list[_Raw], list[_Raw]]:
    python: list[_Raw] = []
    device: list[_Raw] = []
    for plane in data.planes:
        for line in plane.lines:
            line_name = line.name
            if line_name in _PYTHON_LINES:
                _read_python_line(line, plane.name, python, device)
            elif line_name == "XLA Modules":
                for event in line.events:
                    run_name = _MODULE_RUN.match(event.name)
                    label = run_name.group(1) if run_name else event.name
                    device.append(("module", label, event.start_ns, event.duration_ns, label, None))
            elif not line_name.startswith("tf_xla-cpu-codegen"):  # XLA compiling kernels
                _read_op_line(line, plane.name, device)
    return python, device


def _read_python_line(line: Any, plane: str, python: list[_Raw], device: list[_Raw]) -> None:
    """Calls, compile phases and sync marks; XLA ops run inline on the calling thread."""
    for event in line.events:
        name = event.name
        if name.startswith(("PjitFunction(", "PmapFunction(")):
            match = _DISPATCH.match(name)
            if match is None:
                continue
            kind, label = "dispatch", match.group(1)
        elif name in _PHASES:
            kind, label = _PHASES[name], ""
        elif name.startswith(SYNC_PREFIX):
            kind, label = "sync", name[len(SYNC_PREFIX) :]
        elif name.startswith(_HOST_WORK):
            continue
        else:  # maybe an XLA op run inline (small programs), maybe JAX's own step
            module, run_id = _op_stats(event)
            if module is not None:
                device.append(
                    ("op", name, event.start_ns, event.duration_ns, module, (module, run_id, plane))
                )
            continue
        python.append((kind, label, event.start_ns, event.duration_ns, "", None))


def _read_op_line(line: Any, plane: str, device: list[_Raw]) -> None:
    """XLA ops of an executor thread (CPU) or a device's op line (GPU, TPU).

    On a CPU executor thread, the ops between two ``ThreadpoolListener`` region marks are
    one run of one module: their module and run are read from the region's first op only
    (an event's stats are the slow part of reading a trace)."""
    is_op_line = line.name == "XLA Ops"
    region: tuple[str, Any] | None = None  # (module, run_id) of the current region
    for event in line.events:
        name = event.name
        if name.startswith(_HOST_WORK):
            if name.startswith("ThreadpoolListener::"):
                region = None
            continue
        if region is not None:
            module, run_id = region
        else:
            found, run_id = _op_stats(event)
            if found is None and not is_op_line:
                continue
            module = found or ""
            if not is_op_line:
                region = (module, run_id)
        device.append(
            ("op", name, event.start_ns, event.duration_ns, module, (module, run_id, plane))
        )


def _host_spans(python: list[_Raw], origin: float) -> list[Span]:
    """Top-level dispatches and syncs; each compile phase named for the innermost call it
    ran in (a program compiled while ``f`` was traced is named for itself, inside ``f``'s
    dispatch); calls nested in a call (made while it was traced) dropped."""
    spans: list[Span] = []
    open_calls: list[Span] = []  # the dispatches around the event being read, outermost first
    first_lowering: float | None = None  # where the top-level call's own lowering began
    for kind, name, start, duration, _, _ in sorted(python, key=lambda r: (r[2], -r[3])):
        span = Span("host", kind, name, (start - origin) * 1e-9, duration * 1e-9)
        while open_calls and span.start_s >= open_calls[-1].end_s:
            open_calls.pop()
        if not open_calls and first_lowering is not None:  # the top-level call ended
            spans.append(_tracing(_last_call(spans), first_lowering))
            first_lowering = None
        if kind == "dispatch":
            if not open_calls:
                spans.append(span)
            open_calls.append(span)  # nested: a call made while tracing, or JAX's own twin
        elif kind == "sync":
            spans.append(span)
        else:
            owner = open_calls[-1].name if open_calls else ""
            if open_calls and owner == open_calls[0].name and first_lowering is None:
                first_lowering = span.start_s
            spans.append(Span("jax", kind, owner, span.start_s, span.duration_s))
    if first_lowering is not None:
        spans.append(_tracing(_last_call(spans), first_lowering))
    return spans


def _last_call(spans: list[Span]) -> Span:
    """The last top-level dispatch read (the one whose phases are being closed)."""
    return next(s for s in reversed(spans) if s.kind == "dispatch")


def _tracing(call: Span, lowering_at: float) -> Span:
    """A first call's time before lowering began: tracing to a jaxpr and JAX's checks."""
    return Span("jax", "trace", call.name, call.start_s, max(0.0, lowering_at - call.start_s))


def _device_spans(device: list[_Raw], origin: float) -> list[Span]:
    spans: list[Span] = []
    runs: dict[Any, list[float]] = {}  # CPU: (module, run, plane) → [first start, last end]
    has_modules = any(r[0] == "module" for r in device)
    for kind, name, start, duration, module, run in device:
        spans.append(Span("device", kind, name, (start - origin) * 1e-9, duration * 1e-9, module))
        if kind == "op" and not has_modules and run is not None:
            extent = runs.get(run)
            if extent is None:
                runs[run] = [start, start + duration]
            else:
                extent[0] = min(extent[0], start)
                extent[1] = max(extent[1], start + duration)
    for (module, _, _), (begin, end) in runs.items():  # CPU: a module run spans its ops
        spans.append(
            Span("device", "module", module, (begin - origin) * 1e-9, (end - begin) * 1e-9, module)
        )
    return spans


def spans_from_profile(data: Any) -> list[Span]:
    """Every span of a ``jax.profiler.ProfileData``, sorted by start."""
    python, device = _raw_spans(data)
    if not python and not device:
        return []
    origin = min(r[2] for r in python + device)
    spans = _host_spans(python, origin) + _device_spans(device, origin)
    return sorted(spans, key=lambda s: (s.start_s, s.lane, s.kind))


def read_spans(path: str) -> list[Span]:
    """The spans of the ``.xplane.pb`` file at ``path``."""
    from jax.profiler import ProfileData

    return spans_from_profile(ProfileData.from_file(path))
