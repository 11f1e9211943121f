"""The training-run chart, inline SVG: a score along a checkpoint series as a line with its interval as a band.

:func:`band_svg` draws one or more series over the same x positions (checkpoints in step order):
the interval as a translucent band (a polygon through the lower and upper ends), the estimate as a
line with a dot per checkpoint, and a verdict marker above a checkpoint that has one (a triangle up
for ``improved``, down for ``regressed``, a ring for ``inconclusive``; the shape tells the
direction, so colour is not needed to read it).  A regression is also flagged with a "!" under its
point.  The chart's ``<title>`` and ``<desc>`` are its text alternative; the page puts the numbers
in a table beside it.  Every string from a log is escaped; no URL is named.
"""

from __future__ import annotations

import math

from benchcert.tasks.render.charts import TREND_STEPS, coord, fmt_interval, fmt_percent, nice_step
from benchcert.tasks.render.escape import escape, truncate

__all__ = ["band_svg", "MARK_COLORS"]

#: Verdict marker colours (Okabe-Ito: blue, vermillion, grey); the marker's shape carries the meaning too.
MARK_COLORS = {"improved": "#0072B2", "regressed": "#D55E00", "inconclusive": "#59636e"}


def _finite(v) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def _y_range(series: list[dict]) -> tuple[float, float]:
    vals = [v for s in series for k in ("estimate", "lower", "upper") for v in map(_finite, s[k]) if math.isfinite(v)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    pad = max((hi - lo) * 0.1, 0.01)
    lo, hi = max(lo - pad, 0.0), min(hi + pad, 1.0)
    if hi - lo < 0.05:
        mid = (lo + hi) / 2
        lo, hi = max(mid - 0.025, 0.0), min(mid + 0.025, 1.0)
    return lo, hi


def _marker(x: float, y: float, direction: str) -> str:
    c = MARK_COLORS.get(direction, MARK_COLORS["inconclusive"])
    if direction == "improved":
        return f'<path d="M{coord(x)},{coord(y - 6)} L{coord(x - 5)},{coord(y + 3)} L{coord(x + 5)},{coord(y + 3)} Z" fill="{c}"/>'
    if direction == "regressed":
        return f'<path d="M{coord(x)},{coord(y + 6)} L{coord(x - 5)},{coord(y - 3)} L{coord(x + 5)},{coord(y - 3)} Z" fill="{c}"/>'
    return f'<circle cx="{coord(x)}" cy="{coord(y)}" r="4.5" fill="#ffffff" stroke="{c}" stroke-width="2"/>'


def band_svg(labels: list[str], series: list[dict], *, title: str, desc: str, width: int = 760,
             height: int = 240) -> str:
    """Inline-SVG line-with-band chart over ``labels`` (the checkpoints, in order).

    Each series is ``{"name", "color", "estimate", "lower", "upper"}`` (lists aligned with ``labels``,
    None/NaN where a checkpoint has no value) with optional ``"marks"`` (per label: ``"improved"``,
    ``"regressed"``, ``"inconclusive"`` or None, the recorded verdict), ``"flags"`` (per label: True
    for a regression) and ``"tips"`` (per label: a tooltip).  ``title`` and ``desc`` are the chart's
    text alternative.
    """
    n = len(labels)
    if not n:
        return ""
    lo, hi = _y_range(series)
    x0, x1, y0, y1 = 58.0, width - 16.0, 44.0, height - 42.0
    col = (x1 - x0) / n

    def sx(i: int) -> float:
        return x0 + (i + 0.5) * col

    def sy(v: float) -> float:
        return y1 - (v - lo) / (hi - lo) * (y1 - y0)

    out = [f'<svg class="series" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="system-ui,sans-serif" font-size="11">',
           f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{coord(x0)}" y="16" font-size="13" font-weight="600" fill="#1f2328">'
           f"{escape(truncate(title, 90))}</text>"]
    lx = x0
    for s in series:
        out.append(f'<rect x="{coord(lx)}" y="24" width="16" height="8" fill="{escape(s["color"])}" fill-opacity="0.25"/>'
                   f'<line x1="{coord(lx)}" y1="28" x2="{coord(lx + 16)}" y2="28" stroke="{escape(s["color"])}" '
                   f'stroke-width="2"/><text x="{coord(lx + 20)}" y="32" fill="#1f2328">{escape(s["name"])}</text>')
        lx += 40 + 6.5 * len(s["name"])
    step = nice_step(hi - lo, 5, TREND_STEPS)
    dec = max(0, -math.floor(math.log10(step * 100) + 1e-9))
    out.append('<g class="axis" fill="#59636e">')
    for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1):
        y = sy(k * step)
        out.append(f'<line x1="{coord(x0)}" y1="{coord(y)}" x2="{coord(x1)}" y2="{coord(y)}" stroke="#e1e4e8"/>'
                   f'<text x="{coord(x0 - 6)}" y="{coord(y + 4)}" text-anchor="end">{100 * k * step:.{dec}f}%</text>')
    every = max(1, math.ceil(n / 12))
    for i, lab in enumerate(labels):
        if i % every == 0:
            out.append(f'<text x="{coord(sx(i))}" y="{coord(y1 + 16)}" text-anchor="middle">'
                       f"<title>{escape(lab)}</title>{escape(truncate(lab, 16))}</text>")
    out.append(f'<line x1="{coord(x0)}" y1="{coord(y1)}" x2="{coord(x1)}" y2="{coord(y1)}" stroke="#8c959f"/></g>')
    for s in series:
        out += _draw_series(s, n, sx, sy, y0, y1)
    out.append("</svg>")
    return "".join(out)


def _draw_series(s: dict, n: int, sx, sy, y0: float, y1: float) -> list[str]:
    est = [_finite(v) for v in s["estimate"]]
    low = [_finite(v) for v in s["lower"]]
    up = [_finite(v) for v in s["upper"]]
    c = escape(s["color"])
    out = []
    band = [i for i in range(n) if math.isfinite(low[i]) and math.isfinite(up[i])]
    if band:
        pts = [f"{coord(sx(i))},{coord(sy(up[i]))}" for i in band] + [f"{coord(sx(i))},{coord(sy(low[i]))}"
                                                                      for i in reversed(band)]
        if len(band) == 1:  # a lone interval is a bar, not a band
            i = band[0]
            out.append(f'<line class="band" x1="{coord(sx(i))}" y1="{coord(sy(low[i]))}" x2="{coord(sx(i))}" '
                       f'y2="{coord(sy(up[i]))}" stroke="{c}" stroke-opacity="0.35" stroke-width="8"/>')
        else:
            out.append(f'<polygon class="band" points="{" ".join(pts)}" fill="{c}" fill-opacity="0.18" stroke="none"/>')
    line = [f"{coord(sx(i))},{coord(sy(est[i]))}" for i in range(n) if math.isfinite(est[i])]
    if len(line) > 1:
        out.append(f'<polyline class="line" points="{" ".join(line)}" fill="none" stroke="{c}" stroke-width="2"/>')
    marks = list(s.get("marks") or [None] * n)
    flags = list(s.get("flags") or [False] * n)
    tips = list(s.get("tips") or [""] * n)
    for i in range(n):
        if not math.isfinite(est[i]):
            continue
        tip = tips[i] or f"{s['name']}: {fmt_percent(est[i])} {fmt_interval(low[i], up[i])}"
        out.append(f'<g class="pt" data-i="{i}" data-estimate="{est[i]!r}"'
                   + (f' data-mark="{escape(marks[i])}"' if marks[i] else "")
                   + (' data-flag="regression"' if flags[i] else "") + f"><title>{escape(tip)}</title>"
                   f'<circle cx="{coord(sx(i))}" cy="{coord(sy(est[i]))}" r="3.5" fill="{c}"/>')
        if marks[i]:
            top = sy(up[i]) if math.isfinite(up[i]) else sy(est[i])
            out.append(_marker(sx(i), max(top - 10, y0 - 4), marks[i]))
        if flags[i]:
            bottom = sy(low[i]) if math.isfinite(low[i]) else sy(est[i])
            out.append(f'<text x="{coord(sx(i))}" y="{coord(min(bottom + 16, y1 - 2))}" text-anchor="middle" '
                       f'font-weight="700" fill="{MARK_COLORS["regressed"]}">!</text>')
        out.append("</g>")
    return out
