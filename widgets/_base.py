"""What every jaxlab widget shares: its assets on disk and a static twin kept current.

A widget is an ``anywidget.AnyWidget`` subclass that names its asset pair::

    class CompileMonitor(JaxlabWidget, static="compile_monitor"):
        ...  # loads static/compile_monitor.js and static/compile_monitor.css

    def _static_html(self) -> str: ...   # its state as plain HTML (no script, no network)
    def _static_text(self) -> str: ...

Both files ship in the wheel (``package-data``) and nothing is fetched from a CDN or the
network: the ES module imports nothing, the CSS loads no fonts.

Saved notebooks. Displayed in IPython, a widget makes two outputs: the live view (the
widget mime type) and its *static twin*, an HTML output with a display id that is
updated (``update_display``) after every change of a synced trait, so the saved notebook
always holds the latest state as HTML. The twin shows unless a view of its widget is
drawn: a view that drew puts a rule hiding its twin (``data-jaxlab-twin``, the widget's
``_twin_id``) inside its own element, so the rule goes when the view goes and is never
there when the view was not drawn (reopened without a kernel, a saved model restored
whose view never renders, an untrusted notebook, exported to HTML, GitHub, a view that
could not read its saved state). No class CSS hides a twin: a model restored from saved
state injects its CSS whether or not a view is ever drawn. A rule in the twin hides
ipywidgets' "model not found" note above it.

What the page may write. The kernel computes a widget's state; a page (or any script in
it) can send any state through the widget's comm. :meth:`JaxlabWidget.set_state` accepts
only traits tagged ``front_end=True`` (a control the user works: the CompileMonitor's "my
functions only" box, ``traitlets.Bool(True).tag(sync=True, front_end=True)``) and sends
the kernel's value of any other back, so a forged ``view`` never reaches the twin a
shared notebook saves. A value of the wrong type for a trait it may write is refused
quietly: logged (logger ``jaxlab.widgets``), the kernel's value sent back, nothing
printed into the output.

Long sessions. A widget displayed while the extension is loaded belongs to the cell that
showed it (``jaxlab.magics._cell_widgets``): running that cell again releases it
(:meth:`JaxlabWidget.release`: its twins become plain HTML that stays visible, then it is
closed with the ``Layout`` it made), so a notebook's re-run cells do not pile up live
widgets or comms.
"""

from __future__ import annotations

import contextlib
import html
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import traitlets

from ._throttle import Throttle as Throttle  # re-exported: its home before issue 32

STATIC = Path(__file__).parent / "static"
MAX_TWINS = 8  # displays of one widget whose static twin is kept current

_log = logging.getLogger(__name__)
# The widgets' loggers (jaxlab.widgets.*) are a library's: nothing reaches the output
# unless the user configures logging (no "last resort" print to stderr, which a kernel
# shows in the cell).
logging.getLogger("jaxlab.widgets").addHandler(logging.NullHandler())

# In the twin's own HTML (applies only where the twin is shown): the widget output just
# before it, when ipywidgets could not find its model, holds only its error text (a live
# view has child elements); hide that note, the twin below says what there is to see.
_HIDE_MISSING_MODEL = (
    "<style>.jp-OutputArea-child:has(+ .jp-OutputArea-child .jaxlab-twin) "
    ".jupyter-widgets:not(:has(*)){display:none}</style>"
)


def _front_end_updates_displays() -> bool:
    """Whether displays are updated in place (a kernel with a front end); a terminal
    IPython would print every update as a new output."""
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


class LatestRedraw:
    """Redraws of the latest value, at most one per ``interval`` (start to start), each on a
    timer thread; the caller's thread only marks that a value changed. Unlike
    :class:`Throttle`, whose one thread pushes every view it serves at a fixed rate, a
    redraw here begins as soon as the interval ends (``jaxlab.show``'s live view); a loop
    calling this every step never draws nor waits for a drawing::

        redraws = LatestRedraw(widget.redraw, interval=0.25)
        redraws.changed()   # between redraws: one attribute read
        redraws.now()       # a redraw on this thread, after any one running

    ``changed`` arms one timer, for when the interval since the last redraw ends; the
    redraw it makes reads the value then, so an update made while a timer is armed is
    drawn by it, and one made after the redraw began arms the next: the view always
    ends on the latest value.
    """

    def __init__(self, redraw: Callable[[], None], interval: float) -> None:
        self._redraw = redraw
        self._interval = interval
        self._armed = False  # a redraw is due; read without the lock on every change
        self._closed = False
        self._timer: threading.Timer | None = None
        self._last = -interval  # when the last redraw began (monotonic seconds)
        self._lock = threading.Lock()  # guards _armed and _timer
        self.drawing = threading.RLock()  # held by a redraw (reentrant: its observers)

    def changed(self) -> None:
        """A new value: arm a redraw unless one is armed already."""
        if not self._armed:
            self._arm()

    def now(self) -> None:
        """Redraw on this thread (after a running redraw ends), dropping an armed one."""
        with self.drawing:
            self._disarm()
            if not self._closed:
                self._draw()

    def close(self) -> None:
        """No more redraws (the widget is closing); waits for a running one."""
        with self.drawing:
            self._closed = True
            self._disarm()

    def _arm(self) -> None:
        with self._lock:
            if self._armed or self._closed:
                return
            self._armed = True
            delay = max(0.0, self._last + self._interval - time.monotonic())
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _disarm(self) -> None:
        with self._lock:
            self._armed = False
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _fire(self) -> None:
        with self.drawing:
            with self._lock:
                if not self._armed:  # dropped by now() or close() meanwhile
                    return
                # cleared before the value is read: a change from here on arms the next
                self._armed = False
                self._timer = None
            self._draw()

    def _draw(self) -> None:
        self._last = time.monotonic()
        self._redraw()


def asset(name: str) -> str:
    """The text of ``widgets/static/<name>`` (read once, when the class is defined)."""
    return (STATIC / name).read_text(encoding="utf-8")


def module_source(static: str) -> str:
    """A widget's ES module as the page gets it: what every view shares (``_view.js``:
    the guard that hides the twin once drawn, ``Refused``, ``h``) before the widget's own
    ``<static>.js``. ES modules saved in a notebook cannot import one another."""
    return asset("_view.js") + "\n" + asset(f"{static}.js")


class JaxlabWidget(anywidget.AnyWidget):
    """Base class: ``static="name"`` loads ``name.js`` and ``name.css``; displays keep a
    static twin of the widget's latest state for renderers without a kernel."""

    _twin_class: str = "jaxlab-twin-widget"

    def __init_subclass__(cls, static: str | None = None, **kwargs: Any) -> None:
        if static is not None:
            cls._twin_class = f"jaxlab-twin-{static.replace('_', '-')}"
            # Read as text, not passed as a path: anywidget would start a file watcher.
            cls._esm = module_source(static)
            # Styles for the view only: a model restored from saved state injects them
            # even when no view is drawn, so they never hide a twin.
            cls._css = asset(f"{static}.css")
        super().__init_subclass__(**kwargs)

    # Names this widget's twins (data-jaxlab-twin): a view that drew hides them by it.
    _twin_id = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("_twin_id")
    def _new_twin_id(self) -> str:
        return uuid.uuid4().hex

    def __init__(self, **kwargs: Any) -> None:
        # Made here, not given: a Layout passed in may be shared, and is not ours to close.
        self._own_layout = "layout" not in kwargs
        super().__init__(**kwargs)
        self._twin_ids: list[str] = []
        self.observe(self._synced_change, names=traitlets.All)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """State sent by the page: only traits tagged ``front_end=True`` are taken, each
        only if it is of the trait's type; the kernel's value of anything else is sent
        back, so the page shows what the kernel computed. A refusal is logged, never
        raised (ipywidgets would print its traceback into the output)::

            monitor.set_state({"mine_only": "yes"})   # logged; mine_only keeps its value
        """
        writable = self.class_trait_names(front_end=True)
        refused = [k for k in sync_data if k not in writable]
        for name, value in sync_data.items():
            if name not in writable:
                continue
            try:
                super().set_state({name: value})
            except traitlets.TraitError as err:
                _log.warning(
                    "%s refused %s=%.80r from the page: %s", type(self).__name__, name, value, err
                )
                refused.append(name)
        kept = [k for k in refused if k in self.keys]
        if kept and self.comm is not None:
            self.send_state(kept)

    def release(self) -> None:
        """Close the widget, leaving its twins as plain HTML that stays visible (without
        a twin id: no view of a closed widget may hide them)."""
        if self._twin_ids:
            from IPython.display import update_display

            bundle = self.static_bundle(released=True)
            for display_id in self._twin_ids:
                update_display(bundle, raw=True, display_id=display_id)
            self._twin_ids = []
        self.close()

    def close(self) -> None:
        """Close the widget and the widgets it made for itself (its ``Layout``), so a
        closed widget leaves no model or comm behind in the kernel."""
        made = self._made_widgets() if self.comm is not None else []
        super().close()
        for widget in made:
            widget.close()

    def _made_widgets(self) -> list[ipywidgets.Widget]:
        """The widgets held by this widget's traits that it made (not passed in)."""
        made: list[ipywidgets.Widget] = []
        for name in self.trait_names(sync=True):
            if name == "layout" and not self._own_layout:
                continue
            value = getattr(self, name)
            values = value if isinstance(value, list | tuple) else [value]
            made += [v for v in values if isinstance(v, ipywidgets.Widget) and v is not self]
        return made

    def _static_html(self) -> str:
        raise NotImplementedError

    def _static_text(self) -> str:
        return f"<{type(self).__name__}>"

    # ------------------------------------------------------------------ the static twin
    def static_bundle(self, released: bool = False) -> dict[str, str]:
        """The twin's MIME bundle: the latest state as HTML and text (``released``: of a
        closed widget, with no twin id a view could hide it by)."""
        cls = "jaxlab-twin-released" if released else self._twin_class
        twin = "" if released else f' data-jaxlab-twin="{html.escape(self._twin_id)}"'
        return {
            "text/html": (
                f'<div class="jaxlab-twin {cls}"{twin} '
                f'data-jaxlab-model="{html.escape(str(self.model_id))}">'
                f"{_HIDE_MISSING_MODEL}{self._static_html()}</div>"
            ),
            "text/plain": self._static_text(),
        }

    def update_static(self) -> None:
        """Bring every displayed twin up to the widget's current state."""
        if not self._twin_ids:
            return
        from IPython.display import update_display

        bundle = self.static_bundle()
        for display_id in self._twin_ids:
            update_display(bundle, raw=True, display_id=display_id)

    # Inside twin_once() a synced change only marks the twin stale; it is rebuilt once at
    # the end (a redraw setting five traits rebuilt its twin five times).
    _twin_held = False
    _twin_stale = False

    @contextlib.contextmanager
    def twin_once(self) -> Iterator[None]:
        """Changes made inside bring the displayed twins up to date once, at the end."""
        if self._twin_held:
            yield
            return
        self._twin_held, self._twin_stale = True, False
        try:
            yield
        finally:
            self._twin_held = False
            if self._twin_stale:
                self.update_static()

    def _synced_change(self, change: dict[str, Any]) -> None:
        name = change.get("name", "")
        if self._twin_ids and not name.startswith("_") and name in self.keys:
            if self._twin_held:
                self._twin_stale = True
            else:
                self.update_static()

    def _ipython_display_(self, **kwargs: Any) -> None:
        """Display the live view, then its static twin (with a display id to update)."""
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        data, metadata = bundle if bundle is not None else ({}, {})
        view = {k: v for k, v in data.items() if k != "text/html"}
        view["text/plain"] = ""  # the twin below says it; no duplicate in exported HTML
        display(view, metadata=metadata, raw=True)
        display_id = uuid.uuid4().hex
        display(self.static_bundle(), raw=True, display_id=display_id)
        if _front_end_updates_displays():
            self._twin_ids = [*self._twin_ids, display_id][-MAX_TWINS:]
        from jaxlab.magics._cell_widgets import hold

        hold(self)  # released when its cell runs again

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The live view plus ``text/html`` and ``text/plain`` (for front ends that ask an
        object for its bundle directly; IPython's display uses :meth:`_ipython_display_`)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if bundle is not None else ({}, {})
        data = {**data, "text/plain": self._static_text(), "text/html": self._static_html()}
        return data, metadata
