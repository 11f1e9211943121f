"""Dependency-free renderer for a self-contained, offline ``report.html``.

Everything here produces plain strings:

* :func:`table_html` -- an escaped HTML ``<table>`` from a polars DataFrame;
* :func:`render_report` -- the full HTML5 document built from :class:`Section` objects.

The charts a section shows are drawn by :mod:`benchcert.tasks.render.charts`.

Safety rules followed throughout:

* every string that may come from a log (model / subject / benchmark names, table cells,
  titles, meta values) goes through :func:`~benchcert.tasks.render.escape.escape`, the one
  escaper of report, dashboard and every analysis section;
* no external URL of any kind is emitted -- no ``<script>``, no ``<link>``, no web fonts,
  no ``xmlns="http://..."`` on the inline SVG (HTML5 does not need it);
* the document carries a Content-Security-Policy meta tag that forbids any fetch, and
  :func:`render_report` refuses section fragments that reference external resources (each
  fragment is searched whole; only one with a candidate is parsed, :func:`_candidate`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Sequence

import numpy as np
import polars as pl

from benchcert.tasks.render.escape import escape
from benchcert.tasks.slug import slug

__all__ = [
    "Section",
    "table_html",
    "render_report",
    "CSP_POLICY",
]

CSP_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)

_NULL = "\u2014"  # em dash shown for nulls / missing values


# --------------------------------------------------------------------------- helpers


def _fmt_float(x: float, digits: int) -> str:
    """Fixed ``digits`` decimals; scientific for tiny / huge magnitudes."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "\u221e" if x > 0 else "-\u221e"
    digits = max(0, int(digits))
    if x == 0:
        x = 0.0  # no "-0.0000"
    ax = abs(x)
    if x != 0 and (ax < 10.0 ** (-digits) or ax >= 1e9):
        s = f"{x:.{max(digits - 1, 1)}e}"
    else:
        s = f"{x:.{digits}f}"
    return s


def _cell(value: Any, float_digits: int) -> tuple[str, str]:
    """Return (escaped text, css class) for one table cell."""
    if value is None:
        return _NULL, "null"
    if isinstance(value, bool):
        return ("true" if value else "false"), ""
    if isinstance(value, (float, np.floating)):
        return escape(_fmt_float(float(value), float_digits)), "num"
    if isinstance(value, (int, np.integer)):
        return escape(str(int(value))), "num"
    return escape(value), ""


_NULL_TD = f'<td class="null">{_NULL}</td>'


def _td(value: Any, is_num: bool, float_digits: int) -> str:
    text, cls = _cell(value, float_digits)
    if cls == "" and is_num:
        cls = "num"
    return f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>"


def _column_cells(values: list, dtype: pl.DataType, is_num: bool, float_digits: int) -> list[str]:
    """The ``<td>`` of each value of one column, as :func:`_cell` makes them.

    A number's text needs no escaping (digits, sign, point, exponent, NaN, infinity signs): floats,
    integers and booleans are formatted here without the per-cell type tests, which on a report's
    hundred-row tables of many columns cost more than the rest of the report's rendering.
    """
    if dtype.is_float():
        # _fmt_float's fixed-point case (|x| from 10^-digits up to 1e9, so not 0, NaN or infinite) inline
        digits, least = max(0, int(float_digits)), 10.0 ** -max(0, int(float_digits))
        return [_NULL_TD if v is None else
                f'<td class="num">{v:.{digits}f}</td>' if least <= abs(v) < 1e9 else
                f'<td class="num">{_fmt_float(v, float_digits)}</td>' for v in values]
    if dtype.is_integer():
        return [_NULL_TD if v is None else f'<td class="num">{v}</td>' for v in values]
    if dtype == pl.Boolean:
        return [_NULL_TD if v is None else ("<td>true</td>" if v else "<td>false</td>") for v in values]
    return [_td(v, is_num, float_digits) for v in values]


# --------------------------------------------------------------------------- Section


@dataclass(frozen=True)
class Section:
    """One report section. ``html`` must be an already-safe fragment produced by
    :func:`table_html`, a chart of :mod:`benchcert.tasks.render.charts` (or other markup
    escaped with :func:`~benchcert.tasks.render.escape.escape`)."""

    title: str
    html: str
    anchor: str = ""


# --------------------------------------------------------------------------- table


def table_html(
    df: pl.DataFrame,
    *,
    max_rows: int = 200,
    float_digits: int = 4,
    caption: str | None = None,
) -> str:
    """Render ``df`` as an escaped HTML table.

    Floats get ``float_digits`` decimals (scientific notation for |x| < 10**-digits or
    >= 1e9), NaN is shown as ``NaN``, nulls as an em dash. At most ``max_rows`` rows are
    shown; when rows are dropped a note "showing N of M rows" follows the table.
    """
    if max_rows < 0:
        raise ValueError("max_rows must be >= 0")
    total = df.height
    shown = df.head(max_rows)
    numeric = [dt.is_numeric() for dt in df.dtypes]

    out: list[str] = ['<div class="table-wrap">', "<table>"]
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    out.append("<thead><tr>")
    for name, dt, is_num in zip(df.columns, df.dtypes, numeric):
        cls = ' class="num"' if is_num else ""
        out.append(f'<th scope="col"{cls} title="{escape(dt)}">{escape(name)}</th>')
    out.append("</tr></thead>")
    out.append("<tbody>")
    if shown.width:
        # column by column (one formatter per dtype), then row by row: the same cells as _cell's
        columns = [_column_cells(shown.get_column(name).to_list(), dt, is_num, float_digits)
                   for name, dt, is_num in zip(df.columns, df.dtypes, numeric)]
        out.extend(f"<tr>{''.join(cells)}</tr>" for cells in zip(*columns))
    if total == 0:
        span = max(1, df.width)
        out.append(f'<tr><td class="null" colspan="{span}">no rows</td></tr>')
    out.append("</tbody></table>")
    if shown.height < total:
        out.append(
            f'<p class="table-note">showing {shown.height:,} of {total:,} rows</p>'
        )
    out.append("</div>")
    return "".join(out)


# --------------------------------------------------------------------------- document

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--border:#d1d9e0;--alt:#f6f8fa;--accent:#0a58a8}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0 auto;max-width:1120px;padding:28px 32px 48px;color:var(--fg);background:#fff;
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:1.75em;line-height:1.25;margin:0 0 .5em;overflow-wrap:anywhere}
h2{font-size:1.3em;line-height:1.3;margin:0 0 .7em;padding-bottom:.25em;
border-bottom:1px solid var(--border);overflow-wrap:anywhere}
h3{font-size:1.05em;margin:1.2em 0 .5em}
p{margin:.4em 0 .9em}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
header{margin-bottom:1.4em}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top;
overflow-wrap:anywhere}
thead th{background:var(--alt);border-bottom:2px solid var(--border);font-weight:600;overflow-wrap:normal}
.bad{color:#b34700;font-weight:600}
.good{color:#005a8c}
.open{color:var(--muted)}
tbody tr:nth-child(even){background:#fafbfc}
th.num,td.num{text-align:right;white-space:nowrap;overflow-wrap:normal}
td.null{color:var(--muted);text-align:center}
caption{caption-side:top;text-align:left;font-weight:600;padding:0 0 6px}
.table-wrap{overflow-x:auto;max-width:100%;margin:0 0 1.2em}
.table-note{color:var(--muted);font-size:12px;font-style:italic;margin:4px 0 0}
table.meta{font-size:14px}
table.meta th{background:none;border:0;color:var(--muted);font-weight:500;white-space:nowrap;
padding:2px 18px 2px 0}
table.meta td{border:0;padding:2px 0}
table.meta tr{background:none}
nav.toc{background:var(--alt);border:1px solid var(--border);border-radius:6px;
padding:10px 20px 12px;margin:0 0 32px}
nav.toc h2{font-size:1em;border:0;margin:0 0 4px;padding:0}
nav.toc ol{margin:0;padding-left:1.5em}
section{margin:0 0 40px}
svg{max-width:100%;height:auto}
svg.forest{display:block;margin:0 0 1em}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--border);padding-top:8px;
margin-top:48px}
@media print{
body{max-width:none;padding:0;font-size:10.5pt}
a{color:inherit}
nav.toc{border:0;background:none;padding:0}
h2,h3{break-after:avoid}
thead{display:table-header-group}
tr,svg.forest,caption{break-inside:avoid}
.table-wrap{overflow:visible}
tbody tr:nth-child(even){background:none}
}
""".strip()

_URL_ATTRS = {
    "href", "src", "xlink:href", "action", "formaction", "srcset", "poster",
    "background", "cite", "data", "longdesc", "manifest", "ping", "codebase", "archive",
}
_FORBIDDEN_TAGS = {
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "link",
    "base", "meta", "form", "audio", "video", "source", "track", "portal",
    "foreignobject",
}
_EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.\-]*:|//|\\\\)", re.IGNORECASE)


class _FragmentChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._in_style = False

    def _attrs(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}> element")
        for name, value in attrs:
            v = (value or "").strip()
            if name.startswith("on"):
                self.problems.append(f"event handler attribute {name!r} on <{tag}>")
            low = v.lower()
            if low.startswith(("http:", "https:", "//")):
                self.problems.append(f"external URL in {name!r} on <{tag}>")
            elif name in _URL_ATTRS and _EXTERNAL.match(v) and not low.startswith("data:"):
                self.problems.append(f"non-local URL in {name!r} on <{tag}>")
            if name == "style" and "url(" in low.replace(" ", ""):
                self.problems.append(f"url() in style attribute on <{tag}>")

    def handle_starttag(self, tag, attrs):
        self._attrs(tag, attrs)
        if tag == "style":
            self._in_style = True

    def handle_startendtag(self, tag, attrs):
        self._attrs(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            low = data.lower().replace(" ", "")
            if "@import" in low or "url(" in low:
                self.problems.append("@import/url() inside <style>")


#: What :class:`_FragmentChecker` could flag, as a superset found by a few regular-expression
#: searches (:func:`_candidate`): a forbidden tag, an attribute named on..., url( or @import, any
#: character reference but those escape.py and the sections write (a reference could spell a scheme,
#: and &nbsp; is a blank strip() removes before one; these decode to none of their characters), and an
#: attribute value that starts with a scheme, // or \\ (:data:`_VALUE`) when it is http:, https: or //
#: or its attribute's name ends with a URL attribute's (:data:`_URL_ATTRS`). A fragment with none of
#: these cannot fail the check, so it is not parsed: parsing every tag in Python took about 1 s of the
#: collation of a 4,000-model report. Separate searches, each starting from one kind of character:
#: one alternation of them all, case-insensitive, took 0.49 CPU s over a 100-model report's 3.2 MB
#: (0.07 s so), and taking any scheme-like value (every chart's ``style="max-width:..."``) for a
#: candidate made the parser read the charts' sections tag by tag (0.5 CPU s of a 1.9 s audit).
_SUSPECT = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"<\s*/?\s*(?:" + "|".join(sorted(_FORBIDDEN_TAGS)) + r")\b",
    r"[\s\"'/]on[\w.:-]*\s*=",
    r"url\s*\(|@import",
    r"&(?!(?:amp|lt|gt|quot|apos|minus|#x27|#39|#34|#x22);)"))
#: An attribute value (after the parser's ``\s*=+\s*`` and a quote) that starts with a scheme, // or \\.
_VALUE = re.compile(r"=+\s*[\"']?\s*([a-z][a-z0-9+.\-]*:|//|\\\\)", re.IGNORECASE)
_URL_ENDINGS = tuple(sorted(_URL_ATTRS))
_NAME_STOPS = frozenset("/>=")


def _candidate(fragment: str) -> bool:
    """Could :class:`_FragmentChecker` flag ``fragment``? (False: it cannot; module notes above.)"""
    if any(p.search(fragment) for p in _SUSPECT):
        return True
    for m in _VALUE.finditer(fragment):
        if m.group(1).lower() in ("http:", "https:", "//"):
            return True
        # the name the parser gives the value ends the run of characters before the = (and blanks)
        # that holds no blank, / > or =; its last 16 characters tell whether it ends as a URL attribute's
        end = m.start()
        while end > 0 and fragment[end - 1].isspace():
            end -= 1
        start = end
        while start > 0 and end - start < 16 and not (fragment[start - 1].isspace()
                                                       or fragment[start - 1] in _NAME_STOPS):
            start -= 1
        if fragment[start:end].lower().endswith(_URL_ENDINGS):
            return True
    return False


def _check_fragment(fragment: str, where: str) -> None:
    if not _candidate(fragment):
        return
    checker = _FragmentChecker()
    checker.feed(fragment)
    checker.close()
    if checker.problems:
        raise ValueError(
            f"section {where!r} is not self-contained/safe: " + "; ".join(checker.problems[:5])
        )


def _anchors(sections: Sequence[Section]) -> list[str]:
    used = {"top", "toc", "contents"}
    out: list[str] = []
    for i, sec in enumerate(sections, start=1):
        base = slug(sec.anchor) or slug(sec.title) or f"section-{i}"
        cand, j = base, 2
        while cand in used:
            cand, j = f"{base}-{j}", j + 1
        used.add(cand)
        out.append(cand)
    return out


def render_report(
    *,
    title: str,
    meta: dict[str, str],
    sections: list[Section],
    generated_at: str,
) -> str:
    """Full, self-contained HTML5 document.

    ``meta`` keys/values and all titles are escaped; ``Section.html`` is inserted
    verbatim but is first checked for external references (scripts, links, remote
    URLs, event handlers) -- a :class:`ValueError` is raised if any is found.
    Anchors are sanitised to ``[a-z0-9-]`` (falling back to a slug of the title) and
    de-duplicated.
    """
    for sec in sections:
        _check_fragment(sec.html, sec.title)
    anchors = _anchors(sections)

    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP_POLICY)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="benchcert">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        '<header id="top">',
        f"<h1>{escape(title)}</h1>",
    ]
    rows = list(meta.items()) + [("generated", generated_at)]
    out.append('<table class="meta"><tbody>')
    for k, v in rows:
        out.append(f'<tr><th scope="row">{escape(k)}</th><td>{escape(v)}</td></tr>')
    out.append("</tbody></table>")
    out.append("</header>")

    if sections:
        out.append('<nav class="toc" id="toc" aria-label="Contents"><h2>Contents</h2><ol>')
        for sec, anchor in zip(sections, anchors):
            out.append(f'<li><a href="#{anchor}">{escape(sec.title)}</a></li>')
        out.append("</ol></nav>")

    out.append("<main>")
    for sec, anchor in zip(sections, anchors):
        out.append(f'<section id="{anchor}">')
        out.append(f"<h2>{escape(sec.title)}</h2>")
        out.append(sec.html)
        out.append("</section>")
    out.append("</main>")
    out.append(
        f"<footer>Generated by benchcert \u00b7 {escape(generated_at)} \u00b7 "
        "self-contained document, no network access required</footer>"
    )
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"
