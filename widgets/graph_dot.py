"""Graphviz's ``dot`` for the GraphExplorer: one open box as DOT text in, its ``-Tplain``
positions out (in points, y down). Several boxes share one ``dot`` process; output that is
not what ``-Tplain`` prints is a RuntimeError like any other Graphviz failure::

    run_dot([dot_text(names, sizes, edges, ends)])[0]["nodes"]["0"]   # [x, y, w, h]
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time
from typing import Any

from jaxlab.graph import model as m
from jaxlab.graph.render import DOT_TIMEOUT_S

# The explorer waits for dot this long (wall clock); the static view gives a dot that
# computes nothing up after the same time (jaxlab.graph.budgeted).
LAYOUT_TIMEOUT_S = DOT_TIMEOUT_S
# As the static view: bounded network-simplex and mincross work, so a wide view lays out
# in about a second rather than minutes.
_LAYOUT_ARGS = ("-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.5", "-Gsearchsize=10")
_DPI = 72.0  # dot's plain output is in inches; the browser draws in points


def dot_text(
    names: list[str],
    sizes: dict[str, tuple[float, float]],
    edges: list[tuple[str, str, str]],
    ends: list[tuple[str, str]],
    rankdir: str = "TB",
) -> str:
    """One box's members as a DOT graph; hub inputs and constants first, outputs last.
    ``rankdir="LR"`` lays a long chain or a row of side-by-side bodies out left to right
    (graph_layout chooses it when that suits the pane better)."""
    index = {v: k for k, v in enumerate(names)}
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be TB or LR, not {rankdir!r}")
    # Ranks and neighbours close (18 and 11 pt apart): a scan body with its equations
    # open fits a projector's pane at full size (issue 34).
    lines = [
        "digraph g {",
        f"graph [rankdir={rankdir} nodesep=0.15 ranksep=0.25 newrank=true];",
        "node [shape=box fixedsize=true];",
    ]
    for k, v in enumerate(names):
        w, h = sizes[v]
        lines.append(f"n{k} [width={w / _DPI:.3f} height={h / _DPI:.3f}];")
    for end, rank in ((m.INPUT, "min"), (m.CONST, "min"), (m.OUTPUT, "max")):
        chosen = " ".join(f"n{index[v]};" for v, kind in ends if kind == end)
        if chosen:
            lines.append(f"{{rank={rank}; {chosen}}}")
    for a, b, kind in edges:
        if kind == m.CARRY:  # a loop-back edge must not pull its body apart
            lines.append(f"n{index[a]} -> n{index[b]} [constraint=false];")
        else:
            lines.append(f"n{index[a]} -> n{index[b]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_dot(texts: list[str]) -> list[dict[str, Any]]:
    """Lay out several DOT graphs with one ``dot`` process: [{width, height, nodes: {k:
    [x, y, w, h]}, edges: [(k, k, points)]}], points in points, y down, from the top left."""
    if not texts:
        return []
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz's `dot` is not installed: `sudo apt-get install graphviz`")
    text = _WORKERS.lay_out(dot, texts)
    if text is not None:
        return parse_plain(text, len(texts))
    # No worker could (it exited: a graph dot refused): a dot of its own says why.
    done = subprocess.run(
        [dot, "-Tplain", *_LAYOUT_ARGS],
        input="".join(texts).encode(),
        capture_output=True,
        timeout=LAYOUT_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dot could not lay out the graph: {done.stderr.decode()[:300]}")
    return parse_plain(done.stdout.decode(errors="replace"), len(texts))


def parse_plain(text: str, count: int) -> list[dict[str, Any]]:
    """``dot -Tplain`` output of ``count`` graphs -> their layouts (see :func:`run_dot`).
    Output that is not what ``-Tplain`` prints (a broken or mismatched Graphviz) is a
    RuntimeError, as any other Graphviz failure: the explorer keeps its last view."""
    try:
        found = _parse_plain(text)
    except (IndexError, ValueError, KeyError, TypeError) as e:
        lines = text.strip().splitlines()
        seen = lines[0][:80] if lines else "nothing"
        raise RuntimeError(
            f"dot printed a layout jaxlab could not read ({type(e).__name__}: {e}; "
            f"it began {seen!r}): check the Graphviz installation (`dot -V`)"
        ) from e
    if len(found) != count:
        raise RuntimeError(f"dot laid out {len(found)} of {count} boxes")
    return found


def _parse_plain(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    height = 0.0
    laid: dict[str, Any] | None = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "graph":
            height = float(parts[3])
            laid = {"width": round(float(parts[2]) * _DPI, 1), "height": round(height * _DPI, 1)}
            laid.update(nodes={}, edges=[])
        elif parts[0] == "node":
            x, y, w, h = (float(p) for p in parts[2:6])
            _open(laid)["nodes"][parts[1][1:]] = [
                round((x - w / 2) * _DPI, 1),
                round((height - y - h / 2) * _DPI, 1),
                round(w * _DPI, 1),
                round(h * _DPI, 1),
            ]
        elif parts[0] == "edge":
            n = int(parts[3])
            if len(parts) < 4 + 2 * n:
                raise IndexError(f"an edge of {n} points has {len(parts) - 4} numbers")
            points = [
                [
                    round(float(parts[4 + 2 * i]) * _DPI, 1),
                    round((height - float(parts[5 + 2 * i])) * _DPI, 1),
                ]
                for i in range(n)
            ]
            _open(laid)["edges"].append((parts[1][1:], parts[2][1:], points))
        elif parts[0] == "stop":
            found.append(_open(laid))
            laid = None
    return found


def _open(laid: dict[str, Any] | None) -> dict[str, Any]:
    """The graph being read (a node, edge or stop line before any ``graph`` line is
    malformed output)."""
    if laid is None:
        raise ValueError("a line outside any graph")
    return laid


class _Worker:
    """A ``dot -Tplain`` kept running, fed graphs one after another: dot lays out each
    graph of its input as it reads it, in 0.3 ms for a box of a few dozen nodes, where
    starting a dot takes 15-60 ms (an expansion started two to six)."""

    def __init__(self, dot: str) -> None:
        self.dot = dot
        self.pid = os.getpid()  # a forked child does not share its parent's dot
        self.proc = subprocess.Popen(
            [dot, "-Tplain", *_LAYOUT_ARGS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # its errors are said by a dot of their own
        )
        assert self.proc.stdin is not None
        os.set_blocking(self.proc.stdin.fileno(), False)  # a full pipe: read, then write

    def lay_out(self, texts: list[str]) -> str | None:
        """The ``-Tplain`` output of ``texts``; None when dot exited first; past
        LAYOUT_TIMEOUT_S, subprocess.TimeoutExpired (dot killed), as a dot of its own."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = memoryview("".join(texts).encode())
        out, stops = b"", 0
        deadline = time.monotonic() + LAYOUT_TIMEOUT_S
        stdin, stdout = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        while stops < len(texts):  # both ways at once: a big layout fills the pipe back
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.proc.args, LAYOUT_TIMEOUT_S)
            readable, writable, _ = select.select([stdout], [stdin] if data else [], [], left)
            if writable:
                try:
                    data = data[os.write(stdin, data[:65536]) :]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    return None
            if readable:
                chunk = os.read(stdout, 1 << 20)
                if not chunk:
                    return None
                out += chunk
                stops = (b"\n" + out).count(b"\nstop\n")  # each graph's output ends so
        return out.decode(errors="replace")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class _Workers:
    """The explorer's kept dots: two (graph_layout lays a box out both ways at once),
    each used by one layout at a time; one that failed in any way is killed."""

    KEPT = 2

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def lay_out(self, dot: str, texts: list[str]) -> str | None:
        with self._lock:
            mine = [w for w in self._idle if w.dot == dot and w.pid == os.getpid()]
            worker = mine[0] if mine else None
            if worker is not None:
                self._idle.remove(worker)
        try:
            worker = worker or _Worker(dot)
        except OSError:
            return None
        try:
            text = worker.lay_out(texts)
        except BaseException:
            worker.close()
            raise
        if text is None:
            worker.close()
            return None
        with self._lock:
            if len(self._idle) < self.KEPT:
                self._idle.append(worker)
                worker = None
        if worker is not None:
            worker.close()
        return text


_WORKERS = _Workers()
