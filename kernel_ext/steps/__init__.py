"""``%grad --steps``, ``jaxlab.grad_steps``: the chain rule played one equation at a time,
reverse mode (the gradient program, forward then transposed) and forward mode (``jax.jvp``'s).

Inside the package imports run one way: the records (``record``) at the bottom, the
rules in maths (``rules``) and the names (``naming``), the walks (``reverse``,
``forward``) and where a step sits in the drawing (``layout``), the entry (``entry``).
"""

from .entry import StepsError as StepsError
from .entry import grad_steps as grad_steps
from .record import GradSteps as GradSteps
from .record import Step as Step
