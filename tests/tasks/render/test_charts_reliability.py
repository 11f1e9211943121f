"""The reliability-diagram SVG of the calibration report section: well-formed, escaped, self-contained."""

from __future__ import annotations

import xml.dom.minidom

from benchcert.tasks.render.charts import reliability_svg
from benchcert.tasks.render.report import _check_fragment


def test_reliability_svg_is_well_formed_escaped_and_offline():
    hostile = '<script>alert(1)</script>&"\u202e'
    svg = reliability_svg([
        {"name": hostile, "confidence": [0.3, 0.9], "accuracy": [0.2, 0.95], "lower": [0.1, 0.9],
         "upper": [0.35, 0.99], "count": [10, 100]},
        {"name": "empty", "confidence": [], "accuracy": [], "lower": [], "upper": [], "count": []},
        {"name": "nan bin", "confidence": [float("nan")], "accuracy": [0.5], "lower": [0.4], "upper": [0.6],
         "count": [3]},
    ], title="Reliability <of> models")
    doc = xml.dom.minidom.parseString(svg)
    assert doc.documentElement.tagName == "svg"
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    _check_fragment(svg, "reliability")  # raises on scripts, handlers, external URLs
    assert svg.count("<circle") == 2  # the NaN bin is left out, the empty panel says so
    assert "no data" in svg and svg.count('class="panel"') == 3
