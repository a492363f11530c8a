"""The PJRT backend and its devices (not written yet)."""

from __future__ import annotations


class DeviceReport:
    """Backend, devices, memory and live arrays."""


def devices() -> DeviceReport:
    raise NotImplementedError("devices is not written yet")
