"""The dashboard's trend chart, inline SVG: one point per run or checkpoint with its interval.

:func:`trend_svg` draws a model's (or a checkpoint question's) score over runs, its interval as
a band; the shared scales and number formats are :mod:`benchcert.tasks.render.charts`'. As every
chart there, each string from a log goes through
:func:`~benchcert.tasks.render.escape.escape`, no chart names a URL, and the chart is built in
named steps (layout, axis, line, points, legend) that each return their part of the markup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchcert.tasks.render.charts import TREND_STEPS, coord, fmt_interval, fmt_percent, nice_step
from benchcert.tasks.render.escape import escape

__all__ = ["trend_svg"]


def _n1(x: float) -> str:
    # The trend charts have always written one decimal (the other charts two).
    return coord(x, 1)


@dataclass(frozen=True)
class _Trend:
    """A trend chart's clean series, percent y range with ticks, and plot area (pixels)."""

    labels: list[str]
    series: list[dict]  # name, color, tips, estimate, lower, upper (floats, NaN for missing)
    lo: float
    hi: float
    ticks: list[float]
    dec: int
    rotate: bool
    x0: float
    x1: float
    y0: float
    y1: float

    @property
    def col(self) -> float:
        return (self.x1 - self.x0) / len(self.labels)

    def sx(self, i: int, k: int) -> float:
        return self.x0 + (i + 0.5) * self.col + (k - (len(self.series) - 1) / 2) * min(6.0, self.col / 4)

    def sy(self, v: float) -> float:
        return self.y1 - (v - self.lo) / (self.hi - self.lo) * (self.y1 - self.y0)


def _trend_series(labels: list[str], series: list[dict]) -> list[dict]:
    n = len(labels)
    clean = []
    for s in series:
        arrs = {k: [float("nan") if v is None else float(v) for v in (s.get(k) or [None] * n)]
                for k in ("estimate", "lower", "upper")}
        if any(len(a) != n for a in arrs.values()):
            raise ValueError(f"series {s.get('name')!r}: values must align with {n} labels")
        tips = list(s.get("tips") or [""] * n)
        clean.append({"name": str(s.get("name", "")), "color": s.get("color") or "#333333", "tips": tips, **arrs})
    return clean


def _trend_y_range(clean: list[dict]) -> tuple[float, float]:
    """The data's range padded by 8%, at least 10 points wide, inside [0, 1]."""
    finite = [v for s in clean for k in ("estimate", "lower", "upper") for v in s[k] if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    if hi - lo < 0.1:  # a flat series: show at least 10 points so noise does not look like a trend
        mid = (lo + hi) / 2
        lo, hi = mid - 0.05, mid + 0.05
    lo, hi = max(lo, 0.0), min(hi, 1.0)
    if hi - lo < 0.1:  # pinned at 0 or 1
        lo, hi = (0.0, 0.1) if lo <= 0.0 else (0.9, 1.0)
    return lo, hi


def _trend_layout(labels: list[str], clean: list[dict], title: str, width: int, height: int) -> _Trend:
    lo, hi = _trend_y_range(clean)
    step = nice_step(hi - lo, 5, TREND_STEPS)
    ticks = [t * step for t in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
    rotate = len(labels) > 6
    return _Trend(labels=labels, series=clean, lo=lo, hi=hi, ticks=ticks,
                  dec=max(0, -math.floor(math.log10(step * 100) + 1e-9)), rotate=rotate, x0=58.0,
                  x1=width - 14.0, y0=40.0 if title else 26.0, y1=height - (64.0 if rotate else 30.0))


def _trend_legend(t: _Trend) -> list[str]:
    out = []
    lx = t.x0
    for s in t.series:
        out.append(f'<line x1="{_n1(lx)}" y1="28" x2="{_n1(lx + 16)}" y2="28" stroke="{escape(s["color"])}" '
                   f'stroke-width="2"/><text x="{_n1(lx + 20)}" y="32" fill="#1f2328">{escape(s["name"])}</text>')
        lx += 30 + 7 * len(s["name"])
    return out


def _trend_axis(t: _Trend, max_label_chars: int) -> list[str]:
    """Percent grid with tick labels, x labels (rotated when many, at most ~24 shown) and base line."""
    out = ['<g class="axis" fill="#59636e">']
    for tick in t.ticks:
        y = t.sy(tick)
        out.append(f'<line x1="{_n1(t.x0)}" y1="{_n1(y)}" x2="{_n1(t.x1)}" y2="{_n1(y)}" stroke="#e1e4e8"/>'
                   f'<text x="{_n1(t.x0 - 6)}" y="{_n1(y + 4)}" text-anchor="end">{100 * tick:.{t.dec}f}%</text>')
    n = len(t.labels)
    every = max(1, math.ceil(n / 24))  # at most ~24 readable x labels; tooltips name every point
    for i, lab in enumerate(t.labels):
        if i % every:
            continue
        text = lab if len(lab) <= max_label_chars else lab[: max_label_chars - 1] + "\u2026"
        x, y = t.x0 + (i + 0.5) * t.col, t.y1 + 14
        rot = f' transform="rotate(-35 {_n1(x)} {_n1(y)})" text-anchor="end"' if t.rotate else ' text-anchor="middle"'
        out.append(f'<text class="xlab" x="{_n1(x)}" y="{_n1(y)}"{rot}><title>{escape(lab)}</title>'
                   f"{escape(text)}</text>")
    out.append(f'<line x1="{_n1(t.x0)}" y1="{_n1(t.y1)}" x2="{_n1(t.x1)}" y2="{_n1(t.y1)}" stroke="#8c959f"/></g>')
    return out


def _trend_line(t: _Trend, k: int, s: dict, c: str) -> list[str]:
    """Polylines joining consecutive finite estimates of series ``k``."""
    segs, cur = [], []
    for i in range(len(t.labels)):
        if math.isfinite(s["estimate"][i]):
            cur.append(f"{_n1(t.sx(i, k))},{_n1(t.sy(s['estimate'][i]))}")
        elif cur:
            segs.append(cur)
            cur = []
    segs.append(cur)
    return [f'<polyline class="line" points="{" ".join(seg)}" fill="none" stroke="{c}" '
            f'stroke-width="1.5" stroke-opacity="0.7"/>' for seg in segs if len(seg) > 1]


def _trend_points(t: _Trend, k: int, s: dict, c: str) -> list[str]:
    """One ``<g class="pt">`` per finite estimate: tooltip, interval bar with caps, and dot."""
    out = []
    sy = t.sy
    for i in range(len(t.labels)):
        e, l, u = s["estimate"][i], s["lower"][i], s["upper"][i]
        if not math.isfinite(e):
            continue
        x, tip = t.sx(i, k), s["tips"][i] or f"{s['name']} {t.labels[i]}: {fmt_percent(e)} {fmt_interval(l, u)}"
        out.append(f'<g class="pt" data-series="{escape(s["name"])}" data-i="{i}" data-estimate="{e!r}">'
                   f"<title>{escape(tip)}</title>")
        xs, ye = _n1(x), _n1(sy(e))  # each coordinate formatted once (this drew 400,000 points per dashboard)
        if math.isfinite(l) and math.isfinite(u):
            yl, yu, xl, xr = _n1(sy(l)), _n1(sy(u)), _n1(x - 3), _n1(x + 3)
            out.append(f'<line x1="{xs}" y1="{yl}" x2="{xs}" y2="{yu}" stroke="{c}" '
                       f'stroke-width="1.5"/><line x1="{xl}" y1="{yl}" x2="{xr}" '
                       f'y2="{yl}" stroke="{c}"/><line x1="{xl}" y1="{yu}" '
                       f'x2="{xr}" y2="{yu}" stroke="{c}"/>'
                       f'<circle cx="{xs}" cy="{ye}" r="3" fill="{c}"/>')
        else:
            out.append(f'<circle class="point-only" cx="{xs}" cy="{ye}" r="3" fill="#ffffff" '
                       f'stroke="{c}" stroke-width="1.5"/>')
        out.append("</g>")
    return out


def trend_svg(labels: list[str], series: list[dict], *, title: str = "", width: int = 760,
              height: int = 250, max_label_chars: int = 18) -> str:
    """Inline-SVG trend: one x position per label, one series per metric, percent y axis.

    Each series is ``{"name", "estimate", "lower", "upper"}`` (sequences aligned with
    ``labels``, NaN/None for missing; optional ``"color"``, optional ``"tips"``: one tooltip per
    point).  A point is ``<g class="pt" data-series=.. data-i=.. data-estimate=..>`` with a
    ``<title>`` tooltip (no script needed), a vertical interval bar when both ends are finite,
    and a filled dot (hollow when there is no interval).  Consecutive finite estimates of a
    series are joined by a line.  Every label and name is escaped.
    """
    if not labels:
        return ""
    t = _trend_layout(labels, _trend_series(labels, series), title, width, height)
    out = [f'<svg class="trend" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="system-ui,sans-serif" font-size="11">',
           f"<title>{escape(title or 'trend')}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        out.append(f'<text x="{_n1(t.x0)}" y="16" font-size="13" font-weight="600" fill="#1f2328">'
                   f"{escape(title)}</text>")
    out += _trend_legend(t) + _trend_axis(t, max_label_chars)
    for k, s in enumerate(t.series):
        c = escape(s["color"])
        out += _trend_line(t, k, s, c) + _trend_points(t, k, s, c)
    out.append("</svg>")
    return "".join(out)
