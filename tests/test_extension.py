"""The extension's life: load registers every magic, unload removes all it added, reload
leaves one of each, and ``import jaxlab`` stays light."""

import importlib
import json
import logging
import os
import subprocess
import sys
import warnings

import pytest

import jaxlab
from jaxlab.magics import FAMILIES, is_loaded


def _loggers():
    named = [logging.getLogger(n) for n in sorted(logging.root.manager.loggerDict)]
    return [logging.getLogger(), *(lg for lg in named if isinstance(lg, logging.Logger))]


def snapshot(ip):
    """Everything an extension can hook into, copied so later changes do not show through."""
    formatters = ip.display_formatter.formatters
    return {
        "magics": {kind: dict(table) for kind, table in ip.magics_manager.magics.items()},
        "registry": dict(ip.magics_manager.registry),
        "events": {name: list(cbs) for name, cbs in ip.events.callbacks.items()},
        "custom_exceptions": tuple(ip.custom_exceptions),
        "input_transformers_cleanup": list(ip.input_transformers_cleanup),
        "input_transformers_post": list(ip.input_transformers_post),
        "ast_transformers": list(ip.ast_transformers),
        "formatters": {
            mime: (dict(f.type_printers), dict(f.deferred_printers))
            for mime, f in formatters.items()
        },
        "logging": {lg.name: list(lg.handlers) for lg in _loggers()},
        "warnings": list(warnings.filters),
    }


def expected_magics():
    """{(kind, name): Magics class} for every magic the families declare."""
    found = {}
    for family in FAMILIES:
        module = importlib.import_module(f"jaxlab.magics.{family}")
        for cls in module.MAGICS:
            for kind, names in cls.magics.items():
                for name in names:
                    found[(kind, name)] = cls
    return found


@pytest.fixture
def shell(_shell):
    """The session's shell with jaxlab unloaded (and unloaded again afterwards)."""
    if "jaxlab" in _shell.extension_manager.loaded:
        _shell.run_line_magic("unload_ext", "jaxlab")
    assert not is_loaded(_shell)
    yield _shell
    if "jaxlab" in _shell.extension_manager.loaded:
        _shell.run_line_magic("unload_ext", "jaxlab")


def test_families_declare_the_core_magics():
    names = {name for (_, name) in expected_magics()}
    assert {"jaxpr", "jax_devices"} <= names


def test_load_registers_every_magic_bound_to_its_family(shell):
    before = snapshot(shell)
    shell.run_line_magic("load_ext", "jaxlab")
    assert is_loaded(shell)
    tables = shell.magics_manager.magics
    for (kind, name), cls in expected_magics().items():
        assert isinstance(tables[kind][name].__self__, cls), (kind, name)
    added = {(kind, name) for kind, table in tables.items() for name in table} - {
        (kind, name) for kind, table in before["magics"].items() for name in table
    }
    assert added == set(expected_magics())


def test_unload_removes_everything_it_added(shell):
    before = snapshot(shell)
    shell.run_line_magic("load_ext", "jaxlab")
    assert snapshot(shell)["magics"] != before["magics"]
    shell.run_line_magic("unload_ext", "jaxlab")
    assert not is_loaded(shell)
    after = snapshot(shell)
    for key in before:
        assert after[key] == before[key], key


def _shape(snap):
    """Counts per hook: equal shapes mean nothing was registered twice."""
    return {
        "magics": {kind: sorted(table) for kind, table in snap["magics"].items()},
        "registry": sorted(snap["registry"]),
        "events": {name: len(cbs) for name, cbs in snap["events"].items()},
        "custom_exceptions": len(snap["custom_exceptions"]),
        "transformers": [len(snap[k]) for k in ("input_transformers_post", "ast_transformers")],
        "logging": {name: len(h) for name, h in snap["logging"].items()},
        "warnings": len(snap["warnings"]),
    }


def test_reload_and_double_load_leave_exactly_one_of_each(shell):
    shell.run_line_magic("load_ext", "jaxlab")
    once = snapshot(shell)
    jaxlab.load_ipython_extension(shell)  # a second load is a no-op
    assert snapshot(shell) == once
    shell.run_line_magic("reload_ext", "jaxlab")
    again = snapshot(shell)
    assert _shape(again) == _shape(once)
    instances = {
        id(method.__self__)
        for (kind, name) in expected_magics()
        for method in [again["magics"][kind][name]]
    }
    assert len(instances) == len({cls for cls in expected_magics().values()})
    shell.run_line_magic("unload_ext", "jaxlab")
    assert not any(name in snapshot(shell)["magics"]["line"] for (_, name) in expected_magics())


def test_magics_work_after_reload(shell):
    shell.run_line_magic("load_ext", "jaxlab")
    shell.run_line_magic("reload_ext", "jaxlab")
    report = shell.run_line_magic("jax_devices", "-o")
    assert report.device_count == 2


def test_import_jaxlab_is_light():
    heavy = ["IPython", "graphviz", "matplotlib", "anywidget", "ipywidgets", "ipykernel"]
    ours = ["jaxlab.magics", "jaxlab.widgets"]
    code = (
        "import json, sys, jaxlab\n"
        f"heavy, ours = {heavy!r}, {ours!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in heavy or any(m == o or m.startswith(o + '.') for o in ours))))"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
