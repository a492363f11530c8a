"""Turn what the user wrote into a program JAX can trace.

Two forms reach the magics:

* a call expression, ``%jaxpr f(x, y=2)``: :mod:`~jaxlab.program.call` evaluates it in the
  user namespace into a :class:`Call` (the callable, positional and keyword arguments);
* a whole cell, ``%%jit`` / ``%%grad``: :mod:`~jaxlab.program.cell` analyses it into a
  :class:`CellProgram` (inputs, outputs, final expression) and compiles it into a pure
  function of its inputs, and :mod:`~jaxlab.program.guard` keeps it from writing outside
  itself, so that a failing cell magic changes nothing.

A call's arguments are pytrees: :mod:`~jaxlab.program.leaves` says which leaves JAX traces
as arrays (for a call's arguments and a cell's inputs alike), and
:mod:`~jaxlab.program.static_leaves` closes a call over the rest, as ``eqx.filter_jit``
does, so every magic takes the same calls.

Nothing here imports IPython, nor JAX until a leaf is looked at, nor any capability
package (``tests/test_house.py``): errors are :class:`ProgramError`, which the magics turn
into ``UsageError``.
"""

from .call import Call as Call
from .call import ProgramError as ProgramError
from .call import parse_call as parse_call
from .call import parse_expression as parse_expression
from .cell import CellProgram as CellProgram
from .cell import analyse_cell as analyse_cell
