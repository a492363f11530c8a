"""A trace recorded on a real TPU (v5e, JAX 0.10.2, jaxlib's own profiler) read by
jaxlab's trace reader: the host and JAX lanes as well as the device's.

The recording (tests/data/tpu_v5e.xplane.pb.gz, made by ``jax.profiler`` around three
calls of a jitted ``tanh(w @ w) * 0.5`` compiled before, a first call of a jitted
``v * 3.0`` and ``float(w.sum())``) names the Python thread's line ``python3``, where a
CPU trace names it ``python``: before the reader knew it, %%profile on a TPU showed
only device spans and "0 jitted calls".
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

from jaxlab.timing.trace import read_spans

RECORDING = Path(__file__).parent / "data" / "tpu_v5e.xplane.pb.gz"


def _spans(tmp_path):
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(gzip.decompress(RECORDING.read_bytes()))
    return read_spans(str(path))


def test_a_tpu_trace_has_its_host_dispatches_and_first_call_phases(tmp_path):
    spans = _spans(tmp_path)
    kinds = Counter((s.lane, s.kind) for s in spans)
    # three calls of the compiled step and one first call of g: four lambda dispatches,
    # then jnp's sum, compiled on its first call too
    dispatches = [s.name for s in spans if s.kind == "dispatch"]
    assert dispatches == ["<lambda>"] * 4 + ["_reduce_sum"]
    # only the two first calls trace, lower and compile
    assert kinds[("jax", "trace")] == kinds[("jax", "lower")] == kinds[("jax", "compile")] == 2
    compiled = [s.name for s in spans if s.lane == "jax" and s.kind == "compile"]
    assert compiled == ["<lambda>", "_reduce_sum"]


def test_a_tpu_trace_keeps_its_device_modules_and_ops(tmp_path):
    spans = _spans(tmp_path)
    modules = Counter(s.name for s in spans if s.lane == "device" and s.kind == "module")
    # the device's own 'XLA Modules' line: three runs of the step, one of g (both jit__lambda)
    assert modules["jit__lambda"] == 4 and modules["jit__reduce_sum"] == 1
    ops = [s for s in spans if s.lane == "device" and s.kind == "op"]
    assert ops and all(s.duration_s >= 0 for s in ops)
    # every dispatch returned before the device finished its last module
    last_module_end = max(s.end_s for s in spans if s.kind == "module")
    assert all(s.start_s <= last_module_end for s in spans if s.kind == "dispatch")
