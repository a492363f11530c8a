"""jaxlab.devices() and %jax_devices: the backend and devices JAX reports, live arrays."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.devices import DeviceInfo, DeviceReport, format_bytes, one_line


def test_report_matches_jax():
    r = jaxlab.devices()
    assert r.platform == jax.default_backend() == "cpu"
    assert r.jax_version == jax.__version__
    assert r.process_count == jax.process_count() == 1
    assert r.device_count == 2  # conftest: JAX_NUM_CPU_DEVICES=2
    assert [d.id for d in r.devices] == [d.id for d in jax.devices()]
    assert all(d.platform == "cpu" and d.process_index == 0 for d in r.devices)
    assert [d.kind for d in r.devices] == [d.device_kind for d in jax.devices()]
    assert all(d.memory is None for d in r.devices)  # CPU keeps no memory statistics
    assert r.platform_version  # "cpu" on CPU, "cuda 12080"-like on GPU
    assert "\n" not in r.platform_version


def test_a_backend_version_over_several_lines_is_one_line_in_the_report():
    # A TPU v5e's platform_version, as JAX 0.10.2 gave it (benchmarks/device_check.py).
    tpu = "PJRT C API\nTFRT TPU v5 lite\nBuilt on Jun 17 2026 11:08:48 (1781719728) cl/933746096"
    assert one_line(tpu) == (
        "PJRT C API; TFRT TPU v5 lite; Built on Jun 17 2026 11:08:48 (1781719728) cl/933746096"
    )
    report = dataclasses.replace(jaxlab.devices(), platform_version=one_line(tpu))
    header = str(report).splitlines()[0]
    assert header.startswith("backend cpu (PJRT C API; TFRT TPU v5 lite; Built on Jun 17")
    assert one_line("cuda 12080") == "cuda 12080"


def test_live_arrays_grow_by_exactly_what_we_create():
    before = jaxlab.devices()
    held = [jnp.zeros((10, 10), jnp.float32), jnp.ones(7, jnp.int32)]
    after = jaxlab.devices()
    assert after.live_arrays - before.live_arrays == 2
    assert after.live_bytes - before.live_bytes == 400 + 28
    assert after.live_bytes == sum(a.nbytes for a in jax.live_arrays())
    del held
    assert jaxlab.devices().live_arrays == before.live_arrays


def test_report_is_a_json_record_and_renders():
    r = jaxlab.devices()
    data = json.loads(r.to_json())
    assert data["devices"][1]["id"] == 1 and data["live_arrays"] == r.live_arrays
    bundle = r._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/html"].count("<tr>") == 1 + r.device_count  # header + one per device
    assert "2 device(s)" in bundle["text/plain"]


def test_memory_columns_and_escaping():
    gpu = DeviceInfo(
        0, "<b>Fake GPU</b>", "gpu", 0, {"bytes_in_use": 3 << 20, "bytes_limit": 1 << 30}
    )
    r = DeviceReport("gpu", "cuda <x>", "0", "0", 0, 1, (gpu,), 0, 0)
    text, page = r.text(), r.html()
    assert "3.0 MiB" in text and "1.0 GiB" in text and "<b>Fake" in text
    assert "<b>Fake" not in page and "&lt;b&gt;Fake GPU&lt;/b&gt;" in page
    assert "cuda &lt;x&gt;" in page
    row = re.findall(r"<td>(.*?)</td>", page)
    assert row == ["0", "&lt;b&gt;Fake GPU&lt;/b&gt;", "gpu", "0", "3.0 MiB", "-", "1.0 GiB"]


@pytest.mark.parametrize(
    ("n", "text"),
    [(None, "-"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 << 40, "5.0 TiB")],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_magic_displays_and_returns(ip):
    with capture_output() as out:
        result = ip.run_line_magic("jax_devices", "")
    assert result is None
    assert len(out.outputs) == 1
    assert "<table>" in out.outputs[0].data["text/html"]
    report = ip.run_line_magic("jax_devices", "-o")
    assert isinstance(report, DeviceReport) and report.device_count == 2


def test_magic_rejects_unknown_option(ip):
    with pytest.raises(UsageError, match="jax_devices"):
        ip.run_line_magic("jax_devices", "--bogus")
