"""``jaxlab.explore``: sliders on a compiled function, with its sensitivities.

::

    view = jaxlab.explore(period, theta0=0.3, g=(1.0, 20.0), length=1.0)
    view.set(g=5.0)             # moves a slider exactly as the page does
    view.output                 # the function's output there
    view.sensitivity["g"]       # d output / d g, shaped like the output
    view.sweep("g", n=64)       # 64 values in one vmapped call: values, outputs, slopes
    view.compiles               # compilations of the function since the view was made
    view.frame()                # the JSON state the page draws

Every move runs one compiled call (output, ``jax.jvp`` tangent, and for a scalar output
every slider's derivative); moves that arrive while one runs are coalesced, the latest
value winning. A move that fails or makes a NaN keeps the last good answer and flags the
slider with where it happened.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..explain.explanation import explain
from ..session import jaxlab_work
from .compiled import Compiled, float_dtype, is_float
from .controls import Control, ExploreError, Layout, lay_out
from .frames import Frames
from .nans import failure_words, first_non_finite
from .record import FitState, Sweep

HISTORY = 60  # a scalar's sparkline: its last 60 values


class Exploration:
    """The state of one exploration: the controls' values, the last good answer and its
    derivatives, the sweeps and the fit; :meth:`frame` is what the page draws."""

    def __init__(
        self,
        layout: Layout,
        *,
        name: str,
        x: Any = None,
        target: Any = None,
        loss: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.layout = layout
        self.name = name
        self.x = None if x is None else np.asarray(x)
        self.target = target
        self.loss = loss
        self.program = Compiled(layout)
        with jaxlab_work():
            self.arrays = [jnp.asarray(a) for a in layout.fixed_arrays]
        self.seq = 0
        self.moved: str | None = None
        self.error: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.computations = 0  # compiled calls made for moves (coalescing: fewer than moves)
        self.histories: dict[str, deque[float]] = {}
        self.sweeps: dict[str, Sweep] = {}
        self.last_sweep: str | None = None
        self.fit_state: FitState | None = None
        self._subscribers: list[Callable[[dict[str, Any]], None]] = []
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}
        self._pending_seq: int | None = None
        self._pending_moved: str | None = None
        self._running = False
        self._stop = threading.Event()
        self._jacobian_cache: tuple[int, Any] | None = None
        self._version = 0
        self._fitters: dict[Any, Any] = {}
        self.frames = Frames(self)
        # the first call: a failure here is the user's function failing, raised as it is
        self._compute(None, first=True)

    # ---------------------------------------------------------------- reading
    @property
    def values(self) -> dict[str, Any]:
        return {c.name: c.value for c in self.layout.controls if c.kind != "fixed"}

    @property
    def output(self) -> Any:
        return self._output

    @property
    def compiles(self) -> int:
        """Compilations of the user's function since the view was made (moves, sweeps,
        sensitivity maps and fits together; :attr:`compiles_by` splits them)."""
        return sum(self.program.compiles.values())

    @property
    def compiles_by(self) -> dict[str, int]:
        return dict(self.program.compiles)

    @property
    def sensitivity(self) -> dict[str, Any]:
        """Slider name → d(output)/d(name) at the current values, shaped like the output
        (a non-float leaf's entry is None)."""
        jac = self._jacobians
        float_leaves = [i for i, leaf in enumerate(self._leaves) if is_float(leaf)]
        if any(i not in jac for i in float_leaves):
            if self._jacobian_cache is None or self._jacobian_cache[0] != self._version:
                with jaxlab_work():
                    full = self.program.jacobian(self._good_p, self.arrays, self._good_statics)
                self._jacobian_cache = (self._version, full)
            jac = self._jacobian_cache[1]
        result = {}
        for k, control in enumerate(self.layout.sliders):
            leaves = [jac[i][..., k] if i in jac else None for i in range(len(self._leaves))]
            result[control.name] = jax.tree_util.tree_unflatten(self._treedef, leaves)
        return result

    def frame(self) -> dict[str, Any]:
        """The JSON state the page draws (docs: the explore contract's frame schema)."""
        return self.frames.frame()

    def subscribe(self, callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """``callback(frame)`` after every change (a move, a sweep, a fit step); returns
        the undo."""
        self._subscribers.append(callback)

        def undo() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return undo

    def _publish(self) -> None:
        if not self._subscribers:
            return
        frame = self.frame()
        for callback in list(self._subscribers):
            callback(frame)

    # ---------------------------------------------------------------- moving
    def _checked(self, name: str, value: Any) -> tuple[Control, Any]:
        control = self.layout.control(name)
        if control.kind == "fixed":
            raise ExploreError(f"`{name}` is held fixed ({control.described}): it has no control")
        if control.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ExploreError(f"`{name}` is a slider: give a number, not {value!r}")
            if not math.isfinite(float(value)):
                raise ExploreError(f"`{name}` is a slider: give a finite number, not {value!r}")
            return control, float(value)
        if control.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ExploreError(f"`{name}` is a checkbox: give True or False, not {value!r}")
            return control, bool(value)
        if type(value) is not type(control.value) and not (
            isinstance(value, (int, np.integer)) and isinstance(control.value, (int, np.integer))
        ):
            raise ExploreError(
                f"`{name}` is static ({type(control.value).__name__}): give a "
                f"{type(control.value).__name__}, not {value!r}"
            )
        return control, value

    def set(self, **values: Any) -> Exploration:
        """Move sliders (and checkboxes, statics) exactly as the page does; one compiled
        call for them all. Returns the exploration, so ``view.set(g=5.0).output`` reads."""
        for name, value in values.items():
            self._checked(name, value)
        self._submit(values, None)
        return self

    def move(self, name: str, value: Any, seq: int | None = None) -> dict[str, Any] | None:
        """What the page calls on a slider move. A move that arrives while a computation
        runs is only noted: the running one computes again with the latest values when it
        ends. Returns the frame this call published, or None when coalesced into another's."""
        self._checked(name, value)
        return self._submit({name: value}, seq)

    def _submit(self, values: dict[str, Any], seq: int | None) -> dict[str, Any] | None:
        with self._lock:
            self._pending.update(values)
            if values:
                self._pending_moved = list(values)[-1]
            self._pending_seq = seq if seq is not None else (self._pending_seq or self.seq) + 1
            if self._running:
                return None
            self._running = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        self._running = False
                        break
                    batch, moved, seq_now = self._pending, self._pending_moved, self._pending_seq
                    self._pending, self._pending_seq = {}, None
                self._apply(batch, moved, seq_now)
        except BaseException:
            with self._lock:
                self._running = False
                self._pending = {}
            raise
        return self.frame()

    def _apply(self, batch: dict[str, Any], moved: str | None, seq: int | None) -> None:
        statics_before = self.layout.static_key()
        for name, value in batch.items():
            control, value = self._checked(name, value)
            lo, hi = control.lo, control.hi
            if (
                control.kind == "float"
                and lo is not None
                and hi is not None
                and not lo <= value <= hi
            ):
                control.lo, control.hi = min(lo, value), max(hi, value)
                control.range_note += f"; widened to include {value:g}"
            control.value = value
        if seq is not None:
            self.seq = seq
        slider = moved if moved in {c.name for c in self.layout.sliders} else self.moved
        before = self.program.compiles["evaluate"]
        self._compute(slider)
        changed = [
            (c, old)
            for c, old in zip(self.layout.statics, statics_before, strict=True)
            if c.value != old
        ]
        if changed:
            what = ", ".join(f"{c.name} = {c.value!r} (was {old!r})" for c, old in changed)
            compiled = self.program.compiles["evaluate"] > before
            self.notes.append(
                f"static {what}: compiled again"
                if compiled
                else f"static {what}: compiled before, reused"
            )
        self._publish()

    # ---------------------------------------------------------------- computing
    def _p(self) -> Any:
        return jnp.asarray([c.value for c in self.layout.sliders], dtype=float_dtype())

    def _compute(self, moved: str | None, first: bool = False) -> None:
        sliders = self.layout.sliders
        names = [c.name for c in sliders]
        index = names.index(moved) if moved in names else 0
        with jaxlab_work():  # making the inputs compiles JAX's own small programs
            p = self._p()
            direction = jnp.zeros_like(p).at[index].set(1.0) if len(names) else p
        statics = self.layout.static_key()
        self.computations += 1
        try:
            with jaxlab_work():
                out, tangents, jacobians = self.program.evaluate(p, direction, self.arrays, statics)
                leaves = jax.tree_util.tree_leaves(out)
                host = [np.asarray(leaf) for leaf in leaves]
        except Exception as e:
            if first:
                raise
            message, where = failure_words(e)
            self._fail(moved, message, where, "failed")
            explanation = explain(e)  # JAX's common errors: the rule's fix, from their line
            if explanation is not None and self.error is not None:
                self.error["fix"] = explanation.fix
            return
        bad = [
            k
            for k, a in enumerate(host)
            if np.issubdtype(a.dtype, np.inexact) and not np.isfinite(a).all()
        ]
        if bad and not first:
            kinds = {"NaN" if np.isnan(host[k]).any() else "Inf" for k in bad}
            word = "/".join(sorted(kinds))
            site = first_non_finite(lambda q: self.program.user(q, self.arrays, statics), p)
            self._fail(moved, f"the output has {word}", site.words if site else None, word)
            return
        self._output = out
        self._treedef = jax.tree_util.tree_structure(out)
        self._paths = [
            jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(out)[0]
        ]
        self._leaves = leaves
        self._host = host
        self._tangents = {k: np.asarray(v) for k, v in tangents.items()}
        self._jacobians = {k: np.asarray(v) for k, v in jacobians.items()}
        self._good_p = p
        self._good_statics = statics
        self._good_values = {c.name: c.value for c in self.layout.controls}
        self._tangent_of = names[index] if names else None
        self.moved = moved if moved in names else self.moved
        self._version += 1
        self.error = None
        for c in sliders:
            c.flag = None
        for k, a in enumerate(host):
            if a.ndim == 0 and np.issubdtype(a.dtype, np.floating):
                self.histories.setdefault(self._paths[k], deque(maxlen=HISTORY)).append(float(a))

    def _fail(self, moved: str | None, message: str, where: str | None, word: str) -> None:
        param = moved or (self.layout.sliders[0].name if self.layout.sliders else None)
        at = ", ".join(
            f"{c.name} = {c.value:g}" if c.kind == "float" else f"{c.name} = {c.value!r}"
            for c in self.layout.controls
            if c.kind != "fixed"
        )
        self.error = {"message": f"{message} at {at}", "where": where, "param": param}
        if param is not None:
            flag = f"{word} here: {message}" + (f" ({where})" if where else "")
            self.layout.control(param).flag = flag

    # ---------------------------------------------------------------- sweep
    def sweep(self, name: str, n: int = 64) -> Sweep:
        """The output at ``n`` values across slider ``name``'s range, with its slope, from
        one ``jax.vmap``-ed compiled call (sweeping again compiles nothing)."""
        control = self.layout.control(name)
        if control.kind != "float":
            raise ExploreError(f"`{name}` is not a slider: only a float slider sweeps")
        if not isinstance(n, int) or n < 2:
            raise ExploreError(f"sweep takes n >= 2 values, not {n!r}")
        assert control.lo is not None and control.hi is not None
        if control.scale == "log":
            xs = np.geomspace(control.lo, control.hi, n)
        else:
            xs = np.linspace(control.lo, control.hi, n)
        index = [c.name for c in self.layout.sliders].index(name)
        with jaxlab_work():
            outs, slopes = self.program.sweep(
                self._good_p,
                index,
                jnp.asarray(xs, float_dtype()),
                self.arrays,
                self._good_statics,
            )
            outs_host = jax.tree_util.tree_map(np.asarray, outs)
            leaves = jax.tree_util.tree_leaves(outs_host)
            slope_leaves = [
                np.asarray(slopes[i]) if i in slopes else None for i in range(len(leaves))
            ]
        treedef = jax.tree_util.tree_structure(outs_host)
        record = Sweep(
            name,
            xs,
            outs_host,
            jax.tree_util.tree_unflatten(treedef, slope_leaves),
            float(control.value),
        )
        self.sweeps[name] = record
        self.last_sweep = name
        self._publish()
        return record

    # ---------------------------------------------------------------- fit
    def fit(
        self,
        steps: int = 200,
        *,
        learning_rate: float = 0.05,
        params: list[str] | None = None,
        tolerance: float = 1e-10,
    ) -> FitState:
        """Fit the sliders (all, or ``params``) to ``target=`` with Adam (optax's where
        installed) from the current values; the sliders move as it goes. :meth:`stop` (or
        an interrupt) ends it keeping the values reached."""
        from .fit import Fitter

        if self.target is None:
            raise ExploreError("fit needs target=: explore(fn, ..., target=data)")
        sliders = self.layout.sliders
        names = [c.name for c in sliders]
        chosen = params if params is not None else names
        for name in chosen:
            if name not in names:
                raise ExploreError(f"`{name}` is not a slider: the sliders are {', '.join(names)}")
        key = (
            tuple((c.lo, c.hi, c.scale) for c in sliders),
            tuple(chosen),
            float(learning_rate),
        )
        fitter = self._fitters.get(key)
        if fitter is None:
            with jaxlab_work():
                fitter = Fitter(
                    self.program,
                    self.loss,
                    self.target,
                    [float(c.lo or 0.0) for c in sliders],
                    [float(c.hi or 1.0) for c in sliders],
                    [c.scale == "log" for c in sliders],
                    [c.name in chosen for c in sliders],
                    learning_rate,
                )
            self._fitters = {key: fitter}
        state = FitState(running=True, params=tuple(chosen))
        self.fit_state = state
        self._stop.clear()
        statics = self.layout.static_key()
        try:
            with jaxlab_work():
                u, opt = fitter.start(self._p())
            for _ in range(steps):
                if self._stop.is_set():
                    state.ended = "stopped"
                    break
                with jaxlab_work():
                    u, opt, loss = fitter.step(u, opt, self.arrays, statics)
                    p = np.asarray(fitter.to_p(u))
                state.losses.append(loss)
                state.step += 1
                values = {c.name: float(v) for c, v in zip(sliders, p, strict=True)}
                self._submit({k: v for k, v in values.items() if k in chosen}, None)
                if loss <= tolerance:
                    state.ended = "converged"
                    break
            else:
                state.ended = "steps done"
        except KeyboardInterrupt:
            state.ended = "interrupted"
        finally:
            state.running = False
            self._publish()
        return state

    def stop(self) -> None:
        """End a running fit after its current step, keeping the values reached."""
        self._stop.set()

    def _ipython_display_(self) -> None:
        """``view`` at the end of a cell: the live Explorer, as ``%explore`` shows it."""
        from IPython.display import display

        from jaxlab.widgets.explorer import Explorer

        display(Explorer(self))

    def __repr__(self) -> str:
        values = ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in self.values.items()
        )
        return f"<Exploration of {self.name}({values}): {self.compiles} compile(s)>"


def explore(
    fn: Callable[..., Any],
    *args: Any,
    x: Any = None,
    target: Any = None,
    loss: Callable[[Any, Any], Any] | None = None,
    leaves: bool = False,
    **params: Any,
) -> Exploration:
    """Sliders on ``fn``: each float argument a slider (``g=(1.0, 20.0)`` or
    ``g=(0.1, 10.0, "log")`` a range; else one around its value), bools checkboxes, ints
    and strings static, arrays fixed; ``leaves=True`` makes a pytree's float leaves
    sliders. ``x=`` is the abscissa of a 1-D output; ``target=`` (and ``loss=``) for
    :meth:`Exploration.fit`. (A function whose own argument is named ``x``, ``target``,
    ``loss`` or ``leaves``: :func:`explore_call`.)

    >>> view = explore(lambda g, length=1.0: 2 * jnp.pi * jnp.sqrt(length / g), g=9.81)
    >>> view.set(g=4.0).compiles
    1
    """
    return explore_call(fn, args, params, x=x, target=target, loss=loss, leaves=leaves)


def explore_call(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    params: dict[str, Any],
    *,
    x: Any = None,
    target: Any = None,
    loss: Callable[[Any, Any], Any] | None = None,
    leaves: bool = False,
) -> Exploration:
    """:func:`explore` with the function's arguments apart from explore's own, so that a
    function whose argument is named ``x``, ``target``, ``loss`` or ``leaves`` is explored
    too (``%explore`` calls this)."""
    if not callable(fn):
        raise ExploreError(
            f"explore takes a function, not a {type(fn).__name__}: e.g. explore(sim, g=9.81)"
        )
    if loss is not None and not callable(loss):
        raise ExploreError(f"loss= is a function (output, target) -> scalar, not {loss!r}")
    layout = lay_out(fn, tuple(args), dict(params), leaves)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return Exploration(layout, name=name, x=x, target=target, loss=loss)
