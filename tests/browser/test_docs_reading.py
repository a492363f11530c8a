"""The docs site's reading check (docs/read_tutorials.py) finds what a reader at 1280x720
cannot read, on pages written to fail each way, and passes a page that reads well.

The pages are laid out as the built site lays a tutorial out (alabaster's ``div.body``
column, MyST-NB's ``.cell`` and ``.cell_output``), so the check measures what it
measures on the site: drawn font sizes (SVG text at its scale), widths against the column,
and the words a reader sees.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
from read_tutorials import chromium, reading_problems  # noqa: E402

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; font-size: 17px; }} div.body {{ width: 940px; margin-left: 240px; }}
</style></head><body><div class="body"><p>Read the drawing below.</p>
<div class="cell"><div class="cell_input"><pre>%jaxpr f(x)</pre></div>
<div class="cell_output">{output}</div></div></div></body></html>"""

# A wide graph shrunk into the column: its 14 px labels drawn at 0.3 of their size.
SHRUNK_SVG = (
    '<svg width="900" height="100" viewBox="0 0 3000 330"><text x="10" y="40" '
    'font-size="14">tanh</text></svg>'
)
GOOD = (
    '<div style="font-size:13px">what f computes <code>sin</code></div>'
    '<div style="font-size:12px">↔ 2,400 px wide: scroll sideways to see all of it</div>'
    '<div style="overflow-x:auto"><svg width="2400" height="60"><text x="10" y="30" '
    'font-size="14">sin</text></svg></div>'
    '<svg width="600" height="60" viewBox="0 0 300 30"><text x="5" y="20" font-size="7">'
    "drawn at 14 px</text></svg>"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if chromium() is None:
        pytest.skip("Chromium is missing: `tools/ensure_system.sh chromium` installs it")
    root = tmp_path_factory.mktemp("site")
    pages = {
        "good": GOOD,
        "small": '<div style="font-size:11px">(In[3], line 9)</div>' + SHRUNK_SVG,
        "wide": '<svg width="2400" height="60"><text x="5" y="30" font-size="14">x</text></svg>',
        "uncued": '<div style="overflow-x:auto"><pre style="width:2000px">a long line</pre></div>',
        "click": '<div style="font-size:13px">Click a key to see where it was made.</div>',
        "hidden": '<div style="display:none;font-size:8px">Click me, tiny and wide '
        '<svg width="3000" height="10"></svg></div>',
    }
    (root / "tutorials").mkdir()
    for name, output in pages.items():
        (root / "tutorials" / f"{name}.html").write_text(PAGE.format(output=output))
    return root


@pytest.fixture(scope="module")
def found(site: Path, browser: Any) -> list[str]:
    """Every page read in one browser (the session's: one Playwright per process), as
    check_site.py reads the site."""
    pages = sorted(f"tutorials/{p.name}" for p in site.glob("*/*.html"))
    return reading_problems(site, pages, browser)


@pytest.fixture
def _read(found: list[str]) -> Any:
    return lambda _site, name: [line for line in found if line.startswith(f"tutorials/{name}.")]


def test_a_page_that_reads_well_passes(site: Path, _read: Any) -> None:
    assert _read(site, "good") == []
    assert _read(site, "hidden") == []  # what a reader cannot see is not read


def test_small_text_is_found_at_its_drawn_size_svg_text_scaled(site: Path, _read: Any) -> None:
    found = _read(site, "small")
    assert len(found) == 2 and all(": small text: cell 1 " in line for line in found)
    assert any("11.0 px: (In[3], line 9)" in line for line in found)
    assert any("text: 4.2 px: tanh" in line for line in found)  # 14 px at 900/3000


def test_an_output_wider_than_the_column_needs_a_scrolling_box_that_says_so(
    site: Path, _read: Any
) -> None:
    (wide,) = _read(site, "wide")
    assert "too wide: cell 1 svg: 2400 px wide, past the column, in no box that" in wide
    assert wide.endswith("scrolls or pans")
    (uncued,) = _read(site, "uncued")
    assert "too wide: cell 1 pre: 2000 px wide in a box that scrolls or pans" in uncued
    assert uncued.endswith("with no visible cue")


def test_a_click_promised_anywhere_on_the_page_is_found(site: Path, _read: Any) -> None:
    (click,) = _read(site, "click")
    assert "at 1280x720: click: cell 1 div: Click a key to see where it was made." in click
