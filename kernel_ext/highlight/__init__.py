"""Program text as highlighted HTML, for every view that shows code.

:mod:`~jaxlab.highlight.code_html` wraps each token of a printout in a ``<span>`` of its
role's class: the jaxpr's text (:mod:`jaxlab.graph.text`) and the lowered StableHLO and
HLO (:mod:`jaxlab.compile.lowered`) share it. It sits below both packages: nothing here
imports any other part of jaxlab.
"""
