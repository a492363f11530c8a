"""Real-browser fixtures: one JupyterLab server and one Chromium per test session.

The server listens on 127.0.0.1 with a random token, its own config, runtime, settings
and workspace folders, news and update checks off. Chromium is Debian's (Playwright
drives it through ``executable_path``; ``tools/ensure_system.sh chromium`` installs it).
A failing test leaves a screenshot under ``test-output/browser/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path(os.environ.get("JAXLAB_TEST_OUTPUT", ROOT / "test-output")) / "browser"
CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# User settings that keep JupyterLab from reaching the internet.
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}


@dataclass
class Lab:
    """A running JupyterLab: where it serves, its token, the folder it shows."""

    url: str
    token: str
    root: Path
    log: Path
    workspaces: Path

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, token: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer within 120 s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root, config, runtime, settings, workspaces = (
        base / d for d in ("notebooks", "config", "runtime", "settings", "workspaces")
    )
    for d in (root, config, runtime, settings, workspaces):
        d.mkdir()
    for name, values in SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # No announcements feed: a null news_url is only expressible in a config file.
    (config / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"news_url": None}}))
    token = secrets.token_hex(16)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    # JUPYTER_DATA_DIR stays: the environment's kernelspec and lab extensions live there.
    env.update(JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(runtime))
    env.setdefault("JAX_PLATFORMS", "cpu")
    args = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={workspaces}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    log = base / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    try:
        _wait_ready(url, token, proc, log)
        yield Lab(url, token, root, log, workspaces)
    finally:
        proc.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _api(lab: Lab, method: str, path: str, tries: int = 60) -> Any:
    """Call the server's REST API; the decoded JSON answer (None when empty, or when what
    was deleted was gone already). jupyter_server answers 500 to a listing that holds a
    kernel still starting (its model has no ``last_activity`` yet: a page closed just
    after asking for one): asked again every half second until that kernel has started."""
    request = urllib.request.Request(f"{lab.url}{path}?token={lab.token}", method=method)
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                body = answer.read()
            return json.loads(body) if body else None
        except urllib.error.HTTPError as error:
            if error.code == 404 and method == "DELETE":
                return None
            if error.code != 500 or attempt == tries - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable: the last try returns or raises")


def clean_lab(lab: Lab) -> None:
    """Shut down every kernel of the lab and forget its workspace: the next test's page
    opens only its own notebook. (Left alone, each test's kernel kept running, 25 at once in
    one run, and every earlier test's tab was restored into each later page, which
    reconnected to their kernels and drew their outputs: the lane used about 600 s of CPU,
    against 400 with this.)"""
    for session in _api(lab, "GET", "/api/sessions"):
        _api(lab, "DELETE", f"/api/sessions/{session['id']}")
    for kernel in _api(lab, "GET", "/api/kernels"):
        _api(lab, "DELETE", f"/api/kernels/{kernel['id']}")
    for workspace in lab.workspaces.glob("*.jupyterlab-workspace"):
        workspace.unlink()


@pytest.fixture(autouse=True)
def _clean_lab_after(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that used the lab (its page closed first: this fixture is set up
    before, so torn down after, the test's own), :func:`clean_lab`."""
    yield
    if "lab" in request.fixturenames:
        clean_lab(request.getfixturevalue("lab"))


def _chromium() -> str | None:
    for path in CHROMIUM:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is missing: `tools/ensure_system.sh chromium` installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Requests:
    """Every URL the page asked for (requests and web sockets)."""

    urls: list[str] = field(default_factory=list)

    def outside(self, host: str = "127.0.0.1") -> list[str]:
        from urllib.parse import urlsplit

        local = ("data", "blob", "about")
        return [
            u for u in self.urls if urlsplit(u).scheme not in local and urlsplit(u).hostname != host
        ]


# A page may hold other tabs (a test that opens two notebooks, or reloads the page and has
# JupyterLab restore them), so the notebook is found by its path and brought to the front,
# never assumed to be the current widget.
FIND_PANEL = """(name) => {
  const app = window.jupyterapp;
  if (!app) return null;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === name) { app.shell.activateById(w.id); return w; }
  }
  return null;
}"""

KERNEL_IDLE = f"""(name) => {{
  const panel = ({FIND_PANEL})(name);
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
    && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle'
    && window.jupyterapp.shell.currentWidget === panel;
}}"""

RUN = f"""async ([name, index]) => {{
  const panel = ({FIND_PANEL})(name);
  const app = window.jupyterapp;
  if (index === null) {{
    await app.commands.execute('notebook:run-all-cells');
  }} else {{
    panel.content.activeCellIndex = index;
    await app.commands.execute('notebook:run-cell');
  }}
}}"""

ALL_RUN = f"""(name) => {{
  const panel = ({FIND_PANEL})(name);
  return !!panel && panel.content.widgets.filter(c => c.model.type === 'code')
    .every(c => c.model.executionCount !== null);
}}"""


# (null until JupyterLab has started and exposed itself: a freshly loaded page is waited for,
# not failed, by wait_for_function)
PANEL_ID = """(name) => {
  if (!window.jupyterapp || !window.jupyterapp.shell) { return null; }
  for (const w of window.jupyterapp.shell.widgets('main')) {
    if (w.context && w.context.path === name) { return w.id; }
  }
  return null;
}"""


SAVE = """async (name) => {
  for (const w of window.jupyterapp.shell.widgets('main')) {
    if (w.context && w.context.path === name) { await w.context.save(); return true; }
  }
  return false;
}"""
# Shut the notebook's kernel down and close its tab (reopened, it has no live models).
CLOSE = """async (name) => {
  if (!window.jupyterapp || !window.jupyterapp.shell) { return false; }
  for (const w of window.jupyterapp.shell.widgets('main')) {
    if (w.context && w.context.path === name) {
      await w.sessionContext.shutdown();
      w.dispose();
      return true;
    }
  }
  return false;
}"""


class Notebook:
    """A notebook open in the page: ``run(i)`` runs cell ``i`` through JupyterLab itself."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name

    def wait_idle(self) -> None:
        self.page.wait_for_function(KERNEL_IDLE, arg=self.name)

    def run(self, index: int) -> None:
        self.page.evaluate(RUN, [self.name, index])

    def run_all(self) -> None:
        """Run every cell and wait until each code cell has run."""
        self.page.evaluate(RUN, [self.name, None])
        self.page.wait_for_function(ALL_RUN, arg=self.name)
        self.wait_idle()

    def save(self) -> bool:
        """Save it through JupyterLab (widget state included where the lab saves it)."""
        return bool(self.page.evaluate(SAVE, self.name))

    def close(self) -> bool:
        """Shut its kernel down and close its tab."""
        return bool(self.page.evaluate(CLOSE, self.name))

    def wait_restored(self, css: str, timeout_s: float, tries: int = 3) -> Any:
        """The first element matching ``css``, drawn by a model restored from the saved
        widget state. ipywidgets drops the models it restored when the notebook's fresh
        kernel connects after the restore (a race: every saved view then says "model not
        found", and its twin shows): the page is loaded again, the kernel already
        running, up to ``tries`` times."""
        for _ in range(tries):
            drawn = self.locator(css).first
            missing = self.locator(".jp-OutputArea-output").get_by_text("model not found")
            # (the twin's own rule hides that note: attached, not visible)
            drawn.or_(missing.first).wait_for(state="attached", timeout=timeout_s * 1000)
            if drawn.count():
                drawn.wait_for(timeout=timeout_s * 1000)
                return drawn
            self.page.reload()
            self.page.wait_for_function(PANEL_ID, arg=self.name)
            self.wait_idle()
        raise AssertionError(f"{self.name}: its saved views were not restored in {tries} loads")

    def locator(self, css: str) -> Any:
        """Elements matching ``css`` inside this notebook's panel only: other notebooks'
        tabs may be open in the page, their outputs with them."""
        panel = self.page.evaluate(PANEL_ID, self.name)
        assert panel, f"{self.name} is not open"
        return self.page.locator(f"#{panel} {css}")


@pytest.fixture
def open_notebook(lab: Lab, page: Any) -> Any:
    """``open_notebook("name.ipynb", [source, ...])``: write it, open it, wait for its kernel.

    ``open_notebook(path)`` opens a copy of an existing notebook instead.
    """
    import nbformat

    def open_(name: str | Path, cells: list[str] | None = None) -> Notebook:
        if cells is None:
            source = Path(name)
            name = source.name
            shutil.copy(source, lab.root / name)
            return _open(str(name))
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, str(lab.root / name))
        return _open(str(name))

    def _open(name: str) -> Notebook:
        page.goto(lab.notebook_url(name))
        notebook = Notebook(page, name)
        notebook.wait_idle()
        return notebook

    return open_


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page; ``page.requests`` records every URL it asked for."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    requests = Requests()
    page.on("request", lambda r: requests.urls.append(r.url))
    page.on("websocket", lambda ws: requests.urls.append(ws.url))
    page.requests = requests
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / f"{request.node.name}.png"), full_page=True)
    context.close()


# Last in the session: test_tutorials_in_lab.py waits for the executed notebooks that the
# 3.12 lane saves under `make test`; every other browser test runs meanwhile.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name == "test_tutorials_in_lab.py")
