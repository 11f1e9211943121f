"""Tests for benchcert.tasks.render.charts.heatmap_svg (domain-ordered correlation heatmap)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from benchcert.tasks.render.charts import heat_color, heatmap_svg
from benchcert.tasks.render.report import Section, render_report

EVIL = "<script>alert(1)</script> & \"q\" 's'"


def _rects(svg: str):
    root = ET.fromstring(svg)
    return [el for el in root.iter() if el.tag == "rect" and el.get("fill", "").startswith("#")
            and el.find("title") is not None]


def test_heatmap_is_well_formed_escaped_and_offline():
    labels = [EVIL, "b\x00ctrl", "c", "d"]
    groups = ["g<1>", "g<1>", "g&2", "g&2"]
    m = np.array([[1.0, 0.5, -0.5, np.nan], [0.5, 1, 0, 0], [-0.5, 0, 1, 0.2], [np.nan, 0, 0.2, 1]])
    svg = heatmap_svg(m, labels, groups=groups, title=f"title {EVIL}")
    root = ET.fromstring(svg)  # well-formed XML (control characters replaced)
    assert root.tag == "svg" and "xmlns" not in svg and "http" not in svg
    assert "<script" not in svg and "&lt;script&gt;" in svg and "g&amp;2" in svg
    cells = _rects(svg)
    assert len(cells) == 16  # one rect per cell, each with a tooltip (n <= 60)
    titles = [c.find("title").text for c in cells]
    assert titles[3].endswith("undefined") and cells[3].get("fill") == "#cfd4da"
    # the renderer accepts it as a self-contained section
    html = render_report(title="t", meta={}, sections=[Section(title="h", html=svg)], generated_at="now")
    assert svg in html


def test_heatmap_colours_scale_and_group_separators():
    assert heat_color(0.0, -1, 1) == "#f7f7f7"
    assert heat_color(1.0, -1, 1) == "#b2182b" and heat_color(5.0, -1, 1) == "#b2182b"
    assert heat_color(-1.0, -1, 1) == "#2166ac"
    assert heat_color(float("nan"), -1, 1) == "#cfd4da"
    n = 6
    m = np.eye(n)
    groups = ["a", "a", "b", "b", "b", "c"]
    svg = heatmap_svg(m, [f"s{i}" for i in range(n)], groups=groups)
    root = ET.fromstring(svg)
    lines = [el for el in root.iter() if el.tag == "line"]
    assert len(lines) == 2 * 2  # a horizontal and a vertical rule before groups b and c
    fills = [c.get("fill") for c in _rects(svg)]
    assert fills[0] == "#b2182b" and fills[1] == "#f7f7f7"
    # cells are whole pixels and laid out row-major
    xs = [int(c.get("x")) for c in _rects(svg)][:n]
    assert xs == sorted(xs) and len(set(np.diff(xs))) == 1


def test_heatmap_large_matrix_drops_cell_tooltips_and_stays_small():
    n = 91  # MMLU-Pro's subjects
    rng = np.random.default_rng(0)
    m = np.corrcoef(rng.random((n, 29)))
    labels = [f"ori_mmlu-subject_{i:02d}" for i in range(n)]
    svg = heatmap_svg(m, labels, groups=[f"d{i // 7}" for i in range(n)], title="x")
    ET.fromstring(svg)
    assert len(svg) < 700_000
    assert svg.count("<rect") >= n * n and "ori_mmlu-subject_90" in svg  # labels keep their tooltips


@pytest.mark.parametrize("kwargs, match", [
    (dict(matrix=np.eye(3), labels=["a", "b"]), "square with one row per label"),
    (dict(matrix=np.eye(2), labels=["a", "b"], groups=["g"]), "one entry per label"),
    (dict(matrix=np.eye(2), labels=["a", "b"], vmin=1.0, vmax=1.0), "vmin < vmax"),
])
def test_heatmap_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        heatmap_svg(kwargs.pop("matrix"), kwargs.pop("labels"), **kwargs)


def test_heatmap_empty_matrix():
    svg = heatmap_svg(np.zeros((0, 0)), [])
    assert "no data" in svg
    ET.fromstring(svg)


def test_the_vectorised_cell_colours_are_heat_color_of_each_value():
    """charts._heat_colors (a table of hex pairs over the whole matrix) gives each cell what
    heat_color gives its value alone, infinities and NaN included, for ranges around 0 and off it."""
    import numpy as np

    from benchcert.tasks.render import charts

    rng = np.random.default_rng(5)
    for vmin, vmax in [(-1.0, 1.0), (0.0, 1.0), (-3.0, -1.0), (0.2, 5.0)]:
        x = rng.uniform(vmin - 1.0, vmax + 1.0, (30, 30))
        x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
        with np.errstate(over="ignore"):
            got = charts._heat_colors(x, vmin, vmax)
        assert got.shape == x.shape
        assert [[str(c) for c in row] for row in got] == [[charts.heat_color(v, vmin, vmax) for v in row] for row in x]
