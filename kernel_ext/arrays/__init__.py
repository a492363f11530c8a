"""Arrays and pytrees you can see: ``%show``, ``jaxlab.show``, ``%memory``, shards.

::

    view = jaxlab.show_record(params)   # the record: a tree of paths, counts, bytes, flags
    view.root.children[0].path          # "['encoder']"

Walk first, draw second: ``tree`` walks a pytree into ``TreeNode`` records, ``stats``
computes each array's figures on its device, ``sample`` copies a bounded picture to the
host, ``draw`` and ``html`` turn the records into static SVG and HTML.
"""

from .record import ArrayInfo as ArrayInfo
from .record import ShowRecord as ShowRecord
from .record import TreeNode as TreeNode
from .tree import show_record as show_record
