"""%grad --steps / --jvp in a real IPython shell, and grad_steps on programs we did not write."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.steps import GradSteps

SETUP = """
import jax.numpy as jnp
def f(x, w):
    y = jnp.sin(x * w)
    return y * x
x, w = 0.5, 1.2
def vec(x):
    return jnp.sin(x) * jnp.ones(3)
"""


@pytest.fixture
def shell(ip):
    ip.run_cell(SETUP)
    return ip


def _names(ip):
    return {k for k in ip.user_ns if not k.startswith("_i") and k not in ("_", "__", "___")}


def test_steps_magic_returns_the_walk(shell):
    s = shell.run_line_magic("grad", "-o --steps --wrt x,w f(x, w)")
    assert isinstance(s, GradSteps)
    gx, gw = jax.grad(lambda x, w: jnp.sin(x * w) * x, (0, 1))(0.5, 1.2)
    assert np.isclose(s.adjoints["x"], gx) and np.isclose(s.adjoints["w"], gw)
    assert set(s.targets) == {"∂f/∂x", "∂f/∂w"}


def test_jvp_magic_plays_forward_mode(shell):
    s = shell.run_line_magic("grad", "-o --steps --jvp f(x, w)")
    _, want = jax.jvp(lambda x: jnp.sin(x * 1.2) * x, (0.5,), (1.0,))
    assert s.mode == "forward" and np.isclose(s.tangents["ḟ"], want)


def test_steps_magic_displays_the_walk_in_a_terminal(shell):
    with capture_output() as captured:
        assert shell.run_line_magic("grad", "--steps f(x, w)") is None
    (shown,) = captured.outputs
    assert "x̄ = " in shown.data["text/plain"] and "<svg" in shown.data["text/html"]


def test_live_notebook_steps_magic_shows_the_player_on_the_walk(shell, monkeypatch):
    from jaxlab.magics import grad as magic
    from jaxlab.magics import jaxpr as jaxpr_magic
    from jaxlab.widgets import StepsPlayer

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)

    class Live:
        kernel = object()

    monkeypatch.setattr(jaxpr_magic, "get_ipython", lambda: Live())
    players = []
    try:
        assert shell.run_line_magic("grad", "--steps --wrt x,w f(x, w)") is None
        (player,) = shown
        players.append(player)
        assert isinstance(player, StepsPlayer)  # a widget, not the walk's text
        walk = player.steps
        assert isinstance(walk, GradSteps) and walk.mode == "reverse"
        gx, gw = jax.grad(lambda x, w: jnp.sin(x * w) * x, (0, 1))(0.5, 1.2)
        assert np.isclose(walk.adjoints["x"], gx) and np.isclose(walk.adjoints["w"], gw)
        # the widget's synced state: the whole walk's frame, opened on the first step
        state = player.get_state()
        assert state["current"] == 0 and state["frame"]["mode"] == "reverse"
        assert [s["text"] for s in state["frame"]["steps"]] == [s.text for s in walk.steps]
        assert state["frame"]["targets"] == {"∂f/∂x": walk.targets["∂f/∂x"],
                                              "∂f/∂w": walk.targets["∂f/∂w"]}  # fmt: skip
        twin = player.static_bundle()["text/plain"]
        assert f"Step 1 of {len(walk)}" in twin and all(s.text in twin for s in walk.steps)
        # forward mode too
        shown.clear()
        shell.run_line_magic("grad", "--steps --jvp f(x, w)")
        (player,) = shown
        players.append(player)
        assert isinstance(player, StepsPlayer) and player.frame["mode"] == "forward"
        assert {s["kind"] for s in player.frame["steps"]} <= {"forward", "tangent"}
        # -o returns the walk itself, displays nothing
        shown.clear()
        assert isinstance(shell.run_line_magic("grad", "-o --steps f(x, w)"), GradSteps)
        assert shown == []
    finally:
        for p in players:
            p.close()


def test_without_a_widget_front_end_the_magic_shows_the_walk(shell, monkeypatch):
    from jaxlab.magics import grad as magic

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)
    shell.run_line_magic("grad", "--steps f(x, w)")  # a terminal: no kernel, no widget
    (walk,) = shown
    assert isinstance(walk, GradSteps) and "x̄ = " in walk.text()


@pytest.mark.parametrize(
    "line, words",
    [
        ("--steps --check f(x, w)", "--check"),
        ("--steps --split f(x, w)", "--split"),
        ("--jvp f(x, w)", "--jvp"),
        ("--steps --wrt z f(x, w)", "no argument `z`"),
        ("--steps nothing(x)", "nothing"),
        ("--steps vec(x)", "scalar"),
        ("--steps --jvp --mode fwd f(x, w)", "--mode"),
    ],
)
def test_bad_input_is_a_usage_error_and_changes_nothing(shell, line, words):
    before = _names(shell)
    with pytest.raises(UsageError, match=words):
        shell.run_line_magic("grad", line)
    assert _names(shell) == before


def test_steps_in_a_cell_magic_is_refused(shell):
    with pytest.raises(UsageError, match="--steps"):
        shell.run_cell_magic("grad", "--steps", "f(x, w)")


# ---------------------------------------------------------------- programs we did not write


def _close(a, b):
    return np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def _plays(walk):
    """The walk in the player: its frame JSON-able, every step played in the twin's text,
    every target a step played; returns the frame."""
    import json

    from jaxlab.widgets import StepsPlayer

    frame = json.loads(json.dumps(walk.frame()))
    player = StepsPlayer(walk)
    try:
        text = player.static_bundle()["text/plain"]
        assert all(s["text"] in text for s in frame["steps"])
        assert frame["targets"] and all(
            0 <= i < len(frame["steps"]) for i in frame["targets"].values()
        )
    finally:
        player.close()
    return frame


def test_equinox_mlp_loss():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 1, width_size=4, depth=2, key=jax.random.key(0))
    x = jnp.ones((3,))

    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    s = jaxlab.grad_steps(loss, model, x)
    want = jax.tree_util.tree_leaves(eqx.filter_grad(loss)(model, x))
    got = list(s.adjoints.values())
    assert len(got) == len(want) and all(_close(a, b) for a, b in zip(got, want, strict=True))
    assert sum(st.kind == "backward" for st in s.steps) > 5
    frame = _plays(s)
    assert any(b["name"].startswith("scope eqx.nn.MLP") for b in frame["boxes"])


@pytest.mark.slow  # a diffrax solve: 10-14 s under load; once per `make test` (Python 3.12)
def test_diffrax_solve_first_steps():
    diffrax = pytest.importorskip("diffrax")

    def solve(y0):
        term = diffrax.ODETerm(lambda t, y, args: -y)
        sol = diffrax.diffeqsolve(
            term, diffrax.Euler(), t0=0.0, t1=0.3, dt0=0.1, y0=y0, max_steps=4
        )
        return jnp.sum(sol.ys)

    y0 = jnp.array([1.0, 2.0])
    s = jaxlab.grad_steps(solve, y0)
    assert _close(s.adjoints["y0"], jax.grad(solve)(y0))
    assert s.steps[0].kind == "forward" and any(st.kind == "backward" for st in s.steps)
    # Over 2,000 equations: the solve is a box, closed first, whose first steps are the
    # solver's own first equations, with their numbers.
    assert s.n_equations > 2000
    frame = _plays(s)
    (first, *_) = frame["boxes"]
    assert first["first"] == 0 and first["name"].startswith("jit diffeqsolve")
    played = frame["steps"][: first["last"] + 1]
    assert len(played) > 100 and all(x["kind"] == "forward" for x in played)
    assert all(x["box"][:1] == ["jit diffeqsolve"] for x in played[:20])
    assert all(x["values_out"] and "?" not in x["values_out"] for x in played[:20])


def test_flax_nnx_layer():
    nnx = pytest.importorskip("flax.nnx")
    layer = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    x = jnp.ones((4, 3))
    graphdef, params = nnx.split(layer)

    def loss(params, x):
        return jnp.mean(nnx.merge(graphdef, params)(x) ** 2)

    s = jaxlab.grad_steps(loss, params, x)
    want = jax.tree_util.tree_leaves(jax.grad(loss)(params, x))
    got = list(s.adjoints.values())
    assert len(got) == len(want) and all(_close(a, b) for a, b in zip(got, want, strict=True))
    assert any(st.primitive == "dot_general" and st.kind == "backward" for st in s.steps)
    # the layer is a module box, in both passes: closed, one step each
    runs = [
        (s.steps[a].kind, s.steps[a : b + 1]) for name, a, b in s.boxes if name == "module Linear"
    ]
    assert [kind for kind, _ in runs] == ["forward", "backward"]
    assert all(any(st.primitive == "dot_general" for st in run) for _, run in runs)
    assert not any("module" in " ".join(st.box) for st in s.steps if st.primitive == "div")
    frame = _plays(s)
    assert [b["name"] for b in frame["boxes"]] == ["module Linear", "module Linear"]


def test_live_grad_graph_has_a_button_that_plays_the_same_call(shell, monkeypatch):
    """%grad --graph in a live notebook: the report, the explorer, and a button that,
    clicked, shows the StepsPlayer of the same call (the values of the magic's run)."""
    import ipywidgets

    from jaxlab.magics import grad as magic
    from jaxlab.magics import jaxpr as jaxpr_magic
    from jaxlab.widgets import GraphExplorer, StepsPlayer
    from jaxlab.widgets.steps_button import LABEL

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)

    class Live:
        kernel = object()

    monkeypatch.setattr(jaxpr_magic, "get_ipython", lambda: Live())
    made = []
    try:
        assert shell.run_line_magic("grad", "--graph --wrt x,w f(x, w)") is None
        _, explorer, box = shown
        made += [explorer, box]
        assert isinstance(explorer, GraphExplorer) and isinstance(box, ipywidgets.VBox)
        button, out = box.children
        assert button.description == LABEL and out.outputs == ()
        shell.run_cell("x = 2.0")  # the click plays the values the magic ran with
        button.click()
        player = box.player
        made.append(player)
        assert isinstance(player, StepsPlayer) and button.disabled
        gx, gw = jax.grad(lambda x, w: jnp.sin(x * w) * x, (0, 1))(0.5, 1.2)
        assert np.isclose(player.steps.adjoints["x"], gx)
        assert np.isclose(player.steps.adjoints["w"], gw)
        (view,) = out.outputs  # the player's view, and its twin for a saved notebook
        data = view["data"]
        assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == player.model_id
        assert data["text/plain"] == player.static_bundle()["text/plain"]
        assert "Step 1 of" in data["text/plain"]
        # -o, a %%grad cell and --static show no button
        shown.clear()
        shell.run_line_magic("grad", "--graph --static f(x, w)")
        assert len(shown) == 1
    finally:
        for w in made:
            w.close()


def test_the_button_says_why_a_walk_failed_and_stays(shell):
    from jaxlab.widgets.steps_button import steps_button

    def fails():
        raise ValueError("a tuple output: play it with forward mode")

    box = steps_button(fails)
    button, out = box.children
    button.click()
    (said,) = out.outputs
    assert "could not walk this call: a tuple output" in said["text"]
    assert not button.disabled and not hasattr(box, "player")
    box.close()


def test_the_button_evaluates_the_calls_arguments_once(shell, monkeypatch):
    """The magic's call is parsed once: an argument with a side effect runs once for the
    report, the explorer and the button together (the click plays the values it gave)."""
    from jaxlab.magics import grad as magic
    from jaxlab.magics import jaxpr as jaxpr_magic

    shown = []
    monkeypatch.setattr(magic, "display", shown.append)

    class Live:
        kernel = object()

    monkeypatch.setattr(jaxpr_magic, "get_ipython", lambda: Live())
    shell.run_cell("calls = []\ndef arg():\n    calls.append(1)\n    return 0.5")
    try:
        shell.run_line_magic("grad", "--graph f(arg(), w)")
        assert shell.user_ns["calls"] == [1]
        box = shown[-1]
        box.children[0].click()
        assert shell.user_ns["calls"] == [1]
        gx = jax.grad(lambda x: jnp.sin(x * 1.2) * x)(0.5)
        assert np.isclose(box.player.steps.adjoints["x"], gx)
    finally:
        for w in shown[1:]:
            w.close()
        if hasattr(shown[-1], "player"):
            shown[-1].player.close()
