"""tests/claims.py: two pytest runs share a suite's files, each file run once, by one run.

Each test runs real pytest processes on a small suite written here: four files whose tests
append their names to a log, a session fixture that logs its set-up and teardown, and a
file that needs the pinned fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CONFTEST = """\
import os, pytest
from claims import register

def pytest_configure(config):
    register(config)

def log(line):
    with open(os.environ["CLAIMS_LOG"], "a") as f:
        f.write(line + "\\n")

@pytest.fixture(scope="session")
def shared():
    log("setup shared")
    yield
    log("teardown shared")

@pytest.fixture(scope="session")
def binder_env():
    log("setup binder_env")
"""

FILE = """\
import os
from conftest import log

def test_one(shared):
    log("{name}::one")
    {action}

def test_two(shared):
    log("{name}::two")
"""


def _suite(root: Path, actions: dict[str, str] | None = None) -> None:
    (root / "conftest.py").write_text(CONFTEST)
    for name in ("test_a", "test_b", "test_c", "test_d"):
        action = (actions or {}).get(name, "pass")
        (root / f"{name}.py").write_text(FILE.format(name=name, action=action))
    (root / "test_e_pinned.py").write_text(
        "from conftest import log\n\ndef test_pinned(binder_env):\n    log('test_e_pinned::one')\n"
    )


def _environ() -> dict[str, str]:
    """This process's environment without what would change the inner runs: the claims of
    an outer run (`make test`'s own) and options given to every pytest."""
    drop = ("JAXLAB_TEST_CLAIMS", "JAXLAB_TEST_CLAIMS_SIDE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _pytest(root: Path, side: str, log: Path) -> subprocess.Popen[str]:
    env = {
        **_environ(),
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(root)]),
        "JAXLAB_TEST_CLAIMS": str(root / "claims"),
        "JAXLAB_TEST_CLAIMS_SIDE": side,
        "CLAIMS_LOG": str(log),
    }
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    return subprocess.Popen(
        [*args, "--rootdir", str(root), "-c", os.devnull, str(root)],
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run(root: Path, side: str) -> tuple[list[str], str]:
    log = root / f"{side}.log"
    proc = _pytest(root, side, log)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return log.read_text().splitlines(), out


def _ran(*files: str) -> list[str]:
    """The log lines of these files' two tests each, in this order."""
    return [f"{f}::{t}" for f in files for t in ("one", "two")]


def test_the_front_run_takes_the_files_in_order_and_leaves_a_claimed_one(tmp_path: Path) -> None:
    _suite(tmp_path)
    (tmp_path / "claims" / "test_c.py").mkdir(parents=True)
    lines, out = _run(tmp_path, "front")
    assert lines == [
        "setup shared",
        *_ran("test_a", "test_b", "test_d"),
        "setup binder_env",
        "test_e_pinned::one",
        "teardown shared",
    ]
    assert "ran 4 test files; 1 were the other run's: test_c.py" in out
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == [
        "test_a.py",
        "test_b.py",
        "test_c.py",
        "test_d.py",
        "test_e_pinned.py",
    ]


def test_the_back_run_takes_them_from_the_end_and_never_a_pinned_one(tmp_path: Path) -> None:
    _suite(tmp_path)
    lines, out = _run(tmp_path, "back")
    # Reversed by file; each file's tests keep their order; the session fixture is set up
    # once and torn down once across the files.
    assert lines == [
        "setup shared",
        *_ran("test_d", "test_c", "test_b", "test_a"),
        "teardown shared",
    ]
    assert not (tmp_path / "claims" / "test_e_pinned.py").exists()
    assert "ran 4 test files; 0 were the other run's: -; 1 pinned to the front run" in out


def test_a_file_claimed_while_the_run_goes_on_is_left_to_the_other(tmp_path: Path) -> None:
    # The first test plays the other run: it claims test_c while this run is in test_a.
    claim = "os.mkdir(os.path.join(os.environ['JAXLAB_TEST_CLAIMS'], 'test_c.py'))"
    _suite(tmp_path, {"test_a": claim})
    lines, _ = _run(tmp_path, "front")
    assert [line for line in lines if line.startswith("test_")] == [
        *_ran("test_a", "test_b", "test_d"),
        "test_e_pinned::one",
    ]


def test_a_file_claimed_before_the_run_collects_is_not_collected(tmp_path: Path) -> None:
    _suite(tmp_path)
    (tmp_path / "test_b.py").write_text("raise RuntimeError('test_b.py was collected')\n")
    (tmp_path / "claims" / "test_b.py").mkdir(parents=True)
    lines, out = _run(tmp_path, "back")  # an import of test_b.py would fail the run
    assert lines == ["setup shared", *_ran("test_d", "test_c", "test_a"), "teardown shared"]
    assert "ran 3 test files; 1 were the other run's: test_b.py" in out


def test_two_runs_at_once_run_every_test_exactly_once(tmp_path: Path) -> None:
    _suite(tmp_path)
    logs = {side: tmp_path / f"{side}.log" for side in ("front", "back")}
    procs = {side: _pytest(tmp_path, side, logs[side]) for side in logs}
    for proc in procs.values():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode in (0, 5), out  # 5: this run found every file taken
    ran = [
        line
        for log in logs.values()
        if log.exists()
        for line in log.read_text().splitlines()
        if line.startswith("test_")
    ]
    expected = [*_ran("test_a", "test_b", "test_c", "test_d"), "test_e_pinned::one"]
    assert sorted(ran) == sorted(expected)
    front = logs["front"].read_text().splitlines()
    assert "test_e_pinned::one" in front  # the pinned file is the front run's


def test_a_side_other_than_front_or_back_is_refused(tmp_path: Path) -> None:
    _suite(tmp_path)
    log = tmp_path / "x.log"
    proc = _pytest(tmp_path, "middle", log)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "JAXLAB_TEST_CLAIMS_SIDE='middle': expected front or back" in out


@pytest.mark.parametrize("side", ["front", "back"])
def test_without_the_folder_every_test_runs_as_usual(tmp_path: Path, side: str) -> None:
    _suite(tmp_path)
    env = _environ()
    env.update(PYTHONPATH=os.pathsep.join([str(TESTS), str(tmp_path)]))
    env.update(CLAIMS_LOG=str(tmp_path / "plain.log"), JAXLAB_TEST_CLAIMS_SIDE=side)
    args = ["-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), "-c", os.devnull]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
    lines = (tmp_path / "plain.log").read_text().splitlines()
    ran = [line for line in lines if line.startswith("test_")]
    assert ran[:2] == ["test_a::one", "test_a::two"]
    assert len(ran) == 9
    assert not (tmp_path / "claims").exists()
