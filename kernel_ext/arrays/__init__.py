"""Arrays and pytrees you can see: ``%show``, ``jaxlab.show``, ``%memory``, shards.

::

    view = jaxlab.show_record(params)   # the record: a tree of paths, counts, bytes, flags
    view.root.children[0].path          # "['encoder']"

Walk first, draw second: ``tree`` walks a pytree into ``TreeNode`` records, ``stats``
computes each array's figures on its device, ``sample`` copies a bounded picture to the
host, ``draw`` and ``html`` turn the records into static SVG and HTML.

Inside the package imports run one way: the records (``record``) at the bottom, the
renderers (``draw``, ``shards_html``, ``html``) above them, the walk and the entry
functions on top. A record's text and HTML use what this module hands down
(``record.served_by``), so the records never import their renderer.
"""

from . import html as _html
from . import record as _record
from .record import ArrayInfo as ArrayInfo
from .record import ShowRecord as ShowRecord
from .record import TreeNode as TreeNode
from .tree import show_record as show_record

_record.served_by(
    _record.Above(array_line=_html.array_line, tree_text=_html.tree_text, tree_html=_html.tree_html)
)
