"""One table of every benchmark target, and its JSON, from the benchmarks' output.

``make bench`` saves each benchmark's output under ``test-output/bench/NAME.log`` (with a
last line ``EXIT <status>``) and then runs::

    python tools/bench_table.py test-output/bench/*.log --json test-output/bench.json

Each target is read from its ``BENCH {json}`` line (benchmarks/_targets.py prints one per
verdict); a benchmark that prints only ``PASS …`` / ``FAIL …`` lines gives one row per such
line, and one that exits non-zero without a failed target gives an ERROR row. The table
shows each figure, its independent reference (where the benchmark names them), the ratio
or value, the target, PASS/FAIL and the 1-minute load average when the verdict was taken;
the JSON holds the same rows with the commit, date, machine and load, so two commits can
be compared::

    python tools/bench_table.py --compare old.json new.json

Exits 1 when any row failed (or a benchmark errored), 0 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

_VERDICT = re.compile(r"^(PASS|FAIL)\b[:\s]*(.*)$")
_TARGET = re.compile(r"^target: (.*): (\S+) \((at most|at least) (\S+)\)$")
_EXIT = re.compile(r"^EXIT (-?\d+)$")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_log(path: Path) -> list[dict[str, Any]]:
    """The rows of one benchmark's saved output."""
    name = path.stem
    lines = path.read_text(errors="replace").splitlines()
    rows: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []
    status = None
    for line in lines:
        if line.startswith("BENCH {"):
            try:
                record = json.loads(line[len("BENCH ") :])
            except json.JSONDecodeError:
                continue
            record["benchmark"] = name  # the log's name: one row group per script
            rows.append(record)
        elif m := _EXIT.match(line.strip()):
            status = int(m.group(1))
        elif m := _VERDICT.match(line.strip()):
            text = m.group(2).strip()
            row: dict[str, Any] = {"benchmark": name, "name": text, "passed": m.group(1) == "PASS"}
            if t := _TARGET.match(f"target: {text}" if not text.startswith("target:") else text):
                row.update(name=t.group(1), value=_number(t.group(2)), kind=t.group(3))
                row["limit"] = _number(t.group(4))
            plain.append(row)
    if not rows:
        rows = plain
    if status not in (None, 0) and all(r["passed"] for r in rows):
        rows.append({"benchmark": name, "name": f"exit status {status}", "passed": False})
        rows[-1]["error"] = True
    return rows


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".strip()


def _verdict(row: dict[str, Any]) -> str:
    if row.get("error"):
        return "ERROR"
    return "PASS" if row["passed"] else "FAIL"


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table."""
    head = ("benchmark", "target", "figure", "reference", "value", "target", "", "load")
    body = []
    for r in rows:
        limit = r.get("limit")
        goal = (
            f"{'≤' if r.get('kind') == 'at most' else '≥'} {limit:g}" if limit is not None else ""
        )
        load = r.get("load")
        body.append(
            (
                r["benchmark"],
                r["name"] if len(r["name"]) <= 60 else r["name"][:59] + "…",
                _fmt(r.get("figure"), r.get("unit", "")),
                _fmt(r.get("reference"), r.get("unit", "")),
                _fmt(r.get("value")),
                goal,
                _verdict(r),
                f"{load[0]:.2f}" if load else "—",
            )
        )
    return _columns(head, body)


def _columns(head: tuple[str, ...], body: list[tuple[Any, ...]]) -> str:
    """Rows under a header, each column as wide as its widest cell."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = [head, tuple("-" * w for w in widths), *body]
    return "\n".join(
        "  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON written beside the table: the rows, where and when they were measured."""
    loads = [r["load"][0] for r in rows if r.get("load")]
    return {
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "load_now": [round(x, 2) for x in os.getloadavg()],
        "load_range": [min(loads), max(loads)] if loads else None,
        "passed": all(r["passed"] for r in rows),
        "rows": rows,
    }


def compare(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Each target present in both runs: its value before and after, and the change."""
    before = {(r["benchmark"], r["name"]): r for r in old["rows"]}
    head = ("benchmark", "target", "before", "after", "change", "")
    body = []
    for r in new["rows"]:
        o = before.get((r["benchmark"], r["name"]))
        if o is None or o.get("value") is None or r.get("value") is None:
            continue
        change = f"{(r['value'] / o['value'] - 1) * 100:+.1f}%" if o["value"] else "—"
        verdicts = f"{_verdict(o)} → {_verdict(r)}"
        body.append(
            (r["benchmark"], r["name"][:60], _fmt(o["value"]), _fmt(r["value"]), change, verdicts)
        )
    title = (
        f"{old.get('commit')} (load {old.get('load_range')}) → "
        f"{new.get('commit')} (load {new.get('load_range')})"
    )
    return title + "\n" + _columns(head, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="*", type=Path, help="benchmark outputs (NAME.log)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="two JSON files"
    )
    args = parser.parse_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        print(compare(old, new))
        return 0
    rows = [row for path in args.logs for row in read_log(path)]
    doc = document(rows)
    print(table(rows))
    failed = [r for r in rows if not r["passed"]]
    during = doc["load_range"]
    print(
        f"\n{len(rows) - len(failed)} PASS, {len(failed)} FAIL or ERROR, "
        f"{len(args.logs)} benchmarks; load average now "
        + ", ".join(f"{x:.2f}" for x in doc["load_now"])
        + (f" (at the verdicts {during[0]}–{during[1]})" if during else "")
        + f"; {doc['cpus']} CPUs"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"written: {args.json}")
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
