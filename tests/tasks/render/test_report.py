"""Tests for benchcert.tasks.render.report (offline, escaped HTML report renderer)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import polars as pl
import pytest

from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.report import (
    Section,
    render_report,
    table_html,
)

EVIL = "<script>alert(1)</script> & \"quotes\" 'single'"
EVIL_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot; &#x27;single&#x27;"


# --------------------------------------------------------------------------- helpers


class _Collector(HTMLParser):
    """Collect tags, attributes and text of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            self.attrs.append((tag, k, v or ""))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def parse(doc: str) -> _Collector:
    c = _Collector()
    c.feed(doc)
    c.close()
    return c


def svg_fragments(doc: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", doc, flags=re.S)


def assert_offline(doc: str) -> None:
    c = parse(doc)
    for tag, k, v in c.attrs:
        low = v.strip().lower()
        assert not low.startswith(("http:", "https:", "//")), (tag, k, v)
    for forbidden in ("script", "link", "iframe", "object", "embed", "base"):
        assert forbidden not in c.tags, forbidden


def assert_no_raw_evil(doc: str) -> None:
    assert "<script" not in doc.lower()
    assert "<script>alert(1)</script>" not in doc
    # but the (escaped) text is there, and decodes back to the original
    assert EVIL_ESCAPED in doc
    assert any(EVIL in t for t in parse(doc).text) or EVIL in "".join(parse(doc).text)


def count_intervals(svg: str) -> int:
    root = ET.fromstring(svg)
    return sum(1 for el in root.iter("g") if el.get("class") == "interval")


def make_series(n: int, name: str, shift: float = 0.0, nan_rows: tuple[int, ...] = ()):
    est = [0.3 + 0.4 * i / max(n - 1, 1) + shift for i in range(n)]
    lower = [e - 0.05 for e in est]
    upper = [e + 0.05 for e in est]
    for r in nan_rows:
        lower[r] = float("nan")
    return {"name": name, "estimate": est, "lower": lower, "upper": upper}


# --------------------------------------------------------------------------- table


def test_table_escapes_and_formats():
    df = pl.DataFrame(
        {
            "model": [EVIL, "gpt-x", None],
            "acc": [0.123456789, float("nan"), None],
            "tiny": [1.2e-9, 0.0, -0.0],
            "n": [10, None, 3],
            "ok": [True, False, None],
        }
    )
    out = table_html(df, caption=EVIL)
    assert_no_raw_evil(out)
    assert "0.1235" in out
    assert "NaN" in out
    assert "1.200e-09" in out
    assert "-0.0000" not in out
    assert out.count("\u2014") == 4  # None in model, acc, n, ok
    assert "showing" not in out
    assert_offline(out)


def test_table_truncation_note():
    df = pl.DataFrame({"i": list(range(1234)), "x": [i / 7 for i in range(1234)]})
    out = table_html(df, max_rows=50)
    assert "showing 50 of 1,234 rows" in out
    assert out.count("<tr>") == 51  # header + 50 rows
    full = table_html(df.head(10), max_rows=50)
    assert "showing" not in full


def test_table_escapes_column_names_and_empty():
    df = pl.DataFrame({EVIL: pl.Series([], dtype=pl.Float64)})
    out = table_html(df)
    assert_no_raw_evil(out)
    assert "no rows" in out
    assert table_html(pl.DataFrame())  # no columns: does not crash


# --------------------------------------------------------------------------- plot


def test_plot_is_xml_and_counts_finite_intervals():
    labels = ["model-a", EVIL, "model-c", "model-d"]
    s1 = make_series(4, "iid_clt", nan_rows=(1,))
    s2 = make_series(4, EVIL, shift=0.02)
    s2["upper"][3] = float("inf")  # not finite -> skipped
    s2["estimate"][0] = None  # interval still drawn, no dot
    svg = interval_plot_svg(labels, [s1, s2], title=EVIL, x_label=EVIL)
    root = ET.fromstring(svg)  # well-formed
    assert root.tag == "svg"
    assert count_intervals(svg) == 3 + 3
    dots = [el for el in root.iter("circle") if el.get("class") == "est"]
    assert len(dots) == 5
    # rows with a finite estimate but no finite interval are shown as hollow points only
    assert sum(1 for el in root.iter("circle") if el.get("class") == "point-only") == 2
    assert_no_raw_evil(svg)
    assert_offline(svg)
    assert "xmlns" not in svg  # avoid any http: attribute value


def test_plot_all_nan_and_empty_do_not_crash():
    nan = float("nan")
    svg = interval_plot_svg(
        ["a", "b"], [{"name": "x", "estimate": [nan, nan], "lower": [nan, nan], "upper": [nan, nan]}]
    )
    assert count_intervals(svg) == 0
    ET.fromstring(svg)
    ET.fromstring(interval_plot_svg([], []))
    ET.fromstring(interval_plot_svg(["only"], []))


def test_plot_many_labels_scale_and_percent_ticks():
    n = 300
    labels = [f"subject_{i:03d}_" + "x" * (i % 70) for i in range(n)]
    series = [make_series(n, f"s{k}", shift=0.01 * k, nan_rows=(k, 100 + k)) for k in range(3)]
    svg = interval_plot_svg(labels, series, title="many", max_rows=n)
    root = ET.fromstring(svg)
    assert count_intervals(svg) == 3 * n - 6
    # by default a long leaderboard is cut to its first 60 rows, with a note saying so
    capped = interval_plot_svg(labels, series, title="many")
    assert count_intervals(capped) == 3 * 60 - 3 and "the first 60 of 300 rows are drawn" in capped
    small = ET.fromstring(interval_plot_svg(labels[:3], series and [make_series(3, "s")]))
    assert float(root.get("height")) > 20 * float(small.get("height"))
    texts = ["".join(t.itertext()) for t in root.iter("text")]
    assert any(re.fullmatch(r"\d+(\.\d+)?%", t) for t in texts)
    # long labels are truncated but the full name is kept in a <title>
    longest = labels[69]
    assert longest not in [t.text for t in root.iter("text")]
    assert any(t.text == longest for t in root.iter("title"))


def test_plot_x_range_clips_and_non_percent():
    svg = interval_plot_svg(
        ["a", "b"],
        [{"name": "m", "estimate": [5.0, 50.0], "lower": [-3.0, 40.0], "upper": [12.0, 60.0]}],
        x_range=(0.0, 20.0),
        percent=False,
    )
    root = ET.fromstring(svg)
    assert count_intervals(svg) == 2
    assert "%" not in "".join(root.itertext()).replace("interval plot", "")
    assert sum(1 for el in root.iter("path") if el.get("class") == "clip") == 2
    with pytest.raises(ValueError):
        interval_plot_svg(["a"], [], x_range=(1.0, 1.0))
    with pytest.raises(ValueError):
        interval_plot_svg(["a", "b"], [{"name": "m", "estimate": [1], "lower": [0], "upper": [2]}])


def test_plot_control_characters_stay_well_formed():
    svg = interval_plot_svg(["bad\x00\x1b[31mname\ud800"], [make_series(1, "s\x07")])
    ET.fromstring(svg)
    assert count_intervals(svg) == 1


# --------------------------------------------------------------------------- document


def _example_doc() -> str:
    labels = [EVIL, "model-b", "model-c"]
    series = [make_series(3, "iid_clt", nan_rows=(2,)), make_series(3, "cluster", 0.01)]
    df = pl.DataFrame({"model": labels, "acc": [0.5, 0.6, None]})
    return render_report(
        title=f"Report {EVIL}",
        meta={"benchmark": EVIL, "run id": "run-1", EVIL: "value"},
        sections=[
            Section("Forest " + EVIL, interval_plot_svg(labels, series, title=EVIL), anchor="Forest Plot!"),
            Section("Table", table_html(df)),
            Section("Table", table_html(df), anchor="table"),
        ],
        generated_at="2025-01-01T00:00:00Z",
    )


def test_render_report_document():
    doc = _example_doc()
    assert doc.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in doc[:300]
    assert "Content-Security-Policy" in doc
    assert "default-src &#x27;none&#x27;" in doc
    assert_offline(doc)
    assert "<script" not in doc.lower()
    assert EVIL_ESCAPED in doc
    c = parse(doc)
    ids = [v for _, k, v in c.attrs if k == "id"]
    assert len(ids) == len(set(ids))
    section_ids = [v for t, k, v in c.attrs if t == "section" and k == "id"]
    assert section_ids == ["forest-plot", "table", "table-2"]
    assert all(re.fullmatch(r"[a-z0-9-]+", a) for a in section_ids)
    hrefs = [v for t, k, v in c.attrs if k == "href"]
    assert hrefs == ["#" + a for a in section_ids]
    for frag in svg_fragments(doc):
        ET.fromstring(frag)
    assert sum(count_intervals(f) for f in svg_fragments(doc)) == 5


def test_render_report_rejects_external_fragments():
    for bad in (
        '<img src="https://example.com/x.png">',
        '<a href="//evil.example">x</a>',
        "<script>alert(1)</script>",
        '<link rel="stylesheet" href="style.css">',
        '<div style="background:url(http://x)">x</div>',
        '<span onclick="x()">x</span>',
    ):
        with pytest.raises(ValueError):
            render_report(title="t", meta={}, sections=[Section("s", bad)], generated_at="now")
    ok = render_report(
        title="t",
        meta={},
        sections=[Section("s", '<p>fine <img alt="" src="data:image/png;base64,AAAA"></p>')],
        generated_at="now",
    )
    assert "data:image/png" in ok


def test_no_nan_strings_leak_into_svg_coordinates():
    svg = interval_plot_svg(["a"], [make_series(1, "s", nan_rows=(0,))])
    assert "nan" not in svg.lower().replace("nan)", "")
    assert not math.isnan(float(ET.fromstring(svg).get("height")))


def test_long_fragments_are_checked_whole():
    """A long section is searched whole for anything the parser could flag (issue #27: only a
    section with a candidate is parsed): a problem at either end or in the middle, or spelt with a
    character reference, is refused; a long clean table passes without a parse."""
    filler = "<p>row</p>" * 1700  # 17,000 characters
    bad = '<img src="https://x.test/a.png">'
    for html in (bad + filler, filler + bad, filler + bad + filler):
        with pytest.raises(ValueError, match="external URL"):
            render_report(title="t", meta={}, sections=[Section("s", html)], generated_at="now")
    with pytest.raises(ValueError, match="external URL"):
        render_report(title="t", meta={}, sections=[Section("s", filler + '<img src="&#104;ttps://x.test/">' + filler)],
                      generated_at="now")
    with pytest.raises(ValueError, match="event handler"):
        render_report(title="t", meta={}, sections=[Section("s", filler + '<b\nonmouseover="x()">' + filler)],
                      generated_at="now")
    render_report(title="t", meta={}, sections=[Section("s", filler + "<p>O&#x27;Brien &amp; co</p>" + filler)],
                  generated_at="now")


def test_chart_styles_and_minus_signs_are_not_candidates(monkeypatch):
    """A section whose only scheme-like text is a non-URL attribute's value (every chart's
    ``style="max-width:100%"``) or a ``&minus;`` is not parsed (0.5 CPU s of a 100-model audit);
    the same value in a URL attribute, or http: in any attribute, still is, and is refused."""
    from benchcert.tasks.render import report

    def parse(self, data):
        raise AssertionError("parsed")

    monkeypatch.setattr(report._FragmentChecker, "feed", parse)
    chart = '<svg style="max-width:100%;height:auto"><text>gap = a &minus; b</text></svg>' * 500
    render_report(title="t", meta={}, sections=[Section("s", chart)], generated_at="now")
    monkeypatch.undo()
    for bad, problem in (('<a href="max-width:1">x</a>', "non-local URL"),
                         ('<image xlink:href = "javascript:x()"/>', "non-local URL"),
                         ('<a HREF=="\\\\host\\x">x</a>', "non-local URL"),
                         ('<svg style="https://x.test/"></svg>', "external URL"),
                         ('<svg data-x=" //x.test/a"></svg>', "external URL")):
        with pytest.raises(ValueError, match=problem):
            render_report(title="t", meta={}, sections=[Section("s", chart + bad)], generated_at="now")


_NAMES = ["href", "HREF", "src", "xlink:href", "data", "srcset", "data-x", "style", "title", "onclick", "On", "onX.y"]
_VALUES = ["x", "http:", "HTTPS:", "//", "\\\\", "javascript:", "max-width:", "data:", "url(", "URL (", "@import",
           "&minus;", "&amp;", "&#x27;", "&#104;ttp:", "&colon;", "&sol;/", "&nbsp;", "&", "ttp:", "#a", ""]
_LEADS = ["", " ", "\t", "&nbsp;", "&minus;", "&amp;", "&#x27;", "&#32;"]


def test_candidate_search_is_a_superset_of_the_parser():
    """Every fragment the parser would refuse is a candidate of the one-search pre-check
    (tasks/render/report.py ``_candidate``), so skipping the parse of the others refuses nothing it
    would have: every attribute of URL, handler and other names, with =, == or " = ", unquoted,
    in double or single quotes, with a value of a scheme, //, \\\\, data:, url(, @import or a
    character reference, after a blank or a reference; every forbidden tag, opening or closing,
    in either case; a style element's text. Left out, as the search leaves them: ``u rl(`` (the
    parser strips spaces before looking for url( in a style) and an event handler attribute
    without a value (``<a onclick>``: an empty handler, which runs nothing)."""
    from benchcert.tasks.render import report

    fragments = [f"<a {name}{eq}{q}{lead}{value}{q}>"
                 for name in _NAMES for eq in ("=", "==", " = ") for q in ('"', "'", "")
                 for lead in _LEADS for value in _VALUES]
    fragments += [form.format(tag) for t in sorted(report._FORBIDDEN_TAGS) for tag in (t, t.upper())
                  for form in ("<{}>", "< {}>", "</{}>", "</ {} >", "<{}\n/>", "<{} x=1>")]
    fragments += [f"<style>{value}</style>" for value in _VALUES]
    refused = 0
    for fragment in fragments:
        checker = report._FragmentChecker()
        checker.feed(fragment)
        checker.close()
        if checker.problems:
            refused += 1
            assert report._candidate(fragment), (fragment, checker.problems)
    assert refused > len(fragments) // 3  # (the cases are the ones the check is about)


def test_table_cells_are_formatted_by_column_as_each_cell_alone_would_be():
    """table_html formats a column at a time (one formatter per dtype); every cell is still the one
    report._cell makes of its value alone (the per-cell reference), for floats (NaN, infinities,
    -0.0, tiny and huge), integers, booleans, strings to escape, dates, decimals and nulls."""
    import datetime as dt
    import decimal
    import re

    import polars as pl

    from benchcert.tasks.render import report

    df = pl.DataFrame({
        "f": [0.5, None, float("nan"), float("inf"), -float("inf"), -0.0, 1e-9, 3e12, -2.25],
        "f32": pl.Series([1.5, None, 2.0, 0.0, -1.0, 1e-7, 7.0, 8.0, 9.0], dtype=pl.Float32),
        "i": [1, None, -3, 0, 10**12, 5, 6, 7, 8],
        "u": pl.Series([1, 2, None, 4, 5, 6, 7, 8, 9], dtype=pl.UInt32),
        "b": [True, False, None, True, False, True, None, False, True],
        "s": ["a<b", None, "x&y", '"q"', "plain", "\u202eevil", "", "é", "'"],
        "d": [dt.date(2026, 1, k) for k in range(1, 10)],
        "dec": pl.Series([decimal.Decimal("1.25")] * 9, dtype=pl.Decimal(10, 2)),
    })
    html = report.table_html(df, max_rows=7, float_digits=3)
    body = re.search(r"<tbody>(.*)</tbody>", html).group(1)
    numeric = [d.is_numeric() for d in df.dtypes]
    expected = "".join("<tr>" + "".join(report._td(v, n, 3) for v, n in zip(row, numeric)) + "</tr>"
                       for row in df.head(7).iter_rows())
    assert body == expected
    assert "showing 7 of 9 rows" in html
    assert report.table_html(df.clear()).count("no rows") == 1
