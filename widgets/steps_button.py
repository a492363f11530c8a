"""The "play the chain rule" button under ``%grad --graph``'s explorer (issue 36).

One click walks the same call step by step (``%grad --steps``) and shows the
:class:`StepsPlayer` below the button; the walk is made on the click, not before, so the
graph costs nothing more when the button is not used::

    box = steps_button(lambda: steps_for_call(f, (x, w), {}, wrt="x,w"))
    box.children[0].click()        # the button; children[1] then holds the player

A walk that fails says why under the button, once, and the button stays for another try.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets

LABEL = "▶ play the chain rule, step by step"


def steps_button(make_steps: Callable[[], Any]) -> ipywidgets.VBox:
    """A button and, once clicked, the StepsPlayer of ``make_steps()`` below it."""
    from .steps_player import StepsPlayer

    button = ipywidgets.Button(
        description=LABEL,
        tooltip="the gradient's equations one at a time, in JAX's order (%grad --steps)",
        layout=ipywidgets.Layout(width="auto"),
    )
    out = ipywidgets.Output()
    box = ipywidgets.VBox([button, out])

    def play(_: Any) -> None:
        button.disabled = True
        out.clear_output()
        try:
            player = StepsPlayer(make_steps())
        except Exception as e:  # the walk's own words: %grad --steps says the same
            out.append_stdout(f"%grad --steps could not walk this call: {e}\n")
            button.disabled = False
            return
        box.player = player  # for scripts and tests
        # The player's view, with its twin (the step list as text and the drawing) for a
        # saved or exported notebook; written as the output itself, needing no formatter.
        twin = player.static_bundle()
        view = {"model_id": player.model_id, "version_major": 2, "version_minor": 0}
        data = {**twin, "application/vnd.jupyter.widget-view+json": view}
        out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
        button.description = "chain rule shown below"

    button.on_click(play)
    return box
