"""The GraphExplorer's views (graph/explore.py): built per opened set, on the gradient of a
714-layer MLP whose layers are inner jits (10,002 equations), as benchmarks/ measures."""

from collections import Counter

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.graph import model as m
from jaxlab.graph.explore import RUN_ITEMS, Views
from jaxlab.widgets import GraphExplorer

LAYERS = 714  # 14 equations a layer: about 10,000


def layer(w, b, x):
    return jnp.tanh(x @ w + b)


def deep(params, x):
    for w, b in params:
        x = jax.jit(layer)(w, b, x)
    return jnp.mean(x**2)


def params_for(n, width=8):
    return [(jnp.full((width, width), 0.1), jnp.zeros(width)) for _ in range(n)]


def primitives(jaxpr):
    """Every equation's primitive at any depth, counted (what the explorer must reach)."""
    found = Counter()
    for eqn in jaxpr.eqns:
        found[eqn.primitive.name] += 1
        for sub in jcore.jaxprs_in_params(eqn.params):
            found += primitives(sub)
    return found


@pytest.fixture(scope="module")
def big():
    return jaxlab.jaxpr_graph(deep, params_for(LAYERS), jnp.ones((4, 8)), grad=True, explore=True)


@pytest.fixture(scope="module")
def explorer(big):
    assert isinstance(big.rebuild, Views)
    return big.rebuild.explorer


def boxes(graph):
    return [n for n in graph.nodes if n.kind in (m.COLLAPSED, m.SEGMENT)]


def test_first_view_of_10000_equations_is_a_few_dozen_nodes(big):
    total = sum(primitives(big.jaxpr.jaxpr).values())
    assert total > 9_000 and big.n_equations == total
    assert len(big.nodes) <= 40
    # Every equation is in exactly one closed box or drawn: nothing lost, nothing twice.
    drawn = sum(n.n_equations for n in boxes(big)) + len(big.equations)
    assert drawn == total
    # 1,428 parameter arrays are one input node; the 1,428 gradients one output.
    inputs = [n for n in big.nodes if n.kind == m.INPUT]
    assert [n.label for n in inputs] == ["params (1428 arrays)", "x"]
    assert [n.label for n in big.nodes if n.kind == m.OUTPUT] == ["∂deep/∂params (1428 arrays)"]
    assert big.node(next(n.id for n in big.nodes if n.kind == m.CONST)).role == m.SEED


def test_runs_are_balanced_and_never_cross_forward_and_backward(big, explorer):
    runs = [n for n in big.nodes if n.kind == m.SEGMENT]
    assert 2 <= len(runs) <= RUN_ITEMS
    assert {n.phase for n in runs} == {m.FORWARD, m.BACKWARD}
    top = explorer.tree
    for n in runs:
        lo, hi = (int(k) for k in n.id.removeprefix("run").split("-"))
        phases = {
            "transpose" in str(it.eqn.source_info.name_stack) for it in top.items[lo : hi + 1]
        }
        assert len(phases) == 1, n.id
        assert n.n_equations == sum(it.n_equations for it in top.items[lo : hi + 1])


def test_every_box_opens_and_shows_what_it_holds(big):
    for box in boxes(big):
        view = big.rebuild(frozenset({box.id}))
        inside = [n for n in view.nodes if n.cluster == box.id]
        assert inside, box.id
        assert len(inside) <= RUN_ITEMS + 8  # its items, or sub-runs (and a jit's ports)
        assert box.id not in {n.id for n in view.nodes}
        frame = next(c for c in view.clusters if c.id == box.id)
        held = sum(n.n_equations if n.kind != m.EQUATION else 1 for n in inside)
        if box.kind == m.SEGMENT:
            assert held == box.n_equations == frame.n_equations


def test_search_finds_an_equation_inside_a_closed_inner_jit_and_opening_its_holders_shows_it(
    big, explorer
):
    found = explorer.search("tanh")
    assert len(found) == primitives(big.jaxpr.jaxpr)["tanh"] == LAYERS
    target = found[500]  # deep in the forward half, inside the 501st layer's jit
    assert "/" in target and target not in {n.id for n in big.nodes}
    holders = explorer.holders(target)
    assert holders[-1] == target.split("/")[0]  # the jit holding it, innermost last
    assert all(h.startswith("run") for h in holders[:-1]) and len(holders) >= 2
    view = big.rebuild(frozenset(holders))
    (node,) = [n for n in view.nodes if n.id == target]
    assert node.primitive == "tanh" and node.cluster == holders[-1]
    # Argument names and source lines are searched too.
    assert explorer.search("params[3]") == ["in0", "out0"]  # and ∂deep/∂params[3][0]
    assert len(explorer.search("test_graph_explore.py")) >= LAYERS


def test_opening_everything_reaches_every_equation(big, explorer):
    every = explorer.openable()
    assert len(every) == len(set(every))
    view = big.rebuild(frozenset(every))
    assert not boxes(view)
    nested = {c.id for c in view.clusters} & explorer.nested  # programs, not branches
    reached = len(view.equations) + len(nested)
    assert reached == big.n_equations == sum(primitives(big.jaxpr.jaxpr).values())


def test_explorer_widget_sends_only_the_view_and_reveals_search_matches(big, explorer):
    w = GraphExplorer(big)
    assert len(w.model["nodes"]) + len(w.model["clusters"]) <= 40
    run = next(k for k in w.view["nodes"] if k.startswith("cluster:run"))
    # The first view is the program's own structure: the Python loop of jitted layers.
    assert w.model["clusters"][0]["label"].startswith(f"loop ×{LAYERS}")
    w.toggle(run[len("cluster:") :])
    assert w.view["frames"] == [run[len("cluster:") :]]
    # Opened, its iterations in ranges named by what they hold, never by their size.
    labels = [c["label"] for c in w.model["clusters"]]
    assert not [label for label in labels if "equations" in label]
    ranges = [label for label in labels if label.startswith("iteration ")]
    assert len(ranges) <= RUN_ITEMS and ranges[0] == "iteration 0–21"
    assert ranges[-1].endswith(f"–{LAYERS - 1}")
    # The parameters' edges into the open loop, one to each range, are one labelled
    # bundle (issue 34: never a dark band) that still knows every end it stands for.
    hub = [e for e in w.view["edges"] if e["src"] == "in0"]
    bundle = [e for e in hub if e["kind"] == "bundle"]
    assert len(bundle) == 1 and bundle[0]["dst"] == run[len("cluster:") :]
    assert len(bundle[0]["pairs"]) >= len(ranges) and bundle[0]["label"].endswith(" arrays")
    found = w.search("tanh")
    assert found["total"] == LAYERS and len(found["matches"]) == min(LAYERS, 200)
    hidden = found["matches"][150]
    assert hidden["box"].startswith("cluster:")
    w.reveal(hidden["id"])
    assert hidden["id"] in w.view["nodes"]
    again = {x["id"]: x["box"] for x in w.found["matches"]}
    assert again[hidden["id"]] == hidden["id"]  # the matches follow the new view
    # Closing the outer run closes the runs and programs opened inside it.
    held = explorer.holders(hidden["id"])
    assert len(held) >= 3 and set(held) <= set(w.opened)
    assert held[0] == run[len("cluster:") :]
    w.toggle(held[1])
    assert not set(held[1:]) & set(w.opened) and held[0] in w.opened


def small(x, w):
    h = jax.jit(lambda a: jnp.tanh(a @ w))(x)
    return jnp.sum(jnp.sin(h) ** 2)


def test_views_keep_names_roles_and_values_of_the_graph_they_came_from():
    x, w = jnp.ones((4, 3)), jnp.full((3, 2), 0.5)
    g = jaxlab.jaxpr_graph(small, x, w, grad=True, values=True)
    (jit,) = [n for n in g.nodes if n.kind == m.COLLAPSED and n.phase == m.FORWARD] or [
        c for c in g.clusters if c.primitive == "jit" and c.parent is None
    ][:1]
    view = g.rebuild(frozenset({jit.id}))
    assert view.rebuild is g.rebuild
    labels = {n.id: n.label for n in view.nodes}
    assert labels["in0"] == "x" and labels["in1"] == "w"
    assert view.node("in1").role == m.FIXED
    assert any(n.role == m.SEED and n.label == "∂small/∂small = 1" for n in view.nodes)
    (tanh,) = [n for n in view.equations if n.primitive == "tanh"]
    assert tanh.cluster == jit.id
    assert tanh.value is not None
    assert tanh.value.mean == pytest.approx(float(jnp.tanh(x @ w).mean()), rel=1e-6)


def test_a_graph_without_rebuild_is_explored_as_it_is():
    import dataclasses

    g = dataclasses.replace(
        jaxlab.jaxpr_graph(small, jnp.ones((4, 3)), jnp.ones((3, 2))), rebuild=None
    )
    w = GraphExplorer(g)
    assert set(w.view["nodes"]) >= {"in0", "in1"}
    assert [x["id"] for x in w.search("sin")["matches"]] == [
        n.id for n in g.equations if n.primitive == "sin"
    ]


def test_explorer_holders_of_cond_branches_include_the_branch():
    def f(x):
        return jax.lax.cond(x.sum() > 0, lambda a: jnp.sin(a), lambda a: jnp.cos(a), x)

    g = jaxlab.jaxpr_graph(f, jnp.ones(3), explore=True)
    explorer = g.rebuild.explorer
    (cos,) = explorer.search("cos")
    cond = cos.split("/")[0]
    assert explorer.holders(cos) == [cond, f"{cond}/0"]
    w = GraphExplorer(g)
    w.reveal(cos)
    assert cos in w.view["nodes"] and f"{cond}/0" in w.opened


def test_an_equinox_model_with_a_scan_opens_to_every_equation():
    eqx = pytest.importorskip("equinox")

    model = eqx.nn.MLP(3, 2, width_size=4, depth=3, key=jax.random.key(0))

    def loss(model, xs):
        def step(c, x):
            return c + jnp.sum(model(x) ** 2), None

        return jax.lax.scan(step, 0.0, xs)[0]

    g = jaxlab.jaxpr_graph(loss, model, jnp.ones((5, 3)), grad=True, explore=True)
    explorer = g.rebuild.explorer
    view = g.rebuild(frozenset(explorer.openable()))
    # Programs with several bodies count once, as their equation: not each branch.
    owners = {c.id for c in view.clusters} & explorer.nested
    assert len(view.equations) + len(owners) == g.n_equations
    assert any(c.primitive == "scan" for c in view.clusters)
    dots = explorer.search("dot_general")
    assert dots and all(d in {n.id for n in view.nodes} for d in dots)
    inside = [d for d in dots if "/" in d]  # the MLP's matmuls inside the scan's body
    assert inside
    w = GraphExplorer(g)
    w.reveal(inside[-1])
    assert inside[-1] in w.view["nodes"]
    assert set(explorer.holders(inside[-1])) <= set(w.opened)


# A relayout that fails leaves the explorer as it was (issue 22).


def _nested_explorer():
    g = jaxlab.jaxpr_graph(small, jnp.ones((4, 3)), jnp.ones((3, 2)), explore=True)
    w = GraphExplorer(g)
    box = next(k[len("cluster:") :] for k in w.view["nodes"] if k.startswith("cluster:"))
    return w, box


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError, KeyError])
def test_a_relayout_that_fails_restores_the_last_good_view(monkeypatch, failure):
    from jaxlab.widgets import graph_explorer

    w, box = _nested_explorer()
    try:
        view, opened, drawn = w.view, list(w.opened), w.drawn
        calls = []

        def interrupted(*args, **kwargs):
            calls.append(args)
            raise failure("dot was stopped")

        monkeypatch.setattr(graph_explorer, "lay_out", interrupted)
        if failure is KeyboardInterrupt:
            with pytest.raises(KeyboardInterrupt):
                w.toggle(box)
        else:
            w.toggle(box)
            assert w.error  # said in the widget, not a traceback into the output
        assert len(calls) == 1  # the restore lays out nothing
        assert w.opened == opened and w.view == view and w.drawn is drawn
        monkeypatch.undo()
        w.toggle(box)  # the next click opens the box, as the drawing says it will
        assert w.opened == [box] and f"cluster:{box}" not in w.view["nodes"]
        assert box in w.view["frames"] and w.error == ""
    finally:
        w.close()


def test_malformed_dot_output_is_a_graphviz_failure():
    from jaxlab.widgets.graph_dot import parse_plain

    good = "graph 1 2.0 1.0\nnode n0 1.0 0.5 0.8 0.4 x solid box black lightgrey\nstop\n"
    (laid,) = parse_plain(good, 1)
    assert laid["width"] == 144.0 and laid["nodes"]["0"] == [43.2, 21.6, 57.6, 28.8]
    for text in (
        "graph 1 2.0\nstop\n",  # too few fields
        "graph 1 2.0 1.0\nnode n0 1.0 nan?\nstop\n",
        "graph 1 2.0 1.0\nedge n0 n1 4 1 2 3\nstop\n",  # fewer points than it says
        "node n0 1 1 1 1\nstop\n",  # before any graph
        "Segmentation fault\n",
    ):
        with pytest.raises(RuntimeError, match="dot"):
            parse_plain(text, 1)


def test_an_explorer_holds_the_layouts_of_what_it_shows_not_every_view_it_showed():
    w = GraphExplorer(big_graph_for_cache())
    try:
        boxes = [k[len("cluster:") :] for k in w.view["nodes"] if k.startswith("cluster:")]
        sizes = []
        for b in boxes:
            w.toggle(b)
            sizes.append(len(w._layouts))
            w.toggle(b)
        # The box's own layout, its parent's (open and closed) and the previous view's.
        assert max(sizes) <= 4, sizes
    finally:
        w.close()


def big_graph_for_cache():
    params = params_for(40)
    return jaxlab.jaxpr_graph(deep, params, jnp.ones((4, 8)), explore=True)
