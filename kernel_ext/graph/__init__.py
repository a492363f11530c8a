"""jaxpr → Graph model → DOT/SVG or text/HTML."""

from .build import jaxpr_graph as jaxpr_graph
from .model import Graph as Graph
