"""tests/one_case.py: with ``JAXLAB_TEST_ONE_CASE=1``, each parametrized test runs its first
case only, tests without parameters and those marked ``every_case`` run in full.

Each test runs a real pytest process on a small suite written here, whose tests log their
names as they run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = """\
import os, pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "every_case: all cases")

def pytest_collection_modifyitems(config, items):
    from one_case import deselect_other_cases
    deselect_other_cases(config, items)

def log(line):
    with open(os.environ["CASES_LOG"], "a") as f:
        f.write(line + "\\n")
"""

SUITE = """\
import pytest
from conftest import log

def test_plain():
    log("plain")

@pytest.mark.parametrize("x", [1, 2, 3])
def test_cases(x):
    log(f"cases-{x}")

@pytest.mark.parametrize("y", ["a", "b"])
@pytest.mark.parametrize("x", [1, 2])
def test_grid(x, y):
    log(f"grid-{x}{y}")

@pytest.mark.every_case
@pytest.mark.parametrize("x", [1, 2])
def test_all(x):
    log(f"all-{x}")

class TestA:
    @pytest.mark.parametrize("x", [1, 2])
    def test_same_name(self, x):
        log(f"A-{x}")

class TestB:
    @pytest.mark.parametrize("x", [1, 2])
    def test_same_name(self, x):
        log(f"B-{x}")
"""

OTHER = """\
import pytest
from conftest import log

pytestmark = pytest.mark.every_case

@pytest.mark.parametrize("x", [1, 2])
def test_cases(x):
    log(f"other-{x}")
"""


def _run(tmp_path: Path, one_case: str | None) -> tuple[list[str], str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_zother.py").write_text(OTHER)
    log = tmp_path / "log.txt"
    log.unlink(missing_ok=True)
    # (this process's own one-case, claims and added pytest options would change the run)
    drop = ("JAXLAB_TEST_ONE_CASE", "JAXLAB_TEST_CLAIMS", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(CASES_LOG=str(log), PYTHONPATH=str(TESTS))
    if one_case is not None:
        env["JAXLAB_TEST_ONE_CASE"] = one_case
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return log.read_text().split(), done.stdout


def test_one_case_runs_the_first_case_of_each_parametrized_test(tmp_path):
    ran, out = _run(tmp_path, "1")
    first = ["plain", "cases-1", "grid-1a", "all-1", "all-2", "A-1", "B-1"]
    assert ran == [*first, "other-1", "other-2"]
    assert "9 passed, 7 deselected" in out


def test_without_the_variable_every_case_runs(tmp_path):
    for value in (None, "0"):
        ran, out = _run(tmp_path, value)
        assert len(ran) == 16 and "cases-3" in ran and "grid-2b" in ran and "B-2" in ran
        assert "16 passed" in out and "deselected" not in out
