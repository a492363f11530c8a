"""jaxlab: a Jupyter laboratory for differentiable computing on JAX.

``%load_ext jaxlab`` adds the magics; every magic has a plain-Python twin here::

    import jaxlab
    g = jaxlab.jaxpr_graph(f, x)       # the jaxpr as a Graph model
    g.to_svg()

Importing this package imports no IPython, graphviz, matplotlib or widget code.
"""

from typing import Any

from ._warning import JaxlabWarning as JaxlabWarning
from .arrays.memory import MemoryReport as MemoryReport
from .arrays.memory import memory as memory
from .arrays.record import ShowRecord as ShowRecord
from .arrays.show import ShowHandle as ShowHandle
from .arrays.show import show as show
from .autodiff.cell import CellGrad as CellGrad
from .autodiff.cell import grad_cell as grad_cell
from .autodiff.report import GradReport as GradReport
from .autodiff.report import grad_report as grad_report
from .autodiff.split import GradSplit as GradSplit
from .autodiff.split import grad_split as grad_split
from .compile.cell import CellRun as CellRun
from .compile.cell import jit_cell as jit_cell
from .compile.log import CompileEvent as CompileEvent
from .compile.log import CompileLog as CompileLog
from .compile.log import compile_log as compile_log
from .compile.lowered import LoweredText as LoweredText
from .compile.lowered import hlo_text as hlo_text
from .compile.lowered import stablehlo_text as stablehlo_text
from .compile.report import CompileReport as CompileReport
from .compile.report import compile_report as compile_report
from .devices import DeviceReport as DeviceReport
from .devices import devices as devices
from .explain.explanation import Explanation as Explanation
from .explain.explanation import explain as explain
from .explain.nans import NanCheck as NanCheck
from .explain.nans import debug_nans as debug_nans
from .explore.exploration import explore as explore
from .graph import Graph as Graph
from .graph import jaxpr_graph as jaxpr_graph
from .graph.diff import ProgramDiff as ProgramDiff
from .graph.diff import diff as diff
from .graph.diff import recompile_diff as recompile_diff
from .keys.flow import KeyFlow as KeyFlow
from .keys.flow import key_flow as key_flow
from .keys.record import KeyLineage as KeyLineage
from .keys.record import key_lineage as key_lineage
from .keys.track import track_keys as track_keys
from .steps import grad_steps as grad_steps
from .timing.attribution import profile_attribution as profile_attribution
from .timing.attribution import profile_graph as profile_graph
from .timing.bench import bench as bench
from .timing.equation_cost import EquationCosts as EquationCosts
from .timing.equation_cost import equation_costs as equation_costs
from .timing.profile import profile as profile
from .timing.profile_result import ProfileResult as ProfileResult
from .timing.result import BenchResult as BenchResult

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jaxlab``: register every magic and hook (idempotent)."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext jaxlab``: remove every magic, listener, hook and handler it added."""
    from .magics import unload

    unload(ipython)
