"""Check a built site: every page it must have is there and nothing loads from the network.

Run after the build (``make docs`` does)::

    python docs/check_site.py docs/_build/html

It fails (exit 1, one line per problem) when the getting-started, API or design page is
missing; when a magic jaxlab registers has no page or its page lacks the magic's usage
line; when a public name of ``jaxlab`` has no entry in the API page; when a notebook of
``notebooks/`` has no tutorial page or that page shows no cell output; when any page
loads a script, stylesheet or frame from an absolute URL (a CDN), not from the site; or
when a page shows a widget view whose saved state it lacks (or whose state is not readable
JSON, or names its ES module by URL), or does not load the widget loader
(``_static/jaxlab-widgets.js``) from the site itself.

Then it reads every tutorial page as a reader does, in Chromium at 1280x720
(``read_tutorials.py``): it fails on output text drawn under 12 px (SVG text at its drawn
scale), on an output wider than the content column with no box that scrolls and says so,
and on any visible text promising a click (the site has no kernel).
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

from api_page import public_names  # noqa: E402
from magic_pages import magic_help  # noqa: E402

sys.path.insert(0, str(DOCS))
from read_tutorials import reading_problems  # noqa: E402

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


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LOADER = "_static/jaxlab-widgets.js"
# A module given by address (one word, no code), as anywidget allows; "// comment" is code.
_URL = re.compile(r"\s*(https?:)?//\S+\s*", re.IGNORECASE)


class _Scripts(HTMLParser):
    """Collects a page's script elements: the files it loads and the data blocks it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.blocks: list[tuple[str, str]] = []  # (type, text)
        self._type: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            values = dict(attrs)
            if values.get("src"):
                self.sources.append(values["src"] or "")
            self._type = values.get("type") or ""
            self.blocks.append((self._type, ""))

    def handle_data(self, data: str) -> None:
        if self._type is not None:
            kind, text = self.blocks[-1]
            self.blocks[-1] = (kind, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._type = None


def widget_problems(html: str, page: str, site: Path) -> list[str]:
    """What keeps a page's widget views from being drawn from the site alone: a view without
    its saved state, unreadable state, a module named by URL, or no loader from _static."""
    parser = _Scripts()
    parser.feed(html)
    views: list[str] = []
    models: dict[str, dict] = {}
    found = []
    for kind, text in parser.blocks:
        try:
            if kind == WIDGET_VIEW:
                views.append(str(json.loads(text).get("model_id")))
            elif kind == WIDGET_STATE:
                models.update(json.loads(text).get("state", {}))
        except (json.JSONDecodeError, AttributeError):
            found.append(f"{page} holds a {kind} script that is not readable JSON")
    if not views:
        return found
    for model_id in views:
        if model_id not in models:
            found.append(f"{page} shows widget {model_id} without its saved state")
        elif _URL.fullmatch(str(models[model_id].get("state", {}).get("_esm", ""))):
            found.append(f"{page}: widget {model_id} names its module by URL")
    loaded = [
        posixpath.normpath(posixpath.join(posixpath.dirname(page), urlsplit(src).path))
        for src in parser.sources
        if not urlsplit(src).scheme and not src.startswith("//")
    ]
    if LOADER not in loaded:
        found.append(f"{page} shows widgets but does not load {LOADER} from the site")
    elif not (site / LOADER).is_file():
        found.append(f"{page} loads {LOADER}, which the site lacks")
    return found


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
        html, page = path.read_text(), path.relative_to(site).as_posix()
        for url in remote_fetches(html):
            found.append(f"{page} loads {url} from the network")
        found += widget_problems(html, page, site)
    return found


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else DOCS / "_build" / "html"
    found = problems(site, DOCS.parent / "notebooks")
    tutorials = sorted((site / "tutorials").glob("*.html"))
    found += reading_problems(site, [p.relative_to(site).as_posix() for p in tutorials])
    for line in found:
        print(f"docs: {line}", file=sys.stderr)
    if not found:
        print(
            f"docs: {site} has every page, loads nothing from the network, draws its "
            f"widgets from saved state with its own loader, and its {len(tutorials)} "
            "tutorials read at 1280x720 (no text under 12 px, nothing wider than the "
            "column without a scroll cue, no click promised)"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
