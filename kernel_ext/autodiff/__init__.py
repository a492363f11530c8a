"""Gradients for teaching: which arguments, which derivative, whether it is right.

``report`` assembles a :class:`~jaxlab.autodiff.record.GradReport` from ``args`` (argument
selection), ``derivative`` (gradient, Jacobian, forward fallback), ``second_order``
(Hessian, HVP), ``check`` (finite differences), ``nans`` (where a NaN is born) and
``extras`` (what a report adds beyond the derivative); ``display`` draws it, ``split``
shows the primal, linearized and transposed programs, and ``cell`` differentiates a
``%%grad`` cell.

Inside the package imports run one way: the record (``record``: ``GradReport``) below
``display``, which draws it; a report's ``text()`` and ``_repr_mimebundle_`` use what
this module hands down (``record.served_by``), so the record never imports its view.
"""

from . import record as _record
from .display import report_bundle as _report_bundle
from .display import report_text as _report_text

_record.served_by(_record.Above(_report_text, _report_bundle))
