"""Dependency-free renderer for a self-contained, offline ``report.html``.

Everything here produces plain strings:

* :func:`table_html` -- an escaped HTML ``<table>`` from a polars DataFrame;
* :func:`interval_plot_svg` -- an inline-SVG forest plot (intervals per label and series);
* :func:`render_report` -- the full HTML5 document built from :class:`Section` objects.

Safety rules followed throughout:

* every string that may come from a log (model / subject / benchmark names, table cells,
  titles, meta values) goes through :func:`_esc` (``html.escape(..., quote=True)`` after
  replacing characters that are illegal in XML), including SVG ``<text>`` and ``<title>``;
* no external URL of any kind is emitted -- no ``<script>``, no ``<link>``, no web fonts,
  no ``xmlns="http://..."`` on the inline SVG (HTML5 does not need it);
* the document carries a Content-Security-Policy meta tag that forbids any fetch, and
  :func:`render_report` refuses section fragments that reference external resources.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Sequence

import numpy as np
import polars as pl

__all__ = [
    "Section",
    "table_html",
    "interval_plot_svg",
    "render_report",
    "heatmap_svg",
    "CSP_POLICY",
]

CSP_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)

# Characters that are not allowed in XML 1.0 (control chars, lone surrogates,
# non-characters). They are replaced so every SVG fragment stays well-formed XML
# and the document can always be encoded as UTF-8.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff"
                          # Bidi embeddings, overrides and isolates: a name from a log could reorder the
                          # text around it (e.g. make "gpt-evil" read as another model); shown as U+FFFD.
                          "\u202a-\u202e\u2066-\u2069]")

_NULL = "\u2014"  # em dash shown for nulls / missing values
_MINUS = "\u2212"

# Okabe-Ito inspired, colour-blind friendly; cycled when there are more series.
_PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#8C8C8C",
)
_SAFE_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_FONT = "system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif"


# --------------------------------------------------------------------------- helpers


def _esc(value: Any) -> str:
    """HTML/XML-escape any value (None -> empty string)."""
    s = "" if value is None else str(value)
    return html.escape(_XML_ILLEGAL.sub("\ufffd", s), quote=True)


#: The escaper every piece of report HTML goes through (analyses import it; never html.escape directly).
escape = _esc


def _truncate(s: str, max_chars: int) -> str:
    s = _XML_ILLEGAL.sub("\ufffd", s)
    if max_chars < 2 or len(s) <= max_chars:
        return s
    return s[: max_chars - 1].rstrip() + "\u2026"


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
        return _esc(_fmt_float(float(value), float_digits)), "num"
    if isinstance(value, (int, np.integer)):
        return _esc(str(int(value))), "num"
    return _esc(value), ""


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return re.sub(r"-{2,}", "-", s).strip("-")


# --------------------------------------------------------------------------- Section


@dataclass(frozen=True)
class Section:
    """One report section. ``html`` must be an already-safe fragment produced by
    :func:`table_html` / :func:`interval_plot_svg` (or other escaped markup)."""

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
        out.append(f"<caption>{_esc(caption)}</caption>")
    out.append("<thead><tr>")
    for name, dt, is_num in zip(df.columns, df.dtypes, numeric):
        cls = ' class="num"' if is_num else ""
        out.append(f'<th scope="col"{cls} title="{_esc(dt)}">{_esc(name)}</th>')
    out.append("</tr></thead>")
    out.append("<tbody>")
    for row in shown.iter_rows():
        out.append("<tr>")
        for value, is_num in zip(row, numeric):
            text, cls = _cell(value, float_digits)
            if cls == "" and is_num:
                cls = "num"
            out.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        out.append("</tr>")
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


# --------------------------------------------------------------------------- forest plot


def _as_floats(values: Any, n: int, key: str, series_name: str) -> np.ndarray:
    if values is None:
        return np.full(n, np.nan)
    if isinstance(values, pl.Series):
        values = values.to_list()
    arr = np.array(
        [np.nan if v is None else v for v in values], dtype=float
    ).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(
            f"series {series_name!r}: {key!r} has {arr.shape[0]} values, expected {n}"
        )
    return arr


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * mag * (1 + 1e-9):
            return m * mag
    return 10.0 * mag


def _ticks(lo: float, hi: float, target: int = 10) -> tuple[list[float], float]:
    step = _nice_step(hi - lo, target)
    first = math.ceil(lo / step - 1e-9) * step
    ticks: list[float] = []
    t = first
    while t <= hi + step * 1e-9 and len(ticks) < 100:
        ticks.append(round(t, 12) + 0.0)
        t += step
    return ticks, step


def _decimals_for(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _fmt_value(v: float, percent: bool, decimals: int) -> str:
    if not math.isfinite(v):
        return _NULL
    if percent:
        s = f"{v * 100:.{decimals}f}%"
    elif abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-4):
        s = f"{v:.3g}"
    else:
        s = f"{v:.{decimals}f}"
    return s.replace("-", _MINUS, 1) if s.startswith("-") else s


def _n(x: float) -> str:
    """Compact coordinate formatting."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _text_width(s: str, font_px: float) -> float:
    return len(s) * font_px * 0.56


def interval_plot_svg(
    labels: list[str],
    series: list[dict],
    *,
    title: str = "",
    x_label: str = "score",
    x_range: tuple[float, float] | None = None,
    percent: bool = True,
    width: int = 900,
    max_label_chars: int = 40,
    max_rows: int = 60,
) -> str:
    """Inline-SVG forest plot.

    At most ``max_rows`` rows are drawn (the first ones, in the order given: callers list
    the best first), so a 4,000-model leaderboard keeps a readable and small report; the
    title then says how many were drawn (every row is in the run's Parquet tables).

    One row per label; for each series (``{"name", "estimate", "lower", "upper"}``, each
    a sequence aligned with ``labels``; optional ``"color"`` as ``#rgb``/``#rrggbb``)
    a horizontal interval with a dot at the estimate, series offset vertically within a
    row. An interval is drawn iff ``lower`` and ``upper`` are both finite; each drawn
    interval is one ``<g class="interval">``. A finite estimate without a finite
    interval is drawn as a hollow ``<circle class="point-only">``. Values outside
    ``x_range`` are clipped and marked with a chevron at the plot edge.
    """
    labels = [("" if lab is None else str(lab)) for lab in labels]
    n_all = len(labels)
    if max_rows < 1:
        raise ValueError("max_rows must be >= 1")
    if n_all > max_rows:
        labels = labels[:max_rows]
        series = [{**s_, **{key: list(s_.get(key))[:max_rows] for key in ("estimate", "lower", "upper")
                            if s_.get(key) is not None}} for s_ in series]
    n = len(labels)
    n_series = len(series)
    if n_all > n:
        title = f"{title} (the first {n} of {n_all} rows are drawn; every row is in the run's tables)"

    names: list[str] = []
    est, low, up = [], [], []
    colors: list[str] = []
    for k, s in enumerate(series):
        name = str(s.get("name", f"series {k + 1}"))
        names.append(name)
        est.append(_as_floats(s.get("estimate"), n, "estimate", name))
        low.append(_as_floats(s.get("lower"), n, "lower", name))
        up.append(_as_floats(s.get("upper"), n, "upper", name))
        c = s.get("color")
        colors.append(
            c if isinstance(c, str) and _SAFE_COLOR.match(c) else _PALETTE[k % len(_PALETTE)]
        )

    # ---- x range
    if x_range is not None:
        lo, hi = float(x_range[0]), float(x_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"x_range must be finite with lo < hi, got {x_range!r}")
    else:
        finite = [a[np.isfinite(a)] for a in (*est, *low, *up)]
        allv = np.concatenate(finite) if finite else np.array([])
        if allv.size == 0:
            lo, hi = 0.0, 1.0
        else:
            dmin, dmax = float(allv.min()), float(allv.max())
            span = dmax - dmin
            pad = span * 0.05 if span > 0 else max(abs(dmin) * 0.1, 0.05 if percent else 1.0)
            lo, hi = dmin - pad, dmax + pad
            if percent and dmin >= 0.0 and dmax <= 1.0:
                lo, hi = max(lo, 0.0), min(hi, 1.0)
            if hi <= lo:  # pragma: no cover - defensive
                hi = lo + 1.0
    ticks, step = _ticks(lo, hi)
    tick_dec = _decimals_for(step * (100.0 if percent else 1.0))
    tip_dec = tick_dec + 1

    # ---- layout
    label_font, small_font = 12.0, 11.0
    shown_labels = [_truncate(lab, max_label_chars) for lab in labels]
    longest = max((_text_width(s, label_font) for s in shown_labels), default=0.0)
    label_w = min(max(longest + 18.0, 60.0), width * 0.4)
    x0, x1 = label_w, float(width) - 34.0

    gap = 7.0
    row_h = max(18.0, n_series * gap + 9.0)

    y = 8.0
    title_y = None
    if title:
        title_y = y + 14.0
        y += 24.0
    legend_items: list[tuple[float, float, int, str]] = []  # (x, y, k, text)
    if n_series:
        lx, ly = x0, y + 10.0
        for k, name in enumerate(names):
            txt = _truncate(name, 48)
            w = 26.0 + _text_width(txt, small_font) + 18.0
            if lx + w > x1 and lx > x0:
                lx, ly = x0, ly + 18.0
            legend_items.append((lx, ly, k, txt))
            lx += w
        y = ly + 14.0
    top_axis = n > 20
    if top_axis:
        y += 18.0
    plot_top = y
    plot_bottom = plot_top + max(n, 1) * row_h
    height = plot_bottom + 22.0 + (22.0 if x_label else 0.0) + 6.0

    def sx(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * (x1 - x0)

    out: list[str] = []
    out.append(
        f'<svg class="forest" role="img" width="{width}" height="{_n(height)}" '
        f'viewBox="0 0 {width} {_n(height)}" font-family="{_FONT}" font-size="12" '
        f'style="max-width:100%;height:auto">'
    )
    out.append(f"<title>{_esc(title or 'interval plot')}</title>")
    out.append(f'<rect x="0" y="0" width="{width}" height="{_n(height)}" fill="#ffffff"/>')
    if title_y is not None:
        out.append(
            f'<text x="{_n(x0)}" y="{_n(title_y)}" font-size="14" font-weight="600" '
            f'fill="#1f2328">{_esc(_truncate(title, 110))}</text>'
        )

    # legend
    for lx, ly, k, txt in legend_items:
        c = colors[k]
        out.append('<g class="legend-item">')
        out.append(f"<title>{_esc(names[k])}</title>")
        out.append(
            f'<line x1="{_n(lx)}" y1="{_n(ly)}" x2="{_n(lx + 18)}" y2="{_n(ly)}" '
            f'stroke="{c}" stroke-width="2"/>'
        )
        out.append(f'<circle cx="{_n(lx + 9)}" cy="{_n(ly)}" r="3.5" fill="{c}"/>')
        out.append(
            f'<text x="{_n(lx + 24)}" y="{_n(ly + 4)}" font-size="{small_font:g}" '
            f'fill="#1f2328">{_esc(txt)}</text>'
        )
        out.append("</g>")

    # zebra bands
    out.append('<g class="rows">')
    for i in range(n):
        if i % 2 == 1:
            out.append(
                f'<rect x="0" y="{_n(plot_top + i * row_h)}" width="{_n(x1)}" '
                f'height="{_n(row_h)}" fill="#f3f5f8"/>'
            )
    out.append("</g>")

    # grid + tick labels
    out.append('<g class="axis" font-size="11" fill="#59636e">')
    for t in ticks:
        gx = sx(t)
        out.append(
            f'<line x1="{_n(gx)}" y1="{_n(plot_top)}" x2="{_n(gx)}" y2="{_n(plot_bottom)}" '
            f'stroke="#d8dee4" stroke-width="1"/>'
        )
        lab = _esc(_fmt_value(t, percent, tick_dec))
        out.append(
            f'<text x="{_n(gx)}" y="{_n(plot_bottom + 15)}" text-anchor="middle">{lab}</text>'
        )
        if top_axis:
            out.append(
                f'<text x="{_n(gx)}" y="{_n(plot_top - 6)}" text-anchor="middle">{lab}</text>'
            )
    out.append(
        f'<line x1="{_n(x0)}" y1="{_n(plot_bottom)}" x2="{_n(x1)}" y2="{_n(plot_bottom)}" '
        f'stroke="#8c959f" stroke-width="1"/>'
    )
    if x_label:
        out.append(
            f'<text x="{_n((x0 + x1) / 2)}" y="{_n(plot_bottom + 36)}" text-anchor="middle" '
            f'font-size="12" fill="#1f2328">{_esc(_truncate(x_label, 80))}</text>'
        )
    out.append("</g>")

    # labels
    out.append('<g class="labels" font-size="12" fill="#1f2328" text-anchor="end">')
    for i, (full, shown) in enumerate(zip(labels, shown_labels)):
        cy = plot_top + (i + 0.5) * row_h
        out.append(
            f'<text x="{_n(x0 - 10)}" y="{_n(cy + 4)}"><title>{_esc(full)}</title>'
            f"{_esc(shown)}</text>"
        )
    out.append("</g>")

    # intervals
    out.append('<g class="intervals">')
    for i in range(n):
        row_c = plot_top + (i + 0.5) * row_h
        for k in range(n_series):
            cy = row_c + (k - (n_series - 1) / 2.0) * gap
            e, l, u = float(est[k][i]), float(low[k][i]), float(up[k][i])
            c = colors[k]
            e_ok = math.isfinite(e)
            tip_est = _fmt_value(e, percent, tip_dec) if e_ok else _NULL
            if math.isfinite(l) and math.isfinite(u):
                l, u = min(l, u), max(l, u)
                tip = (
                    f"{labels[i]} \u00b7 {names[k]}: {tip_est} "
                    f"[{_fmt_value(l, percent, tip_dec)}, {_fmt_value(u, percent, tip_dec)}]"
                )
                cl, cu = min(max(l, lo), hi), min(max(u, lo), hi)
                out.append(f'<g class="interval" data-series="{k}" data-row="{i}">')
                out.append(f"<title>{_esc(tip)}</title>")
                out.append(
                    f'<line class="ci" x1="{_n(sx(cl))}" y1="{_n(cy)}" x2="{_n(sx(cu))}" '
                    f'y2="{_n(cy)}" stroke="{c}" stroke-width="2" stroke-linecap="round"/>'
                )
                if l < lo:
                    ex = sx(lo)
                    out.append(
                        f'<path class="clip" d="M{_n(ex + 5)},{_n(cy - 3.5)} L{_n(ex)},{_n(cy)} '
                        f'L{_n(ex + 5)},{_n(cy + 3.5)}" fill="none" stroke="{c}" stroke-width="1.5"/>'
                    )
                if u > hi:
                    ex = sx(hi)
                    out.append(
                        f'<path class="clip" d="M{_n(ex - 5)},{_n(cy - 3.5)} L{_n(ex)},{_n(cy)} '
                        f'L{_n(ex - 5)},{_n(cy + 3.5)}" fill="none" stroke="{c}" stroke-width="1.5"/>'
                    )
                if e_ok and lo <= e <= hi:
                    out.append(
                        f'<circle class="est" cx="{_n(sx(e))}" cy="{_n(cy)}" r="3.5" '
                        f'fill="{c}" stroke="#ffffff" stroke-width="0.8"/>'
                    )
                out.append("</g>")
            elif e_ok and lo <= e <= hi:
                tip = f"{labels[i]} \u00b7 {names[k]}: {tip_est} (no interval)"
                out.append(
                    f'<circle class="point-only" cx="{_n(sx(e))}" cy="{_n(cy)}" r="3.5" '
                    f'fill="#ffffff" stroke="{c}" stroke-width="1.5">'
                    f"<title>{_esc(tip)}</title></circle>"
                )
    out.append("</g>")

    if n == 0:
        out.append(
            f'<text x="{_n((x0 + x1) / 2)}" y="{_n(plot_top + row_h / 2 + 4)}" '
            f'text-anchor="middle" fill="#59636e">no data</text>'
        )
    out.append("</svg>")
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
thead th{background:var(--alt);border-bottom:2px solid var(--border);font-weight:600}
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


def _check_fragment(fragment: str, where: str) -> None:
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
        base = _slug(sec.anchor) or _slug(sec.title) or f"section-{i}"
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
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(CSP_POLICY)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="benchcert">',
        f"<title>{_esc(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        '<header id="top">',
        f"<h1>{_esc(title)}</h1>",
    ]
    rows = list(meta.items()) + [("generated", generated_at)]
    out.append('<table class="meta"><tbody>')
    for k, v in rows:
        out.append(f'<tr><th scope="row">{_esc(k)}</th><td>{_esc(v)}</td></tr>')
    out.append("</tbody></table>")
    out.append("</header>")

    if sections:
        out.append('<nav class="toc" id="toc" aria-label="Contents"><h2>Contents</h2><ol>')
        for sec, anchor in zip(sections, anchors):
            out.append(f'<li><a href="#{anchor}">{_esc(sec.title)}</a></li>')
        out.append("</ol></nav>")

    out.append("<main>")
    for sec, anchor in zip(sections, anchors):
        out.append(f'<section id="{anchor}">')
        out.append(f"<h2>{_esc(sec.title)}</h2>")
        out.append(sec.html)
        out.append("</section>")
    out.append("</main>")
    out.append(
        f"<footer>Generated by benchcert \u00b7 {_esc(generated_at)} \u00b7 "
        "self-contained document, no network access required</footer>"
    )
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"



# --------------------------------------------------------------------------- heatmap

_HEAT_NEG = (33, 102, 172)  # #2166ac
_HEAT_MID = (247, 247, 247)  # #f7f7f7
_HEAT_POS = (178, 24, 43)  # #b2182b
_HEAT_NAN = "#cfd4da"


def _heat_color(v: float, vmin: float, vmax: float) -> str:
    """Diverging blue-white-red colour, white at 0 (or the mid-point when 0 is outside)."""
    if not math.isfinite(v):
        return _HEAT_NAN
    mid = 0.0 if vmin < 0.0 < vmax else (vmin + vmax) / 2.0
    if v >= mid:
        f = min((v - mid) / (vmax - mid), 1.0) if vmax > mid else 0.0
        end = _HEAT_POS
    else:
        f = min((mid - v) / (mid - vmin), 1.0) if mid > vmin else 0.0
        end = _HEAT_NEG
    r, g, b = (int(math.floor(m + (e - m) * f + 0.5)) for m, e in zip(_HEAT_MID, end))
    return f"#{r:02x}{g:02x}{b:02x}"


def _heat_colors(arr: np.ndarray, vmin: float, vmax: float) -> list[list[str]]:
    """:func:`_heat_color` for a whole matrix, vectorised."""
    if arr.size == 0:
        return [[] for _ in range(arr.shape[0])]
    mid = 0.0 if vmin < 0.0 < vmax else (vmin + vmax) / 2.0
    v = np.nan_to_num(arr, nan=mid)
    with np.errstate(invalid="ignore", divide="ignore"):
        f_pos = np.clip((v - mid) / (vmax - mid), 0.0, 1.0) if vmax > mid else np.zeros_like(v)
        f_neg = np.clip((mid - v) / (mid - vmin), 0.0, 1.0) if mid > vmin else np.zeros_like(v)
    base = np.array(_HEAT_MID, dtype=float)
    pos = v >= mid
    f = np.where(pos, f_pos, f_neg)[..., None]
    end = np.where(pos[..., None], np.array(_HEAT_POS, dtype=float), np.array(_HEAT_NEG, dtype=float))
    rgb = np.floor(base + (end - base) * f + 0.5).astype(int)
    code = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    hexes = np.char.add("#", np.char.zfill(np.char.mod("%x", code), 6))
    hexes = np.where(np.isfinite(arr), hexes, _HEAT_NAN)
    return hexes.tolist()


def heatmap_svg(
    matrix: Any,
    labels: Sequence[str],
    *,
    groups: Sequence[str] | None = None,
    title: str = "",
    vmin: float = -1.0,
    vmax: float = 1.0,
    value_label: str = "correlation",
    max_label_chars: int = 28,
    cell_px: int | None = None,
    cell_titles: bool | None = None,
) -> str:
    """Inline-SVG heatmap of a square matrix, rows and columns in the given order.

    ``groups`` (one name per label) marks contiguous blocks - e.g. domains, with the
    labels already ordered by domain - with separator lines and a block name beside the
    rows. Colours are diverging (blue < 0 < red, white at 0); NaN cells are grey and say
    "undefined" in their tooltip. Every label, group and title is escaped; the SVG is
    well-formed XML with no external reference. ``cell_titles`` adds a hover tooltip per
    cell (about 100 bytes each); by default only up to 60 x 60 cells, so that a large
    matrix stays a few hundred kilobytes (row and column labels keep their tooltips).
    """
    arr = np.asarray(matrix, dtype=float)
    n = len(labels)
    if arr.shape != (n, n):
        raise ValueError(f"matrix must be square with one row per label ({n}); got shape {arr.shape}")
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups must have one entry per label ({n}); got {len(groups)}")
    if not (math.isfinite(vmin) and math.isfinite(vmax) and vmin < vmax):
        raise ValueError(f"need finite vmin < vmax; got {vmin!r}, {vmax!r}")
    # Whole-pixel cells keep every coordinate an integer (shorter markup, crisp edges).
    cell = int(cell_px) if cell_px else max(4, min(22, 640 // max(n, 1)))
    if cell_titles is None:
        cell_titles = n <= 60
    font = max(6.0, min(11.0, cell * 0.95))
    shown = [_truncate(str(lab), max_label_chars) for lab in labels]
    label_w = min(max((_text_width(s, font) for s in shown), default=0.0) + 10.0, 260.0)
    group_w = 0.0
    blocks: list[tuple[int, int, str]] = []
    if groups is not None and n:
        start = 0
        for i in range(1, n + 1):
            if i == n or groups[i] != groups[start]:
                blocks.append((start, i, str(groups[start])))
                start = i
        group_w = min(max(_text_width(_truncate(b[2], 22), 11.0) for b in blocks) + 14.0, 180.0)
    top = float(math.ceil(8.0 + (24.0 if title else 0.0) + label_w))
    x0 = float(math.ceil(8.0 + group_w + label_w))
    size = n * cell
    legend_x = x0 + size + 24.0
    width = legend_x + 90.0
    height = max(top + size + 16.0, top + 200.0)

    out: list[str] = [
        f'<svg class="heatmap" role="img" width="{_n(width)}" height="{_n(height)}" '
        f'viewBox="0 0 {_n(width)} {_n(height)}" font-family="{_FONT}" font-size="{font:g}" '
        f'style="max-width:100%;height:auto">',
        f"<title>{_esc(title or 'heatmap')}</title>",
        f'<rect x="0" y="0" width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>',
    ]
    if title:
        out.append(f'<text x="8" y="22" font-size="14" font-weight="600" fill="#1f2328">'
                   f"{_esc(_truncate(title, 110))}</text>")
    # row labels (left) and column labels (top, rotated)
    out.append('<g class="row-labels" fill="#1f2328" text-anchor="end">')
    for i, (full, s) in enumerate(zip(labels, shown)):
        y = top + (i + 0.5) * cell + font * 0.35
        out.append(f'<text x="{_n(x0 - 4)}" y="{_n(y)}"><title>{_esc(full)}</title>{_esc(s)}</text>')
    out.append("</g>")
    out.append('<g class="col-labels" fill="#1f2328" text-anchor="start">')
    for j, (full, s) in enumerate(zip(labels, shown)):
        x = x0 + (j + 0.5) * cell + font * 0.35
        y = top - 4.0
        out.append(f'<text x="{_n(x)}" y="{_n(y)}" transform="rotate(-90 {_n(x)} {_n(y)})">'
                   f"<title>{_esc(full)}</title>{_esc(s)}</text>")
    out.append("</g>")
    # cells (colours computed for the whole matrix at once; coordinates are whole pixels)
    out.append('<g class="cells" shape-rendering="crispEdges">')
    colors = _heat_colors(arr, vmin, vmax)
    xs = [int(x0) + j * cell for j in range(n)]
    for i in range(n):
        y = int(top) + i * cell
        row = colors[i]
        if cell_titles:
            rl = _esc(labels[i])
            for j in range(n):
                v = arr[i, j]
                txt = f"{v:.2f}" if math.isfinite(v) else "undefined"
                out.append(f'<rect x="{xs[j]}" y="{y}" width="{cell}" height="{cell}" fill="{row[j]}">'
                           f"<title>{rl} \u00d7 {_esc(labels[j])}: {txt}</title></rect>")
        else:
            out.append("".join(f'<rect x="{xs[j]}" y="{y}" width="{cell}" height="{cell}" fill="{row[j]}"/>'
                               for j in range(n)))
    out.append("</g>")
    # group separators and names
    if blocks:
        out.append('<g class="groups" fill="#1f2328" font-size="11">')
        for a, b, name in blocks:
            if a > 0:
                p = _n(top + a * cell)
                q = _n(x0 + a * cell)
                out.append(f'<line x1="{_n(x0)}" y1="{p}" x2="{_n(x0 + size)}" y2="{p}" stroke="#1f2328" '
                           'stroke-width="1"/>')
                out.append(f'<line x1="{q}" y1="{_n(top)}" x2="{q}" y2="{_n(top + size)}" stroke="#1f2328" '
                           'stroke-width="1"/>')
            cy = top + (a + b) / 2.0 * cell + 4.0
            out.append(f'<text x="8" y="{_n(cy)}"><title>{_esc(name)}</title>{_esc(_truncate(name, 22))}</text>')
        out.append("</g>")
    out.append(f'<rect x="{_n(x0)}" y="{_n(top)}" width="{_n(size)}" height="{_n(size)}" fill="none" '
               'stroke="#8c959f" stroke-width="1"/>')
    # colour bar
    bar_h, steps = 160.0, 32
    out.append('<g class="legend" font-size="11" fill="#1f2328">')
    out.append(f'<text x="{_n(legend_x)}" y="{_n(top - 8)}">{_esc(_truncate(value_label, 18))}</text>')
    for k in range(steps):
        v = vmax - (vmax - vmin) * (k + 0.5) / steps
        out.append(f'<rect x="{_n(legend_x)}" y="{_n(top + k * bar_h / steps)}" width="14" '
                   f'height="{_n(bar_h / steps + 0.5)}" fill="{_heat_color(v, vmin, vmax)}"/>')
    for v in (vmax, (vmin + vmax) / 2.0, vmin):
        y = top + (vmax - v) / (vmax - vmin) * bar_h
        out.append(f'<text x="{_n(legend_x + 20)}" y="{_n(y + 4)}">{_esc(_fmt_value(v, False, 2))}</text>')
    out.append(f'<rect x="{_n(legend_x)}" y="{_n(top + bar_h + 12)}" width="14" height="10" fill="{_HEAT_NAN}"/>')
    out.append(f'<text x="{_n(legend_x + 20)}" y="{_n(top + bar_h + 21)}">undefined</text>')
    out.append("</g>")
    if n == 0:
        out.append(f'<text x="{_n(x0)}" y="{_n(top + 16)}" fill="#59636e">no data</text>')
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- reliability diagram


def reliability_svg(panels: Sequence[dict], *, title: str = "", size_px: int = 220) -> str:
    """Inline-SVG reliability diagrams, one small panel per model.

    Each panel is a dict with ``name`` (str) and equal-length sequences ``confidence``,
    ``accuracy``, ``lower``, ``upper`` and ``count`` (one entry per non-empty confidence bin).
    Points are bin accuracy against mean confidence (area ~ item count), with the accuracy's
    interval as a vertical bar; the diagonal is perfect calibration.  Names are escaped and
    truncated; the SVG has no external reference.
    """
    cols = max(1, min(len(panels), 4))
    rows = max(1, math.ceil(len(panels) / cols))
    pad_l, pad_t, pad_b, gap = 34.0, 30.0, 30.0, 18.0
    top0 = 8.0 + (24.0 if title else 0.0)
    pw = pad_l + size_px + gap
    ph = pad_t + size_px + pad_b
    width, height = 8.0 + cols * pw, top0 + rows * ph + 8.0
    out = [f'<svg class="reliability" role="img" width="{_n(width)}" height="{_n(height)}" '
           f'viewBox="0 0 {_n(width)} {_n(height)}" font-family="{_FONT}" font-size="10" '
           f'style="max-width:100%;height:auto">',
           f"<title>{_esc(title or 'reliability diagram')}</title>",
           f'<rect x="0" y="0" width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>']
    if title:
        out.append(f'<text x="8" y="22" font-size="14" font-weight="600" fill="#1f2328">'
                   f"{_esc(_truncate(title, 110))}</text>")
    for k, panel in enumerate(panels):
        ox = 8.0 + (k % cols) * pw + pad_l
        oy = top0 + (k // cols) * ph + pad_t
        s = float(size_px)

        def px(c, a):
            return ox + min(max(c, 0.0), 1.0) * s, oy + (1.0 - min(max(a, 0.0), 1.0)) * s

        name = str(panel.get("name", ""))
        out.append(f'<g class="panel"><text x="{_n(ox)}" y="{_n(oy - 10)}" font-size="11" font-weight="600" '
                   f'fill="#1f2328"><title>{_esc(name)}</title>{_esc(_truncate(name, 34))}</text>')
        out.append(f'<rect x="{_n(ox)}" y="{_n(oy)}" width="{_n(s)}" height="{_n(s)}" fill="#f6f8fa" '
                   'stroke="#8c959f" stroke-width="1"/>')
        x1, y1 = px(0, 0)
        x2, y2 = px(1, 1)
        out.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="#8c959f" '
                   'stroke-dasharray="4 3" stroke-width="1"/>')
        for t in (0.0, 0.5, 1.0):
            tx, ty = px(t, t)
            out.append(f'<text x="{_n(tx)}" y="{_n(oy + s + 12)}" text-anchor="middle" fill="#59636e">{t:g}</text>')
            out.append(f'<text x="{_n(ox - 4)}" y="{_n(ty + 3)}" text-anchor="end" fill="#59636e">{t:g}</text>')
        out.append(f'<text x="{_n(ox + s / 2)}" y="{_n(oy + s + 24)}" text-anchor="middle" fill="#59636e">'
                   "confidence</text>")
        counts = [float(c) for c in panel.get("count", [])]
        cmax = max(counts, default=1.0) or 1.0
        for c, a, lo, hi, cnt in zip(panel.get("confidence", []), panel.get("accuracy", []),
                                     panel.get("lower", []), panel.get("upper", []), counts):
            if not all(math.isfinite(float(v)) for v in (c, a, lo, hi)):
                continue
            cx, cy = px(float(c), float(a))
            _, ylo = px(float(c), float(lo))
            _, yhi = px(float(c), float(hi))
            r = 2.0 + 4.0 * math.sqrt(cnt / cmax)
            out.append(f'<line x1="{_n(cx)}" y1="{_n(ylo)}" x2="{_n(cx)}" y2="{_n(yhi)}" stroke="#0969da" '
                       'stroke-width="1.2"/>')
            out.append(f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="{_n(r)}" fill="#0969da" fill-opacity="0.7">'
                       f"<title>confidence {float(c):.3f}, accuracy {float(a):.3f} "
                       f"[{float(lo):.3f}, {float(hi):.3f}], {int(cnt)} items</title></circle>")
        if not counts:
            out.append(f'<text x="{_n(ox + 8)}" y="{_n(oy + 16)}" fill="#59636e">no data</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
