"""The modules the site's widget loader may run: jaxlab's own, by content hash.

A page's saved widget state holds each anywidget's ES module (``_esm``) and CSS
(``_css``). A notebook's state can hold anything (it is saved by whatever ran it), and
nothing upstream checks it: JupyterLab's widget manager restores saved widgets whether
the notebook is trusted or not, and anywidget runs a model's ``_esm`` and adds its
``_css`` as the model is made (jaxlab's own lab keeps an untrusted notebook's state out
of the page on the server: ``jaxlab_server``); ipywidgets' embed manager, the one HTML
exports use, loads code by module name, never from the state. So the site's loader
(``docs/_static/jaxlab-widgets.js``) draws a saved widget only when the SHA-256 of its
``_esm`` and of its ``_css`` are those of a widget class jaxlab ships; anything else keeps
its static twin. After the build, this extension writes those hashes into the built
copy of the loader, in place of its ``/* jaxlab:shipped */ []`` (the source loader, not
built, trusts nothing)::

    shipped_modules()[0]   # {"widget": "CompileMonitor", "esm": "3f1c…", "css": "a9e0…"}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

LOADER = "jaxlab-widgets.js"
PLACEHOLDER = "/* jaxlab:shipped */ []"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shipped_modules() -> list[dict[str, str]]:
    """Each jaxlab widget class: its name and the hashes of its ES module and CSS, as a
    kernel running this jaxlab saves them."""
    import jaxlab.widgets as widgets
    from jaxlab.widgets._base import JaxlabWidget

    found = []
    for name in sorted(dir(widgets)):
        cls = getattr(widgets, name)
        if isinstance(cls, type) and issubclass(cls, JaxlabWidget) and "_esm" in vars(cls):
            esm, css = vars(cls)["_esm"], vars(cls)["_css"]
            found.append({"widget": name, "esm": _sha256(esm), "css": _sha256(css)})
    return found


def trust_loader(loader: Path) -> None:
    """Write the shipped hashes into a built copy of the loader."""
    text = loader.read_text(encoding="utf-8")
    if PLACEHOLDER not in text:
        raise RuntimeError(f"{loader} has no {PLACEHOLDER!r} to fill: is it jaxlab's loader?")
    shipped = json.dumps(shipped_modules(), indent=1)
    loader.write_text(text.replace(PLACEHOLDER, shipped, 1), encoding="utf-8")


def _on_build_finished(app: Any, exception: BaseException | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    loader = Path(app.outdir) / "_static" / LOADER
    if loader.is_file():
        trust_loader(loader)


def setup(app: Any) -> dict[str, Any]:
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
