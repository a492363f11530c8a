"""The API reference, written at build time from what ``jaxlab/__init__.py`` exports.

Every public name of ``jaxlab`` (a function or class defined in the package, not a
submodule or a typing helper) gets an ``autofunction``/``autoclass`` entry, grouped by
the package it lives in, so a new twin appears here once it is re-exported::

    write_api_page(Path("docs/api.md"))
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

# Sections in reading order: the package a public name lives in -> its heading.
SECTIONS = {
    "graph": "Programs as graphs (`%jaxpr`)",
    "autodiff": "Gradients (`%grad`, `%%grad`)",
    "compile": "Compilation (`%jit`, `%%jit`, `%compile_log`)",
    "devices": "Devices (`%jax_devices`)",
    "explain": "Errors explained (`%jax_nans`)",
}
OTHER = "Extension and warnings"


def public_names() -> dict[str, list[str]]:
    """``{section heading: [name, ...]}`` for every public name ``jaxlab`` exports."""
    import jaxlab

    groups: dict[str, list[str]] = {}
    for name in sorted(vars(jaxlab), key=str.lower):
        obj = getattr(jaxlab, name)
        if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
            continue
        module = getattr(obj, "__module__", "") or ""
        if module != "jaxlab" and not module.startswith("jaxlab."):
            continue  # typing.Any and friends, imported for annotations
        package = module.split(".")[1] if "." in module else ""
        # A package not in SECTIONS yet (a new capability) is headed by its own name.
        heading = SECTIONS.get(package, f"`jaxlab.{package}`") if package else OTHER
        groups.setdefault(heading, []).append(name)
    order = [*SECTIONS.values()]
    order += [*sorted(set(groups) - {*order, OTHER}), OTHER]
    return {heading: groups[heading] for heading in order if heading in groups}


def api_page() -> str:
    import jaxlab

    parts = [
        "# API reference\n",
        "Every magic has a plain-Python twin, importable without IPython: "
        "`import jaxlab` loads no IPython, graphviz, matplotlib or widget code.\n",
    ]
    for heading, names in public_names().items():
        parts.append(f"## {heading}\n")
        directives = []
        for name in names:
            if inspect.isclass(getattr(jaxlab, name)):
                directives.append(f".. autoclass:: jaxlab.{name}\n   :members:\n")
            else:
                directives.append(f".. autofunction:: jaxlab.{name}\n")
        parts.append("```{eval-rst}\n" + "\n".join(directives) + "```\n")
    return "\n".join(parts)


def write_api_page(path: Path) -> None:
    text = api_page()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _on_builder_inited(app: Any) -> None:
    write_api_page(Path(app.srcdir) / "api.md")


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
