"""jaxlab.widgets: live views drawn in the browser (anywidget).

Each widget is one Python class and one ES module plus CSS under ``static/``, shipped
in the wheel and loaded from nowhere else::

    from jaxlab.widgets import CompileMonitor
    CompileMonitor()
"""

from .array_view import ArrayView as ArrayView
from .compile_monitor import CompileMonitor as CompileMonitor
from .explorer import Explorer as Explorer
from .graph_explorer import GraphExplorer as GraphExplorer
from .key_lineage import KeyLineage as KeyLineage
from .profile_timeline import ProfileTimeline as ProfileTimeline
from .steps_player import StepsPlayer as StepsPlayer
