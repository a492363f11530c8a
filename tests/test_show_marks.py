"""%show's marks (issue 33, point 5): NaN/Inf markers and their legend, the colour bar's
range (the whole array's, or fixed), one gradient id per drawing, the live view's fixed
range across updates, and a tree view opening on its first flagged leaf."""

import re

import numpy as np
import pytest

from jaxlab.arrays import show_record
from jaxlab.arrays.draw import MARK_SIDE, draw_info
from jaxlab.widgets.array_view import ArrayView, checked_range


def _leaf(x, name="x"):
    info = show_record(x, name).root.array
    assert info is not None
    return info


def _markers(svg):
    """(width, height) of every NaN/Inf marker drawn."""
    marker = r'<rect class="jaxlab-not-finite"[^>]*width="([\d.]+)" height="([\d.]+)"'
    found = re.findall(marker, svg)
    return [(float(w), float(h)) for w, h in found]


def test_a_planted_nan_is_a_marker_of_at_least_six_pixels_named_in_the_legend():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    for r, c in [(3, 7), (10, 2), (20, 20), (40, 1), (50, 50), (63, 63)]:
        a[r, c] = np.nan
    a[5, 5] = np.inf
    out = draw_info(_leaf(a))
    marks = _markers(out)
    assert len(marks) == 7  # one per not-finite cell
    assert all(w >= 6 and h >= 6 for w, h in marks)
    assert min(w for w, _ in marks) >= MARK_SIDE
    text = re.search(r'class="jaxlab-array-legend">([^<]*)<', out)
    assert text is not None
    assert text.group(1) == "NaN at [3, 7], [10, 2], [20, 20] and 3 more; Inf at [5, 5]"


def test_a_nan_in_a_line_is_a_marker_and_in_the_legend():
    a = np.linspace(0, 1, 300).astype(np.float32)
    a[17] = np.nan
    out = draw_info(_leaf(a))
    assert [w for w, _ in _markers(out)] == [float(MARK_SIDE)]
    assert "NaN at [17]" in out


def test_a_subsampled_maps_colour_bar_says_the_arrays_range_and_the_samples():
    # 400 x 400 drawn every 3rd value: the maximum sits off the sample's grid
    a = np.full((400, 400), 0.25, dtype=np.float32)
    a[0, 0] = 0.01
    a[198, 198] = 0.4725  # 198 = 3 * 66: sampled
    a[1, 1] = 0.5018  # not sampled
    info = _leaf(a)
    assert info.sample is not None and info.sample.steps == (3, 3)
    out = draw_info(info)
    bar = re.search(r'<svg class="jaxlab-colour-bar".*?</svg>', out)
    assert bar is not None
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", bar.group(0))
    assert labels[0] == "0.5018"  # the array's max, not the sample's 0.4725
    assert labels[1] == "0.01"
    assert "drawn values 0.01 to 0.4725" in labels


def test_two_drawings_have_different_gradient_ids():
    a = np.random.default_rng(0).normal(size=(30, 30)).astype(np.float32)
    ids = [re.findall(r'linearGradient id="([^"]+)"', draw_info(_leaf(a))) for _ in range(2)]
    assert len(ids[0]) == 1 and len(ids[1]) == 1
    assert ids[0] != ids[1]
    html = show_record({"a": a, "b": a}, "p").html()
    both = re.findall(r'linearGradient id="([^"]+)"', html)
    assert len(both) == 2 and len(set(both)) == 2


def test_a_fixed_range_draws_the_static_bar_at_it():
    a = np.linspace(0, 1, 900, dtype=np.float32).reshape(30, 30)
    out = draw_info(_leaf(a), (-2.0, 2.0))
    bar = re.search(r'<svg class="jaxlab-colour-bar".*?</svg>', out)
    assert bar is not None
    assert re.findall(r"<text[^>]*>([^<]*)</text>", bar.group(0))[:2] == ["2", "-2"]


def _frames():
    first = np.linspace(0, 1, 900, dtype=np.float32).reshape(30, 30)
    return first, first * 0.1  # a fade: the second frame's max is a tenth


def test_the_live_view_refits_by_default_and_keeps_a_fixed_range_across_updates():
    first, faded = _frames()
    plain = ArrayView(first, name="w")
    plain.update(faded)
    plain.flush()
    assert plain.drawing["range"] == pytest.approx([0.0, 0.1])
    assert plain.drawing["range_fixed"] is False

    kept = ArrayView(first, name="w", value_range="first")
    assert kept.drawing["range"] == pytest.approx([0.0, 1.0])
    kept.update(faded)
    kept.flush()
    assert kept.drawing["range"] == pytest.approx([0.0, 1.0])
    assert kept.drawing["range_fixed"] is True
    assert kept.drawing["sample_range"] == "drawn values 0 to 0.1"
    bar = re.search(r'<svg class="jaxlab-colour-bar".*?</svg>', kept._static_html())
    assert bar is not None and re.findall(r"<text[^>]*>([^<]*)</text>", bar.group(0))[:2] == [
        "1",
        "0",
    ]

    given = ArrayView(first, name="w", value_range=(-1, 3))
    given.update(faded)
    given.flush()
    assert given.drawing["range"] == [-1.0, 3.0]


def test_a_bad_range_is_refused_with_what_is_taken():
    for bad in [(1, 0), (0, float("nan")), "fixed", "12", (1,)]:
        with pytest.raises(ValueError, match=r"\(lo, hi\)"):
            checked_range(bad)


def test_the_live_drawing_carries_the_legend():
    a = np.ones((20, 20), dtype=np.float32)
    a[3, 7] = np.nan
    view = ArrayView(a, name="x")
    assert view.drawing["legend"] == "NaN at [3, 7]"


def test_the_tree_view_opens_on_the_first_flagged_leaf():
    w = np.ones((4, 4), dtype=np.float32)
    bad = w.copy()
    bad[1, 2] = np.nan
    params = {"layers": [{"W": w, "b": w[0]}, {"W": bad, "b": w[0]}]}
    view = ArrayView(params, name="params")
    assert view.selected == "params['layers'][1]['W']"
    assert view.drawing["path"] == "params['layers'][1]['W']"
    assert view.drawing["legend"] == "NaN at [1, 2]"
    clean = ArrayView({"layers": [{"W": w}]}, name="params")
    assert clean.selected == "params['layers'][0]['W']"


def test_a_nan_the_strided_sample_steps_over_is_found_on_the_device_and_marked():
    # tutorial 09's case: a NaN at [7, 42] of a 512 x 512 weight drawn every 4th value
    import jax.numpy as jnp

    w = jnp.ones((512, 512)).at[7, 42].set(jnp.nan).at[300, 1].set(jnp.inf)
    info = _leaf(w, "W")
    assert info.sample is not None and info.sample.steps == (4, 4)
    assert np.isfinite(np.asarray(info.sample.values, dtype=float)).all()  # stepped over
    out = draw_info(info)
    assert "NaN at [7, 42]; Inf at [300, 1]" in out
    assert len(_markers(out)) == 2
    view = ArrayView({"W": w}, name="p")
    assert view.drawing["legend"] == "NaN at [7, 42]; Inf at [300, 1]"
    assert view.drawing["marks"] == [[1, 10], [75, 0]]  # the cells holding them
