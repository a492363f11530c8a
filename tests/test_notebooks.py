"""Every notebook under notebooks/ runs top to bottom, in Binder's environment.

On Python 3.12 (binder/runtime.txt) the kernel is that of the environment Binder builds
(tests/binder_setup.py: ``binder/requirements.txt`` and ``postBuild`` in a fresh venv), so
each notebook runs once and in what a student gets; on another Python, in a kernel of this
interpreter.

A notebook passes when no cell errors, every cell that draws a graph with ``%jaxpr``
(no ``--text`` / ``--stablehlo`` / ``--hlo`` / ``-o``) shows an SVG (the static graph, or
the GraphExplorer's saved copy of its view inside its HTML), and every ``%grad --graph``
or ``%grad --split`` cell (no ``-o``) shows its graphs as SVG inside its HTML. The science is
checked by the notebooks themselves: their cells assert against analytic results.

Each executed notebook is saved (outputs and widget state included) into the folder
``$JAXLAB_EXECUTED_NOTEBOOKS`` names, ``test-output/notebooks`` by default: ``make test``
builds the docs from those copies, and the browser lane opens them in JupyterLab
(tests/browser/test_tutorials_in_lab.py), so every notebook runs once. A notebook whose run
fails leaves ``<name>.failed`` (what failed) there instead, for the browser lane to say so.
"""

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
_GRAPH_LINE = re.compile(r"^\s*%jaxpr\b(?!.*\s(?:--text|--stablehlo|--hlo|-o)\b)", re.MULTILINE)
_GRAD_GRAPH_LINE = re.compile(r"^\s*%%?grad\b(?=.*\s--(?:graph|split)\b)(?!.*\s-o\b)", re.MULTILINE)
# Each notebook's budget, kernel start included, in the kernel's own CPU time (user and
# system, every thread): "under a minute on 2 cores" on an idle machine. Wall-clock time is
# printed, never asserted: a busy machine (CI's) stretches it without the notebook changing.
NOTEBOOK_CPU_SECONDS = 60
NOTEBOOK_PEAK_BYTES = 1.5 * 2**30  # the kernel's peak resident memory


@pytest.fixture(scope="module")
def kernel_name(notebook_kernel):
    """Binder's environment on Python 3.12 (tests/conftest.py): the notebooks run once, in
    what a student's Binder has; elsewhere this interpreter's kernel."""
    return notebook_kernel


def graph_cells(nb, pattern=_GRAPH_LINE):
    return [c for c in nb.cells if c.cell_type == "code" and pattern.search(c.source)]


def test_graph_cell_patterns():
    assert _GRAPH_LINE.search("%jaxpr --grad f(x)")
    assert not _GRAPH_LINE.search("%jaxpr --text f(x)")
    assert _GRAD_GRAPH_LINE.search("%grad --graph f(x)")
    assert _GRAD_GRAPH_LINE.search("%%grad --wrt w --graph\nw.sum()")
    assert not _GRAD_GRAPH_LINE.search("%grad --check f(x)")
    assert not _GRAD_GRAPH_LINE.search("s = %grad -o --split f(x)")
    assert not _GRAD_GRAPH_LINE.search("%grad -o --graph f(x)")


def test_there_are_notebooks():
    assert any(p.name == "00_welcome.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_clean_and_checks_its_science(path):
    """Stored without outputs (what a student opens is the lesson, not last run's results),
    starting with `%load_ext jaxlab`; every tutorial past the welcome checks itself."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.outputs for c in code] == [[]] * len(code)
    assert all(c.execution_count is None for c in code)
    assert code[0].source.startswith("%load_ext jaxlab")
    if path.name != "00_welcome.ipynb":
        checks = [
            c for c in code if re.search(r"^\s*(assert |np\.testing\.assert_)", c.source, re.M)
        ]
        assert len(checks) >= 3, f"{path.name}: {len(checks)} cells check the science"


def executed_folder() -> Path:
    """Where executed copies go: ``$JAXLAB_EXECUTED_NOTEBOOKS`` (relative to the repository
    root, as the docs read it) or ``test-output/notebooks``."""
    return ROOT / (
        os.environ.get("JAXLAB_EXECUTED_NOTEBOOKS", "").strip() or "test-output/notebooks"
    )


def kernel_peak_bytes(client) -> int | None:
    """The kernel process's peak resident memory so far (Linux's VmHWM), or None where the
    kernel is not a local Linux process."""
    try:
        pid = client.km.provisioner.process.pid
        status = Path(f"/proc/{pid}/status").read_text()
    except (AttributeError, OSError):
        return None
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
    return int(line.split()[1]) * 1024 if line else None  # reported in kB


def kernel_cpu_seconds(client) -> float | None:
    """The CPU time (user and system, all its threads) the kernel process has used so far,
    or None where the kernel is not a local Linux process."""
    import os

    try:
        pid = client.km.provisioner.process.pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def execute(path: Path, kernel_name: str, measured: dict | None = None):
    """Run a notebook top to bottom; return it with outputs and the cells' errors.

    ``measured``, if given, receives ``wall_s`` (kernel start to last cell), ``cpu_s`` (the
    kernel's CPU time, read after every cell: it only grows) and ``peak_bytes`` (the
    kernel's peak resident memory, read after every cell: the high-water mark only grows,
    so the last reading is the notebook's peak)."""
    import time

    import nbformat
    from kernel_polls import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=300,
        allow_errors=True,  # collect every failing cell rather than stop at the first
        resources={"metadata": {"path": str(path.parent)}},
    )
    peaks: list[int | None] = []
    cpus: list[float | None] = []

    def after_cell(**_):
        peaks.append(kernel_peak_bytes(client))
        cpus.append(kernel_cpu_seconds(client))

    client.on_cell_executed = after_cell
    start = time.perf_counter()
    client.execute()
    if measured is not None:
        measured["wall_s"] = time.perf_counter() - start
        measured["peak_bytes"] = max((p for p in peaks if p is not None), default=None)
        measured["cpu_s"] = max((c for c in cpus if c is not None), default=None)
    errors = [
        (i, out.get("ename"), out.get("evalue"))
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    return nb, errors


def failed_marker(path: Path) -> Path:
    """Beside where ``path``'s executed copy would go: ``<name>.failed``, written when its
    run failed (what failed, in its text), for the browser lane, which waits for the copies
    (tests/browser/test_tutorials_in_lab.py), to say so rather than wait."""
    return executed_folder() / f"{path.stem}.failed"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, request):
    import traceback

    saved, failed = executed_folder() / path.name, failed_marker(path)
    # A failing notebook leaves no copy for the docs to show, nor an earlier run's marker.
    saved.unlink(missing_ok=True)
    failed.unlink(missing_ok=True)
    try:
        # The kernel inside: a failure to build Binder's environment is this run's too.
        _run_and_save(path, request.getfixturevalue("kernel_name"), saved)
    except BaseException as e:  # a failed assert, an error, a skip: each leaves its marker
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(f"{path.name}: {''.join(traceback.format_exception_only(e))}")
        raise


def _run_and_save(path, kernel_name, saved):
    import nbformat

    measured: dict = {}
    nb, errors = execute(path, kernel_name, measured)
    assert errors == []
    # Binder's budget (issue 14): a student's 2 CPU cores and about 2 GB.
    print(
        f"{path.name}: {measured['wall_s']:.1f} s wall, {measured['cpu_s']} s kernel CPU, "
        f"peak {measured['peak_bytes']} bytes"
    )
    assert measured["cpu_s"] is not None and measured["cpu_s"] < NOTEBOOK_CPU_SECONDS
    assert measured["peak_bytes"] is not None and measured["peak_bytes"] < NOTEBOOK_PEAK_BYTES
    shown = [
        out.get("text", "") + out.get("data", {}).get("text/plain", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    ]
    assert not [s for s in shown if "extension is already loaded" in s]  # %load_ext is silent
    for cell in graph_cells(nb):
        # The static SVG (--static, no widgets), or the GraphExplorer, whose saved copy of
        # its last view is an inline SVG inside its text/html.
        kinds = {k for out in cell.outputs for k in out.get("data", {})}
        html = "".join(out.get("data", {}).get("text/html", "") for out in cell.outputs)
        assert "image/svg+xml" in kinds or "<svg" in html, cell.source
    for cell in graph_cells(nb, _GRAD_GRAPH_LINE):
        html = "".join(out.get("data", {}).get("text/html", "") for out in cell.outputs)
        assert "<svg" in html, cell.source
    saved.parent.mkdir(parents=True, exist_ok=True)
    part = saved.with_name(f"{saved.name}.part")  # whole or absent for whoever waits on it
    nbformat.write(nb, part)
    part.replace(saved)


# The docs take the executed copies (docs/_ext/tutorials.py): they must be the notebooks'.


def _docs_module_at(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docs_module(name):
    return _docs_module_at(ROOT / "docs" / "_ext" / f"{name}.py")


def _notebook(*sources, outputs=()):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A tutorial")]
    nb.cells += [nbformat.v4.new_code_cell(s, outputs=list(outputs)) for s in sources]
    return nbformat.writes(nb)


def test_docs_take_the_executed_copies_without_widget_only_outputs(tmp_path):
    import nbformat

    tutorials = _docs_module("tutorials")
    source, executed, dest = tmp_path / "nb", tmp_path / "executed", tmp_path / "docs"
    for folder in (source, executed, dest):
        folder.mkdir()
    code = ("x = 1", "x + 1", "slider")
    (source / "01_a.ipynb").write_text(_notebook(*code))
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "m1"}}
    ran = nbformat.reads(_notebook(*code), as_version=4)
    ran.cells[2].outputs = [
        nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=2)
    ]
    ran.cells[3].outputs = [
        nbformat.v4.new_output("display_data", {**view, "text/plain": "IntSlider(value=3)"}),
        nbformat.v4.new_output("display_data", {**view, "text/html": "<b>static</b>"}),
    ]
    nbformat.write(ran, executed / "01_a.ipynb")
    (dest / "gone.ipynb").write_text("{}")  # a notebook since removed from notebooks/

    assert tutorials.copy_tutorials(source, dest, executed) == ["01_a"]
    assert sorted(p.name for p in dest.iterdir()) == ["01_a.ipynb"]
    shown = nbformat.read(dest / "01_a.ipynb", as_version=4)
    assert [o["data"]["text/plain"] for o in shown.cells[2].outputs] == ["2"]
    # The slider has nothing to show without a kernel; the widget with HTML keeps it.
    assert [set(o["data"]) for o in shown.cells[3].outputs] == [{*view, "text/html"}]


def test_docs_execute_a_notebook_without_a_copy(tmp_path):
    import nbformat
    from nbclient.exceptions import CellExecutionError

    tutorials = _docs_module("tutorials")
    source, dest = tmp_path / "nb", tmp_path / "docs"
    source.mkdir()
    (source / "01_a.ipynb").write_text(_notebook("x = 20", "x + 22"))
    tutorials.copy_tutorials(source, dest, None)
    shown = nbformat.read(dest / "01_a.ipynb", as_version=4)
    assert shown.cells[2].outputs[0]["data"]["text/plain"] == "42"
    (source / "01_a.ipynb").write_text(_notebook("x = 1 / 0"))
    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        tutorials.copy_tutorials(source, dest, None)


def test_docs_refuse_a_stale_or_missing_executed_copy(tmp_path):
    tutorials = _docs_module("tutorials")
    source, executed = tmp_path / "nb", tmp_path / "executed"
    source.mkdir()
    executed.mkdir()
    (source / "01_a.ipynb").write_text(_notebook("x = 2"))
    with pytest.raises(tutorials.StaleNotebook, match="missing"):
        tutorials.copy_tutorials(source, tmp_path / "docs", executed)
    (executed / "01_a.ipynb").write_text(_notebook("x = 1"))  # run before the edit
    with pytest.raises(tutorials.StaleNotebook, match="older"):
        tutorials.copy_tutorials(source, tmp_path / "docs", executed)


@pytest.mark.parametrize("value", ["", "test-output/notebooks"])
def test_docs_render_executed_notebooks_from_the_tests_or_their_own_run(monkeypatch, value):
    import runpy

    monkeypatch.setenv("JAXLAB_EXECUTED_NOTEBOOKS", value)
    monkeypatch.setattr(sys, "path", list(sys.path))  # conf.py prepends docs/_ext
    conf = runpy.run_path(str(ROOT / "docs" / "conf.py"))
    assert conf["nb_execution_mode"] == "off"  # the tutorials extension executes
    assert conf["nb_ipywidgets_js"] == {}  # no widget JavaScript from a CDN
    # ... but jaxlab's own loader, served by the site, draws widgets from their saved state.
    assert [js for js, _ in conf["html_js_files"]] == ["jaxlab-widgets.js"]
    assert (ROOT / "docs" / "_static" / "jaxlab-widgets.js").is_file()
    tutorials = _docs_module("tutorials")
    expected = (ROOT / value).resolve() if value else None
    assert tutorials.executed_folder(ROOT) == expected


def test_site_check_finds_what_loads_from_the_network(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # check_site.py prepends docs/_ext
    check = _docs_module_at(ROOT / "docs" / "check_site.py")
    page = """<html><head>
    <script src="_static/doctools.js"></script>
    <script src="https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager/embed-amd.js"></script>
    <link rel="stylesheet" href="//cdnjs.cloudflare.com/x.css">
    <link rel="stylesheet" href="../_static/alabaster.css">
    <link rel="index" href="https://example.org/genindex.html">
    </head><body><a href="https://mybinder.org/v2/gh/jaxlab/jaxlab/HEAD">Binder</a>
    <img src="http://example.org/logo.png"></body></html>"""
    assert check.remote_fetches(page) == [
        "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager/embed-amd.js",
        "//cdnjs.cloudflare.com/x.css",
        "http://example.org/logo.png",
    ]


def test_docs_math_is_svg_from_the_site_not_mathjax(monkeypatch):
    import base64

    monkeypatch.setattr(sys, "path", list(sys.path))
    math = _docs_module("math_svg")
    img = math.svg_image(r"\frac{v^2 \sin 2\theta}{g}", display=False)
    src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', img).group(1)
    svg = base64.b64decode(src).decode()
    assert "<svg" in svg and "<path" in svg  # glyphs as paths: no font to fetch
    assert 'alt="\\frac{v^2 \\sin 2\\theta}{g}"' in img
    assert "vertical-align: -" in img  # the fraction's bar sits on the text line
    # TeX that mathtext lacks but can do without (sizes) is typeset, the alt text unchanged.
    sized = math.svg_image(r"\big(a - b\big)/\tfrac{1}{2}", display=False)
    assert sized.startswith('<img class="math" alt="\\big(a - b\\big)/\\tfrac{1}{2}"')
    # What mathtext cannot typeset is shown as its source, escaped.
    fallback = math.svg_image(r"\begin{aligned} a &= b < c \end{aligned}", display=True)
    assert fallback == r'<code class="math">\begin{aligned} a &amp;= b &lt; c \end{aligned}</code>'


@pytest.mark.notebooks
def test_execute_measures_the_kernels_time_and_peak_memory(kernel_name, tmp_path):
    import nbformat
    import numpy as np

    nb = nbformat.v4.new_notebook()
    # 600 MiB held for a moment: more than a kernel with jaxlab loaded uses by itself.
    planted = (
        "import numpy as np\nblock = np.ones(75 * 2**20)\ntotal = block.sum()\ndel block\ntotal"
    )
    nb.cells = [nbformat.v4.new_code_cell(planted)]
    path = tmp_path / "planted.ipynb"
    nbformat.write(nb, path)
    measured: dict = {}
    ran, errors = execute(path, kernel_name, measured)
    assert errors == []
    assert ran.cells[0].outputs[-1]["data"]["text/plain"] == repr(np.float64(75 * 2**20))
    assert measured["peak_bytes"] >= 600 * 2**20
    assert measured["peak_bytes"] < NOTEBOOK_PEAK_BYTES + 2**30  # a peak, not a sum of readings
    assert 0 < measured["wall_s"] < 300
