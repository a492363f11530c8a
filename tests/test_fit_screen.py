"""Big programs at projector size (issue 34), measured in the kernel: each first view the
GraphExplorer chooses is laid out within the pane (graph_layout's PANE_W x PANE_H, a
1280x720 screen's JupyterLab output) at scale 1, its boxes at their 14/12 px text sizes;
what does not fit is left closed and said; many arrays between two boxes are one edge
labelled "N arrays"; ``%grad --split``'s programs are each at most 700 px tall at 12 px.

The programs are benchmarks/fit_screen.py's (the numbers it prints are these): tutorial
06's ``run`` with its ``--open scan,hamiltonian``, tutorial 09's ``train_step``, a 20-layer
MLP's gradient, an RNN's gradient (a scan of 50) and an optax Adam step.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.autodiff.split import grad_split
from jaxlab.autodiff.split_drawing import PROGRAM_H_PX
from jaxlab.graph import model as m
from jaxlab.graph.explore import Views
from jaxlab.graph.render import graph_to_dot
from jaxlab.widgets import GraphExplorer
from jaxlab.widgets.graph_fit import left_closed_note
from jaxlab.widgets.graph_layout import PANE_H, PANE_W, VIEW_PAD, _size, box_clusters, fits

_SPEC = importlib.util.spec_from_file_location(
    "jaxlab_bench_fit_screen", Path(__file__).parents[1] / "benchmarks" / "fit_screen.py"
)
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

RUN_06, TRAIN_09 = "06 run --open scan,hamiltonian", "09 train_step"
MLP_20, RNN, OPTAX = "20-layer MLP gradient", "RNN gradient (scan of 50)", "optax Adam step"


@pytest.fixture(scope="module")
def programs() -> Any:
    """Each program's explore Graph and the boxes its ``--open`` words ask for (06 runs in
    float64, as the tutorial does: x64 is put back as it was afterwards)."""
    x64 = jax.config.jax_enable_x64
    built: dict[str, tuple[m.Graph, list[str]]] = {}
    try:
        for name, make in bench.PROGRAMS.items():
            fun, args, words = make()
            graph = jaxlab.jaxpr_graph(fun, *args, explore=True)
            assert isinstance(graph.rebuild, Views)
            asked = graph.rebuild.explorer.boxes_to_open(words) if words else []
            built[name] = (graph, asked)
            jax.config.update("jax_enable_x64", x64)
    finally:
        jax.config.update("jax_enable_x64", x64)
    return built


def _first(programs: Any, name: str) -> GraphExplorer:
    graph, asked = programs[name]
    return GraphExplorer(graph, opened=asked)


def _labels(w: GraphExplorer) -> list[str]:
    """What the view draws: node names and closed boxes' titles."""
    clusters = box_clusters(w.drawn)
    by_id = {n.id: n for n in w.drawn.nodes}
    out = []
    for key in w.view["nodes"]:
        if key.startswith("cluster:"):
            out.append(clusters[key[len("cluster:") :]].label)
        elif key in by_id:
            out.append(by_id[key].label)
    return out


def _loops(graph: m.Graph) -> list[str]:
    """The 20-layer MLP gradient's two loops of layers (forward, backward), closed boxes
    of its first view."""
    w = GraphExplorer(graph, fit=False)
    loops = [c["id"] for c in w.model["clusters"] if c["label"] == "layer ×20"]
    w.close()
    assert len(loops) == 2, loops
    return loops


@pytest.mark.parametrize("name", [RUN_06, TRAIN_09, MLP_20, RNN, OPTAX])
def test_first_view_fits_the_pane_at_scale_1_with_full_size_text(programs: Any, name: str) -> None:
    w = _first(programs, name)
    view = w.view
    width, height = view["width"] + 2 * VIEW_PAD, view["height"] + 2 * VIEW_PAD
    assert width <= PANE_W and height <= PANE_H, (name, width, height)
    assert fits(view)
    # At scale 1: every box as big as its 14 px title and 12 px rows need (no box was
    # shrunk to make the view fit), and something to read (not one closed box).
    by_id = {n.id: n for n in w.drawn.nodes}
    clusters = box_clusters(w.drawn)
    for key, (_, _, bw, bh) in view["nodes"].items():
        need_w, need_h = _size(key, by_id, clusters)
        assert bw >= need_w - 0.5 and bh >= need_h - 0.5, (name, key, bw, bh)
    assert len(view["nodes"]) >= 4
    w.close()


def _notebook_open_words(name: str, cell: int) -> list[str]:
    """The ``--open`` words of a tutorial's ``%jaxpr`` cell."""
    book = json.loads((Path(__file__).parents[1] / "notebooks" / name).read_text())
    source = "".join(book["cells"][cell]["source"])
    found = re.search(r"%jaxpr --open (\S+)", source)
    assert found is not None, source
    return found[1].split(",")


def test_the_boxes_the_tutorials_prose_names_are_in_the_first_view(programs: Any) -> None:
    # 06: the two `scan` boxes inside the open jit, the first (Euler's) drawn open.
    run = _first(programs, RUN_06)
    clusters = box_clusters(run.drawn)
    scans = [c for c in clusters.values() if c.label == "scan ×10000"]
    assert len(scans) == 2
    assert [c.id for c in scans if c.id in run.view["frames"]] == ["e0/e0"], run.opened
    assert _labels(run).count("scan ×10000") == 1  # Verlet's, closed
    assert any(c["label"] == "jit run" for c in run.model["clusters"]) and run.view["frames"]
    run.close()
    # 09: "the `loss_fn` box" and "the `<lambda>` boxes" of the update, in the open jit.
    step = _first(programs, TRAIN_09)
    shown = _labels(step)
    assert "loss_fn" in shown and any(s.startswith("<lambda>") for s in shown), shown
    assert "e0" in step.opened
    step.close()


def test_06_first_view_shows_sin_inside_an_open_scan_body(programs: Any) -> None:
    # Tutorial 06's prose: the scan body holds the forces grad derived, "`sin` from
    # differentiating `cos`". Its first view, opened as its cell's --open words ask and
    # kept within the pane at full size, draws a `sin` equation inside an open scan.
    x64 = jax.config.jax_enable_x64
    try:
        words = bench.pendulum_run()[2]  # the words the fixture opened (x64 put back)
    finally:
        jax.config.update("jax_enable_x64", x64)
    assert _notebook_open_words("06_pendulum_energy.ipynb", 12) == words
    run = _first(programs, RUN_06)
    assert fits(run.view)
    parents = {c.id: c.parent for c in run.drawn.clusters}
    kinds = {c.id: c.primitive for c in run.drawn.clusters}

    def inside_open_scan(cluster: str | None) -> bool:
        while cluster is not None:
            if kinds.get(cluster) == "scan" and cluster in run.view["frames"]:
                return True
            cluster = parents.get(cluster)
        return False

    sines = [
        n
        for n in run.drawn.nodes
        if n.primitive == "sin" and n.kind == m.EQUATION and n.id in run.view["nodes"]
    ]
    assert sines and all(inside_open_scan(n.cluster) for n in sines), run.opened
    assert "cos" in _labels(run)  # what it differentiates, beside it
    # The view says what it left closed (the other scan among them).
    assert any("left closed to stay readable" in note for note in run.model["notes"])
    run.close()


def test_repeated_update_calls_are_one_box_that_opens_to_them(programs: Any) -> None:
    # 09's ``jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)``: six calls of the
    # same two equations, one per parameter, drawn as one ``<lambda> ×6`` box.
    step = _first(programs, TRAIN_09)
    boxes = [c for c in step.model["clusters"] if c["label"].startswith("<lambda>")]
    assert [c["label"] for c in boxes] == ["<lambda> ×6"], boxes
    assert f"cluster:{boxes[0]['id']}" in step.view["nodes"]
    step.toggle(boxes[0]["id"])
    calls = sorted(c["label"] for c in step.model["clusters"] if c["label"].startswith("<lambda> "))
    assert calls == sorted(["<lambda> ×6", *(f"<lambda> {k}" for k in range(6))]), calls
    step.close()

    # Calls of more than a few equations each stay one box per call: a 3-layer MLP's
    # layers are told apart (layer 0, 1, 2), folded only past INLINE_INSTANCES.
    def layer(p, x):
        return jnp.tanh(x @ p["W"] + p["b"])

    def mlp(params, x):
        for p in params:
            x = layer(p, x)
        return jnp.mean(x**2)

    params = [{"W": jnp.full((4, 4), 0.1), "b": jnp.zeros(4)} for _ in range(3)]
    w = GraphExplorer(jaxlab.jaxpr_graph(mlp, params, jnp.ones((2, 4)), explore=True))
    labels = sorted(c["label"] for c in w.model["clusters"] if c["label"].startswith("layer"))
    assert [label.split(" (")[0] for label in labels] == ["layer 0", "layer 1", "layer 2"]
    w.close()


def test_what_does_not_fit_is_left_closed_and_said(programs: Any) -> None:
    graph, asked = programs[RUN_06]
    w = GraphExplorer(graph, opened=asked)
    kept = list(w.opened)
    left = [c for c in asked if c not in kept]
    assert kept and left and set(kept) < set(asked)
    assert left_closed_note(len(left)) in w.model["notes"]
    assert left_closed_note(len(left)).startswith(f"{len(left)} boxes left closed to stay readable")
    # Everything asked would not fit: that is why some were left closed ...
    whole = GraphExplorer(graph, opened=asked, fit=False)
    assert not fits(whole.view), (whole.view["width"], whole.view["height"])
    assert not any("left closed" in note for note in whole.model["notes"])
    # ... and each box left closed whose parent is open would not fit either.
    parents = {c.id: c.parent for c in graph.rebuild(frozenset(asked)).clusters}
    tried = 0
    for box in left:
        if parents.get(box) in kept:
            more = GraphExplorer(graph, opened=[*kept, box], fit=False)
            assert not fits(more.view), box
            more.close()
            tried += 1
    assert tried >= 1
    for x in (w, whole):
        x.close()


def test_saved_twin_draws_the_same_view_its_frames_and_what_it_left_closed(
    programs: Any,
) -> None:
    # The saved notebook's twin of 06's first view: the open jit's frame, the first scan
    # open and the second closed, the note, no "wider than this pane" (it fits), and the
    # same size.
    w = _first(programs, RUN_06)
    twin = w._static_html()
    assert "▾ jit run" in twin and twin.count("▸ scan ×10000") == 1
    assert twin.count("▾ scan ×10000") == 1 and ">sin<" in twin
    said = [n for n in w.model["notes"] if "left closed" in n]
    assert said and said[0] in twin
    assert "than this pane" not in twin
    size = re.search(r'viewBox="0 0 (\d+) (\d+)"', twin)
    assert size is not None
    assert (int(size[1]), int(size[2])) == (
        round(w.view["width"] + 2 * VIEW_PAD),
        round(w.view["height"] + 2 * VIEW_PAD),
    )
    w.close()


def test_fit_closes_boxes_rather_than_shrinking_text(programs: Any) -> None:
    # The 20-layer MLP's forward loop opened is far bigger than the pane: "fit" (the
    # page's button sends the pane's size) closes it and says so; the view then fits.
    graph, _ = programs[MLP_20]
    loop = _loops(graph)[0]
    w = GraphExplorer(graph, opened=[loop], fit=False)
    assert not fits(w.view) and w.view["height"] > PANE_H
    w.fit(PANE_W, PANE_H)
    assert loop not in w.opened and fits(w.view)
    assert left_closed_note(1) in w.model["notes"]
    # A pane that the view already fits changes nothing.
    w.fit(PANE_W, PANE_H)
    assert list(w.opened) == [] and fits(w.view)
    w.close()


def test_many_arrays_into_an_open_box_are_one_labelled_bundle(programs: Any) -> None:
    graph, _ = programs[MLP_20]
    forward, backward = _loops(graph)
    w = GraphExplorer(graph, opened=[forward], fit=False)
    edges = w.view["edges"]
    clusters = box_clusters(w.drawn)
    members = {  # the open loop's ranges of iterations, each a closed box
        k
        for k in w.view["nodes"]
        if k.startswith("cluster:") and clusters[k[len("cluster:") :]].parent == forward
    }
    assert len(members) >= 10
    # The forward loop's residuals into the closed backward loop: one edge, not 20.
    into = [
        e
        for e in edges
        if e["dst"] == f"cluster:{backward}" and (e["src"] == forward or e["src"] in members)
    ]
    assert len(into) == 1, [(e["src"], e["kind"]) for e in into]
    bundle = into[0]
    assert bundle["kind"] == "bundle" and bundle["src"] == forward
    n = int(re.fullmatch(r"(\d+) arrays", bundle["label"]).group(1))  # type: ignore[union-attr]
    assert n >= len(bundle["pairs"]) >= 10
    assert {a for a, _ in bundle["pairs"]} <= members
    # No edge from a range of the loop goes around the bundle.
    assert not [e for e in edges if e["src"] in members and e["dst"] == f"cluster:{backward}"]
    # The parameters into the open loop: one bundle for every range they feed.
    params = [e for e in edges if e["src"] == "in0" and e["dst"] == forward]
    assert len(params) == 1 and params[0]["kind"] == "bundle"
    # It counts arrays, not drawn edges: each layer reads its W and b, 40 arrays in all
    # through the one ``params`` node (its edge to a layer carries two).
    assert params[0]["label"] == "40 arrays" and len(params[0]["pairs"]) >= 10
    assert not [e for e in edges if e["src"] == "in0" and e["dst"] in members]
    w.close()


def test_static_drawing_bundles_parallel_edges_with_their_count() -> None:
    # A closed program's 40 results into another closed program, as the static drawing
    # (render.graph_to_dot) receives them: one edge saying "40 arrays", never 40 curves.
    nodes = (
        m.Node("a", m.COLLAPSED, "mlp ×20", primitive="jit", n_equations=100),
        m.Node("b", m.COLLAPSED, "backward", primitive="jit", n_equations=140),
        m.Node("c", m.EQUATION, "sin", primitive="sin"),
    )
    edges = (*(m.Edge("a", "b") for _ in range(40)), m.Edge("b", "c"))
    dot = graph_to_dot(m.Graph("g", nodes, edges, ()))
    arrows = re.findall(r'^\s*("[^"]*") -> ("[^"]*")(.*)$', dot, re.M)
    ab = [a for a in arrows if (a[0], a[1]) == ('"a"', '"b"')]
    assert len(ab) == 1 and 'label="40 arrays"' in ab[0][2]
    bc = [a for a in arrows if (a[0], a[1]) == ('"b"', '"c"')]
    assert len(bc) == 1 and "arrays" not in bc[0][2]


def _mlp_split() -> Any:
    def mlp_loss(params, x, y):
        h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
        return jnp.mean((h @ params[1]["W"] - y) ** 2)

    params = [{"W": jnp.full((3, 4), 0.3), "b": jnp.zeros(4)}, {"W": jnp.full((4, 1), 0.2)}]
    return grad_split(mlp_loss, params, jnp.ones((5, 3)), jnp.ones((5, 1)))


def test_split_programs_of_a_2_layer_mlp_fit_700_px_at_12_px() -> None:
    page = _mlp_split()._html()
    drawn = re.findall(
        r'<svg width="([\d.]+)pt" height="([\d.]+)pt" style="width:min\(100%,([\d.]+)px,'
        r'([\d.]+)px\);max-width:none;height:auto;min-width:([\d.]+)px"',
        page,
    )
    assert len(drawn) == 3
    for w, h, natural, capped, least in (tuple(map(float, d)) for d in drawn):
        # At its smallest (Graphviz's 12 pt rows at 12 px: 1 pt drawn as 1 px) it is at
        # most 700 px tall and fits the output's width (no sideways scroll).
        assert least == pytest.approx(w, abs=1) and h <= PROGRAM_H_PX and w <= PANE_W, (w, h)
        # Never drawn taller than 700 px: its width is capped at 700 px of height.
        assert capped * h / w <= PROGRAM_H_PX + 1 and capped >= least
        assert natural == pytest.approx(w * 4 / 3, abs=1)
    # No "scroll sideways" cue shows in this pane: each is hidden unless its program
    # scrolls (a narrower pane, tests/browser/test_tutorials_in_lab.py), so it is hidden
    # where the browser cannot tell
    cues = re.findall(r'class="jaxlab-split-scroll" style="([^"]*)"', page)
    assert len(cues) == 3 and all("max-height:0;overflow:hidden;" in c for c in cues)
