"""The report's sections of the prompt-perturbation audit: rejection shares, null rates, top items.

The bar charts and histograms are drawn here, in the section's own layout (the shares of each tested
variant side by side, the paper's Figure 4).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from benchcert.tasks.perturbation.service import STATUS_TEXT, PerturbationAudit
from benchcert.tasks.render.escape import escape  # the shared escaper: NUL, bidi controls
from benchcert.tasks.render.report import Section, table_html

_COMPOSITE = "#0072B2"
_CLASSICAL = "#D55E00"
_NULL = "#8C8C8C"


def sections(audit: PerturbationAudit, benchmark: str) -> list[Section]:
    """Report sections: rejection shares (table and bars), null-rate histograms, top items.

    Parameters
    ----------
    audit : PerturbationAudit
        The design's result (tables, notes, assumptions, the rates behind the histograms).
    benchmark : str
        The benchmark audited.

    Returns
    -------
    list of Section
    """
    d = audit.design
    level = f"{audit.alpha:g}"
    widened = audit.method in ("calibrated", "widened")
    calibrated = audit.method == "calibrated"
    margin = ("and by a margin for the binomial noise whose size is computed exactly over the composite null"
              if calibrated else "and by Hoeffding bounds for the binomial noise (the assumption-light option)")
    share = "&alpha;" if calibrated else "&alpha;<sub>I</sub>"
    test_text = (
        "rejects when the tested variant's rate lies outside the null variants' range widened by a margin "
        f"c&middot;R proportional to their spread R (c = {share}<sup>-1/(m-1)</sup> - 1, so that the "
        "chance of the sampled rewordings missing the tested probability by more than that is at most "
        f"{share} whatever the true range) {margin}. Its level "
        f"holds at {escape(level)} for every number of null variants and replicates; items where no outcome could "
        "reject are marked <b>no power</b>, items whose null range covers every rate <b>no alternative</b> - "
        "neither says the prompt does not matter" if widened else
        "uses the paper's plug-in calibration (Algorithm B's range treated as the true one). "
        "<b>This is assumption-dependent and does not hold its level with few null variants</b>; the default "
        "calibrated test does")
    intro = (f"<p>Does a prompt variant change the answers beyond what semantically irrelevant rewordings "
             f"do? For every item, the <b>composite test</b> {test_text}. The <b>classical test</b> (Fisher's exact "
             f"test against the base prompt alone) treats any difference as a change. Shares are over the items "
             f"each test can reject at all (the others are marked no power); BH = Benjamini-Hochberg across items "
             f"at {escape(level)}.</p>"
             f"<p>The composite test assumes: {escape('; '.join(audit.assumptions))}.</p>"
             f"<p>Design: base <code>{escape(repr(d.base))}</code>; null variants "
             f"{escape(', '.join(map(repr, d.null)))}; tested {escape(', '.join(map(repr, d.test)))}. "
             f"{escape(d.rule)}.</p>")
    v = audit.variants
    shares = v.select(
        "model", "variant", pl.col("n_tested").alias("items"),
        (pl.col("composite_share") * 100).alias("composite %"),
        (pl.col("composite_share_bh") * 100).alias("composite BH %"),
        (pl.col("classical_share") * 100).alias("classical %"),
        (pl.col("classical_share_bh") * 100).alias("classical BH %"),
        (pl.col("test_accuracy") * 100).alias("accuracy %"),
        pl.col("composite_status").alias("composite test"), pl.col("classical_status").alias("classical test"))
    no_power = "".join(f"<p class=\"no-power\"><b>No power</b> - {escape(r['model'])} {escape(repr(r['variant']))}: "
                       f"{r['n_no_power']} of {r['n_items']} items: {escape(r['no_power'])}.</p>"
                       for r in v.iter_rows(named=True) if r["no_power"])
    no_power += "".join(f"<p class=\"no-power\"><b>No power</b> (classical test) - {escape(r['model'])} "
                        f"{escape(repr(r['variant']))}: {r['n_classical_no_power']} of {r['n_items']} items: "
                        f"{escape(r['classical_no_power'])}.</p>"
                        for r in v.iter_rows(named=True) if r["classical_no_power"])
    no_power += "".join(f"<p class=\"low-power\"><b>Low power</b> - {escape(r['model'])} {escape(repr(r['variant']))}: "
                        f"{r['n_low_power']} of {r['n_tested']} tested items: {escape(r['low_power'])}.</p>"
                        for r in v.iter_rows(named=True) if r["low_power"])
    status_counts = v.select("model", "variant", pl.col("n_ok").alias("ok"),
                             pl.col("n_no_power").alias("no power"),
                             pl.col("n_no_alternative").alias("no alternative"),
                             pl.col("n_identical_null_rates").alias("identical null"),
                             pl.col("n_one_null_variant").alias("one null"),
                             pl.col("n_no_null_variants").alias("no null"),
                             pl.col("n_unequal_replicates").alias("unequal r"))
    notes = "".join(f"<li>{escape(n)}</li>" for n in audit.notes)
    statuses = "".join(f"<li><b>{escape(k)}</b>: {escape(t)}</li>" for k, t in STATUS_TEXT.items())
    out = [Section(
        title="Prompt perturbations: does the change matter?",
        anchor="perturbation",
        html=(intro + table_html(shares, float_digits=1) + no_power
              + "".join(_share_bars_svg(v.filter(pl.col("model") == model), model)
                        for model in v["model"].unique(maintain_order=True).to_list())
              + f"<ul class=\"assumptions\">{notes}</ul>"
              + table_html(status_counts, caption="items per status (see below)")
              + f"<ul>{statuses}</ul>"),
    )]
    plots = []
    for model in audit.null_rates["model"].unique(maintain_order=True).to_list():
        rates = audit.null_rates.filter(pl.col("model") == model)
        plots.append(_rates_histogram_svg(rates, model))
    top = (audit.items.filter(pl.col("p_value").is_not_null())
           .sort("p_value", "statistic", descending=[False, True]).head(5))
    for row in top.iter_rows(named=True):
        plots.append(_item_histogram_svg(audit, row))
    out.append(Section(
        title="Prompt perturbations: null rates and test rates",
        anchor="perturbation-rates",
        html=("<p>Benchmark-level accuracy of every variant (grey: null set, blue: tested), then, for the items "
              "with the smallest composite p-values, the histogram of the null variants' rates with the tested "
              "variant's rate marked (the paper's Figure 4, left).</p>" + "".join(plots)
              + table_html(top.select("model", "item_id", "variant", "test_rate", "null_min", "null_max",
                                      "range_low", "range_high", "p_value", "reject", "classical_p", "status"),
                           float_digits=3, caption="items with the smallest composite p-values")),
    ))
    return out


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}"><title>{escape(label)}</title>' + "".join(body) + "</svg>")


def _share_bars_svg(v: pl.DataFrame, model: str) -> str:
    """Horizontal bars per tested variant: composite vs classical share (raw; BH as a tick)."""
    rows = v.to_dicts()
    if not rows:
        return ""
    left, width, bar_h = 190, 700, 9
    height = 40 + len(rows) * (2 * bar_h + 10) + 48
    plot_w = width - left - 30
    body = [f'<text x="{left}" y="16" font-size="13">{escape(f"share of items where the change matters - {model}")}'
            "</text>"]
    for t in range(0, 101, 20):
        x = left + plot_w * t / 100
        body.append(f'<line x1="{x:.1f}" y1="26" x2="{x:.1f}" y2="{height - 42}" stroke="#ddd"/>'
                    f'<text x="{x:.1f}" y="{height - 30}" font-size="10" text-anchor="middle">{t}%</text>')
    y = 30
    for row in rows:
        body.append(f'<text x="{left - 6}" y="{y + bar_h + 4}" font-size="11" text-anchor="end">'
                    f'{escape(str(row["variant"]))}</text>')
        for key, bh, color in (("composite_share", "composite_share_bh", _COMPOSITE),
                               ("classical_share", "classical_share_bh", _CLASSICAL)):
            share = row[key]
            if share is not None:
                body.append(f'<rect x="{left}" y="{y}" width="{plot_w * share:.1f}" height="{bar_h}" fill="{color}">'
                            f'<title>{escape(f"{key}: {100 * share:.1f}%")}</title></rect>')
            if row[bh] is not None:
                xb = left + plot_w * row[bh]
                body.append(f'<line x1="{xb:.1f}" y1="{y - 1}" x2="{xb:.1f}" y2="{y + bar_h + 1}" stroke="#000" '
                            'stroke-width="2"/>')
            y += bar_h + 1
        y += 9
    body.append(f'<rect x="{left}" y="{height - 14}" width="10" height="8" fill="{_COMPOSITE}"/>'
                f'<text x="{left + 14}" y="{height - 7}" font-size="10">composite</text>'
                f'<rect x="{left + 90}" y="{height - 14}" width="10" height="8" fill="{_CLASSICAL}"/>'
                f'<text x="{left + 104}" y="{height - 7}" font-size="10">classical (Fisher vs base); '
                'black tick = after Benjamini-Hochberg</text>')
    return _svg(width, height, body, f"rejection shares for {model}")


def _histogram(values, marks, *, title: str, label: str, lo=0.0, hi=1.0, bins=20) -> str:
    width, height, left, right, top, bottom = 700, 190, 40, 20, 28, 36
    pw, ph = width - left - right, height - top - bottom
    counts, edges = np.histogram(np.clip(values, lo, hi), bins=bins, range=(lo, hi))
    peak = max(int(counts.max()) if counts.size else 0, 1)
    body = [f'<text x="{left}" y="16" font-size="13">{escape(title)}</text>',
            f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444"/>']
    for c, e0, e1 in zip(counts, edges[:-1], edges[1:]):
        if c:
            x0 = left + pw * (e0 - lo) / (hi - lo)
            bw = pw * (e1 - e0) / (hi - lo)
            h = ph * c / peak
            body.append(f'<rect x="{x0 + 0.5:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 1, 1):.1f}" '
                        f'height="{h:.1f}" fill="{_NULL}"><title>{int(c)} null variant(s)</title></rect>')
    for t in np.linspace(lo, hi, 6):
        x = left + pw * (t - lo) / (hi - lo)
        body.append(f'<text x="{x:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{t:.2f}</text>')
    for k, (name, value) in enumerate(marks):
        if value is None or not math.isfinite(value):
            continue
        x = left + pw * (min(max(value, lo), hi) - lo) / (hi - lo)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="{_COMPOSITE}" '
                    f'stroke-width="2"><title>{escape(f"{name}: {value:.3f}")}</title></line>'
                    f'<text x="{x + 3:.1f}" y="{top + 10 + 11 * (k % 4)}" font-size="10" fill="{_COMPOSITE}">'
                    f'{escape(name)}</text>')
    body.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">'
                f'{escape(label)}</text>')
    return _svg(width, height, body, title)


def _rates_histogram_svg(rates: pl.DataFrame, model: str) -> str:
    null = rates.filter(pl.col("role").is_in(["base", "null"]))["accuracy"].to_numpy()
    marks = [(str(r["variant"]), float(r["accuracy"])) for r in rates.filter(pl.col("tested")).iter_rows(named=True)]
    lo = float(min(rates["accuracy"].min(), 1.0))
    hi = float(max(rates["accuracy"].max(), 0.0))
    pad = max((hi - lo) * 0.1, 0.02)
    return _histogram(null, marks, title=f"benchmark accuracy per variant - {model}",
                      label="accuracy (null-set variants histogram; tested variants marked)",
                      lo=max(0.0, lo - pad), hi=min(1.0, hi + pad), bins=15)


def _item_histogram_svg(audit: PerturbationAudit, row: dict) -> str:
    rates = audit.item_rates(row["model"], row["item_id"])
    values = np.array([rates[v] for v in audit.design.null_for(row["variant"]) if v in rates])
    lo, hi = (row["range_low"], row["range_high"]) if row["range_low"] is not None else (row["a_hat"], row["b_hat"])
    rng = "none" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
    title = (f"item {row['item_id']} - {row['model']}: null rates vs {row['variant']} "
             f"(null range as tested {rng}, p = {row['p_value']:.3g})")
    return _histogram(values, [(str(row["variant"]), row["test_rate"])], title=title,
                      label="response rate over replicates (null variants histogram; tested variant marked)", bins=20)
