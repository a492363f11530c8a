"""A page per magic, written at build time from the magic's own help and the README.

Every magic registered by a family in ``jaxlab.magics.FAMILIES`` gets ``magics/<name>.md``:
its title (``%grad`` and ``%%grad``), the README's section on it when the README's
"Magics" chapter has one (prose and examples, kept in one place), and the help text
``%name?`` prints (from ``magic_arguments``). A magic added later gets its page without
touching the docs::

    pages = magic_help()            # {"jaxpr": [("line", "::\\n\\n  %jaxpr [--text] ...")], ...}
    write_pages(Path("docs/magics"), Path("README.md"))
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

_HEADING = re.compile(r"^### (.+)$", re.MULTILINE)
_MAGIC_IN_HEADING = re.compile(r"`%%?([A-Za-z_]\w*)`")


def magic_help() -> dict[str, list[tuple[str, str]]]:
    """``{name: [(kind, help), ...]}`` in registration order; kind is "line" or "cell"."""
    from jaxlab.magics import FAMILIES

    pages: dict[str, list[tuple[str, str]]] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"jaxlab.magics.{family}")
        for cls in getattr(module, "MAGICS", ()):
            for kind in ("line", "cell"):
                for name, method in cls.magics.get(kind, {}).items():
                    doc = inspect.getdoc(getattr(cls, method)) or "(no help text)"
                    pages.setdefault(name, []).append((kind, doc))
    return pages


def readme_sections(readme: str) -> dict[str, str]:
    """The README's "## Magics" chapter cut at its ``###`` headings: ``{name: body}``
    for every magic a heading names (``### `%jit` and `%%jit`: ...`` gives "jit")."""
    chapter = readme.partition("\n## Magics\n")[2].split("\n## ", 1)[0]
    heads = list(_HEADING.finditer(chapter))
    sections = {}
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = chapter[head.end() : after.start() if after else len(chapter)].strip()
        for name in _MAGIC_IN_HEADING.findall(head.group(1)):
            sections.setdefault(name, body)
    return sections


def _usage(doc: str) -> str:
    # magic_arguments starts its help with a reST literal marker ("::") before the usage.
    return doc.removeprefix("::").strip("\n")


def page(name: str, helps: list[tuple[str, str]], readme_body: str | None) -> str:
    """The Markdown of one magic's page."""
    prefixes = {"line": "%", "cell": "%%"}
    title = " and ".join(f"`{prefixes[kind]}{name}`" for kind, _ in helps)
    parts = [f"# {title}\n"]
    if readme_body:
        parts.append(readme_body + "\n")
    parts.append("## Options\n")
    shown: list[str] = []
    for kind, doc in helps:
        if doc in shown:  # line and cell magic share one method, so one help text
            continue
        shown.append(doc)
        if len(helps) > 1 and len({d for _, d in helps}) > 1:
            parts.append(f"`{prefixes[kind]}{name}?` prints:\n")
        parts.append(f"```text\n{_usage(doc)}\n```\n")
    return "\n".join(parts)


def index(names: list[str]) -> str:
    entries = "\n".join(f"{name}" for name in names)
    return (
        "# Magics\n\n`%load_ext jaxlab` adds these magics. Each answers `%name?` with the "
        "options below, returns its result object with `-o`, and has a plain-Python twin "
        "in the [API](../api.md).\n\n"
        f"```{{toctree}}\n:maxdepth: 1\n\n{entries}\n```\n"
    )


def write_if_changed(path: Path, text: str) -> None:
    # Sphinx rebuilds a page whose file is newer than its last build: leave unchanged ones.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def write_pages(folder: Path, readme: Path) -> list[str]:
    """Write ``index.md`` and one page per magic into ``folder``; return the names."""
    helps = magic_help()
    sections = readme_sections(readme.read_text()) if readme.exists() else {}
    folder.mkdir(parents=True, exist_ok=True)
    for stale in set(folder.glob("*.md")) - {folder / f"{n}.md" for n in [*helps, "index"]}:
        stale.unlink()
    for name, entries in helps.items():
        write_if_changed(folder / f"{name}.md", page(name, entries, sections.get(name)))
    write_if_changed(folder / "index.md", index(list(helps)))
    return list(helps)


def _on_builder_inited(app: Any) -> None:
    source = Path(app.srcdir)
    write_pages(source / "magics", source.parent / "README.md")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
