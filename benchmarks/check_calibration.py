"""The full calibration of ``%grad --check`` (issue 33): every program of
tests/check_programs.py as written (must pass or be inconclusive, never FAIL) and with
each planted wrong rule (1%, 10%, sign flipped, a missing term: must FAIL), and a correct
custom rule (must not FAIL). The test suite runs one planted rule per program; this runs
all of them and prints the table, the verdict counts and PASS/FAIL.

    .venv/bin/python benchmarks/check_calibration.py [program ...]
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from check_programs import CORRECT, OPTIONS, planted

from jaxlab import grad_report

KINDS = ["1%", "10%", "sign", "missing term"]


def verdict(check) -> str:
    if check.passed:
        return "passed"
    if check.failed:
        return "FAILED"
    return "inconclusive" + (" (kink)" if check.kink else " (raises)" if check.refused else "")


def main(names: list[str]) -> int:
    logging.disable(logging.ERROR)  # JAX logs each callback that raised a step away
    false_fails, missed, rows = [], [], 0
    start = time.perf_counter()
    for name in names:
        for kind in [None, "right", *KINDS]:
            f, args = CORRECT[name]() if kind is None else planted(name, kind)
            t = time.perf_counter()
            check = grad_report(f, *args, check=True, **OPTIONS.get(name, {})).check
            said = verdict(check)
            rows += 1
            wrong = kind in KINDS
            if wrong and not check.failed:
                missed.append(f"{name} {kind}")
            if not wrong and check.failed:
                false_fails.append(f"{name} {kind or ''}".strip())
            print(
                f"{name:22s} {kind or 'as written':13s} {said:22s} "
                f"error {check.max_error:.1e}  {time.perf_counter() - t:5.1f} s",
                flush=True,
            )
    print(
        f"\n{rows} checks in {time.perf_counter() - start:.0f} s: "
        f"{len(false_fails)} correct programs FAILED ({', '.join(false_fails) or 'none'}), "
        f"{len(missed)} planted rules not FAILED ({', '.join(missed) or 'none'})"
    )
    ok = not false_fails and not missed
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(CORRECT)))
