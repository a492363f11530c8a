"""The tutorials in the docs: ``notebooks/*.ipynb`` copied to ``docs/tutorials/``.

A plain ``make docs`` copies the stored notebooks (without outputs) and MyST-NB executes
them. ``make test`` has already executed every notebook once (tests/test_notebooks.py
saves the executed copies in the folder ``JAXLAB_EXECUTED_NOTEBOOKS`` names); then the
docs take those copies and execute nothing. An executed copy whose code differs from the
notebook it claims to be, or a notebook without a copy, stops the build::

    copy_tutorials(Path("notebooks"), Path("docs/tutorials"), executed=None)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV = "JAXLAB_EXECUTED_NOTEBOOKS"


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


def copy_tutorials(source: Path, dest: Path, executed: Path | None) -> list[str]:
    """Copy each notebook of ``source`` (or its executed copy from ``executed``) into
    ``dest``, removing copies of notebooks that no longer exist; return their stems."""
    dest.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(source.glob("*.ipynb"))
    for stale in set(dest.glob("*.ipynb")) - {dest / p.name for p in notebooks}:
        stale.unlink()
    for path in notebooks:
        text = path.read_text()
        if executed is not None:
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
