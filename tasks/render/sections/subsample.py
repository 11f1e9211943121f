"""The report's section of subsample guarantees (the exchangeable-bounds paper's Table 4 layout) and its
line plot of half-width against the number of items evaluated."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from benchcert.tasks.render.escape import escape  # the shared escaper: NUL, bidi controls
from benchcert.tasks.render.report import Section, table_html

_COLORS = {"theorem_5_2": "#0072B2", "barber_nonnegative": "#D55E00", "exact_worst_case": "#009E73",
           "mean_model_error95": "#CC79A7", "worst_model_error95": "#E69F00", "stratified_proxy": "#56B4E9",
           "theorem_5_2_paired": "#0072B2", "mean_pair_error95": "#CC79A7", "worst_pair_error95": "#E69F00"}
_DASHED = ("barber_nonnegative", "stratified_proxy", "worst_model_error95", "worst_pair_error95")


def _pp(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100.0 * x


def section(curve: pl.DataFrame, pairs: pl.DataFrame, estimates: pl.DataFrame, alpha: float, N: int,
            baseline: str | None) -> Section:
    """The subsample section: the cost-accuracy curve, the paired gaps, the recorded subsets' estimates.

    Parameters
    ----------
    curve : polars.DataFrame
        Table ``subsample_curve`` (one row per subset size).
    pairs : polars.DataFrame
        Table ``subsample_pairs``.
    estimates : polars.DataFrame
        Table ``subsample_estimates``.
    alpha : float
        1 - confidence level.
    N : int
        The benchmark's number of items.
    baseline : str or None
        The baseline model the pairs are taken against, None for neighbours in the ranking.

    Returns
    -------
    Section
    """
    level = f"{100 * (1 - alpha):g}%"
    parts = [f"<p>Evaluating a uniformly random subset of n of the {N:,} items instead of all of them: how far "
             f"the subset score can be from the full score ({level} half-widths, percentage points). "
             "Theorem 5.2 (exchangeable-bounds paper) holds for any exchangeable scores; the exact worst case "
             "h* is computed from the hypergeometric distribution and holds for every binary response vector; "
             "each model's exact 95% error uses its own number of correct answers (the paper's Table 4 "
             "layout).</p>"]
    if curve.height:
        table4 = curve.select(
            "n", (pl.col("cost_fraction") * 100).alias("cost %"),
            (pl.col("mean_model_error95") * 100).alias("mean model 95% error pp"),
            (pl.col("worst_model_error95") * 100).alias("worst model 95% error pp"),
            (pl.col("theorem_5_2") * 100).alias("Theorem 5.2 pp"),
            (pl.col("exact_worst_case") * 100).alias("exact worst case pp"),
            (pl.col("barber_nonnegative") * 100).alias("Barber pp"),
            (pl.col("serfling") * 100).alias("Serfling pp"),
            (pl.col("max_violation_theorem") * 100).alias("max violation of Thm 5.2 %"))
        parts.append(table_html(table4, float_digits=2))
        parts.append(line_plot_svg(
            curve["n"].to_list(),
            [{"name": name, "y": [_pp(v) for v in curve[col].to_list()], "color": _COLORS[col],
              "dash": col in _DASHED}
             for name, col in (("Theorem 5.2", "theorem_5_2"), ("Barber (non-negative)", "barber_nonnegative"),
                               ("exact worst case h*", "exact_worst_case"),
                               ("mean model 95% error", "mean_model_error95"),
                               ("worst model 95% error", "worst_model_error95"))
             if curve[col].null_count() < curve.height],
            title=f"Cost vs accuracy: {level} half-width of the subset-vs-full error",
            x_label="items evaluated n (log scale)", y_label="half-width (pp)"))
    if pairs.height:
        who = f"against the baseline {escape(baseline)}" if baseline else "between neighbours in the ranking"
        parts.append(f"<p>Paired gaps {who} (Remark 7.2): the gap between two models on a shared subset vs on "
                     "the full benchmark. Theorem 5.2 with R = 2 ignores that most items are answered alike; the "
                     "exact (multivariate hypergeometric) 95% error uses the number of items each model alone "
                     "gets right.</p>")
        parts.append(table_html(curve.select(
            "n", (pl.col("cost_fraction") * 100).alias("cost %"), "n_pairs",
            (pl.col("mean_pair_error95") * 100).alias("mean pair 95% error pp"),
            (pl.col("worst_pair_error95") * 100).alias("worst pair 95% error pp"),
            (pl.col("theorem_5_2_paired") * 100).alias("Theorem 5.2 (R=2) pp"),
            (pl.col("max_violation_paired_theorem") * 100).alias("max violation %")), float_digits=2))
        parts.append(line_plot_svg(
            curve["n"].to_list(),
            [{"name": name, "y": [_pp(v) for v in curve[col].to_list()], "color": _COLORS[col], "dash": col in _DASHED}
             for name, col in (("Theorem 5.2, R = 2", "theorem_5_2_paired"),
                               ("mean pair 95% error", "mean_pair_error95"),
                               ("worst pair 95% error", "worst_pair_error95"))],
            title=f"Paired gaps: {level} half-width of the subset-vs-full gap error",
            x_label="items evaluated n (log scale)", y_label="half-width (pp)"))
        big = pairs.filter(pl.col("n") == pairs["n"].max())
        small = pairs.filter(pl.col("n") == pairs["n"].min())
        for frame in (small, big) if small.height and pairs["n"].min() != pairs["n"].max() else (big,):
            parts.append(table_html(frame.select(
                "model_a", "model_b", "n", (pl.col("full_gap") * 100).alias("full gap pp"),
                (pl.col("error95") * 100).alias("exact 95% error pp"),
                (pl.col("theorem_5_2_paired") * 100).alias("Theorem 5.2 (R=2) pp")), float_digits=2))
    if estimates.height:
        parts.append("<p>Checkpoints evaluated on a recorded random subset (<code>benchcert subsample</code>): "
                     "the estimated full-benchmark score with its guarantee and the exact post-hoc interval.</p>")
        parts.append(table_html(estimates.select(
            "model", "subset_id", "n", "N", (pl.col("estimate") * 100).alias("estimate %"), "method",
            (pl.col("lower") * 100).alias("lower %"), (pl.col("upper") * 100).alias("upper %")), float_digits=2))
    return Section(title="Subsample guarantees (evaluation cost)", anchor="subsample", html="".join(parts))


def _fmt_tick(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def line_plot_svg(x: list[float], series: list[dict], *, title: str = "", x_label: str = "", y_label: str = "",
                  width: int = 760, height: int = 360, log_x: bool = True) -> str:
    """Inline-SVG line plot: one polyline with point markers per series.

    ``series`` entries: ``{"name", "y" (aligned with x; None/NaN = no point), "color"
    ("#rrggbb"), "dash" (bool)}``. Every string is escaped; no external resource is used.
    """
    xs = np.asarray(x, dtype=float)
    left, right, top, bottom = 64.0, 190.0, 34.0, 48.0
    pw, ph = width - left - right, height - top - bottom
    ys_all = [v for s in series for v in s["y"] if v is not None and math.isfinite(v)]
    if xs.size == 0 or not ys_all:
        return '<p class="table-note">nothing to plot</p>'
    use_log = log_x and bool((xs > 0).all()) and xs.size > 1
    fx = np.log10 if use_log else (lambda v: v)
    x0, x1 = float(fx(xs.min())), float(fx(xs.max()))
    if x1 == x0:
        x0, x1 = x0 - 1.0, x1 + 1.0
    y1 = max(ys_all) * 1.08 or 1.0

    def sx(v: float) -> float:
        return left + (float(fx(v)) - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return top + ph - v / y1 * ph

    out = [f'<svg class="lineplot" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="system-ui,sans-serif" font-size="11" style="max-width:100%;height:auto">',
           f"<title>{escape(title or 'line plot')}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        out.append(f'<text x="{left:.1f}" y="20" font-size="13" font-weight="600" fill="#1f2328">'
                   f"{escape(title)}</text>")
    step = 10 ** math.floor(math.log10(y1 / 4)) if y1 > 0 else 1
    for mult in (1, 2, 5, 10):
        if y1 / (step * mult) <= 6:
            step *= mult
            break
    t = 0.0
    while t <= y1 + 1e-12:
        yy = sy(t)
        out.append(f'<line x1="{left:.1f}" y1="{yy:.1f}" x2="{left + pw:.1f}" y2="{yy:.1f}" stroke="#d8dee4"/>')
        out.append(f'<text x="{left - 6:.1f}" y="{yy + 4:.1f}" text-anchor="end" fill="#59636e">{t:g}</text>')
        t += step
    for v in xs:
        xx = sx(v)
        out.append(f'<line x1="{xx:.1f}" y1="{top + ph:.1f}" x2="{xx:.1f}" y2="{top + ph + 4:.1f}" stroke="#8c959f"/>')
        out.append(f'<text x="{xx:.1f}" y="{top + ph + 16:.1f}" text-anchor="middle" fill="#59636e">'
                   f"{escape(_fmt_tick(v))}</text>")
    out.append(f'<line x1="{left:.1f}" y1="{top + ph:.1f}" x2="{left + pw:.1f}" y2="{top + ph:.1f}" stroke="#8c959f"/>')
    out.append(f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{top + ph:.1f}" stroke="#8c959f"/>')
    if x_label:
        out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10:.1f}" text-anchor="middle" fill="#1f2328">'
                   f"{escape(x_label)}</text>")
    if y_label:
        out.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#1f2328" '
                   f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>')
    for k, s in enumerate(series):
        color = s.get("color") or "#000000"
        if not (isinstance(color, str) and len(color) in (4, 7) and color.startswith("#")
                and all(c in "0123456789abcdefABCDEF" for c in color[1:])):
            color = "#000000"
        pts = [(sx(xv), sy(yv)) for xv, yv in zip(xs, s["y"]) if yv is not None and math.isfinite(yv)]
        dash = ' stroke-dasharray="5 3"' if s.get("dash") else ""
        name = escape(str(s.get("name", f"series {k + 1}")))
        out.append(f'<g class="series"><title>{name}</title>')
        if len(pts) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for (px, py), (xv, yv) in zip(pts, [(a, b) for a, b in zip(xs, s["y"]) if b is not None
                                               and math.isfinite(b)]):
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"><title>{name}: n = '
                       f"{escape(_fmt_tick(xv))}, {yv:.2f}</title></circle>")
        out.append("</g>")
        ly = top + 10 + 18 * k
        lx = left + pw + 14
        out.append(f'<line x1="{lx:.1f}" y1="{ly:.1f}" x2="{lx + 20:.1f}" y2="{ly:.1f}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 26:.1f}" y="{ly + 4:.1f}" fill="#1f2328">{name}</text>')
    out.append("</svg>")
    return "".join(out)
