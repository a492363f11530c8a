"""Two pytest runs of one suite share its test files as they go (``make test``'s 3.12 lanes).

Each run collects the same tests. Before it runs a file's first test it claims the file by
creating a folder named after it in a shared folder (``os.mkdir``: of two runs asking at
once, exactly one succeeds); a file the other run has claimed is left to it. The ``front``
run takes the files in the suite's order, the ``back`` run from the end, so the two meet
wherever the work ends up dividing, and neither waits with nothing to do while the other
still has files it has not started. A file already claimed when a run collects is not
collected. A file whose tests need a ``pinned`` fixture (Binder's
environment: built once, by the front run) is the front run's alone.

Turned on by ``JAXLAB_TEST_CLAIMS=FOLDER`` and ``JAXLAB_TEST_CLAIMS_SIDE=front|back``
(``tests/conftest.py`` registers it); without them pytest runs every test as usual.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

SIDES = ("front", "back")


def claim_name(path: Path, root: Path) -> str:
    """The folder name that stands for a test file: its path under ``root``, '/' as '__'."""
    return "__".join(path.relative_to(root).parts)


def by_file(items: list[pytest.Item]) -> list[list[pytest.Item]]:
    """The items in runs of one file each, in the session's order (a file split by the
    session's sort, as the notebooks are, stays one group at its first place)."""
    groups: dict[Path, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(item.path, []).append(item)
    return list(groups.values())


class Claims:
    """The ``pytest_runtestloop`` of one side: claims a file, runs it, claims the next."""

    def __init__(self, folder: Path, side: str, pinned: tuple[str, ...]) -> None:
        if side not in SIDES:
            raise pytest.UsageError(f"JAXLAB_TEST_CLAIMS_SIDE={side!r}: expected front or back")
        self.folder = folder
        self.side = side
        self.pinned = pinned
        self.ran: list[str] = []
        self.left: list[str] = []
        self.n_pinned = 0

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """A test file the other run has claimed already is not even collected (collecting
        the whole suite again took the browser lane's run 45 s under load)."""
        if collection_path.suffix != ".py" or not collection_path.is_relative_to(config.rootpath):
            return None
        name = claim_name(collection_path, config.rootpath)
        if (self.folder / name).is_dir():
            self.left.append(name)
            return True
        return None

    def _order(self, session: pytest.Session) -> list[list[pytest.Item]]:
        groups = by_file(session.items)
        if self.side == "front":
            return groups
        pinned = set(self.pinned)
        mine = [g for g in reversed(groups) if not any(pinned & set(i.fixturenames) for i in g)]
        self.n_pinned = len(groups) - len(mine)
        return mine

    def _claimed(self, groups: list[list[pytest.Item]], root: Path) -> Iterator[list[pytest.Item]]:
        for group in groups:
            name = claim_name(group[0].path, root)
            try:
                os.mkdir(self.folder / name)
            except FileExistsError:
                self.left.append(name)
                continue
            self.ran.append(name)
            yield group

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        if session.config.option.collectonly:
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        files = self._claimed(self._order(session), session.config.rootpath)
        group = next(files, None)
        while group is not None:
            following: list[pytest.Item] | None = None
            for i, item in enumerate(group):
                if i + 1 < len(group):
                    nextitem: pytest.Item | None = group[i + 1]
                else:
                    # The next file is claimed before this one's last test runs: pytest
                    # tears down what the next test does not share (nextitem), so a
                    # session's fixtures stay up between files.
                    following = next(files, None)
                    nextitem = following[0] if following else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldfail:
                    raise session.Failed(session.shouldfail)
                if session.shouldstop:
                    raise session.Interrupted(session.shouldstop)
            group = following
        return True

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(
            f"jaxlab claims ({self.side}): ran {len(self.ran)} test files; "
            f"{len(self.left)} were the other run's: {' '.join(self.left) or '-'}"
            + (f"; {self.n_pinned} pinned to the front run" if self.n_pinned else "")
        )


def register(config: pytest.Config) -> None:
    """Register the claims of this run where the environment asks for them."""
    folder = os.environ.get("JAXLAB_TEST_CLAIMS")
    if not folder:
        return
    side = os.environ.get("JAXLAB_TEST_CLAIMS_SIDE", "front")
    # Binder's environment: notebook_kernel asks for it only while it runs, so it is named.
    pinned = ("binder_env", "binder_kernel", "notebook_kernel")
    config.pluginmanager.register(Claims(Path(folder), side, pinned), "jaxlab-claims")
