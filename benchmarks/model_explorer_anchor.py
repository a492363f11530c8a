"""Google's Model Explorer, measured on the GraphExplorer benchmark's own programs.

Model Explorer (``ai-edge-model-explorer`` and its compiled ``ai-edge-model-explorer-adapter``,
Apache-2.0, PyPI) is not a jaxlab dependency: like jaxviz (benchmarks/jaxviz_anchor.py) it
is installed for the run into a temporary folder (``pip install --target``, appended to
``sys.path`` after the environment so it shadows nothing there), never into the
environment or a lock, and nothing of it ships.

It is fed what it reads for a JAX program: the StableHLO text of
``jax.jit(f).lower(*args).as_text()`` written to a ``.mlir`` file, converted by its built-in
MLIR adapter (``builtin_mlir_adapter.BuiltinMlirAdapter``: the adapter's C++
``ConvertMlirToJson``, then ``utils.convert_builtin_resp``), and serialized as its server's
``/apipost/v1/send_command`` answers the page (``convert_adapter_response``, ``json.dumps``).
Two measurements:

* ``convert`` (the kernel side): seconds to lower the program to StableHLO (JAX's trace
  and lowering), to convert it to Model Explorer's graph JSON, and to serialize that, the
  JSON's bytes and its node counts. Model Explorer lays its graph out in the browser (a
  web worker), so unlike jaxlab's kernel half this holds no layout.
* ``first_view`` (the page): its server (``model_explorer.server.start`` on 127.0.0.1, a
  free port, ``no_open_in_browser``) in a child process, its page in headless Chromium with
  the browser tests' flags (``--disable-gpu``: WebGL falls back to SwiftShader), and the
  seconds from navigation to the first frame that draws ink on its graph canvas
  (``canvas.main``; each WebGL draw call into it is followed, in the same task, by a copy
  of the canvas to a 2D canvas whose pixels are compared with the background), then to
  its "Processing graph..." notice going away. Requests off 127.0.0.1 are aborted and
  listed (its index.html asks fonts.gstatic.com for a font); the server's check for a new
  version on PyPI/GitHub is replaced by an empty answer, so neither side reaches out.

benchmarks/graph_explorer.py calls both beside its own figures; alone::

    .venv/bin/python benchmarks/model_explorer_anchor.py
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

VERSION = "0.1.34"
ADAPTER_VERSION = "0.2.1"
# per page: a program not painted by then is reported as such (its page draws with WebGL,
# SwiftShader's software one on a GPU-less machine; with 240 s a page, graph_explorer.py
# with this anchor did not finish in 15 minutes)
PAGE_TIMEOUT_S = 60.0

_target: str | None = None
_why_not: str | None = None

# Run in the child process: argv = [target folder, .mlir path, port].
_SERVER = """
import sys
sys.path.append(sys.argv[1])
import model_explorer
from model_explorer import server
server._check_new_version = lambda print_msg=True: {}  # no request to PyPI / GitHub
config = model_explorer.config()
config.add_model_from_path(path=sys.argv[2])
server.start(host="127.0.0.1", port=int(sys.argv[3]), config=config,
             no_open_in_browser=True)
"""

# Installed before the page's scripts: the first frame that draws ink on the graph canvas,
# and when the "Processing graph..." notice is gone after it (performance.now(), ms).
_HOOK = """
window.__meInked = 0; window.__meInk = 0; window.__meSettled = 0; window.__meFrames = 0;
let pending = false;
const probe = document.createElement('canvas');
function look(c) {
  pending = false;
  window.__meFrames += 1;
  const w = 160, h = Math.max(1, Math.round(160 * c.height / c.width));
  probe.width = w; probe.height = h;
  const g = probe.getContext('2d', {willReadFrequently: true});
  g.clearRect(0, 0, w, h);
  g.drawImage(c, 0, 0, w, h);
  const px = g.getImageData(0, 0, w, h).data;
  let ink = 0;
  for (let i = 0; i < px.length; i += 4) {
    const d = Math.abs(px[i] - px[0]) + Math.abs(px[i + 1] - px[1])
      + Math.abs(px[i + 2] - px[2]) + Math.abs(px[i + 3] - px[3]);
    if (d > 24) ink++;
  }
  if (ink / (w * h) > 0.002) {
    window.__meInked = performance.now();
    window.__meInk = ink / (w * h);
  }
}
for (const C of [WebGLRenderingContext, WebGL2RenderingContext]) {
  for (const name of ['drawElements', 'drawArrays', 'drawElementsInstanced',
                      'drawArraysInstanced']) {
    const orig = C.prototype[name];
    if (!orig) continue;
    C.prototype[name] = function (...a) {
      const r = orig.apply(this, a);
      const c = this.canvas;
      if (!pending && !window.__meInked && c && c.classList && c.classList.contains('main')) {
        pending = true;
        queueMicrotask(() => look(c));  // same task: the drawing buffer still holds the frame
      }
      return r;
    };
  }
}
setInterval(() => {
  if (window.__meInked && !window.__meSettled && document.body
      && !document.body.innerText.includes('Processing graph')) {
    window.__meSettled = performance.now();
  }
}, 100);
"""


def _folder(prefix: str) -> str:
    """A temporary folder, removed when this process ends (the install alone is 630 MB:
    left behind, each run of ``make bench`` filled the disk by that much)."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def why_not() -> str | None:
    """Why Model Explorer is not measured in this run (None when it is, or not yet tried)."""
    return _why_not


def load() -> str | None:
    """The temporary folder Model Explorer is installed in for this run, on ``sys.path``;
    None (and ``why_not()`` says why) if pip cannot get it or its adapter cannot load."""
    global _target, _why_not
    if _target is not None or _why_not is not None:
        return _target
    target = _folder("model-explorer-")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--target", target, f"ai-edge-model-explorer=={VERSION}",
         f"ai-edge-model-explorer-adapter=={ADAPTER_VERSION}"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if "ERROR" in ln] or done.stderr.splitlines()
        _why_not = f"pip install --target failed (exit {done.returncode}): " + " | ".join(
            lines[-3:]
        )
        return None
    sys.path.append(target)  # after the environment: it cannot shadow anything there
    try:
        importlib.import_module("ai_edge_model_explorer_adapter")
        importlib.import_module("model_explorer.utils")
    except Exception as err:  # the compiled adapter may not load on this machine
        _why_not = f"installed, but does not import here: {type(err).__name__}: {err}"
        return None
    _target = target
    return target


def _stablehlo(fun: Callable[..., Any], args: tuple[Any, ...], folder: str) -> tuple[str, float]:
    """The program as StableHLO text in a ``.mlir`` file, and the seconds to lower it."""
    import jax

    t0 = time.perf_counter()
    text = jax.jit(fun).lower(*args).as_text()
    lower_s = time.perf_counter() - t0
    path = os.path.join(folder, "program.mlir")
    Path(path).write_text(text)
    return path, lower_s


def convert(fun: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """Model Explorer's kernel-side cost for ``fun(*args)``: lowering to StableHLO, its
    MLIR adapter's conversion to graph JSON, the server's serialization of the answer."""
    if load() is None:
        return None
    adapter = importlib.import_module("ai_edge_model_explorer_adapter")
    utils = importlib.import_module("model_explorer.utils")
    folder = _folder("model-explorer-program-")
    cpu0 = time.process_time()  # this process's threads: the adapter converts in-process
    path, lower_s = _stablehlo(fun, args, folder)
    t0 = time.perf_counter()
    try:  # BuiltinMlirAdapter.convert, step by step
        resp = adapter.ConvertMlirToJson(adapter.VisualizeConfig(), path)
    except Exception as err:
        global _why_not
        _why_not = f"its MLIR adapter cannot convert JAX's StableHLO: {type(err).__name__}: {err}"
        return None
    t1 = time.perf_counter()
    graphs = {"graphCollections": utils.convert_builtin_resp(resp)}
    body = json.dumps(utils.convert_adapter_response(graphs))  # what send_command answers
    t2 = time.perf_counter()
    cpu_s = time.process_time() - cpu0
    subgraphs = [g for c in json.loads(resp) for g in c["subgraphs"]]
    return {
        "lower_s": lower_s,
        "convert_s": t1 - t0,
        "serialize_s": t2 - t1,
        "kernel_s": lower_s + (t2 - t0),
        "kernel_cpu_s": cpu_s,
        "stablehlo_bytes": Path(path).stat().st_size,
        "json_bytes": len(body.encode()),
        "main_nodes": len(subgraphs[0]["nodes"]) if subgraphs else 0,
        "all_nodes": sum(len(g["nodes"]) for g in subgraphs),
        "subgraphs": len(subgraphs),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_view(
    fun: Callable[..., Any], *args: Any, timeout_s: float = PAGE_TIMEOUT_S
) -> dict[str, Any] | None:
    """Model Explorer's page for ``fun(*args)`` in headless Chromium: seconds from
    navigation to the first inked frame of its graph canvas and to its processing notice
    gone; None where it is not installed or Playwright is missing."""
    target = load()
    if target is None:
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "browser"))
    from conftest import CHROMIUM, CHROMIUM_ARGS  # the browser tests' Chromium and flags

    chromium = next((c for c in CHROMIUM if Path(c).exists()), CHROMIUM[-1])
    folder = _folder("model-explorer-page-")
    path, lower_s = _stablehlo(fun, args, folder)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-u", "-c", _SERVER, target, path, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    figures: dict[str, Any] = {"lower_s": lower_s, "timeout_s": timeout_s}
    try:
        url = None
        assert server.stdout is not None
        for line in server.stdout:  # it prints its address once it answers on it
            if line.startswith(f"http://127.0.0.1:{port}"):
                url = line.strip()
                break
        if url is None:
            figures["error"] = f"its server exited ({server.wait()}) without an address"
            return figures
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 720})
                page.add_init_script(_HOOK)
                blocked: list[str] = []
                local = re.compile(rf"^http://127\.0\.0\.1:{port}/")

                def block(route: Any) -> None:
                    blocked.append(route.request.url)
                    route.abort()

                page.route(lambda u: not local.match(u) and not u.startswith("data:"), block)
                t0 = time.perf_counter()
                page.goto(url)
                try:
                    page.wait_for_function(
                        "() => window.__meInked > 0", polling=250, timeout=timeout_s * 1000
                    )
                    left = max(1.0, timeout_s - (time.perf_counter() - t0))
                    page.wait_for_function(
                        "() => window.__meSettled > 0", polling=250, timeout=left * 1000
                    )
                except Exception as err:  # Playwright's TimeoutError: reported, not raised
                    figures["error"] = f"{type(err).__name__} after {timeout_s:.0f} s"
                inked, ink, settled, frames, nodes = page.evaluate(
                    """() => [window.__meInked, window.__meInk, window.__meSettled,
                              window.__meFrames,
                              (document.body.innerText.match(/(\\d+) nodes/) || [])[1]]"""
                )
                figures |= {
                    "first_ink_s": inked / 1000 if inked else None,
                    "ink_fraction": ink,
                    "settled_s": settled / 1000 if settled else None,
                    "probed_frames": frames,
                    "nodes_said": int(nodes) if nodes else None,
                    "blocked_requests": sorted({re.sub(r"/s/.*", "/s/…", u) for u in blocked}),
                    "wall_s": time.perf_counter() - t0,
                }
            finally:
                browser.close()
    finally:
        server.terminate()  # the child this function started, by its handle
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return figures


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import jax
    from graph_explorer import SIZES, _program, deep

    for size, layers in SIZES.items():
        print(f"{size}: {convert(jax.grad(deep), *_program(layers))}", flush=True)
    if why_not():
        print(f"Model Explorer not measured: {why_not()}")
        return
    print(f"200 page: {first_view(jax.grad(deep), *_program(SIZES[200]))}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
