"""The house of ``kernel_ext/`` (docs/design.md, "The house"): floors, one direction of
imports, no circles inside a package, small modules.

Every module is parsed with ``ast``, and every import it makes counts, at the top, inside
a function or under ``TYPE_CHECKING``: a lazy import keeps ``import jaxlab`` light, but it
is a dependency all the same. The floors, lowest first:

    _jax_compat, session/, program/, highlight/   the bottom: import no package
    graph/, compile/, autodiff/, timing/, ...      the capabilities, one way between them
    magics/                                        the verbs on top: nothing imports them

Inside a package, records sit at the bottom, what draws them above, the entry functions
on top: the module import graph of a package has no circle (no strongly connected
component of more than one module). A record asks for its view through what its
package's ``__init__`` hands down, never by importing it.

The checks are functions of a root directory (the folder that is the package ``jaxlab``),
so they are tried on a planted tree too (``test_each_check_fails_on_a_planted_house``).
"""

from __future__ import annotations

import ast
import functools
import pathlib
from collections.abc import Iterable

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_EXT = ROOT / "kernel_ext"

# The bottom floor: below every capability, each imports no other package of kernel_ext/
# (nor the widgets). session/ holds the own-work marker and the kept programs that every
# capability shares, so that none of them imports compile/ for it.
BOTTOM = ("highlight", "program", "session")
TOP = "magics"  # the verbs: no package imports them

# (importer, imported): a package that must not import the other, beyond the acyclic rule
# (compile/ is the compile log; graph/ draws programs and takes nothing from the log).
NEVER = (("compile", "graph"), ("graph", "compile"))
# The module only compile/ and the verbs on top may import: JAX's events → the log. The
# own-work marker, which every capability uses, is session/'s.
LISTENERS = "jaxlab.compile.capture"

MAX_LINES = 500

# What is not done yet, each with its reason; a check fails when an exemption is no
# longer needed, so this list stays exactly what is left.
CIRCLES_EXEMPT: dict[str, str] = {}
LENGTH_EXEMPT: dict[str, str] = {}


# --------------------------------------------------------------------------- reading


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module under ``root`` by its dotted name (``jaxlab.graph.build``; a package by
    its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(("jaxlab", *parts))] = path
    return found


def _resolve(name: str, modules: Iterable[str]) -> str:
    """The module of ``modules`` a dotted name falls in (its longest known prefix)."""
    known = set(modules)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


@functools.cache  # a root's tree is read once per test run
def imports(root: pathlib.Path) -> dict[str, dict[str, list[int]]]:
    """For each module under ``root``: the modules of ``jaxlab`` it imports, with the
    lines. ``from .x import name`` imports ``x``; ``from . import x`` and ``from jaxlab.p
    import x`` import the module ``x`` when there is one, else the package."""
    modules = _modules(root)
    graph: dict[str, dict[str, list[int]]] = {}
    for name, path in modules.items():
        rel = path.relative_to(root)
        package = ["jaxlab", *rel.parent.parts]  # what a relative import starts from
        edges: dict[str, list[int]] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - (node.level - 1)])
                    module = f"{base}.{node.module}" if node.module else base
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.append(sub if sub in modules else module)
            for target in targets:
                if target == "jaxlab" or target.startswith("jaxlab."):
                    found = _resolve(target, modules)
                    if found and found != name:
                        edges.setdefault(found, []).append(node.lineno)
        graph[name] = edges
    return graph


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _packages(root: pathlib.Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists())


def _where(graph: dict[str, dict[str, list[int]]], a: str, b: str) -> str:
    return f"{a.removeprefix('jaxlab.')} -> {b.removeprefix('jaxlab.')} (line {graph[a][b]})"


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm,
    iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# --------------------------------------------------------------------------- the checks
# Each returns what breaks its rule (empty: the house keeps it).


def bottom_floor_imports(root: pathlib.Path) -> list[str]:
    """Imports from the bottom floor's packages of any other package (or the widgets)."""
    graph = imports(root)
    packages = set(_packages(root)) | {"widgets"}
    return [
        _where(graph, a, b)
        for a, targets in graph.items()
        if _package(a) in BOTTOM
        for b in targets
        if _package(b) in packages - {_package(a)}
    ]


def imports_against_the_floors(root: pathlib.Path) -> list[str]:
    """Imports of the verbs on top from below, the pairs in NEVER, the listeners from
    outside compile/ and the verbs, and every circle between packages."""
    graph = imports(root)
    packages = set(_packages(root))
    wrong = []
    between: dict[str, set[str]] = {p: set() for p in packages}
    for a, targets in graph.items():
        pa = _package(a)
        for b in targets:
            pb = _package(b)
            if pa not in packages or pb not in packages or pa == pb:
                continue
            between[pa].add(pb)
            if pb == TOP or (pa, pb) in NEVER:
                wrong.append(_where(graph, a, b))
            if b == LISTENERS and pa != TOP:
                wrong.append(_where(graph, a, b) + ": the own-work marker is session/'s")
    wrong += [f"packages in a circle: {' <-> '.join(c)}" for c in circles(between)]
    return wrong


def circles_within_packages(root: pathlib.Path) -> dict[str, list[str]]:
    """Per package, its circles of modules, each with the imports that close it."""
    graph = imports(root)
    found: dict[str, list[str]] = {}
    for package in _packages(root):
        inside = {
            a: {b for b in targets if _package(b) == package}
            for a, targets in graph.items()
            if _package(a) == package
        }
        for circle in circles(inside):
            members = set(circle)
            edges = [_where(graph, a, b) for a in circle for b in sorted(inside[a] & members)]
            found.setdefault(package, []).append("; ".join(edges))
    return found


def long_modules(root: pathlib.Path) -> dict[str, int]:
    """The modules over MAX_LINES lines, by path under ``root``, with their length."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            found[path.relative_to(root).as_posix()] = n
    return found


# --------------------------------------------------------------------------- the house


def test_imports_are_read_relative_absolute_and_lazy():
    # The reader itself: without it the rules below would pass on nothing.
    graph = imports(KERNEL_EXT)
    assert "jaxlab.highlight.code_html" in graph["jaxlab.graph.text"]  # from ..highlight import
    assert {"jaxlab.program", "jaxlab.program.leaves", "jaxlab.compile.cell_inputs"} <= set(
        graph["jaxlab.compile.cell_keys"]
    )
    assert "jaxlab.compile.loop_costs" in graph["jaxlab.timing.bench_cost"]  # timing -> compile
    # a lazy import inside a function counts (timing's profile attribution of a graph)
    assert "jaxlab.graph.build" in graph["jaxlab.timing.attribution"]
    # `from . import model as m` imports the module, not the package
    assert "jaxlab.graph.model" in graph["jaxlab.graph.emit"]


def test_the_bottom_floor_imports_no_capability():
    assert set(BOTTOM) <= set(_packages(KERNEL_EXT))
    assert bottom_floor_imports(KERNEL_EXT) == []


def test_packages_import_one_way():
    assert imports_against_the_floors(KERNEL_EXT) == []


def test_no_circle_of_imports_within_a_package():
    found = circles_within_packages(KERNEL_EXT)
    assert {p: c for p, c in found.items() if p not in CIRCLES_EXEMPT} == {}
    stale = sorted(set(CIRCLES_EXEMPT) - set(found))
    assert stale == [], f"no circle left in {stale}: remove the exemption"


def test_no_module_over_the_line_limit():
    found = long_modules(KERNEL_EXT)
    assert {p: n for p, n in found.items() if p not in LENGTH_EXEMPT} == {}
    stale = sorted(set(LENGTH_EXEMPT) - set(found))
    assert stale == [], f"{stale} within {MAX_LINES} lines now: remove the exemption"


# --------------------------------------------------------------------------- a planted house


def _plant(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_each_check_fails_on_a_planted_house(tmp_path):
    root = _plant(
        tmp_path / "kernel_ext",
        {
            "__init__.py": "",
            "_jax_compat.py": "",
            "session/__init__.py": "from .. import _jax_compat\n",
            # the bottom floor importing a capability, lazily
            "program/__init__.py": "def f():\n    from ..graph import model\n",
            "graph/__init__.py": "from .build import draw\n",
            "graph/model.py": "def to_svg():\n    from .render import svg\n",  # a lazy circle
            "graph/render.py": "from . import model as m\n",
            "graph/build.py": "from jaxlab.graph import model\nimport jaxlab.compile.log\n",
            "graph/long.py": "x = 1\n" * (MAX_LINES + 1),
            "compile/__init__.py": "",
            "compile/log.py": "",
            "compile/capture.py": "from ..graph import build\n",  # compile -> graph: a circle
            "autodiff/__init__.py": "from ..compile.capture import jaxlab_work\n",
            "magics/__init__.py": "from ..graph import build\n",
            "magics/grad.py": "",
            "timing/__init__.py": "from ..magics import grad\n",  # the verbs from below
        },
    )
    assert bottom_floor_imports(root) == ["program -> graph.model (line [2])"]
    wrong = imports_against_the_floors(root)
    assert "graph.build -> compile.log (line [2])" in wrong  # NEVER
    assert "compile.capture -> graph.build (line [1])" in wrong  # NEVER
    assert "timing -> magics.grad (line [1])" in wrong  # the verbs imported from below
    assert "autodiff -> compile.capture (line [1]): the own-work marker is session/'s" in wrong
    assert "packages in a circle: compile <-> graph" in wrong
    assert circles_within_packages(root) == {
        "graph": ["graph.model -> graph.render (line [2]); graph.render -> graph.model (line [1])"]
    }
    assert long_modules(root) == {"graph/long.py": MAX_LINES + 1}
    # and a house that keeps the rules: nothing found
    quiet = _plant(
        tmp_path / "quiet",
        {
            "__init__.py": "",
            "session/__init__.py": "",
            "graph/__init__.py": "from . import model, render\nmodel.served_by(render.svg)\n",
            "graph/model.py": "def served_by(svg):\n    pass\n",
            "graph/render.py": "from .model import served_by\n",
            "magics/__init__.py": "from ..graph import render\n",
        },
    )
    assert bottom_floor_imports(quiet) == []
    assert imports_against_the_floors(quiet) == []
    assert circles_within_packages(quiet) == {}
    assert long_modules(quiet) == {}


def test_circles_are_strongly_connected_components():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(circles(edges)) == [["a", "b", "c"], ["d", "e"]]
    assert circles({"a": {"b"}, "b": set()}) == []
