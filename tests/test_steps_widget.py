"""StepsPlayer in Python (issue 36): the frame synced once, ``current`` both ways, the
static twin (the step shown, the drawing marked, the whole walk as text) and escaping.

The frames here are written by hand in the shape of ``GradSteps.frame()``, with a drawing
as Graphviz writes it (a node is ``<g class="node">`` with its ``<title>``, its shapes
inside a tooltip's ``<a>``); the steps played on a real program are in the last tests.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from jaxlab.widgets import StepsPlayer

SVG_NS = "{http://www.w3.org/2000/svg}"


def _node(name: str, label: str) -> str:
    return (
        f'<g id="node_{name}" class="node"><title>{name}</title>'
        f'<g id="a_node_{name}"><a xlink:title="{label}">'
        f'<path fill="#dbe8fb" stroke="#3b6fb6" d="M0,0L10,0L10,10Z"/>'
        f'<text x="1" y="5">{label}</text></a></g></g>'
    )


def _edge(a: str, b: str) -> str:
    return f'<g class="edge"><title>{a}&#45;&gt;{b}</title><path d="M0,0L5,5"/></g>'


SVG = (
    '<svg width="100pt" height="100pt" viewBox="0 0 100 100" '
    'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
    '<g id="graph0" class="graph"><title>jaxpr</title>'
    + _node("e0", "sin x")
    + _node("e1", "y · x")
    + _node("e2", "ȳ · cos(x)")
    + _node("e3", "x̄ summed")
    + _edge("e0", "e1")
    + _edge("e2", "e3")
    + _edge("e1", "e3")
    + "</g></svg>"
)


def _step(i: int, kind: str, node: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "index": i,
        "kind": kind,
        "equation": f"eq{i}",
        "rule": f"rule{i}",
        "text": text,
        "fanout": None,
        "node": node,
        "box": [],
        "values_in": ["0.5"],
        "values_out": ["0.4794"],
        "cotangent_in": ["1"] if kind == "backward" else [],
        "cotangent_out": ["0.8776"] if kind == "backward" else [],
        **extra,
    }


def frame(**extra: Any) -> dict[str, Any]:
    steps = [
        _step(0, "forward", "e0", "y = sin(0.5) = 0.4794"),
        _step(1, "forward", "e1", "z = 0.4794 · 0.5 = 0.2397"),
        _step(2, "backward", "e2", "x̄ = 1 · cos(0.5) = 0.8776"),
        _step(3, "backward", "e3", "x̄ = 0.8776 + 0.4794 = 1.357",
              fanout="x̄ = 0.8776 + 0.4794 = 1.357"),
    ]  # fmt: skip
    return {
        "function": "f",
        "mode": "reverse",
        "svg": SVG,
        "steps": steps,
        "targets": {"∂f/∂x": 3},
        "current": 0,
        "passes_note": "1 input → 1 forward pass, 1 output → 1 reverse pass",
        "notes": [],
        **extra,
    }


def _from_page(widget: StepsPlayer, state: dict[str, Any]) -> None:
    """A state update as the front end sends it: through the comm, not a Python setattr."""
    msg = {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}}
    widget._handle_msg({**msg, "buffers": []})


def _markup(text: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The elements and attributes a browser would make of ``text`` (not its words)."""
    from html.parser import HTMLParser

    tags: set[str] = set()
    attrs: list[tuple[str, str]] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag: str, found: list[tuple[str, str | None]]) -> None:
            tags.add(tag)
            attrs.extend((k, v or "") for k, v in found)

    Reader().feed(text)
    return tags, attrs


def _twin_svg(html_text: str) -> ET.Element:
    start = html_text.index("<svg")
    end = html_text.index("</svg>") + len("</svg>")
    return ET.fromstring(html_text[start:end])


def _marks(svg: ET.Element) -> dict[str, str]:
    """Each node's mark in the twin's drawing: its shapes' stroke, or "faint"."""
    marks = {}
    for g in svg.iter(f"{SVG_NS}g"):
        title = g.find(f"{SVG_NS}title")
        if "node" not in (g.get("class") or "").split() or title is None:
            continue
        path = next(g.iter(f"{SVG_NS}path"))
        marks[title.text or ""] = "faint" if g.get("opacity") == "0.3" else path.get("stroke", "")
    return marks


def test_the_twin_shows_the_step_it_was_left_on_the_drawing_marked_and_every_step():
    player = StepsPlayer(frame(), current=2)
    try:
        bundle = player.static_bundle()
        html_text, text = bundle["text/html"], bundle["text/plain"]
        assert "Step 3 of 4 · backward pass" in html_text
        assert "Step 3 of 4 · backward pass: eq2" in text
        for step in frame()["steps"]:  # the whole walk, readable without a kernel
            assert step["text"] in html_text and step["text"] in text
        marked = [line for line in text.splitlines() if line.startswith("▶")]
        assert marked == ["▶   3. backward x̄ = 1 · cos(0.5) = 0.8776"]
        assert "arriving: 1" in text and "leaving: 0.8776" in text  # a backward step's ȳ
        # done forward nodes blue, this step orange, the step still to come faint
        assert _marks(_twin_svg(html_text)) == {
            "e0": "#3b6fb6",
            "e1": "#3b6fb6",
            "e2": "#e08600",
            "e3": "faint",
        }
        assert "fan-out: x̄ = 0.8776 + 0.4794 = 1.357" in text
    finally:
        player.close()


def test_current_syncs_both_ways_and_the_twin_follows():
    player = StepsPlayer(frame())
    try:
        assert player.current == 0 and "current" in player.keys and "frame" in player.keys
        _from_page(player, {"current": 3})  # the page stepped to the last step
        assert player.current == 3 and player.step["node"] == "e3"
        assert "Step 4 of 4" in player.static_bundle()["text/html"]
        assert _marks(_twin_svg(player.static_bundle()["text/html"]))["e3"] == "#e08600"
        sent: list[Any] = []
        player.send_state = lambda key=None: sent.append(key)
        player.go(1)  # the kernel moves it: the page is sent the new index
        assert player.current == 1 and player.get_state("current") == {"current": 1}
        assert sent and all("current" in (k if isinstance(k, list | set) else [k]) for k in sent)
        player.go(-1)
        assert player.current == 3
    finally:
        player.close()


def test_the_page_cannot_write_the_frame_nor_a_step_that_is_not_there():
    player = StepsPlayer(frame(), current=1)
    try:
        _from_page(player, {"current": 4})  # one past the last step
        _from_page(player, {"current": -1})
        _from_page(player, {"current": "2"})
        _from_page(player, {"frame": frame(function="forged")})
        assert player.current == 1 and player.frame["function"] == "f"
        with pytest.raises(Exception, match="numbered 0 to 3"):
            player.current = 9
    finally:
        player.close()


def test_a_hostile_function_name_step_text_and_drawing_are_escaped():
    hostile = '</b><script>alert("f")</script><img src=x onerror=alert(1)>'
    svg = SVG.replace(
        "</g></svg>",
        "<script>alert(2)</script><foreignObject><div>x</div></foreignObject>"
        '<a href="javascript:alert(3)"><rect onclick="alert(4)" width="1" height="1" '
        'style="fill:url(https://example.com/x)"/></a>'
        '<image href="https://example.com/track.png"/></g></svg>',
    ).replace('<g id="graph0"', '<g id="graph0" onload="alert(5)"')
    player = StepsPlayer(
        frame(function=hostile, svg=svg, notes=[hostile]),
        current=0,
    )
    player.frame["steps"][0]["text"] = hostile
    try:
        html_text = player.static_bundle()["text/html"]
        tags, attrs = _markup(html_text)
        assert not tags & {"script", "img", "foreignobject", "image", "a", "iframe"}, tags
        assert not any(name.startswith("on") or name == "href" for name, _ in attrs)
        assert not any("javascript:" in v or "example.com" in v for _, v in attrs)
        assert "alert" not in "".join(v for _, v in attrs)
        assert "&lt;/b&gt;&lt;script&gt;alert(&quot;f&quot;)&lt;/script&gt;" in html_text
        assert "<rect" in html_text  # a link's drawing is kept, the link is not
    finally:
        player.close()


def test_bad_input_is_refused_with_what_to_give():
    with pytest.raises(TypeError, match="GradSteps"):
        StepsPlayer(42)
    with pytest.raises(ValueError, match="'steps' list"):
        StepsPlayer({"function": "f"})


def test_displayed_in_a_shell_it_is_a_live_view_and_its_twin(ip):
    outputs: list[dict[str, Any]] = []
    publisher = ip.display_pub
    original = publisher.publish

    def capture(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        outputs.append(data)

    publisher.publish = capture
    try:
        player = StepsPlayer(frame(), current=1)
        player._ipython_display_()
    finally:
        publisher.publish = original
    try:
        view, twin = outputs
        assert "application/vnd.jupyter.widget-view+json" in view
        assert "Step 2 of 4" in twin["text/html"] and "Step 2 of 4" in twin["text/plain"]
    finally:
        player.close()


def test_a_real_walk_its_twin_and_forward_mode():
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxlab

    def f(x, w):
        return jnp.sin(x * w) * x  # x used twice: a fan-out step

    walk = jaxlab.grad_steps(f, 0.5, 1.2, argnums=(0, 1))
    target = walk.targets["∂f/∂x"]
    player = StepsPlayer(walk, current=target)
    try:
        assert player.steps is walk and player.step["node"] == walk.steps[target].node
        text = player.static_bundle()["text/plain"]
        assert f"Step {target + 1} of {len(walk)}" in text
        assert all(s.text in text for s in walk.steps)
        assert walk.steps[target].fanout and f"fan-out: {walk.steps[target].fanout}" in text
        np.testing.assert_allclose(walk.adjoints["x"], jax.grad(f)(0.5, 1.2), rtol=1e-6)
        html_text = player.static_bundle()["text/html"]
        # the drawing holds every step's node, the current one marked
        marks = _marks(_twin_svg(html_text))
        assert {s.node for s in walk.steps} <= set(marks)
        assert marks[walk.steps[target].node] == "#e08600"
    finally:
        player.close()
    forward = jaxlab.grad_steps(f, 0.5, 1.2, argnums=(0, 1), mode="forward")
    player = StepsPlayer(forward, current=len(forward) - 1)
    try:
        text = player.static_bundle()["text/plain"]
        assert "forward mode (tangents)" in text and forward.passes_note in text
        kinds = {s.kind for s in forward.steps}
        assert "tangent" in kinds and "backward" not in kinds
        marks = _marks(_twin_svg(player.static_bundle()["text/html"]))
        done = {marks[s.node] for s in forward.steps[:-1] if s.node != forward.steps[-1].node}
        assert done <= {"#3b6fb6", "#1a7f37"} and "#1a7f37" in done  # tangents green
    finally:
        player.close()


def test_the_page_chooses_a_long_scans_iteration_and_the_kernel_steps_it_again():
    import jax
    import jax.numpy as jnp

    import jaxlab

    def f(x):
        def body(c, _):
            return jnp.sin(c) * 1.1, c

        h, _ = jax.lax.scan(body, x, None, length=12)
        return h

    walk = jaxlab.grad_steps(f, 0.7)
    player = StepsPlayer(walk)
    try:
        assert player.iteration == -1 and [x["shown"] for x in player.frame["loops"]] == [
            [0, 1, 2, 3, 4],
            [11, 10, 9, 8, 7],
        ]
        _from_page(player, {"iteration": 9})  # the page's iteration control
        assert player.iteration == 9 and player.steps is not walk
        steps = player.frame["steps"]
        assert {s["iteration"] for s in steps} == {9, None}
        assert [x["shown"] for x in player.frame["loops"]] == [[9], [9]]
        assert steps[player.current]["iteration"] == 9  # opened on the iteration chosen
        assert player.current == min(i for i, s in enumerate(steps) if s["iteration"] == 9)
        text = player.static_bundle()["text/plain"]
        assert "(9)" in text and all(s["text"] in text for s in steps)
        _from_page(player, {"iteration": 12})  # past the scan: refused, nothing changes
        _from_page(player, {"iteration": "3"})
        assert player.iteration == 9 and len(player.frame["steps"]) == len(steps)
        _from_page(player, {"iteration": -1})  # back to the first iterations
        assert player.frame["loops"][0]["shown"] == [0, 1, 2, 3, 4]
    finally:
        player.close()
    plain = StepsPlayer(jaxlab.grad_steps(lambda x: jnp.sin(x) * x, 0.5))
    try:
        with pytest.raises(Exception, match="no scan"):
            plain.iteration = 2
    finally:
        plain.close()
