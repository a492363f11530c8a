"""The tutorials in the docs: ``notebooks/*.ipynb``, executed, in ``docs/tutorials/``.

``make test`` has already executed every notebook once (tests/test_notebooks.py saves the
executed copies in the folder ``$JAXLAB_EXECUTED_NOTEBOOKS`` names); the docs take those
copies. A plain ``make docs`` executes the notebooks here (nbclient, a kernel of this
environment; a failing cell stops the build). Either way MyST-NB renders executed
notebooks and executes nothing itself. An executed copy whose code differs from the
notebook it claims to be, or a notebook without a copy, stops the build.

A static page has no kernel for a live widget: an output that only a widget view can show
(no HTML or image beside it, its text an empty or ``IntSlider(...)`` repr) is dropped;
jaxlab's widgets carry their own static HTML, which the page shows instead::

    copy_tutorials(Path("notebooks"), Path("docs/tutorials"), executed=None)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV = "JAXLAB_EXECUTED_NOTEBOOKS"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC = {"text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "text/latex"}


class StaleNotebook(Exception):
    """An executed copy that is missing or does not match its notebook's code."""


def executed_folder(root: Path) -> Path | None:
    """The folder of executed copies named by ``$JAXLAB_EXECUTED_NOTEBOOKS`` (relative to
    the repository root), or None when the docs execute the notebooks themselves."""
    value = os.environ.get(ENV, "").strip()
    return (root / value).resolve() if value else None


def code_sources(notebook: dict[str, Any]) -> list[str]:
    def text(source: str | list[str]) -> str:
        return source if isinstance(source, str) else "".join(source)

    return [text(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def execute(path: Path) -> str:
    """Run a notebook top to bottom in its own folder; the executed notebook's JSON."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # The notebook's kernel ("python3") runs this interpreter: jupyter_client swaps a
    # kernelspec's bare `python` for sys.executable. A cell error raises.
    NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
    return nbformat.writes(nb)


def static_view(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook without the outputs only a live widget can show."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [
                out
                for out in cell["outputs"]
                if WIDGET_VIEW not in out.get("data", {}) or STATIC & out["data"].keys()
            ]
    return notebook


def copy_tutorials(source: Path, dest: Path, executed: Path | None) -> list[str]:
    """Write each notebook of ``source`` executed (its copy from ``executed``, or run here
    when that is None) into ``dest``, removing notebooks that no longer exist; return the
    stems."""
    dest.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(source.glob("*.ipynb"))
    for stale in set(dest.glob("*.ipynb")) - {dest / p.name for p in notebooks}:
        stale.unlink()
    for path in notebooks:
        if executed is None:
            text = execute(path)
        else:
            copy = executed / path.name
            if not copy.exists():
                raise StaleNotebook(
                    f"{copy} is missing: run tests/test_notebooks.py with {ENV}={executed}, "
                    f"or unset {ENV} so the docs execute {path.name} themselves"
                )
            text = copy.read_text()
            if code_sources(json.loads(text)) != code_sources(json.loads(path.read_text())):
                raise StaleNotebook(
                    f"{copy} was executed from an older {path.name}: run the notebook "
                    f"test again, or unset {ENV}"
                )
        text = json.dumps(static_view(json.loads(text)), indent=1, ensure_ascii=False) + "\n"
        target = dest / path.name
        # Unchanged files keep their time, so Sphinx does not read them again.
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    return [p.stem for p in notebooks]


def _on_builder_inited(app: Any) -> None:
    docs = Path(app.srcdir)
    root = docs.parent
    copy_tutorials(root / "notebooks", docs / "tutorials", executed_folder(root))


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
