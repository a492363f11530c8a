"""The public surface: every ``jaxlab.*`` name and every magic stays, and the house keeps
its shape (capability packages, nothing loose at the top of ``kernel_ext/``)."""

import importlib
import pathlib

import jaxlab
from jaxlab.magics import FAMILIES

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Removing a name from here is an API break: say so in the commit.
PUBLIC_NAMES = {
    "JaxlabWarning",
    "GradReport",
    "grad_report",
    "CellRun",
    "jit_cell",
    "CompileEvent",
    "CompileLog",
    "compile_log",
    "DeviceReport",
    "devices",
    "Explanation",
    "explain",
    "explore",
    "NanCheck",
    "debug_nans",
    "CellGrad",
    "grad_cell",
    "GradSplit",
    "grad_split",
    "grad_steps",
    "Graph",
    "jaxpr_graph",
    "ProgramDiff",
    "diff",
    "recompile_diff",
    "CompileReport",
    "compile_report",
    "LoweredText",
    "hlo_text",
    "stablehlo_text",
    "bench",
    "BenchResult",
    "profile",
    "ProfileResult",
    "profile_graph",
    "profile_attribution",
    "equation_costs",
    "EquationCosts",
    "KeyFlow",
    "key_flow",
    "KeyLineage",
    "key_lineage",
    "track_keys",
    "show",
    "ShowHandle",
    "ShowRecord",
    "memory",
    "MemoryReport",
    "load_ipython_extension",
    "unload_ipython_extension",
}

PUBLIC_MAGICS = {
    ("line", "jaxpr"),
    ("line", "jax_devices"),
    ("line", "grad"),
    ("cell", "grad"),
    ("line", "jit"),
    ("cell", "jit"),
    ("line", "compile_log"),
    ("line", "jax_nans"),
    ("line", "bench"),
    ("cell", "profile"),
    ("line", "keys"),
    ("line", "show"),
    ("line", "memory"),
    ("line", "explore"),
}

# The top of kernel_ext/: the entry point and the shared modules (plus the warning
# category); everything else lives in a package: the package of its capability, or a
# package below them all: program/ (calls, cells and a call's argument leaves, shared by
# every magic) or highlight/ (code as HTML). tests/test_house.py checks the imports.
TOP_LEVEL = {"__init__.py", "devices.py", "_jax_compat.py", "_warning.py"}


def test_every_public_name_is_there_and_callable_or_a_class():
    missing = sorted(n for n in PUBLIC_NAMES if not hasattr(jaxlab, n))
    assert missing == []
    for name in PUBLIC_NAMES:
        assert callable(getattr(jaxlab, name)), name


def test_public_functions_are_the_functions_not_the_modules_of_the_same_name():
    # jaxlab.explain, jaxlab.compile_log and jaxlab.devices share a name with a package
    # or module; importing those must not replace the function on the package.
    importlib.import_module("jaxlab.explain.rules")
    importlib.import_module("jaxlab.compile.log")
    for name in ("explain", "explore", "compile_log", "devices", "grad_split", "grad_cell"):
        assert not isinstance(getattr(jaxlab, name), type(jaxlab)), name


def test_every_public_magic_is_declared_by_a_family():
    declared = set()
    for family in FAMILIES:
        module = importlib.import_module(f"jaxlab.magics.{family}")
        for cls in module.MAGICS:
            declared |= {(kind, name) for kind, names in cls.magics.items() for name in names}
    assert declared >= PUBLIC_MAGICS, sorted(PUBLIC_MAGICS - declared)


def test_kernel_ext_top_level_holds_only_the_entry_and_shared_modules():
    top = ROOT / "kernel_ext"
    loose = sorted(p.name for p in top.glob("*.py") if p.name not in TOP_LEVEL)
    assert loose == []
    for folder in (p for p in top.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").exists(), f"{folder.name}/ is not a package"


def test_design_doc_names_every_package():
    design = (ROOT / "docs" / "design.md").read_text()
    packages = sorted(
        p.name for p in (ROOT / "kernel_ext").iterdir() if (p / "__init__.py").exists()
    )
    for name in packages:
        assert f"`{name}/`" in design, f"docs/design.md does not describe {name}/"
