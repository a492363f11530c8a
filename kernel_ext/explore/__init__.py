"""``%explore`` and ``jaxlab.explore``: sliders on a compiled function, with its
sensitivities drawn live (issue 35).

Records at the bottom, the drawing of the answer above them, the entry on top; one way:

* :mod:`~jaxlab.explore.controls`: each argument → a slider, checkbox, static or fixed
  value (:class:`Control`), and the call put back together (:class:`Layout`);
* :mod:`~jaxlab.explore.record`: :class:`Sweep`, :class:`FitState`;
* :mod:`~jaxlab.explore.compiled`: the function jitted once with the sliders traced: the
  output, its ``jax.jvp`` tangent and (scalar outputs) every slider's derivative in one
  call; a sweep's ``jax.vmap``; the compilations counted;
* :mod:`~jaxlab.explore.nans`: where a NaN first appeared (or a failure passed), by the
  user's line;
* :mod:`~jaxlab.explore.fit`: the fit toward ``target=`` (optax's Adam, else its own);
* :mod:`~jaxlab.explore.panels`: the answer drawn by its kind (``arrays/``' colours);
* :mod:`~jaxlab.explore.frames`: ``frame()``, the JSON the page draws;
* :mod:`~jaxlab.explore.exploration`: :class:`Exploration` and :func:`explore`.
"""

from .controls import Control as Control
from .controls import ExploreError as ExploreError
from .exploration import Exploration as Exploration
from .exploration import explore as explore
from .record import FitState as FitState
from .record import Sweep as Sweep
