"""Timing under asynchronous dispatch: ``%bench`` and ``%%profile``.

::

    r = jaxlab.bench(f, x)        # BenchResult: compile, dispatch and ready times apart
    with jaxlab.profile() as p:   # a jax.profiler trace of the block, parsed in-process
        y = f(x)
    p.result                      # ProfileResult: host and device spans, costs, hidden syncs

Inside the package imports run one way: records (``result``, ``profile_result``) below
their views (``bench_view``, ``profile_view`` and ``profile_svg``), which import them;
a record's ``str()`` and ``_repr_mimebundle_`` use what this module hands down
(``served_by``), so no record imports its view.
"""

from . import profile_result as _profile_result
from . import result as _result
from .bench_view import bench_html as _bench_html
from .bench_view import bench_text as _bench_text
from .profile_view import profile_html as _profile_html
from .profile_view import profile_text as _profile_text

_result.served_by(_result.Above(_bench_text, _bench_html))
_profile_result.served_by(_profile_result.Above(_profile_text, _profile_html))
