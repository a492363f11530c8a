"""Check a built site: every page it must have is there and nothing loads from the network.

Run after the build (``make docs`` does)::

    python docs/check_site.py docs/_build/html

It fails (exit 1, one line per problem) when the getting-started, API or design page is
missing; when a magic jaxlab registers has no page or its page lacks the magic's usage
line; when a public name of ``jaxlab`` has no entry in the API page; when a notebook of
``notebooks/`` has no tutorial page or that page shows no cell output; or when any page
loads a script, stylesheet or frame from an absolute URL (a CDN), not from the site.
"""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

from api_page import public_names  # noqa: E402
from magic_pages import magic_help  # noqa: E402

# (tag, attribute) pairs whose URL the browser fetches while showing the page.
_FETCHED = {("script", "src"), ("link", "href"), ("iframe", "src"), ("img", "src")}


class _Fetched(HTMLParser):
    """Collects the URLs a page makes the browser fetch (not the links a reader follows)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "link" and values.get("rel") not in ("stylesheet", "preload", "modulepreload"):
            return  # rel="index", "search"... are navigation, not fetched
        for name, value in attrs:
            if (tag, name) in _FETCHED and value:
                self.urls.append(value)


def remote_fetches(html: str) -> list[str]:
    """Absolute URLs (``http:``, ``https:``, ``//host``) a page loads."""
    parser = _Fetched()
    parser.feed(html)
    return [u for u in parser.urls if u.startswith(("http:", "https:", "//"))]


def problems(site: Path, notebooks: Path) -> list[str]:
    found = []
    for page in ("index", "getting_started", "api", "design", "magics/index"):
        if not (site / f"{page}.html").exists():
            found.append(f"missing page {page}.html")
    for name, helps in magic_help().items():
        path = site / "magics" / f"{name}.html"
        if not path.exists():
            found.append(f"missing page for %{name}: {path}")
            continue
        usage = helps[0][1].removeprefix("::").strip().splitlines()[0].split()[0]
        if usage.startswith("%") and usage not in path.read_text():
            found.append(f"{path} lacks the usage line of %{name} ({usage})")
    api = (site / "api.html").read_text() if (site / "api.html").exists() else ""
    for names in public_names().values():
        for name in names:
            if f'id="jaxlab.{name}"' not in api:
                found.append(f"api.html has no entry for jaxlab.{name}")
    for notebook in sorted(notebooks.glob("*.ipynb")):
        path = site / "tutorials" / f"{notebook.stem}.html"
        if not path.exists():
            found.append(f"missing tutorial page {path}")
            continue
        has_code = any(c["cell_type"] == "code" for c in json.loads(notebook.read_text())["cells"])
        if has_code and "cell_output" not in path.read_text():
            found.append(f"{path} shows no cell output (were the notebooks executed?)")
    for path in sorted(site.rglob("*.html")):
        for url in remote_fetches(path.read_text()):
            found.append(f"{path.relative_to(site)} loads {url} from the network")
    return found


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else DOCS / "_build" / "html"
    found = problems(site, DOCS.parent / "notebooks")
    for line in found:
        print(f"docs: {line}", file=sys.stderr)
    if not found:
        print(f"docs: {site} has every page and loads nothing from the network")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
