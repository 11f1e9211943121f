"""Inline-SVG charts for the report and the dashboard: plain strings, no script, no external reference.

* :func:`interval_plot_svg` -- a forest plot: intervals per label and series (report, dashboard);
* :func:`heatmap_svg` -- a square matrix with diverging colours (the report's correlations);
* :func:`reliability_svg` -- small reliability diagrams, one per model (the calibration section);

and the scales and number formats every chart shares (:func:`nice_step`, :func:`fmt_percent`,
:func:`fmt_interval`, :func:`coord`), which the dashboard's trend chart
(:mod:`benchcert.tasks.render.trend`) uses too.

Every string from a log goes through :func:`~benchcert.tasks.render.escape.escape`, in
``<text>`` and ``<title>`` alike, and no chart carries ``xmlns="http://..."`` (HTML5 does not
need it), so a chart never names a URL.  Each chart is built in named steps (layout, axis,
rows, legend, ...) that each return their part of the markup, in drawing order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import polars as pl

from benchcert.tasks.render.escape import escape, truncate

__all__ = ["interval_plot_svg", "heatmap_svg", "reliability_svg", "nice_step", "heat_color",
           "fmt_percent", "fmt_interval", "coord", "REPORT_STEPS", "TREND_STEPS"]

_NULL = "\u2014"  # em dash shown for nulls / missing values
_MINUS = "\u2212"

# Okabe-Ito inspired, colour-blind friendly; cycled when there are more series.
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C8C8C")
_SAFE_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_FONT = "system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif"

#: Tick steps (times a power of ten) of the report's forest plots.
REPORT_STEPS = (1.0, 2.0, 5.0)
#: Tick steps of the dashboard's trend charts; 2.5 gives them a tick more often on a narrow
#: percent axis.  The two sets differ on purpose so both outputs stay as they were.
TREND_STEPS = (1.0, 2.0, 2.5, 5.0)


# --------------------------------------------------------------------------- shared helpers


def nice_step(span: float, target: int, steps: Sequence[float] = REPORT_STEPS) -> float:
    """The smallest ``m * 10**k`` (``m`` in ``steps``, else 10) at least ``span / target``.

    Parameters
    ----------
    span
        Width of the axis (> 0).
    target
        Wanted number of ticks (values below 1 count as 1).
    steps
        Increasing mantissas in [1, 10): :data:`REPORT_STEPS` or :data:`TREND_STEPS`.
    """
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    return next((m * mag for m in steps if raw <= m * mag * (1 + 1e-9)), 10.0 * mag)


def _ticks(lo: float, hi: float, target: int = 10) -> tuple[list[float], float]:
    step = nice_step(hi - lo, target)
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


def fmt_percent(x: float | None) -> str:
    """``0.4567`` -> ``"45.67%"``; None or not finite -> an em dash."""
    return _NULL if x is None or not math.isfinite(x) else f"{100 * x:.2f}%"


def fmt_interval(lo: float | None, hi: float | None) -> str:
    """``(0.4, 0.5)`` -> ``"[40.00, 50.00]"`` (percent points); a missing end -> an em dash."""
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return _NULL
    return f"[{100 * lo:.2f}, {100 * hi:.2f}]"


def coord(x: float, places: int = 2) -> str:
    """Compact coordinate: at most ``places`` decimals, no trailing zeros, never ``-0``."""
    s = f"{x:.{places}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _text_width(s: str, font_px: float) -> float:
    return len(s) * font_px * 0.56


def _svg_open(cls: str, width: str, height: str, font_size: str, title: str) -> list[str]:
    """The ``<svg>`` element, its ``<title>`` and the white background of a report chart."""
    return [f'<svg class="{cls}" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="{_FONT}" font-size="{font_size}" style="max-width:100%;height:auto">',
            f"<title>{escape(title)}</title>",
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']


def _chart_title(title: str, x: str) -> str:
    return (f'<text x="{x}" y="22" font-size="14" font-weight="600" fill="#1f2328">'
            f"{escape(truncate(title, 110))}</text>")


# --------------------------------------------------------------------------- forest plot


def _as_floats(values: Any, n: int, key: str, series_name: str) -> np.ndarray:
    if values is None:
        return np.full(n, np.nan)
    if isinstance(values, pl.Series):
        values = values.to_list()
    arr = np.array([np.nan if v is None else v for v in values], dtype=float).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"series {series_name!r}: {key!r} has {arr.shape[0]} values, expected {n}")
    return arr


@dataclass(frozen=True)
class _ForestSeries:
    """The series of a forest plot as aligned float arrays, with names and safe colours."""

    names: list[str]
    est: list[np.ndarray]
    low: list[np.ndarray]
    up: list[np.ndarray]
    colors: list[str]


def _forest_series(series: list[dict], n: int) -> _ForestSeries:
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
        colors.append(c if isinstance(c, str) and _SAFE_COLOR.match(c) else _PALETTE[k % len(_PALETTE)])
    return _ForestSeries(names, est, low, up, colors)


def _forest_x_range(data: _ForestSeries, x_range: tuple[float, float] | None,
                    percent: bool) -> tuple[float, float]:
    """The x axis: ``x_range`` when given, else the data padded by 5% (kept in [0, 1] for shares)."""
    if x_range is not None:
        lo, hi = float(x_range[0]), float(x_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"x_range must be finite with lo < hi, got {x_range!r}")
        return lo, hi
    finite = [a[np.isfinite(a)] for a in (*data.est, *data.low, *data.up)]
    allv = np.concatenate(finite) if finite else np.array([])
    if allv.size == 0:
        return 0.0, 1.0
    dmin, dmax = float(allv.min()), float(allv.max())
    span = dmax - dmin
    pad = span * 0.05 if span > 0 else max(abs(dmin) * 0.1, 0.05 if percent else 1.0)
    lo, hi = dmin - pad, dmax + pad
    if percent and dmin >= 0.0 and dmax <= 1.0:
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    if hi <= lo:  # pragma: no cover - defensive
        hi = lo + 1.0
    return lo, hi


@dataclass(frozen=True)
class _Forest:
    """Everything a forest plot's drawing steps need: data, axis and layout (pixels)."""

    labels: list[str]
    shown_labels: list[str]
    data: _ForestSeries
    title: str
    x_label: str
    percent: bool
    width: int
    lo: float
    hi: float
    ticks: list[float]
    tick_dec: int
    x0: float
    x1: float
    gap: float
    row_h: float
    title_y: float | None
    legend_items: list[tuple[float, float, int, str]]  # (x, y, series index, shown name)
    top_axis: bool
    plot_top: float
    plot_bottom: float
    height: float

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def n_series(self) -> int:
        return len(self.data.names)

    def sx(self, v: float) -> float:
        return self.x0 + (v - self.lo) / (self.hi - self.lo) * (self.x1 - self.x0)


_LEGEND_FONT = 11.0


def _forest_layout(labels: list[str], data: _ForestSeries, lo: float, hi: float, *, title: str,
                   x_label: str, percent: bool, width: int, max_label_chars: int) -> _Forest:
    """Axis ticks, label column, title, legend rows (wrapped to the plot width) and plot area."""
    ticks, step = _ticks(lo, hi)
    label_font = 12.0
    shown_labels = [truncate(lab, max_label_chars) for lab in labels]
    longest = max((_text_width(s, label_font) for s in shown_labels), default=0.0)
    label_w = min(max(longest + 18.0, 60.0), width * 0.4)
    x0, x1 = label_w, float(width) - 34.0
    n, n_series = len(labels), len(data.names)
    gap = 7.0
    row_h = max(18.0, n_series * gap + 9.0)

    y = 8.0
    title_y = None
    if title:
        title_y = y + 14.0
        y += 24.0
    legend_items: list[tuple[float, float, int, str]] = []
    if n_series:
        lx, ly = x0, y + 10.0
        for k, name in enumerate(data.names):
            txt = truncate(name, 48)
            w = 26.0 + _text_width(txt, _LEGEND_FONT) + 18.0
            if lx + w > x1 and lx > x0:
                lx, ly = x0, ly + 18.0
            legend_items.append((lx, ly, k, txt))
            lx += w
        y = ly + 14.0
    top_axis = n > 20  # a long plot repeats the tick labels above its rows
    if top_axis:
        y += 18.0
    plot_bottom = y + max(n, 1) * row_h
    return _Forest(labels=labels, shown_labels=shown_labels, data=data, title=title, x_label=x_label,
                   percent=percent, width=width, lo=lo, hi=hi, ticks=ticks,
                   tick_dec=_decimals_for(step * (100.0 if percent else 1.0)), x0=x0, x1=x1, gap=gap,
                   row_h=row_h, title_y=title_y, legend_items=legend_items, top_axis=top_axis, plot_top=y,
                   plot_bottom=plot_bottom, height=plot_bottom + 22.0 + (22.0 if x_label else 0.0) + 6.0)


def _forest_head(f: _Forest) -> list[str]:
    out = _svg_open("forest", str(f.width), coord(f.height), "12", f.title or "interval plot")
    if f.title_y is not None:
        out.append(f'<text x="{coord(f.x0)}" y="{coord(f.title_y)}" font-size="14" font-weight="600" '
                   f'fill="#1f2328">{escape(truncate(f.title, 110))}</text>')
    return out


def _forest_legend(f: _Forest) -> list[str]:
    out: list[str] = []
    for lx, ly, k, txt in f.legend_items:
        c = f.data.colors[k]
        out += ['<g class="legend-item">', f"<title>{escape(f.data.names[k])}</title>",
                f'<line x1="{coord(lx)}" y1="{coord(ly)}" x2="{coord(lx + 18)}" y2="{coord(ly)}" stroke="{c}" stroke-width="2"/>',
                f'<circle cx="{coord(lx + 9)}" cy="{coord(ly)}" r="3.5" fill="{c}"/>',
                f'<text x="{coord(lx + 24)}" y="{coord(ly + 4)}" font-size="{_LEGEND_FONT:g}" '
                f'fill="#1f2328">{escape(txt)}</text>', "</g>"]
    return out


def _forest_rows(f: _Forest) -> list[str]:
    """Zebra bands behind every second row."""
    out = ['<g class="rows">']
    for i in range(f.n):
        if i % 2 == 1:
            out.append(f'<rect x="0" y="{coord(f.plot_top + i * f.row_h)}" width="{coord(f.x1)}" '
                       f'height="{coord(f.row_h)}" fill="#f3f5f8"/>')
    out.append("</g>")
    return out


def _forest_axis(f: _Forest) -> list[str]:
    """Grid lines, tick labels (below, and above too on a long plot), the base line and the x label."""
    out = ['<g class="axis" font-size="11" fill="#59636e">']
    for t in f.ticks:
        gx = f.sx(t)
        out.append(f'<line x1="{coord(gx)}" y1="{coord(f.plot_top)}" x2="{coord(gx)}" y2="{coord(f.plot_bottom)}" '
                   f'stroke="#d8dee4" stroke-width="1"/>')
        lab = escape(_fmt_value(t, f.percent, f.tick_dec))
        out.append(f'<text x="{coord(gx)}" y="{coord(f.plot_bottom + 15)}" text-anchor="middle">{lab}</text>')
        if f.top_axis:
            out.append(f'<text x="{coord(gx)}" y="{coord(f.plot_top - 6)}" text-anchor="middle">{lab}</text>')
    out.append(f'<line x1="{coord(f.x0)}" y1="{coord(f.plot_bottom)}" x2="{coord(f.x1)}" y2="{coord(f.plot_bottom)}" '
               f'stroke="#8c959f" stroke-width="1"/>')
    if f.x_label:
        out.append(f'<text x="{coord((f.x0 + f.x1) / 2)}" y="{coord(f.plot_bottom + 36)}" text-anchor="middle" '
                   f'font-size="12" fill="#1f2328">{escape(truncate(f.x_label, 80))}</text>')
    out.append("</g>")
    return out


def _forest_labels(f: _Forest) -> list[str]:
    """Row labels, truncated, each with its full text as a tooltip."""
    out = ['<g class="labels" font-size="12" fill="#1f2328" text-anchor="end">']
    for i, (full, shown) in enumerate(zip(f.labels, f.shown_labels)):
        cy = f.plot_top + (i + 0.5) * f.row_h
        out.append(f'<text x="{coord(f.x0 - 10)}" y="{coord(cy + 4)}"><title>{escape(full)}</title>{escape(shown)}</text>')
    out.append("</g>")
    return out


def _forest_clip_marks(f: _Forest, l: float, u: float, cy: float, c: str) -> list[str]:
    """Chevrons at the plot edge for an interval that runs past the x range."""
    out = []
    if l < f.lo:
        ex = f.sx(f.lo)
        out.append(f'<path class="clip" d="M{coord(ex + 5)},{coord(cy - 3.5)} L{coord(ex)},{coord(cy)} '
                   f'L{coord(ex + 5)},{coord(cy + 3.5)}" fill="none" stroke="{c}" stroke-width="1.5"/>')
    if u > f.hi:
        ex = f.sx(f.hi)
        out.append(f'<path class="clip" d="M{coord(ex - 5)},{coord(cy - 3.5)} L{coord(ex)},{coord(cy)} '
                   f'L{coord(ex - 5)},{coord(cy + 3.5)}" fill="none" stroke="{c}" stroke-width="1.5"/>')
    return out


def _forest_point(f: _Forest, i: int, k: int) -> list[str]:
    """Series ``k`` in row ``i``: an interval group, a hollow point without interval, or nothing."""
    d, lo, hi = f.data, f.lo, f.hi
    tip_dec = f.tick_dec + 1
    cy = f.plot_top + (i + 0.5) * f.row_h + (k - (f.n_series - 1) / 2.0) * f.gap
    e, l, u = float(d.est[k][i]), float(d.low[k][i]), float(d.up[k][i])
    c = d.colors[k]
    e_ok = math.isfinite(e)
    tip_est = _fmt_value(e, f.percent, tip_dec) if e_ok else _NULL
    if math.isfinite(l) and math.isfinite(u):
        l, u = min(l, u), max(l, u)
        tip = (f"{f.labels[i]} \u00b7 {d.names[k]}: {tip_est} "
               f"[{_fmt_value(l, f.percent, tip_dec)}, {_fmt_value(u, f.percent, tip_dec)}]")
        cl, cu = min(max(l, lo), hi), min(max(u, lo), hi)
        out = [f'<g class="interval" data-series="{k}" data-row="{i}">', f"<title>{escape(tip)}</title>",
               f'<line class="ci" x1="{coord(f.sx(cl))}" y1="{coord(cy)}" x2="{coord(f.sx(cu))}" '
               f'y2="{coord(cy)}" stroke="{c}" stroke-width="2" stroke-linecap="round"/>']
        out += _forest_clip_marks(f, l, u, cy, c)
        if e_ok and lo <= e <= hi:
            out.append(f'<circle class="est" cx="{coord(f.sx(e))}" cy="{coord(cy)}" r="3.5" '
                       f'fill="{c}" stroke="#ffffff" stroke-width="0.8"/>')
        out.append("</g>")
        return out
    if e_ok and lo <= e <= hi:
        tip = f"{f.labels[i]} \u00b7 {d.names[k]}: {tip_est} (no interval)"
        return [f'<circle class="point-only" cx="{coord(f.sx(e))}" cy="{coord(cy)}" r="3.5" '
                f'fill="#ffffff" stroke="{c}" stroke-width="1.5"><title>{escape(tip)}</title></circle>']
    return []


def _forest_intervals(f: _Forest) -> list[str]:
    out = ['<g class="intervals">']
    for i in range(f.n):
        for k in range(f.n_series):
            out += _forest_point(f, i, k)
    out.append("</g>")
    return out


def interval_plot_svg(labels: list[str], series: list[dict], *, title: str = "", x_label: str = "score",
                      x_range: tuple[float, float] | None = None, percent: bool = True, width: int = 900,
                      max_label_chars: int = 40, max_rows: int = 60) -> str:
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
        title = f"{title} (the first {max_rows} of {n_all} rows are drawn; every row is in the run's tables)"
    data = _forest_series(series, len(labels))
    lo, hi = _forest_x_range(data, x_range, percent)
    f = _forest_layout(labels, data, lo, hi, title=title, x_label=x_label, percent=percent, width=width,
                       max_label_chars=max_label_chars)
    out = (_forest_head(f) + _forest_legend(f) + _forest_rows(f) + _forest_axis(f) + _forest_labels(f)
           + _forest_intervals(f))
    if f.n == 0:
        out.append(f'<text x="{coord((f.x0 + f.x1) / 2)}" y="{coord(f.plot_top + f.row_h / 2 + 4)}" '
                   f'text-anchor="middle" fill="#59636e">no data</text>')
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- heatmap

_HEAT_NEG = (33, 102, 172)  # #2166ac
_HEAT_MID = (247, 247, 247)  # #f7f7f7
_HEAT_POS = (178, 24, 43)  # #b2182b
_HEAT_NAN = "#cfd4da"


def heat_color(v: float, vmin: float, vmax: float) -> str:
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


_HEX2 = np.array([f"{k:02x}" for k in range(256)])


def _heat_colors(arr: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """:func:`heat_color` for a whole matrix, vectorised: an array of strings shaped like ``arr``."""
    if arr.size == 0:
        return np.full(arr.shape, "", dtype=str)
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
    # '#rrggbb' from a table of the 256 two-digit hex codes (np.char.mod of the 24-bit code took 15 ms at 200 x 200)
    rgb = np.clip(rgb, 0, 255)
    hexes = np.char.add(np.char.add(np.char.add("#", _HEX2[rgb[..., 0]]), _HEX2[rgb[..., 1]]), _HEX2[rgb[..., 2]])
    return np.where(np.isfinite(arr), hexes, _HEAT_NAN)


@dataclass(frozen=True)
class _Heat:
    """A heatmap's labels and layout: whole-pixel cells, label and group columns, colour bar."""

    labels: list[str]
    shown: list[str]
    blocks: list[tuple[int, int, str]]  # (first row, end row, group name)
    cell: int
    cell_titles: bool
    font: float
    top: float
    x0: float
    size: int
    legend_x: float
    width: float
    height: float

    @property
    def n(self) -> int:
        return len(self.labels)


def _heat_blocks(groups: Sequence[str] | None, n: int) -> list[tuple[int, int, str]]:
    """Contiguous runs of equal group names as (start, end, name)."""
    blocks: list[tuple[int, int, str]] = []
    if groups is not None and n:
        start = 0
        for i in range(1, n + 1):
            if i == n or groups[i] != groups[start]:
                blocks.append((start, i, str(groups[start])))
                start = i
    return blocks


def _heat_layout(labels: Sequence[str], groups: Sequence[str] | None, title: str, max_label_chars: int,
                 cell_px: int | None, cell_titles: bool | None) -> _Heat:
    n = len(labels)
    # Whole-pixel cells keep every coordinate an integer (shorter markup, crisp edges).
    cell = int(cell_px) if cell_px else max(4, min(22, 640 // max(n, 1)))
    font = max(6.0, min(11.0, cell * 0.95))
    shown = [truncate(str(lab), max_label_chars) for lab in labels]
    label_w = min(max((_text_width(s, font) for s in shown), default=0.0) + 10.0, 260.0)
    blocks = _heat_blocks(groups, n)
    group_w = (min(max(_text_width(truncate(b[2], 22), 11.0) for b in blocks) + 14.0, 180.0)
               if blocks else 0.0)
    top = float(math.ceil(8.0 + (24.0 if title else 0.0) + label_w))
    x0 = float(math.ceil(8.0 + group_w + label_w))
    size = n * cell
    legend_x = x0 + size + 24.0
    return _Heat(labels=list(labels), shown=shown, blocks=blocks, cell=cell,
                 cell_titles=n <= 60 if cell_titles is None else cell_titles, font=font, top=top, x0=x0,
                 size=size, legend_x=legend_x, width=legend_x + 90.0,
                 height=max(top + size + 16.0, top + 200.0))


def _heat_labels(h: _Heat) -> list[str]:
    """Row labels on the left and column labels on top, rotated; full names as tooltips."""
    out = ['<g class="row-labels" fill="#1f2328" text-anchor="end">']
    for i, (full, s) in enumerate(zip(h.labels, h.shown)):
        y = h.top + (i + 0.5) * h.cell + h.font * 0.35
        out.append(f'<text x="{coord(h.x0 - 4)}" y="{coord(y)}"><title>{escape(full)}</title>{escape(s)}</text>')
    out.append("</g>")
    out.append('<g class="col-labels" fill="#1f2328" text-anchor="start">')
    for j, (full, s) in enumerate(zip(h.labels, h.shown)):
        x = h.x0 + (j + 0.5) * h.cell + h.font * 0.35
        y = h.top - 4.0
        out.append(f'<text x="{coord(x)}" y="{coord(y)}" transform="rotate(-90 {coord(x)} {coord(y)})">'
                   f"<title>{escape(full)}</title>{escape(s)}</text>")
    out.append("</g>")
    return out


def _heat_cells(h: _Heat, arr: np.ndarray, vmin: float, vmax: float) -> list[str]:
    """One rect per cell (colours computed for the whole matrix at once), with tooltips if asked."""
    n, cell = h.n, h.cell
    out = ['<g class="cells" shape-rendering="crispEdges">']
    colors = _heat_colors(arr, vmin, vmax)
    xs = [int(h.x0) + j * cell for j in range(n)]
    if not h.cell_titles:
        # every cell's text from whole-matrix string operations (40,000 cells at 200 subjects); the same
        # text as one f-string per cell: <rect x= y= width= height= fill=/>
        if n:
            front = np.array([f'<rect x="{x}" y="' for x in xs])[None, :]
            ys = np.array([str(int(h.top) + i * cell) for i in range(n)])[:, None]
            cells = np.char.add(np.char.add(np.char.add(front, ys), f'" width="{cell}" height="{cell}" fill="'),
                                np.char.add(colors, '"/>'))
            out.append("".join(cells.ravel().tolist()))
        out.append("</g>")
        return out
    for i in range(n):
        y = int(h.top) + i * cell
        row = colors[i].tolist()
        rl = escape(h.labels[i])
        for j in range(n):
            v = arr[i, j]
            txt = f"{v:.2f}" if math.isfinite(v) else "undefined"
            out.append(f'<rect x="{xs[j]}" y="{y}" width="{cell}" height="{cell}" fill="{row[j]}">'
                       f"<title>{rl} \u00d7 {escape(h.labels[j])}: {txt}</title></rect>")
    out.append("</g>")
    return out


def _heat_groups(h: _Heat) -> list[str]:
    """Separator lines between group blocks and each block's name beside its rows."""
    if not h.blocks:
        return []
    top, x0, size, cell = h.top, h.x0, h.size, h.cell
    out = ['<g class="groups" fill="#1f2328" font-size="11">']
    for a, b, name in h.blocks:
        if a > 0:
            p = coord(top + a * cell)
            q = coord(x0 + a * cell)
            out.append(f'<line x1="{coord(x0)}" y1="{p}" x2="{coord(x0 + size)}" y2="{p}" stroke="#1f2328" '
                       'stroke-width="1"/>')
            out.append(f'<line x1="{q}" y1="{coord(top)}" x2="{q}" y2="{coord(top + size)}" stroke="#1f2328" '
                       'stroke-width="1"/>')
        cy = top + (a + b) / 2.0 * cell + 4.0
        out.append(f'<text x="8" y="{coord(cy)}"><title>{escape(name)}</title>{escape(truncate(name, 22))}</text>')
    out.append("</g>")
    return out


def _heat_legend(h: _Heat, vmin: float, vmax: float, value_label: str) -> list[str]:
    """The colour bar with its end and middle values, and the swatch for undefined cells."""
    bar_h, steps = 160.0, 32
    lx, top = h.legend_x, h.top
    out = ['<g class="legend" font-size="11" fill="#1f2328">',
           f'<text x="{coord(lx)}" y="{coord(top - 8)}">{escape(truncate(value_label, 18))}</text>']
    for k in range(steps):
        v = vmax - (vmax - vmin) * (k + 0.5) / steps
        out.append(f'<rect x="{coord(lx)}" y="{coord(top + k * bar_h / steps)}" width="14" '
                   f'height="{coord(bar_h / steps + 0.5)}" fill="{heat_color(v, vmin, vmax)}"/>')
    for v in (vmax, (vmin + vmax) / 2.0, vmin):
        y = top + (vmax - v) / (vmax - vmin) * bar_h
        out.append(f'<text x="{coord(lx + 20)}" y="{coord(y + 4)}">{escape(_fmt_value(v, False, 2))}</text>')
    out.append(f'<rect x="{coord(lx)}" y="{coord(top + bar_h + 12)}" width="14" height="10" fill="{_HEAT_NAN}"/>')
    out.append(f'<text x="{coord(lx + 20)}" y="{coord(top + bar_h + 21)}">undefined</text>')
    out.append("</g>")
    return out


def heatmap_svg(matrix: Any, labels: Sequence[str], *, groups: Sequence[str] | None = None, title: str = "",
                vmin: float = -1.0, vmax: float = 1.0, value_label: str = "correlation", max_label_chars: int = 28,
                cell_px: int | None = None, cell_titles: bool | None = None) -> str:
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
    h = _heat_layout(labels, groups, title, max_label_chars, cell_px, cell_titles)
    out = _svg_open("heatmap", coord(h.width), coord(h.height), f"{h.font:g}", title or "heatmap")
    if title:
        out.append(_chart_title(title, "8"))
    out += _heat_labels(h) + _heat_cells(h, arr, vmin, vmax) + _heat_groups(h)
    out.append(f'<rect x="{coord(h.x0)}" y="{coord(h.top)}" width="{coord(h.size)}" height="{coord(h.size)}" fill="none" '
               'stroke="#8c959f" stroke-width="1"/>')
    out += _heat_legend(h, vmin, vmax, value_label)
    if n == 0:
        out.append(f'<text x="{coord(h.x0)}" y="{coord(h.top + 16)}" fill="#59636e">no data</text>')
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- reliability diagram


def _reliability_panel(panel: dict, ox: float, oy: float, s: float) -> list[str]:
    """One model's panel with its top-left corner at (``ox``, ``oy``) and side ``s`` pixels."""

    def px(c, a):
        return ox + min(max(c, 0.0), 1.0) * s, oy + (1.0 - min(max(a, 0.0), 1.0)) * s

    name = str(panel.get("name", ""))
    out = [f'<g class="panel"><text x="{coord(ox)}" y="{coord(oy - 10)}" font-size="11" font-weight="600" '
           f'fill="#1f2328"><title>{escape(name)}</title>{escape(truncate(name, 34))}</text>',
           f'<rect x="{coord(ox)}" y="{coord(oy)}" width="{coord(s)}" height="{coord(s)}" fill="#f6f8fa" '
           'stroke="#8c959f" stroke-width="1"/>']
    x1, y1 = px(0, 0)
    x2, y2 = px(1, 1)
    out.append(f'<line x1="{coord(x1)}" y1="{coord(y1)}" x2="{coord(x2)}" y2="{coord(y2)}" stroke="#8c959f" '
               'stroke-dasharray="4 3" stroke-width="1"/>')
    for t in (0.0, 0.5, 1.0):
        tx, ty = px(t, t)
        out.append(f'<text x="{coord(tx)}" y="{coord(oy + s + 12)}" text-anchor="middle" fill="#59636e">{t:g}</text>')
        out.append(f'<text x="{coord(ox - 4)}" y="{coord(ty + 3)}" text-anchor="end" fill="#59636e">{t:g}</text>')
    out.append(f'<text x="{coord(ox + s / 2)}" y="{coord(oy + s + 24)}" text-anchor="middle" fill="#59636e">'
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
        out.append(f'<line x1="{coord(cx)}" y1="{coord(ylo)}" x2="{coord(cx)}" y2="{coord(yhi)}" stroke="#0969da" '
                   'stroke-width="1.2"/>')
        out.append(f'<circle cx="{coord(cx)}" cy="{coord(cy)}" r="{coord(r)}" fill="#0969da" fill-opacity="0.7">'
                   f"<title>confidence {float(c):.3f}, accuracy {float(a):.3f} "
                   f"[{float(lo):.3f}, {float(hi):.3f}], {int(cnt)} items</title></circle>")
    if not counts:
        out.append(f'<text x="{coord(ox + 8)}" y="{coord(oy + 16)}" fill="#59636e">no data</text>')
    out.append("</g>")
    return out


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
    out = _svg_open("reliability", coord(width), coord(height), "10", title or "reliability diagram")
    if title:
        out.append(_chart_title(title, "8"))
    for k, panel in enumerate(panels):
        ox = 8.0 + (k % cols) * pw + pad_l
        oy = top0 + (k // cols) * ph + pad_t
        out += _reliability_panel(panel, ox, oy, float(size_px))
    out.append("</svg>")
    return "".join(out)
