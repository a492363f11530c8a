"""Targets a benchmark evaluates, and the CPU time it reports beside wall time.

Every benchmark states its targets and evaluates them in the same run: one line per
target, ``PASS target: …`` or ``FAIL target: …``, then the figures as one JSON line
that records each verdict. This machine is shared, so each script also reports its
process CPU time (``time.process_time()``) beside wall time: CPU time is the steady
figure when other work competes for the cores. Example::

    from _targets import Targets  # benchmarks/ is on sys.path when a script there runs

    targets = Targets()
    targets.at_most("%%jit cell / jax.jit, ~1 ms call", ratio, 1.05)
    targets.at_least("chart reason text, px", px, 12)
    figures = {"benchmark": "x", **targets.figures()}
    print(json.dumps(figures))
    sys.exit(targets.exit_code())

Each verdict also prints one machine-readable line, ``BENCH {json}``: the benchmark's name,
the target, its value, limit and verdict, the load average when it was decided, and, where
the benchmark passes them, the measured figure and its independent reference (the ratio's
two sides, e.g. ``figure=ours_s, reference=plain_jax_s, unit="s"``). ``make bench``
gathers those lines into one table and ``test-output/bench.json`` (tools/bench_table.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """One target's outcome: the figure, the limit, which side of it passes."""

    name: str
    value: float
    limit: float
    kind: str  # "at most" | "at least"
    passed: bool
    figure: float | None = None  # what was measured (the ratio's numerator), if given
    reference: float | None = None  # its independent reference (the denominator), if given
    unit: str = ""  # the unit of figure and reference

    def line(self) -> str:
        word = "PASS" if self.passed else "FAIL"
        return f"{word} target: {self.name}: {self.value:.4g} ({self.kind} {self.limit:g})"

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "value": round(self.value, 6),
            "limit": self.limit,
            "kind": self.kind,
            "passed": self.passed,
        }
        if self.figure is not None:
            record["figure"] = round(self.figure, 9)
        if self.reference is not None:
            record["reference"] = round(self.reference, 9)
        if self.unit:
            record["unit"] = self.unit
        return record

    def bench_line(self) -> str:
        """``BENCH {json}``: this verdict for tools/bench_table.py, with the load average."""
        record = {"benchmark": _benchmark_name(), "name": self.name, **self.record()}
        record["load"] = [round(x, 2) for x in os.getloadavg()]
        return "BENCH " + json.dumps(record, ensure_ascii=False)


def _benchmark_name() -> str:
    """The running script's name without ``.py`` (``jit_overhead``)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
    return os.path.splitext(os.path.basename(path))[0] or "?"


def _float(x: float | None) -> float | None:
    return None if x is None else float(x)


class Stopwatch:
    """Wall, process CPU and child-process CPU seconds since it was made (or ``restart``).

    Process CPU counts every thread of this process (XLA's too); child CPU counts the
    processes it started and waited for (``dot``), which ``process_time`` leaves out::

        sw = Stopwatch()
        graph.to_svg()
        sw.wall_s, sw.cpu_s, sw.child_cpu_s
    """

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._child = _children_cpu()

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self._wall

    @property
    def cpu_s(self) -> float:
        return time.process_time() - self._cpu

    @property
    def child_cpu_s(self) -> float:
        return _children_cpu() - self._child


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


@dataclass
class Targets:
    """The verdicts of one benchmark run, with its wall and process CPU clocks.

    Starts both clocks when made; ``figures()`` reads them, so make it at the top of
    ``main()`` for the whole run to count.
    """

    verdicts: list[Verdict] = field(default_factory=list)
    watch: Stopwatch = field(default_factory=lambda: Stopwatch())

    def at_most(
        self,
        name: str,
        value: float,
        limit: float,
        *,
        figure: float | None = None,
        reference: float | None = None,
        unit: str = "",
    ) -> Verdict:
        """Pass when ``value <= limit``; prints the verdict line. ``figure`` and
        ``reference`` (in ``unit``) are the measured figure and its independent reference
        where ``value`` is their ratio: the table shows them beside it."""
        passed = value <= limit
        verdict = Verdict(
            name, float(value), limit, "at most", passed, _float(figure), _float(reference), unit
        )
        return self._add(verdict)

    def at_least(
        self,
        name: str,
        value: float,
        limit: float,
        *,
        figure: float | None = None,
        reference: float | None = None,
        unit: str = "",
    ) -> Verdict:
        """Pass when ``value >= limit``; prints the verdict line (``figure``, ``reference``
        as for ``at_most``)."""
        passed = value >= limit
        verdict = Verdict(
            name, float(value), limit, "at least", passed, _float(figure), _float(reference), unit
        )
        return self._add(verdict)

    def _add(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        print(verdict.line(), flush=True)
        print(verdict.bench_line(), flush=True)
        return verdict

    def clocks(self) -> dict[str, float]:
        """Wall, process CPU and child-process CPU seconds since this object was made."""
        return {
            "wall_s": round(self.watch.wall_s, 3),
            "cpu_s": round(self.watch.cpu_s, 3),
            "child_cpu_s": round(self.watch.child_cpu_s, 3),
        }

    def print_clocks(self, label: str = "whole run") -> None:
        """One line: the run's wall time beside its process (and child) CPU time."""
        c = self.clocks()
        print(
            f"{label}: wall {c['wall_s']:.2f} s, process CPU {c['cpu_s']:.2f} s"
            + (f", child processes' CPU {c['child_cpu_s']:.2f} s" if c["child_cpu_s"] else ""),
            flush=True,
        )

    def figures(self) -> dict[str, Any]:
        """The verdicts and clocks, for the benchmark's JSON line."""
        return {
            **self.clocks(),
            "targets": {v.name: v.record() for v in self.verdicts},
            "passed": all(v.passed for v in self.verdicts),
        }

    def exit_code(self) -> int:
        """0 when every target passed, 1 otherwise (a failing benchmark fails its run)."""
        return 0 if all(v.passed for v in self.verdicts) else 1


def target(
    name: str,
    value: float,
    limit: float,
    *,
    at_least: bool = False,
    figure: float | None = None,
    reference: float | None = None,
    unit: str = "",
) -> Verdict:
    """One verdict without a ``Targets`` record: ``value <= limit`` (or ``>=``)."""
    passed = value >= limit if at_least else value <= limit
    kind = "at least" if at_least else "at most"
    measured = _float(figure), _float(reference)
    verdict = Verdict(name, float(value), limit, kind, passed, *measured, unit)
    print(verdict.line(), flush=True)
    print(verdict.bench_line(), flush=True)
    return verdict


def print_clocks(label: str, wall_s: float, cpu_s: float) -> None:
    """One line naming a measured span's wall and process CPU seconds side by side."""
    print(f"{label}: wall {wall_s:.3f} s, process CPU {cpu_s:.3f} s", flush=True)
