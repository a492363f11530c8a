"""What every capability shares about the session, below all of them.

* :mod:`~jaxlab.session.work`: the own-work marker, :func:`jaxlab_work`: compilations in
  its block are jaxlab's (a check, a drawing, a report's extra runs), never the user's;
  the compile log (``compile/``) listens to it, the capabilities only mark their work;
* :mod:`~jaxlab.session.programs`: the traced programs the session keeps of the user's
  functions (``recompile_diff``, ``%%profile --graph``), fed by the compile log.

Nothing here imports JAX or any capability package (``tests/test_house.py``), so a
capability marks its work and reads the kept programs without importing ``compile/``.
"""

from .programs import kept_programs as kept_programs
from .work import in_jaxlab_work as in_jaxlab_work
from .work import jaxlab_work as jaxlab_work
