"""jaxpr → Graph model → DOT/SVG or text/HTML (being written)."""

from .model import Graph as Graph
from .build import jaxpr_graph as jaxpr_graph
