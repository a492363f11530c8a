"""A child process (Graphviz's ``dot``) run under a budget, so the kernel never waits for
ever on a drawing::

    done = run_budgeted(["dot", "-Tsvg"], dot_text, cpu_s=20)   # CompletedProcess

Three limits, whichever comes first:

- **CPU**: ``cpu_s`` seconds of the process's own CPU time (read from ``/proc``): a layout
  that computes that long is too big. A busy machine's waiting is not counted (a layout of
  1.7 s fell back to text under load with a 20 s wall-clock limit).
- **Hung**: ``hung_s`` seconds of wall clock (by default ``cpu_s``, the explorer's own
  wall-clock limit; at least :data:`HUNG_MIN_S`) in which the process used under
  :data:`HUNG_SHARE` of that time in CPU. A process that is stopped, deadlocked or
  waiting on something that never comes computes nothing; one starved on a machine at
  load 15 of 2 cores still gets about 13%.
- **Wall**: ``wall_factor`` times ``cpu_s`` of wall clock, whatever it used.

Past a limit the process is killed and :class:`Overrun` (a ``subprocess.TimeoutExpired``)
raised, saying which limit it passed. Where ``/proc`` cannot say, wall-clock time stands
in for CPU time. The clock and the CPU reading can be given, so a test decides what the
process did rather than how busy the machine is.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

WALL_FACTOR = 6
HUNG_SHARE = 0.05
POLL_S = 0.25  # the longest wait between two looks at the process
# /proc counts CPU time in ticks of 10 ms: over a shorter window "computed nothing" is
# only the tick not having come yet.
HUNG_MIN_S = 1.0


class Overrun(subprocess.TimeoutExpired):
    """The process passed a limit; ``limit`` says which: "cpu", "hung" or "wall", and
    ``spent_s`` and ``cpu_used_s`` what it had taken when it was killed."""

    def __init__(self, cmd: list[str], limit: str, spent_s: float, cpu_used_s: float | None):
        super().__init__(cmd, spent_s)
        self.limit = limit
        self.spent_s = spent_s
        self.cpu_used_s = cpu_used_s


def run_budgeted(
    command: list[str],
    data: bytes,
    cpu_s: float,
    wall_factor: float = WALL_FACTOR,
    *,
    hung_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    cpu_of: Callable[[int], float | None] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` on ``data`` until it exits or passes a limit (module docstring)."""
    read_cpu = cpu_seconds if cpu_of is None else cpu_of
    hung = cpu_s if hung_s is None else hung_s
    wall = cpu_s * wall_factor
    start = clock()
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        step = min(0.05, wall, POLL_S)
        given: bytes | None = data
        while True:
            try:
                out, err = proc.communicate(given, timeout=step)
                break
            except subprocess.TimeoutExpired:
                given = None  # sent once; a retry only reads
                spent = clock() - start
                cpu = read_cpu(proc.pid)
                limit = _passed(spent, cpu, cpu_s, hung, wall)
                if limit:
                    proc.kill()
                    proc.communicate()
                    raise Overrun(command, limit, spent, cpu) from None
                step = min(POLL_S, max(0.001, wall - spent), step * 2)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _passed(spent: float, cpu: float | None, cpu_s: float, hung_s: float, wall: float) -> str:
    """Which limit a process that ran ``spent`` seconds and used ``cpu`` has passed, or ""."""
    used = spent if cpu is None else cpu
    if used >= cpu_s:
        return "cpu"
    if cpu is not None and spent >= max(hung_s, HUNG_MIN_S) and cpu < HUNG_SHARE * spent:
        return "hung"
    if spent >= wall:
        return "wall"
    return ""


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) a running process has used; None where ``/proc``
    cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None
