"""The packages of ``kernel_ext/`` import in one direction (docs/design.md, "The house").

Every module is parsed with ``ast``, and every import it makes counts, at the top or
inside a function: a lazy import keeps ``import jaxlab`` light, but it is a dependency
all the same. Allowed directions, lowest first:

    program/, highlight/  <-  compile/  <-  graph/  <-  magics/

``program/`` (what the user wrote: calls, cells, a call's argument leaves) and
``highlight/`` (program text as HTML) are below every capability and import none of them;
``compile/`` never imports ``graph/`` (``graph/`` may import ``compile/``: its interpreter
runs under ``compile.capture.jaxlab_work``); ``graph/`` never imports ``magics/``, the
verbs on top.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_EXT = ROOT / "kernel_ext"

# The packages below every capability, and what they may not import: every other package
# of kernel_ext/ (today graph/, compile/, autodiff/, timing/, keys/, arrays/, explain/,
# magics/; a new capability is covered as soon as it exists) and the widgets.
BELOW = ("program", "highlight", "session")

# (importer, imported): a package that must not import the other.
NEVER = (("compile", "graph"), ("graph", "compile"), ("graph", "magics"))


def _packages() -> list[str]:
    return sorted(p.name for p in KERNEL_EXT.iterdir() if (p / "__init__.py").exists())


def _imports(path: pathlib.Path) -> set[tuple[str, int]]:
    """The ``jaxlab`` modules that the module at ``path`` imports (dotted, absolute), each
    with its line."""
    # The package a relative import starts from: a module's own (for __init__, itself).
    package = ["jaxlab", *path.relative_to(KERNEL_EXT).parent.parts]
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {(a.name, node.lineno) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if node.module is None:  # from .. import graph: the names are modules
                found |= {(f"{module}.{a.name}", node.lineno) for a in node.names}
            else:
                found.add((module, node.lineno))
    return {(m, line) for m, line in found if m == "jaxlab" or m.startswith("jaxlab.")}


def _imported_packages(package: str) -> dict[str, list[str]]:
    """For each package of jaxlab (or ``widgets``) that ``package`` imports, where."""
    out: dict[str, list[str]] = {}
    for path in sorted((KERNEL_EXT / package).rglob("*.py")):
        for module, line in _imports(path):
            parts = module.split(".")
            if len(parts) > 1 and parts[1] != package:
                where = f"{path.relative_to(KERNEL_EXT)}:{line} imports {module}"
                out.setdefault(parts[1], []).append(where)
    return out


def test_imports_are_read_relative_and_absolute():
    # The reader itself: without it the rules below would pass on nothing.
    text = _imports(KERNEL_EXT / "graph" / "text.py")
    assert any(m == "jaxlab.highlight" for m, _ in text)
    cells = _imports(KERNEL_EXT / "compile" / "cell_keys.py")
    assert {"jaxlab.program", "jaxlab.program.leaves", "jaxlab.compile.cell_inputs"} <= {
        m for m, _ in cells
    }
    assert "compile" in _imported_packages("timing")  # timing -> compile is allowed


def test_program_and_highlight_import_no_capability():
    packages = _packages()
    assert set(BELOW) <= set(packages)
    for low in BELOW:
        forbidden = {p for p in packages if p != low} | {"widgets"}
        found = {p: w for p, w in _imported_packages(low).items() if p in forbidden}
        assert found == {}, f"{low}/ must import no other package: {found}"


def test_compile_imports_no_graph_and_graph_no_magics():
    for importer, imported in NEVER:
        found = _imported_packages(importer).get(imported, [])
        assert found == [], f"{importer}/ must not import {imported}/: {found}"
