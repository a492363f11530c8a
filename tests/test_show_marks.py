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
    sizes = re.findall(r'<text[^>]*font-size="([0-9.]+)"', bar.group(0))
    assert len(sizes) == len(labels) and min(map(float, sizes)) >= 12  # no text under 12 px
    width = float(re.search(r'width="([0-9.]+)"', bar.group(0)).group(1))
    assert width >= 16 + 6.5 * len("drawn values 0.01 to 0.4725")  # the words fit the bar's box


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


# ---------------------------------------------------------------- contrast, every theme
# WCAG 2 contrast of every text/background pair the array view (widgets/static/
# array_view.css, the canvas' labels) and the tree view's static twin (arrays/html.py,
# the SVG's labels in arrays/draw.py) draw, computed from JupyterLab's own light and dark
# theme variables; text at least 4.5:1, the line plot's stroke 3:1 (WCAG 1.4.11). The
# page is --jp-layout-color0 or --jp-layout-color1 (a notebook's output sits on either).
def _theme(name):
    from pathlib import Path

    import jupyterlab

    base = Path(jupyterlab.__file__).parent / "themes" / "@jupyterlab"
    path = base / f"theme-{name}-extension" / "index.css"
    if not path.exists():
        pytest.skip(f"JupyterLab's {name} theme CSS is not installed here")
    return dict(re.findall(r"(--[\w-]+):([^;]+);", path.read_text()))


def _colour(expr, theme, under=(255, 255, 255)):
    """An RGB triple for a CSS colour expression (var() resolved in ``theme``, falling
    back as CSS does; an alpha blended over ``under``)."""
    expr = expr.strip()
    found = re.fullmatch(r"var\((--[\w-]+)\s*(?:,\s*(.*))?\)", expr)
    if found:
        value = theme.get(found.group(1))
        return _colour(value if value is not None else found.group(2), theme, under)
    named = {"white": "#fff", "black": "#000"}
    expr = named.get(expr, expr)
    if expr.startswith("#"):
        h = expr[1:]
        h = "".join(c * 2 for c in h) if len(h) == 3 else h
        return tuple(int(h[i : i + 2], 16) for i in (0, 2, 4))
    parts = [float(p) for p in re.findall(r"[\d.]+", expr)]
    rgb, alpha = parts[:3], parts[3] if len(parts) > 3 else 1.0
    return tuple(alpha * c + (1 - alpha) * u for c, u in zip(rgb, under, strict=True))


def _luminance(rgb):
    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _ratio(fg, bg, theme, page, opacity=1.0):
    back = _colour(bg, theme, _colour(page, theme))
    text = _colour(fg, theme, back)
    text = tuple(opacity * t + (1 - opacity) * b for t, b in zip(text, back, strict=True))
    a, b = _luminance(text), _luminance(back)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _css_rules(text):
    """selector -> {property: value} of a stylesheet (comments dropped)."""
    rules = {}
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", text):
        props = dict(
            (k.strip(), v.strip())
            for k, v in (d.split(":", 1) for d in body.split(";") if ":" in d)
        )
        for sel in selectors.split(","):
            rules.setdefault(" ".join(sel.split()), {}).update(props)
    return rules


DARK = 'body[data-jp-theme-light="false"] '  # JupyterLab's dark themes mark the body so


def _pairs(dark):
    """(what, text colour, background, opacity, least ratio) for everything drawn, the
    dark theme's own rules (``body[data-jp-theme-light="false"] ...``) where ``dark``."""
    from pathlib import Path

    from jaxlab.arrays import draw
    from jaxlab.arrays.html import _STYLE

    def rules(text):
        found = _css_rules(text)

        def colour(sel, prop="color", default=None):
            themed = found.get(DARK + sel, {}).get(prop) if dark else None
            return themed or found.get(sel, {}).get(prop, default)

        return found, colour

    sheet = (Path(__file__).parents[1] / "widgets/static/array_view.css").read_text()
    _, of = rules(sheet)
    twin, twin_of = rules(re.sub(r"</?style>", "", _STYLE))
    page = "transparent"
    text = of(".jaxlab-av")
    hover = of(".jaxlab-av-row:hover", "background", page)  # none: outlined, not shaded
    selected = ".jaxlab-av-row.jaxlab-av-selected"
    on_selected = of(selected, "background")
    dim, flag = of(".jaxlab-av-dim"), of(".jaxlab-av-flag")
    dim_hover = of(".jaxlab-av-row:hover .jaxlab-av-dim", default=dim)
    flag_hover = of(".jaxlab-av-row:hover .jaxlab-av-flag", default=flag)
    inputs = ".jaxlab-av-slice input"
    dim_opacity = float(twin[".jaxlab-show .dim"]["opacity"])
    svg_text = draw._TEXT.replace("currentColor", "#222")
    return [
        ("view text", text, page, 1.0, 4.5),
        ("a hovered row", of(".jaxlab-av-row:hover", default=text), hover, 1.0, 4.5),
        ("dim words", dim, page, 1.0, 4.5),
        ("dim words on a hovered row", dim_hover, hover, 1.0, 4.5),
        ("a flag (NaN x1)", flag, page, 1.0, 4.5),
        ("a flag on a hovered row", flag_hover, hover, 1.0, 4.5),
        ("the legend", of(".jaxlab-av-legend"), page, 1.0, 4.5),
        ("the selected row", of(selected), on_selected, 1.0, 4.5),
        ("dim words on the selected row", of(f"{selected} .jaxlab-av-dim"), on_selected, 1.0, 4.5),
        ("a flag on the selected row", of(f"{selected} .jaxlab-av-flag"), on_selected, 1.0, 4.5),
        ("the slice inputs", of(inputs), of(inputs, "background"), 1.0, 4.5),
        ("an unreadable state's note", of(".jaxlab-error"), page, 1.0, 4.5),
        ("the canvas's labels", "var(--jp-ui-font-color1, #222)", page, 1.0, 4.5),
        ("the line plot's stroke", "var(--jp-brand-color1, #1976d2)", page, 1.0, 3.0),
        ("static tree text", twin_of(".jaxlab-show"), page, 1.0, 4.5),
        ("static dim words", twin_of(".jaxlab-show"), page, dim_opacity, 4.5),
        ("static flag", twin_of(".jaxlab-show .flag"), page, 1.0, 4.5),
        ("static legend", twin_of(".jaxlab-array-legend"), page, 1.0, 4.5),
        ("SVG labels", svg_text, page, 1.0, 4.5),
        ("SVG bar's middle label", svg_text, page, 0.8, 4.5),
        ("SVG line", draw._LINE, page, 1.0, 3.0),
    ]  # fmt: skip


def test_the_selected_rows_colours_outrank_the_dark_themes_flag_colour():
    """Specificity: the selected row's flag (3 classes) wins over the dark theme's flag
    rule (2 classes and an element), so it stays light on blue."""
    from pathlib import Path

    sheet = (Path(__file__).parents[1] / "widgets/static/array_view.css").read_text()
    rules = _css_rules(sheet)
    assert ".jaxlab-av-row.jaxlab-av-selected .jaxlab-av-flag" in rules
    assert DARK + ".jaxlab-av-flag" in rules


@pytest.mark.parametrize("theme_name", ["light", "dark"])
@pytest.mark.parametrize("page", ["var(--jp-layout-color0)", "var(--jp-layout-color1)"])
def test_every_text_reads_at_wcag_aa_in_light_and_dark(theme_name, page):
    theme = _theme(theme_name)
    low = []
    for what, fg, bg, opacity, least in _pairs(dark=theme_name == "dark"):
        ratio = _ratio(fg, bg if bg != "transparent" else page, theme, page, opacity)
        if ratio < least:
            low.append(f"{what}: {ratio:.2f}:1 (< {least})")
    assert low == []


def test_the_contrast_arithmetic_matches_wcags_examples():
    theme = {}
    assert _ratio("#000", "#fff", theme, "#fff") == pytest.approx(21.0)
    assert _ratio("#777", "#fff", theme, "#fff") == pytest.approx(4.48, abs=0.01)
    assert _ratio("#fff", "#0d47a1", theme, "#fff") == pytest.approx(8.6, abs=0.05)
    # an alpha is blended over what is under it: 54% black on white is #757575
    assert _ratio("rgba(0,0,0,.54)", "#fff", theme, "#fff") == pytest.approx(4.6, abs=0.05)
