"""The JupyterLab half of a benchmark: the script's own ``@pytest.mark.browser`` tests run
through the browser test harness (``tests/browser/conftest.py``: a server on 127.0.0.1,
Debian's Chromium), and what they wrote to ``out`` read back::

    from _lab import run_browser_half
    figures = run_browser_half(__file__, OUT)   # None when the run failed (said why)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_browser_half(script: str, out: Path) -> Any:
    """Run ``script``'s browser tests; the JSON they left in ``out``, else None."""
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    out.unlink(missing_ok=True)
    args = ["-q", "-p", "conftest", "-p", "no:cacheprovider", "-m", "browser"]
    code = pytest.main([script, *args, "--rootdir", str(ROOT), "-o", "addopts=", "-W", "ignore"])
    if code != 0 or not out.exists():
        print(f"the JupyterLab half failed (pytest exit {code})")
        return None
    return json.loads(out.read_text())
