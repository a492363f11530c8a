"""``%jax_devices``: the PJRT backend, its devices, their memory and the live arrays.

::

    %jax_devices            # a table: backend, platform version, devices, memory, live arrays
    r = %jax_devices -o     # the DeviceReport record, not displayed

Its plain-Python twin is ``jaxlab.devices()``.
"""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ._options import parse_options


@magics_class
class DeviceMagics(Magics):
    @magic_arguments()
    @argument(
        "-o",
        dest="output",
        action="store_true",
        help="Return the DeviceReport instead of displaying it.",
    )
    @line_magic
    def jax_devices(self, line: str = "") -> Any:
        """Show JAX's backend (platform and version), its devices with their memory, and how
        many arrays are alive. Example: ``%jax_devices``.
        """
        args = parse_options(self.jax_devices, line)
        from ..devices import devices

        report = devices()
        if args.output:
            return report
        display(report)
        return None


MAGICS = (DeviceMagics,)
