"""The PJRT backend and its devices: platform, memory, live arrays.

::

    r = devices()
    r.platform, r.platform_version      # 'cpu', 'cpu'   ('gpu', 'cuda 12080' on a GPU)
    [d.id for d in r.devices]           # [0, 1]
    r.live_arrays, r.live_bytes         # arrays JAX holds now, and their logical bytes

Everything comes from public JAX (``jax.devices``, ``jax.live_arrays``,
``jax.extend.backend``); ``memory_stats`` is None where the backend keeps none (CPU).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from typing import Any

# The memory_stats() keys worth a column; the full dict stays in DeviceInfo.memory.
_MEMORY_KEYS = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit")
_HEADER = ("id", "kind", "platform", "process", "in use", "peak", "limit")


@dataclass(frozen=True)
class DeviceInfo:
    """One device as its PJRT client describes it."""

    id: int
    kind: str  # device_kind, e.g. "cpu", "NVIDIA H100 80GB HBM3", "TPU v5 lite"
    platform: str  # "cpu", "gpu", "tpu"
    process_index: int
    memory: dict[str, int] | None = field(default=None, hash=False)  # memory_stats()

    def memory_value(self, key: str) -> int | None:
        return None if self.memory is None else self.memory.get(key)


@dataclass(frozen=True)
class DeviceReport:
    """The default backend, its devices and the arrays alive on it."""

    platform: str
    platform_version: str
    jax_version: str
    jaxlib_version: str
    process_index: int
    process_count: int
    devices: tuple[DeviceInfo, ...]
    live_arrays: int  # jax.live_arrays() on the default backend
    live_bytes: int  # their logical sizes (nbytes), summed

    @property
    def device_count(self) -> int:
        return len(self.devices)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def text(self) -> str:
        lines = [
            f"backend {self.platform} ({self.platform_version}), jax {self.jax_version}, "
            f"jaxlib {self.jaxlib_version}, process {self.process_index} of {self.process_count}",
            f"{self.device_count} device(s); {self.live_arrays} live array(s), "
            f"{format_bytes(self.live_bytes)}",
        ]
        rows: list[tuple[str, ...]] = [_HEADER]
        rows += [_row(d) for d in self.devices]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        note = self._memory_note()
        return "\n".join([*lines, note] if note else lines)

    def _memory_note(self) -> str:
        """Why the memory columns are empty, when no device reports memory (CPU)."""
        if any(d.memory is not None for d in self.devices):
            return ""
        return f"memory (in use, peak, limit): not reported by the {self.platform} backend"

    def html(self) -> str:
        e = html.escape
        head = (
            f"<div><b>{e(self.platform)}</b> backend ({e(self.platform_version)}), "
            f"jax {e(self.jax_version)}, jaxlib {e(self.jaxlib_version)}, "
            f"process {self.process_index} of {self.process_count}<br>"
            f"{self.device_count} device(s); {self.live_arrays} live array(s), "
            f"{e(format_bytes(self.live_bytes))}</div>"
        )
        header = "".join(f"<th>{c}</th>" for c in _HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(c)}</td>" for c in _row(d)) + "</tr>" for d in self.devices
        )
        table = f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
        note = self._memory_note()
        foot = f'<div style="font-size:90%;opacity:0.8">{e(note)}</div>' if note else ""
        return f'<div class="jaxlab-devices">{head}{table}{foot}</div>'

    def __str__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


def format_bytes(n: int | None) -> str:
    """``1536 -> '1.5 KiB'``; None (not reported) -> ``'-'``."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _row(d: DeviceInfo) -> tuple[str, ...]:
    memory = tuple(format_bytes(d.memory_value(k)) for k in _MEMORY_KEYS)
    return (str(d.id), d.kind, d.platform, str(d.process_index), *memory)


def _memory_stats(device: Any) -> dict[str, int] | None:
    try:
        stats = device.memory_stats()
    except Exception:  # some plugins raise "not implemented" rather than return None
        return None
    if not stats:
        return None
    return {str(k): int(v) for k, v in stats.items() if isinstance(v, int | float)}


def one_line(text: str) -> str:
    """A backend's version as one line: a TPU's spans three ("PJRT C API", "TFRT TPU v5
    lite", "Built on ..."), which are joined with "; "."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def devices() -> DeviceReport:
    """The default backend's platform and devices, with memory and live arrays.

    >>> devices().platform      # doctest: +SKIP
    'cpu'
    """
    import jax
    import jax.extend.backend as jex_backend
    import jaxlib

    backend = jex_backend.get_backend()
    infos = tuple(
        DeviceInfo(
            id=int(d.id),
            kind=str(d.device_kind),
            platform=str(d.platform),
            process_index=int(d.process_index),
            memory=_memory_stats(d),
        )
        for d in jax.devices()
    )
    arrays = jax.live_arrays()
    return DeviceReport(
        platform=str(backend.platform),
        platform_version=one_line(str(backend.platform_version)),
        jax_version=jax.__version__,
        jaxlib_version=str(jaxlib.__version__),
        process_index=int(jax.process_index()),
        process_count=int(jax.process_count()),
        devices=infos,
        live_arrays=len(arrays),
        live_bytes=sum(int(a.nbytes) for a in arrays),
    )
