"""``%keys`` in a real IPython shell, and the KeyLineage widget's state."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.keys import track
from jaxlab.widgets import KeyLineage as KeyLineageWidget

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(autouse=True)
def clean():
    jaxlab.key_lineage().clear()
    yield
    jaxlab.track_keys(False)
    jaxlab.key_lineage().clear()


def run(ip, source):
    result = ip.run_cell(source)
    result.raise_error()
    return result


def test_keys_on_records_cells_and_lines_and_off_restores_jax(ip):
    original_split, original_jit = jax.random.split, jax.jit
    with capture_output() as out:
        ip.run_line_magic("keys", "on")
    assert "key tracking on" in out.stdout and track.is_tracking()
    run(
        ip,
        "import jax\nk = jax.random.key(0)\na, b = jax.random.split(k)\n"
        "x = jax.random.normal(a, (3,))",
    )
    lineage = ip.run_line_magic("keys", "-o")
    assert lineage is jaxlab.key_lineage()
    draw = next(e for e in lineage.events if e.op == "normal")
    assert (
        draw.site.where.endswith(", line 4") and draw.site.cell and draw.site.cell.startswith("In[")
    )
    assert draw.site.code == "x = jax.random.normal(a, (3,))"
    assert ip.user_ns["x"].shape == (3,)
    ip.run_line_magic("keys", "off")
    assert jax.random.split is original_split and jax.jit is original_jit


def test_reuse_in_a_cell_warns_with_both_lines(ip):
    ip.run_line_magic("keys", "on")
    source = (
        "import jax\nk = jax.random.key(1)\ny1 = jax.random.normal(k)\ny2 = jax.random.uniform(k)"
    )
    with pytest.warns(
        jaxlab.JaxlabWarning,
        match=r"^k is reused .*normal at In\[\d+\], line 3 and uniform at In\[\d+\], line 4",
    ):
        run(ip, source)
    (reuse,) = jaxlab.key_lineage().reuses
    assert (reuse.first.lineno, reuse.second.lineno) == (3, 4)


def test_keys_shows_the_widget_and_a_static_list(ip):
    ip.run_line_magic("keys", "on")
    run(ip, "import jax\nks = jax.random.split(jax.random.key(2), 3)\nz = jax.random.normal(ks[0])")
    with capture_output() as out:
        ip.run_line_magic("keys", "")
    assert any(WIDGET in o.data for o in out.outputs)
    with capture_output() as out:
        ip.run_line_magic("keys", "--static")
    (shown,) = out.outputs
    html = shown.data["text/html"]
    assert "split [0]" in html and "normal float32[]" in html and "In[" in html


def test_keys_cell_filter(ip):
    ip.run_line_magic("keys", "on")
    run(ip, "import jax\nk1 = jax.random.key(3)")
    result = run(ip, "s = jax.random.normal(k1)")
    cell = f"In[{result.execution_count}]"
    with capture_output() as out:
        ip.run_line_magic("keys", f"--cell {cell}")
    html = out.outputs[0].data["text/html"]
    assert "normal" in html and "seed" in html  # the draw, and the key it hangs from
    with pytest.raises(UsageError, match=r"no key was made or drawn in In\[999\]"):
        ip.run_line_magic("keys", "--cell In[999]")


def test_bad_input_is_a_usage_error_and_changes_nothing(ip):
    run(ip, "marker = 1")
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match="unknown action 'onn'"):
        ip.run_line_magic("keys", "onn")
    with pytest.raises(UsageError, match="--max must be a positive number"):
        ip.run_line_magic("keys", "--max 0")
    with pytest.raises(UsageError, match="see %keys"):
        ip.run_line_magic("keys", "--nope")
    # refused with a reason even while tracking is off (issue 22)
    with pytest.raises(
        UsageError, match=r"--cell takes a cell as IPython numbers it, like In\[4\]"
    ):
        ip.run_line_magic("keys", "--cell nonsense")
    with pytest.raises(UsageError, match=r"nothing was recorded in In\[4\]: key tracking is off"):
        ip.run_line_magic("keys", "--cell In[4]")
    with pytest.raises(UsageError, match="--static chooses what a view shows; %keys on shows"):
        ip.run_line_magic("keys", "on --static")
    assert not track.is_tracking()
    assert set(ip.user_ns) == set(before)


def test_keys_clear_and_off_when_nothing_was_recorded(ip):
    with capture_output() as out:
        ip.run_line_magic("keys", "")
    assert "key tracking is off" in out.stdout
    ip.run_line_magic("keys", "on")
    run(ip, "import jax\njax.random.normal(jax.random.key(4))")
    assert jaxlab.key_lineage().events
    ip.run_line_magic("keys", "clear")
    assert jaxlab.key_lineage().events == ()


def test_unloading_the_extension_switches_tracking_off(ip):
    original = jax.random.normal
    ip.run_line_magic("keys", "on")
    assert jax.random.normal is not original
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        assert jax.random.normal is original and not track.is_tracking()
    finally:
        ip.run_line_magic("load_ext", "jaxlab")


def test_an_optax_and_equinox_program_in_a_cell(ip):
    ip.run_line_magic("keys", "on")
    run(
        ip,
        "import jax, equinox as eqx, optax\n"
        "k_model, k_data = jax.random.split(jax.random.key(5))\n"
        "model = eqx.nn.MLP(2, 1, 8, 2, key=k_model)\n"
        "x = jax.random.normal(k_data, (16, 2))\n"
        "opt = optax.adam(1e-2)\n"
        "state = opt.init(eqx.filter(model, eqx.is_array))\n",
    )
    lineage = jaxlab.key_lineage()
    lines = {e.site.lineno for e in lineage.events}
    assert lines == {2, 3, 4}  # equinox's own splits are charged to the line that called it
    assert lineage.reuses == ()


def test_the_widget_state_follows_the_lineage():
    with jaxlab.track_keys():
        k = jax.random.key(6)
        a, _ = jax.random.split(k)
        jax.random.normal(a, (2,))
        widget = KeyLineageWidget()
        assert widget.summary["keys"] == 3 and widget.summary["reuses"] == 0
        labels = [i["label"] for i in widget.items]
        assert labels == ["seed", "split [0]", "normal float32[2]", "split [1]"]
        with pytest.warns(jaxlab.JaxlabWarning):
            jax.random.uniform(a)
        widget.refresh()
    assert widget.summary["reuses"] == 1
    reused = [i for i in widget.items if i["reused"]]
    assert {i["label"] for i in reused} >= {"split [0]"}
    assert widget.reuses[0]["kind"] == "consumed twice"
    data, _ = widget._repr_mimebundle_()
    assert WIDGET in data and "Reused keys" in data["text/html"]
    assert np.all([isinstance(i["id"], str) for i in widget.items])
    widget.close()


def test_the_widget_aggregates_beyond_its_row_budget():
    with jaxlab.track_keys():
        key = jax.random.key(7)
        for _ in range(300):
            key, sub = jax.random.split(key)
            jax.random.normal(sub)
        widget = KeyLineageWidget(max_items=100)
    assert widget.summary["by_site"] is True and len(widget.items) <= 100
    assert any(i["count"] == 300 for i in widget.items)
    widget.close()


def test_a_large_lineage_is_summarised_per_call_site_with_detail_on_demand():
    with jaxlab.track_keys():
        key = jax.random.key(8)
        for _ in range(1500):
            key, sub = jax.random.split(key)
            jax.random.normal(sub, (2,))
        widget = KeyLineageWidget(max_items=200)
    assert widget.summary["by_site"] and widget.summary["keys"] == 3001
    rows = {i["label"]: i for i in widget.items}
    assert rows["split ×3000"]["count"] == 3000 and rows["normal float32[2] ×1500"]
    widget.set_state({"expanded": rows["split ×3000"]["id"]})  # the page asks
    keys = [d for d in widget.detail if d["kind"] == "key"]
    draws = [d for d in widget.detail if d["kind"] == "consume"]
    assert len(keys) == 200 and len(draws) == 100  # newest first: half were drawn from
    assert {d["label"] for d in draws} == {"normal float32[2]"}
    widget.set_state({"summary": {"keys": 0}})  # the kernel's trait: not the page's
    assert widget.summary["keys"] == 3001
    widget.close()


def test_the_saved_twin_is_written_when_the_cell_ends_not_on_every_update(ip, monkeypatch):
    widget = KeyLineageWidget()
    written = []
    monkeypatch.setattr(widget, "update_static", lambda: written.append(widget.summary["keys"]))
    with jaxlab.track_keys():
        for i in range(5):
            jax.random.normal(jax.random.key(i))
            widget.refresh()
    assert written == []  # five updates, no twin
    ip.run_cell("1 + 1")  # a cell ends
    assert written == [5]
    widget.close()
    ip.run_cell("2 + 2")
    assert written == [5]  # a closed widget is no longer told
