"""``StepsPlayer``: the chain rule played one equation at a time (``%grad --steps``).

::

    steps = jaxlab.grad_steps(f, x, w)
    StepsPlayer(steps)             # or StepsPlayer(steps.frame()), a frame dict
    StepsPlayer(steps, current=4)  # opened on the fifth step (of steps.steps)

The frame (``GradSteps.frame()``: the drawing, every step's words and numbers, the targets
"∂f/∂w" -> step) travels to the page once, in the ``frame`` trait; stepping is the page's
own (⏮ ◀ ▶ ⏭, play at a speed, arrow keys, a slider, jump to a target; a box, a jit or
named scope or scan iteration, starts closed as one step and opens into its steps), so a
step costs no kernel round trip. The page writes back ``current``, the step shown (a
quarter second after stepping settles), so a saved notebook, its static twin and the docs
site show the step the view was left on; and ``iteration``, a long scan's iteration
chosen, for which the kernel steps the walk again (``GradSteps.again``) and sends the new
frame. The twin holds the current step's words, the drawing
with its nodes marked (done, this step, to come) and the whole walk as text: readable
with no kernel and no script.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

import traitlets

from ._base import JaxlabWidget

SVG_NS = "http://www.w3.org/2000/svg"
PASS_WORDS = {
    "forward": "forward pass",
    "backward": "backward pass",
    "tangent": "tangent (forward mode)",
}
# What the twin's drawing keeps (the view's allow-list, widgets/static/steps_player.js).
_ELEMENTS = {
    "svg", "g", "title", "desc", "path", "polygon", "polyline", "ellipse", "circle", "rect",
    "line", "text", "tspan",
}  # fmt: skip
_ATTRIBUTES = {
    "id", "class", "d", "points", "cx", "cy", "rx", "ry", "r", "x", "y", "x1", "y1", "x2", "y2",
    "dx", "dy", "width", "height", "viewBox", "transform", "fill", "stroke", "stroke-width",
    "stroke-dasharray", "stroke-opacity", "fill-opacity", "opacity", "font-family",
    "font-size", "font-weight", "font-style", "text-anchor", "text-decoration",
    "preserveAspectRatio",
}  # fmt: skip
_FETCHES = re.compile(r"url\s*\(|expression|javascript:", re.IGNORECASE)
# The twin's marks, as inline attributes (a twin has no CSS of its own).
_STATE_STYLE = {
    "current": {"stroke": "#e08600", "stroke-width": "4"},
    "done-forward": {"stroke": "#3b6fb6", "stroke-width": "2.5"},
    "done-backward": {"stroke": "#b63b3b", "stroke-width": "2.5"},
    "done-tangent": {"stroke": "#1a7f37", "stroke-width": "2.5"},
}
_SHAPES = {"polygon", "ellipse", "rect", "path", "circle"}

ET.register_namespace("", SVG_NS)


def _frame_of(steps: Any, current: int | None = None) -> dict[str, Any]:
    if isinstance(steps, Mapping):
        return dict(steps)
    frame = getattr(steps, "frame", None)
    if callable(frame):
        made = frame() if current is None else frame(current)
        if isinstance(made, Mapping):
            return dict(made)
    raise TypeError(
        f"StepsPlayer takes a GradSteps (jaxlab.grad_steps(f, x)) or its frame() dict, "
        f"not {type(steps).__name__}"
    )


class StepsPlayer(JaxlabWidget, static="steps_player"):
    """Plays a :class:`jaxlab.GradSteps` walk in the browser, one equation a step."""

    frame = traitlets.Dict().tag(sync=True)
    # the step shown: the page writes it (front_end), the kernel may set it too
    current = traitlets.Int(0).tag(sync=True, front_end=True)
    # the iteration stepped of the walk's long scans (-1: their first ones); the page's
    # iteration control writes it and the kernel steps the walk again there
    iteration = traitlets.Int(-1).tag(sync=True, front_end=True)

    def __init__(self, steps: Any, current: int | None = None, **kwargs: Any) -> None:
        frame = _frame_of(steps, current)
        if not isinstance(frame.get("steps"), list):
            raise ValueError("a steps frame needs a 'steps' list (GradSteps.frame() makes one)")
        self._steps = None if isinstance(steps, Mapping) else steps
        # ``current``: a step of the GradSteps (its frame says where it is played), or of
        # a frame dict's steps
        n = len(getattr(self._steps, "steps", ()))
        if self._steps is not None and current is not None and not 0 <= current < n:
            raise traitlets.TraitError(f"current={current}: the steps are numbered 0 to {n - 1}")
        start = frame.get("current", 0) if current is None or self._steps else current
        super().__init__(frame=frame, **kwargs)
        self.current = start

    @traitlets.validate("current")
    def _valid_current(self, proposal: dict[str, Any]) -> int:
        value = proposal["value"]
        n = len(self.frame.get("steps", []))
        if not 0 <= value < max(n, 1):
            raise traitlets.TraitError(f"current={value}: the steps are numbered 0 to {n - 1}")
        return int(value)

    @traitlets.validate("iteration")
    def _valid_iteration(self, proposal: dict[str, Any]) -> int:
        value = int(proposal["value"])
        longest = max((int(loop.get("length", 0)) for loop in self._loops()), default=0)
        if not -1 <= value < longest:
            raise traitlets.TraitError(
                f"iteration={value}: this walk's scans run iterations 0 to {longest - 1}"
                if longest
                else f"iteration={value}: this walk has no scan past its stepped iterations"
            )
        return value

    def _loops(self) -> list[dict[str, Any]]:
        loops = self.frame.get("loops") if isinstance(self.frame, dict) else None
        return [x for x in loops if isinstance(x, dict)] if isinstance(loops, list) else []

    @traitlets.observe("iteration")
    def _step_again(self, change: dict[str, Any]) -> None:
        """Another iteration chosen: the walk stepped again there, the player opened on
        that iteration's first step."""
        again = getattr(self._steps, "again", None)
        if again is None:
            return
        k = None if change["new"] < 0 else int(change["new"])
        walk = again(k)
        self._steps = walk
        frame = walk.frame()
        played = frame["steps"]
        first = next((i for i, s in enumerate(played) if k is not None and s["iteration"] == k), 0)
        with self.hold_sync():
            self.frame = frame
            self.current = first

    @property
    def steps(self) -> Any:
        """The :class:`jaxlab.GradSteps` played (None when made from a frame dict)."""
        return self._steps

    @property
    def step(self) -> dict[str, Any]:
        """The step shown, as the frame holds it."""
        return dict(self.frame["steps"][self.current]) if self.frame["steps"] else {}

    def go(self, index: int) -> None:
        """Show step ``index`` of the steps played (``frame["steps"]``, counted from 0;
        negative counts from the end)."""
        n = len(self.frame["steps"])
        self.current = index + n if index < 0 else index

    # ---------------------------------------------------------------- the static twin
    def _static_html(self) -> str:
        return steps_twin_html(self.frame, self.current)

    def _static_text(self) -> str:
        return steps_twin_text(self.frame, self.current)


def _s(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _head(frame: Mapping[str, Any]) -> str:
    forward = frame.get("mode") == "forward"
    mode = "forward mode (tangents)" if forward else "reverse mode (adjoints)"
    note = f" · {_s(frame.get('passes_note'))}" if frame.get("passes_note") else ""
    return f"Chain rule of {_s(frame.get('function')) or 'f'} · {mode}{note}"


def _step_lines(step: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, words) of one step beyond its equation and text."""
    lines = []
    if step.get("rule"):
        lines.append(("rule", _s(step["rule"])))
    if step.get("fanout"):
        lines.append(("fan-out: contributions add", _s(step["fanout"])))
    backward = step.get("kind") == "backward"
    for key, label in (
        (("cotangent_in", "arriving"), ("cotangent_out", "leaving"))
        if backward
        else (("values_in", "in"), ("values_out", "out"))
    ):
        values = step.get(key) or []
        if values:
            lines.append((label, ", ".join(_s(v) for v in values)))
    return lines


def _list_line(i: int, step: Mapping[str, Any]) -> str:
    kind = _s(step.get("kind")) or "forward"
    words = _s(step.get("text")) or _s(step.get("equation"))
    fan = f"   [fan-out: {_s(step['fanout'])}]" if step.get("fanout") else ""
    return f"{i + 1:>4}. {kind:<8} {words}{fan}"


def steps_twin_text(frame: Mapping[str, Any], current: int) -> str:
    """The whole walk as text, the current step marked ``▶`` and told in full first."""
    steps = list(frame.get("steps") or [])
    lines = [_head(frame)]
    if not steps:
        return "\n".join([*lines, "This program has no steps to play."])
    step = steps[current]
    kind = PASS_WORDS.get(_s(step.get("kind")), "forward pass")
    lines.append(f"Step {current + 1} of {len(steps)} · {kind}: {_s(step.get('equation'))}")
    if step.get("text"):
        lines.append(f"  {_s(step['text'])}")
    lines += [f"  {label}: {words}" for label, words in _step_lines(step)]
    lines.append("All steps:")
    for i, s in enumerate(steps):
        lines.append(("▶" if i == current else " ") + _list_line(i, s))
    targets = frame.get("targets") or {}
    if targets:
        lines.append(
            "Targets: " + ", ".join(f"{_s(k)} at step {int(v) + 1}" for k, v in targets.items())
        )
    lines += [_s(n) for n in frame.get("notes") or []]
    return "\n".join(lines)


def steps_twin_html(frame: Mapping[str, Any], current: int) -> str:
    """The twin: the current step's words, the drawing marked, the whole walk as a list."""
    esc = html.escape
    steps = list(frame.get("steps") or [])
    parts = [f"<div class='jaxlab-steps' style='font-size:13px'><p><b>{esc(_head(frame))}</b></p>"]
    if not steps:
        return parts[0] + "<p>This program has no steps to play.</p></div>"
    step = steps[current]
    colour = {"backward": "#b63b3b", "tangent": "#1a7f37"}.get(_s(step.get("kind")), "#3b6fb6")
    kind = PASS_WORDS.get(_s(step.get("kind")), "forward pass")
    parts.append(
        f"<div class='jaxlab-steps-current' style='border-left:4px solid {colour};"
        f"padding:4px 8px;margin:4px 0'>"
        f"<div style='font-size:13px'><b>Step {current + 1} of {len(steps)} · {kind}</b></div>"
        f"<div style='font-size:16px;font-family:monospace'>{esc(_s(step.get('equation')))}</div>"
    )
    if step.get("text"):
        parts.append(
            f"<div style='font-size:16px;font-family:monospace;font-weight:600'>"
            f"{esc(_s(step['text']))}</div>"
        )
    for label, words in _step_lines(step):
        parts.append(
            f"<div style='font-size:14px'>{esc(label)}: "
            f"<span style='font-family:monospace'>{esc(words)}</span></div>"
        )
    parts.append("</div>")
    svg = marked_svg(_s(frame.get("svg")), steps, current)
    if svg:
        parts.append(
            "<div style='max-height:480px;overflow:auto;background:#fff;"
            f"border:1px solid #ccc'>{svg}</div>"
        )
    parts.append("<p style='margin:6px 0 2px'><b>All steps</b> (▶ the step shown):</p>")
    parts.append("<ol style='font-family:monospace;font-size:12px;margin:0'>")
    for i, s in enumerate(steps):
        words = esc(_s(s.get("text")) or _s(s.get("equation")))
        fan = f" <i>[fan-out: {esc(_s(s['fanout']))}]</i>" if s.get("fanout") else ""
        kind_word = esc(_s(s.get("kind")) or "forward")
        if i == current:
            parts.append(f"<li><b>▶ {kind_word}: {words}{fan}</b></li>")
        else:
            parts.append(f"<li>{kind_word}: {words}{fan}</li>")
    parts.append("</ol>")
    for note in frame.get("notes") or []:
        parts.append(f"<p>{esc(_s(note))}</p>")
    return "".join(parts) + "</div>"


def marked_svg(source: str, steps: list[Mapping[str, Any]], current: int) -> str:
    """The drawing for the twin: copied through the view's allow-list (no script, event
    attribute, link or fetch), each step's node marked done, current or to come; "" when
    there is no drawing or it cannot be read."""
    if not source:
        return ""
    try:
        root = ET.fromstring(source)
    except ET.ParseError:
        return ""
    if root.tag != f"{{{SVG_NS}}}svg":
        return ""
    _clean(root)
    # in its scrolling box at its own size: a page's max-width:100% (JupyterLab's) shrank
    # its 12 px text to 11.8 px beside the file browser
    root.set("style", "max-width:none")
    nodes: dict[str, ET.Element] = {}
    for g in root.iter(f"{{{SVG_NS}}}g"):
        title = g.find(f"{{{SVG_NS}}}title")
        if "node" in (g.get("class") or "").split() and title is not None and title.text:
            nodes.setdefault(title.text, g)
        if g.get("id"):
            nodes.setdefault(g.get("id", ""), g)
    states: dict[int, tuple[ET.Element, str]] = {}
    for i, step in enumerate(steps):
        node = nodes.get(_s(step.get("node")))
        if node is None:
            continue
        if i < current:
            state = f"done-{_s(step.get('kind')) or 'forward'}"
        elif i == current:
            state = "current"
        else:
            state = states.get(id(node), (node, "pending"))[1]
        states[id(node)] = (node, state)
    for node, state in states.values():
        if state == "pending":
            node.set("opacity", "0.3")
            continue
        for shape in node.iter():
            if shape.tag.rsplit("}", 1)[-1] in _SHAPES:
                shape.attrib.update(_STATE_STYLE.get(state, {}))
    for g in root.iter(f"{{{SVG_NS}}}g"):
        g.attrib.pop("id", None)  # Graphviz's ids repeat from one drawing to the next
    return ET.tostring(root, encoding="unicode")


def _clean(element: ET.Element) -> None:
    for at, child in reversed(list(enumerate(element))):
        tag = child.tag if isinstance(child.tag, str) else ""
        name = tag.rsplit("}", 1)[-1]
        if tag == f"{{{SVG_NS}}}a":  # a tooltip's link: its drawing stays, the link goes
            _clean(child)
            element.remove(child)
            for k, inner in enumerate(list(child)):
                element.insert(at + k, inner)
            continue
        if not tag.startswith(f"{{{SVG_NS}}}") or name not in _ELEMENTS:
            element.remove(child)
            continue
        _clean(child)
    for key in list(element.attrib):
        if key not in _ATTRIBUTES or _FETCHES.search(element.attrib[key]):
            del element.attrib[key]
