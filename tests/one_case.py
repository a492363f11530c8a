"""The second Python's run (``make test``'s 3.11 lane) takes one case of each parametrized test.

``make test`` runs the unit tests twice: on Python 3.12 with JAX 0.12, every case, and on
Python 3.11 with JAX 0.10, where what is checked is that each of jaxlab's code paths works
on the older JAX. There, with ``JAXLAB_TEST_ONE_CASE=1``, a parametrized test runs its first
case only (as collected) and the others are deselected: the same code paths, not every
program or input once more. A test marked ``every_case`` (the compatibility layer's tests,
whose cases are what differs between JAX versions) keeps all its cases. Each test function
without parameters runs as usual.

(In two runs of ``make test`` from a fresh clone the 3.11 run went from 1,414 tests and 586
core-seconds to 1,040 tests and 461; half of what it left out is the gradient check's
calibration over eleven real programs, which the 3.12 run still runs in full.)
"""

from __future__ import annotations

import os

import pytest

ENV = "JAXLAB_TEST_ONE_CASE"


def first_cases(items: list[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """The items to run and the ones to leave: of each parametrized test function (one
    per file, class and name), its first case, unless it is marked ``every_case``."""
    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    seen: set[tuple[object, ...]] = set()
    for item in items:
        if getattr(item, "callspec", None) is None or item.get_closest_marker("every_case"):
            kept.append(item)
            continue
        cls = getattr(getattr(item, "cls", None), "__qualname__", None)
        function = (item.path, cls, getattr(item, "originalname", item.name))
        (left if function in seen else kept).append(item)
        seen.add(function)
    return kept, left


def deselect_other_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Where the environment asks for one case (``JAXLAB_TEST_ONE_CASE=1``), deselect the
    other cases of each parametrized test, as ``-m`` or ``-k`` deselects (pytest's summary
    counts them)."""
    if os.environ.get(ENV) != "1":
        return
    kept, left = first_cases(items)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
