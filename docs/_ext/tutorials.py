"""The tutorials in the docs: ``notebooks/*.ipynb``, executed, in ``docs/tutorials/``.

``make test`` has already executed every notebook once (tests/test_notebooks.py saves the
executed copies in the folder ``$JAXLAB_EXECUTED_NOTEBOOKS`` names); the docs take those
copies. A plain ``make docs`` executes the notebooks here (nbclient, a kernel of this
environment; a failing cell stops the build). Either way MyST-NB renders executed
notebooks and executes nothing itself. An executed copy whose code differs from the
notebook it claims to be, or a notebook without a copy, stops the build.

Widgets. An executed notebook saves its widgets' state (nbclient writes it into the
metadata). A jaxlab widget is an anywidget whose state holds its own ES module and CSS, so
the page keeps its view, and ``docs/_static/jaxlab-widgets.js`` draws it from that state
(its static twin, the HTML saved beside it, is what a reader without JavaScript sees). A
widget that is not an anywidget (ipywidgets' sliders, ``interact``, tqdm's bar) has no
module the page could run: its view becomes HTML written here from its saved state, the
description and value as text, a bar as ``<progress>``, an ``Output``'s figures as
images. A view whose state was not saved is dropped (a twin, if any, shows instead). The
page keeps only the state of the views it draws, and the state's JSON is written so that
no ``</script>`` inside it can end its script element::

    copy_tutorials(Path("notebooks"), Path("docs/tutorials"), executed=None)
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from pathlib import Path
from typing import Any

ENV = "JAXLAB_EXECUTED_NOTEBOOKS"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC = {"text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "text/latex"}
_REF = "IPY_MODEL_"  # how a widget's state names another model
_TAGS = re.compile(r"<[^>]*>")
# A module given by address (one word, no code), as anywidget allows; "// comment" is code.
_URL = re.compile(r"\s*(https?:)?//\S+\s*", re.IGNORECASE)


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


def widget_models(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook's saved widget models, by id (empty when it saved none)."""
    saved = notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    models = saved.get("state", {}) if isinstance(saved, dict) else {}
    return models if isinstance(models, dict) else {}


def esm_source(entry: dict[str, Any]) -> str | None:
    """An anywidget's ES module as saved in its state; None for other widgets, and for a
    module given as a URL (the site fetches nothing from the network)."""
    esm = entry.get("state", {}).get("_esm")
    return esm if isinstance(esm, str) and esm and not _URL.fullmatch(esm) else None


def _refs(value: Any) -> list[str]:
    """Model ids a state value names (``IPY_MODEL_…`` strings, in lists and dicts too)."""
    if isinstance(value, str):
        return [value.removeprefix(_REF)] if value.startswith(_REF) else []
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _refs(v)]
    return []


def _reachable(ids: list[str], models: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = [i for i in ids if i in models]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += [r for r in _refs(models[current].get("state", {})) if r in models]
    return seen


def _text(value: Any, fmt: Any = None) -> str:
    if isinstance(value, float) and isinstance(fmt, str):
        try:
            return format(value, fmt)  # ipywidgets' readout_format, e.g. ".2f"
        except ValueError:
            pass
    if isinstance(value, list):
        return " – ".join(_text(v, fmt) for v in value)  # a range slider's two ends
    return str(value)


def _saved_output(out: dict[str, Any]) -> str:
    """One output an ``Output`` widget captured, as HTML: images as data: images, text
    escaped (its HTML is not trusted here, and a figure carries its image beside it)."""
    data = out.get("data", {})
    for mime in ("image/png", "image/jpeg"):
        if isinstance(data.get(mime), str):
            return f'<img alt="" src="data:{mime};base64,{html.escape(data[mime].strip())}">'
    if isinstance(data.get("image/svg+xml"), (str, list)):
        svg = data["image/svg+xml"]
        svg = svg if isinstance(svg, str) else "".join(svg)
        encoded = base64.b64encode(svg.encode()).decode()
        return f'<img alt="" src="data:image/svg+xml;base64,{encoded}">'
    text = out.get("text", data.get("text/plain", ""))
    text = text if isinstance(text, str) else "".join(text)
    return f"<pre>{html.escape(text)}</pre>" if text.strip() else ""


def _hidden(state: dict[str, Any], models: dict[str, Any]) -> bool:
    layout = models.get(next(iter(_refs(state.get("layout"))), ""), {}).get("state", {})
    return layout.get("display") == "none" or layout.get("visibility") == "hidden"


def _saved_html(model_id: str, models: dict[str, Any], depth: int = 0) -> str:
    """A widget that is not an anywidget, as HTML from its saved state."""
    entry = models.get(model_id)
    if not isinstance(entry, dict) or depth > 20:
        return ""
    state = entry.get("state", {})
    name = str(entry.get("model_name") or state.get("_model_name", ""))
    if _hidden(state, models):
        return ""  # hidden by the kernel: tqdm's leave=False bar once it finished
    children = [r for r in _refs(state.get("children", [])) if r in models]
    if children or name.endswith("BoxModel"):
        vertical = " jaxlab-saved-vertical" if name in ("VBoxModel", "GridBoxModel") else ""
        inner = "".join(_saved_html(c, models, depth + 1) for c in children)
        return f'<div class="jaxlab-saved-box{vertical}">{inner}</div>' if inner else ""
    if name == "OutputModel":
        return "".join(_saved_output(o) for o in state.get("outputs", []) if isinstance(o, dict))
    label = state.get("description")
    parts = [f'<span class="jaxlab-saved-description">{html.escape(label)}</span>'] if label else []
    value = state.get("value")
    if isinstance(state.get("_options_labels"), list) and isinstance(state.get("index"), int):
        labels, index = state["_options_labels"], state["index"]
        value = labels[index] if 0 <= index < len(labels) else None
    if "Progress" in name and isinstance(value, (int, float)):
        top = html.escape(str(state.get("max", 100)))
        parts.append(f'<progress value="{value}" max="{top}"></progress>')
    elif name in ("HTMLModel", "HTMLMathModel") and isinstance(value, str):
        value = html.unescape(_TAGS.sub("", value))  # markup from the kernel, shown as text
        parts.append(f"<span>{html.escape(value)}</span>" if value.strip() else "")
    elif value is not None and name not in ("ButtonModel",):
        parts.append(f"<output>{html.escape(_text(value, state.get('readout_format')))}</output>")
    shown = " ".join(part for part in parts if part)
    return f"<span>{shown}</span>" if shown else ""


def site_view(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook as the site shows it (see the module's docstring): anywidget views kept
    with their saved state, other widgets' views written as HTML, unsaved views dropped."""
    models = widget_models(notebook)
    drawn: list[str] = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        outputs = []
        for out in cell["outputs"]:
            view = out.get("data", {}).get(WIDGET_VIEW)
            model_id = view.get("model_id") if isinstance(view, dict) else None
            if view is None or STATIC & out["data"].keys():
                outputs.append(out)  # not a widget, or one that carries its own HTML
            elif model_id in models and esm_source(models[model_id]):
                outputs.append(out)  # an anywidget: the page draws it from its state
                drawn.append(model_id)
            elif model_id in models and (saved := _saved_html(model_id, models)):
                title = "the saved state of a control: run the notebook in Jupyter to use it"
                text = f'<div class="jaxlab-saved-widget" title="{title}">{saved}</div>'
                plain = out["data"].get("text/plain", "")
                outputs.append({**out, "data": {"text/html": text, "text/plain": plain}})
        cell["outputs"] = outputs
    widgets = notebook.get("metadata", {}).pop("widgets", None)
    keep = _reachable(drawn, models)
    if widgets is not None and keep:
        state = {k: v for k, v in models.items() if k in keep}
        saved = {**widgets[WIDGET_STATE], "state": state}
        notebook["metadata"]["widgets"] = {WIDGET_STATE: saved}
    return notebook


def safe_script_json(text: str) -> str:
    """JSON to put inside ``<script>``: every ``<`` written as ``\\u003c`` (the same JSON),
    so no ``</script>`` or ``<!--`` in a string (a user's function name, a module's source)
    ends or changes the element."""
    return text.replace("<", "\\u003c")


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
        text = json.dumps(site_view(json.loads(text)), indent=1, ensure_ascii=False) + "\n"
        target = dest / path.name
        # Unchanged files keep their time, so Sphinx does not read them again.
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    return [p.stem for p in notebooks]


def _on_builder_inited(app: Any) -> None:
    docs = Path(app.srcdir)
    root = docs.parent
    copy_tutorials(root / "notebooks", docs / "tutorials", executed_folder(root))


def _on_html_page(app: Any, pagename: str, *args: Any) -> None:
    """Make a page's saved widget state safe inside its ``<script>`` (MyST-NB only escapes
    a lower-case ``</script>``); runs before MyST-NB adds the script to the page."""
    pages = getattr(app.env, "nb_metadata", {})
    scripts = pages.get(pagename, {}).get("js_files", {})
    for _, attributes in scripts.values():
        if attributes.get("type") == WIDGET_STATE and "body" in attributes:
            attributes["body"] = safe_script_json(attributes["body"])


def setup(app: Any) -> dict[str, Any]:
    # The loader that draws the saved widgets runs only jaxlab's own modules (by hash).
    app.setup_extension("widget_trust")
    app.connect("builder-inited", _on_builder_inited)
    app.connect("html-page-context", _on_html_page, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
