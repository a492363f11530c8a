"""Gradients for teaching: which arguments, which derivative, whether it is right.

``report`` assembles a :class:`~jaxlab.autodiff.record.GradReport` from ``args`` (argument
selection), ``derivative`` (gradient, Jacobian, forward fallback), ``second_order``
(Hessian, HVP), ``check`` (finite differences), ``nans`` (where a NaN is born) and
``extras`` (what a report adds beyond the derivative); ``display`` draws it, ``split``
shows the primal, linearized and transposed programs, and ``cell`` differentiates a
``%%grad`` cell.
"""
