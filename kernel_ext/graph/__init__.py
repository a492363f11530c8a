"""jaxpr → Graph model → DOT/SVG or text/HTML.

Inside the package imports run one way: the model (``model``) at the bottom, what walks
and plans a program above it, the emitters, the explorer's views, then the entry
functions (``build``, ``gradient``, ``diff``); ``render`` and ``overlay`` draw the model
and import it. A Graph's ``to_svg()``, ``_repr_mimebundle_`` and ``overlay()`` use what
this module hands down (``model.served_by``), so the model never imports them.
"""

from . import model as _model
from . import overlay as _overlay
from . import render as _render
from .build import jaxpr_graph as jaxpr_graph
from .model import Graph as Graph

_model.served_by(
    _model.Above(
        to_dot=_render.graph_to_dot,
        to_svg=_render.graph_to_svg,
        mimebundle=_render.graph_mimebundle,
        overlay=_overlay.overlay,
        overlay_from_adjoints=_overlay.overlay_from_adjoints,
        ranked=_overlay.ranked,
    )
)
