"""The second Python's run (``make test``'s 3.11 lane) takes one case of each parametrized test.

``make test`` runs the unit tests twice: on Python 3.12 with JAX 0.12, every case, and on
Python 3.11 with JAX 0.10, where what is checked is that each of jaxlab's code paths works
on the older JAX. There, with ``JAXLAB_TEST_ONE_CASE=1``, a parametrized test runs its first
case only (as collected) and the others are deselected: the same code paths, not every
program or input once more. A test marked ``every_case`` (the compatibility layer's tests,
whose cases are what differs between JAX versions) keeps all its cases. Each test function
without parameters runs as usual.

(The other cases were 195 s of the 3.11 run's 1,071 under CI's load, about 100 s of CPU,
half of them the gradient check's calibration over eleven real programs.)
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
        function = (item.path, getattr(item.cls, "__qualname__", None), item.originalname)  # type: ignore[attr-defined]
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
