"""PRNG key lineage: every key's family tree, and reuse caught where it happens.

::

    with jaxlab.track_keys():                     # or %keys on
        k1, k2 = jax.random.split(jax.random.key(0))
        jax.random.normal(k1, (3,))
    jaxlab.key_lineage()                          # KeyLineage: .nodes, .edges, .reuses
    jaxlab.key_flow(f, key)                       # static: reuse found in the jaxpr

Modules: ``site`` (the user's line), ``model`` (the frozen records), ``sites`` (the
per-call-site table), ``identity`` (which key a call used: by object before data),
``calls`` (compiled functions: a template per trace, keys per call), ``store`` (the
bounded session store), ``replay`` (calls replayed into it when read), ``events``
(recording and noting), ``queries`` (reading), ``record`` (``KeyLineage``, the three
together, and ``key_lineage``), ``switch`` (the wrapped names, the pause), ``flow``
(static analysis of ``random_*`` equations through sub-jaxprs), ``jit`` (the ``jax.jit``
installed while tracking), ``track`` (the switch and the ``jax.random`` wrappers),
``tree`` (the forest a view draws, aggregated), ``view`` (static HTML and text).

Imports run one way: the records and the store at the bottom, recording and reading
above, then ``flow``, ``jit`` and ``track``; ``tree`` and ``view`` draw the records and
import them. A ``KeyLineage`` and a ``KeyFlow`` draw themselves with what this module
hands down (``served_by``), so neither imports ``view``.

How keys are tracked, and why (measured by ``benchmarks/key_tracking.py``): while
tracking is on, the public ``jax.random`` functions and ``jax.jit`` are wrappers that
call JAX's own (results bit-identical). Eagerly, a wrapper reads the key data (a reuse
warns at once). A function jitted while tracking is on is traced with a template on a
stack: the wrappers write what it does with keys there, and each call only notes the
key leaves it was given and returned; calls are replayed when someone reads the lineage,
and the jaxpr's static flow adds the reuses the wrappers cannot see (two slices of one
split). Nothing runs inside the compiled program: a ``jax.debug.callback`` inside a
jitted loop cost 33x in the issue's measurement, and a single callback per call cost
~20% of a 50 ms Monte-Carlo function here. Only code traced without a template (a
function jitted before tracking began and first called after, ``vmap`` of eager code)
gets one callback per call site, outside loop bodies, which are recorded once when
traced. A wrapping PRNG implementation (``jax.extend.random.define_prng_impl``) was not
chosen: it changes the dtype of the user's keys and reports only by callback.
"""

from . import flow as _flow
from . import record as _record
from . import view as _view

_record.served_by(_record.Above(_view.lineage_text, _view.lineage_html))
_flow.served_by(_flow.Above(_view.flow_text, _view.flow_html))
