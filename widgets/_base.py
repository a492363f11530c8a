"""What every jaxlab widget shares: its assets on disk and a static fallback.

A widget is an ``anywidget.AnyWidget`` subclass that names its asset pair::

    class CompileMonitor(JaxlabWidget, static="compile_monitor"):
        ...  # loads static/compile_monitor.js and static/compile_monitor.css

    def _static_html(self) -> str: ...   # what exported HTML, GitHub and the docs show
    def _static_text(self) -> str: ...

Both files ship in the wheel (``package-data``) and nothing is fetched from a CDN or the
network: the ES module imports nothing, the CSS loads no fonts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget

STATIC = Path(__file__).parent / "static"


def asset(name: str) -> str:
    """The text of ``widgets/static/<name>`` (read once, when the class is defined)."""
    return (STATIC / name).read_text(encoding="utf-8")


class JaxlabWidget(anywidget.AnyWidget):
    """Base class: ``static="name"`` loads ``name.js`` and ``name.css``; a static fallback
    joins the widget view in the MIME bundle."""

    def __init_subclass__(cls, static: str | None = None, **kwargs: Any) -> None:
        if static is not None:
            # Read as text, not passed as a path: anywidget would start a file watcher.
            cls._esm = asset(f"{static}.js")
            cls._css = asset(f"{static}.css")
        super().__init_subclass__(**kwargs)

    def _static_html(self) -> str:
        raise NotImplementedError

    def _static_text(self) -> str:
        return f"<{type(self).__name__}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The live view plus ``text/html`` and ``text/plain`` for renderers without a kernel.

        Front ends that know widgets choose the widget view; nbconvert, GitHub and
        MyST-NB fall back to the HTML when the widget state was not saved.
        """
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if bundle is not None else ({}, {})
        data = {**data, "text/plain": self._static_text(), "text/html": self._static_html()}
        return data, metadata
