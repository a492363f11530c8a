"""Teaching explanations for JAX's common errors.

``explanation`` is the entry (:func:`~jaxlab.explain.explanation.explain`); ``rules``
picks the rule for an error, with ``tracing`` (concretization, leaked tracers),
``shapes`` and ``finding`` (the record a rule returns); ``rewrite`` and
``control_flow`` rewrite the user's line into its fix; ``source`` finds the user's frames
and names notebook cells; ``trace_failure`` classifies why tracing failed; ``nans``
switches ``jax_debug_nans``.
"""
