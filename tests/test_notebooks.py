"""Every notebook under notebooks/ runs top to bottom in a kernel of this environment.

A notebook passes when no cell errors, every cell that draws a graph with ``%jaxpr``
(no ``--text`` / ``--stablehlo`` / ``--hlo`` / ``-o``) shows an SVG, and every ``%grad --graph``
or ``%grad --split`` cell (no ``-o``) shows its graphs as SVG inside its HTML. The science is
checked by the notebooks themselves: their cells assert against analytic results.
"""

import json
import re
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
_GRAPH_LINE = re.compile(r"^\s*%jaxpr\b(?!.*\s(?:--text|--stablehlo|--hlo|-o)\b)", re.MULTILINE)
_GRAD_GRAPH_LINE = re.compile(r"^\s*%%?grad\b(?=.*\s--(?:graph|split)\b)(?!.*\s-o\b)", re.MULTILINE)


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory, monkeypatch_module):
    """A kernelspec that runs *this* interpreter (the installed one says plain `python`)."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "jaxlab-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "jaxlab test", "language": "python"})
    )
    monkeypatch_module.setenv("JUPYTER_PATH", str(root))
    return "jaxlab-test"


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


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


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_name):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=300,
        allow_errors=True,  # collect every failing cell rather than stop at the first
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        (i, out.get("ename"), out.get("evalue"))
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert errors == []
    for cell in graph_cells(nb):
        kinds = {k for out in cell.outputs for k in out.get("data", {})}
        assert "image/svg+xml" in kinds, cell.source
    for cell in graph_cells(nb, _GRAD_GRAPH_LINE):
        html = "".join(out.get("data", {}).get("text/html", "") for out in cell.outputs)
        assert "<svg" in html, cell.source
