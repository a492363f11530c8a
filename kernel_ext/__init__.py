"""jaxlab: a Jupyter laboratory for differentiable computing on JAX.

``%load_ext jaxlab`` adds the magics; every magic has a plain-Python twin here::

    import jaxlab
    g = jaxlab.jaxpr_graph(f, x)       # the jaxpr as a Graph model
    g.to_svg()

Importing this package imports no IPython, graphviz, matplotlib or widget code.
"""

from typing import Any

from ._warning import JaxlabWarning as JaxlabWarning
from .autodiff import GradReport as GradReport
from .autodiff import grad_report as grad_report
from .cell_jit import CellRun as CellRun
from .cell_jit import jit_cell as jit_cell
from .compile_log import CompileEvent as CompileEvent
from .compile_log import CompileLog as CompileLog
from .compile_log import compile_log as compile_log
from .devices import DeviceReport as DeviceReport
from .devices import devices as devices
from .explain import Explanation as Explanation
from .explain import explain as explain
from .explain_nans import NanCheck as NanCheck
from .explain_nans import debug_nans as debug_nans
from .grad_cell import CellGrad as CellGrad
from .grad_cell import grad_cell as grad_cell
from .grad_split import GradSplit as GradSplit
from .grad_split import grad_split as grad_split
from .graph import Graph as Graph
from .graph import jaxpr_graph as jaxpr_graph
from .jit_report import CompileReport as CompileReport
from .jit_report import compile_report as compile_report
from .lowered import LoweredText as LoweredText
from .lowered import hlo_text as hlo_text
from .lowered import stablehlo_text as stablehlo_text

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jaxlab``: register every magic and hook (idempotent)."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext jaxlab``: remove every magic, listener, hook and handler it added."""
    from .magics import unload

    unload(ipython)
