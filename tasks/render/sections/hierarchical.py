"""The hierarchical analysis' report sections: the Table 3 layout, the variance components, the
domain fits, the split-half correlations and the subject correlation heatmap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.tasks.hierarchical.settings import N_SPLITS, SPLIT_MC_TOL, SPLIT_ROUND, SPLIT_SEED
from benchcert.tasks.render.charts import heatmap_svg, interval_plot_svg
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.model_order import order_models, sort_frame
from benchcert.tasks.render.report import Section, table_html

#: Colours shared with the report's other interval plots (tasks/audit/results.py METHOD_COLORS).
COLORS = {"iid_clt": "#0072b2", "clustered_subject": "#009e73", "hierarchical": "#e69f00"}


def _wide_tables(frame: pl.DataFrame, *, index: str = "model", per_table: int = 7, digits: int = 3) -> str:
    """A models x domains pivot as several narrower tables (14 domain columns do not fit a page)."""
    cols = [c for c in frame.columns if c != index]
    return "".join(table_html(frame.select(index, *cols[i:i + per_table]), float_digits=digits)
                   for i in range(0, max(len(cols), 1), per_table))


def _series(name: str, order: list[str], idx: dict[str, int], est, lower, upper) -> dict:
    sel = [idx[o] for o in order]
    return {"name": name, "color": COLORS[name], "estimate": np.asarray(est)[sel].tolist(),
            "lower": np.asarray(lower)[sel].tolist(), "upper": np.asarray(upper)[sel].tolist()}


@dataclass(frozen=True)
class Fitted:
    """What the report sections show of one hierarchical analysis
    (:func:`benchcert.tasks.hierarchical.analysis.analyze` fills it)."""

    hier: str  # the hierarchy's name: "subject,domain", "subject" or "none"
    bounds: dict  # metric -> the hierarchical bound per model
    comparators: dict  # metric -> method -> the comparator interval per model
    components: pl.DataFrame
    fit_frame: pl.DataFrame
    split_frame: pl.DataFrame
    corr: object  # the subject correlation across models, or None with fewer than 3 models
    item_only: bool


def sections(m, config, fitted: Fitted) -> list[Section]:
    """The hierarchical analysis' report sections: its intervals, the domain fits, the split-half
    reliability and (when computed) the subject correlation across models."""
    out = [_intervals_section(m, config, fitted), _domain_fits_section(fitted.fit_frame, fitted.item_only),
           _split_half_section(fitted.split_frame)]
    if fitted.corr is not None:
        out.append(_correlation_section(m, fitted.corr))
    return out


def _intervals_section(m, config, fitted: Fitted) -> Section:
    hier, bounds, comparators, components = fitted.hier, fitted.bounds, fitted.comparators, fitted.components
    models = m.models
    level = f"{100 * (1 - config.alpha):g}%"
    idx = {name: i for i, name in enumerate(models)}
    macro = bounds["macro"]

    def table3(metric: str):
        b, c = bounds[metric], comparators[metric]
        return pl.DataFrame({
            "model": models, f"{metric} %": b.estimate * 100, "iid ±": c["iid_clt"].half_width * 100,
            "wilson ±": c["wilson"].half_width * 100, "clustered ±": c["clustered_subject"].half_width * 100,
            "hierarchical ±": b.half_width * 100,
            "hierarchical / iid": b.half_width / np.maximum(c["iid_clt"].half_width, 1e-12),
            "_pooled": bounds["pooled"].estimate}).pipe(sort_frame, "_pooled").drop("_pooled")

    plots = []
    for metric in ("macro", "pooled"):
        b, c = bounds[metric], comparators[metric]
        order = order_models(models, bounds["pooled"].estimate)
        series = [_series("iid_clt", order, idx, c["iid_clt"].estimate, c["iid_clt"].lower, c["iid_clt"].upper),
                  _series("clustered_subject", order, idx, c["clustered_subject"].estimate,
                          c["clustered_subject"].lower, c["clustered_subject"].upper),
                  _series("hierarchical", order, idx, b.estimate, b.lower, b.upper)]
        plots.append(interval_plot_svg(order, series, title=f"{metric.capitalize()} score: iid vs clustered vs "
                                                            f"hierarchical, {level}", x_label=f"{metric} score"))

    comp = (components.select(
        "model", "metric", (pl.col("estimate") * 100).alias("score %"),
        (pl.col("sigma2_item") * 1e4).alias("σ²_item ×1e4"), (pl.col("sigma2_subj") * 1e4).alias("σ²_subj ×1e4"),
        (pl.col("sigma2_dom") * 1e4).alias("σ²_dom ×1e4"), (pl.col("sigma2_eff") * 1e4).alias("σ²_eff ×1e4"),
        (pl.col("sigma2_subj") / pl.col("sigma2_eff") * 100).alias("subject share %"),
        (pl.col("half_width") * 100).alias("half-width pp"))
        .sort("metric", "score %"))
    ratio = macro.half_width / np.maximum(comparators["macro"]["iid_clt"].half_width, 1e-12)
    hier_text = {"subject,domain": "subjects exchangeable within each domain, domains fixed strata",
                 "subject": "all subjects exchangeable in one group (domains ignored)",
                 "none": "no clustering: item-level proxy only"}[hier]
    notes = "".join(f"<li>{escape(a)}</li>" for a in macro.assumptions)
    head = (f"<p>{level} intervals from Corollary 6.1 of the exchangeable-bounds paper: "
            f"h = √(2 σ²_eff log(2/α)) with σ²_eff = σ²_item + σ²_subj + σ²_dom, the subject term from a "
            f"beta-binomial fit per domain (Marchal-Arbel proxy 1/(4(a+b+1))), as a profile-likelihood upper "
            f"confidence bound over all domains, so that the interval keeps its level with few subjects per domain "
            f"(half of α is spent on that bound). Hierarchy: <b>{escape(hier)}</b> "
            f"({escape(hier_text)}). The macro half-width is {np.median(ratio):.1f}× the iid one (median over "
            f"models; range {ratio.min():.1f}-{ratio.max():.1f}×). Half-widths in percentage points.</p>")
    if fitted.item_only:
        head += ("<p><b>Item-level only.</b> With hierarchy 'none' items are treated as independent, so these "
                 "intervals ignore the subject dependence that the diagnostics below measure.</p>")
    return Section(
        title="Hierarchical exchangeable intervals", anchor="hierarchical",
        html=(head + "<h3>Macro score (paper Table 3 layout)</h3>" + table_html(table3("macro"), float_digits=2)
              + "<h3>Pooled score</h3>" + table_html(table3("pooled"), float_digits=2) + "".join(plots)
              + "<h3>Where the uncertainty comes from</h3>"
              + table_html(comp, float_digits=3, max_rows=500)
              + f'<ul class="assumptions">{notes}</ul>'))


def _domain_fits_section(fit_frame: pl.DataFrame, item_only: bool) -> Section:
    fits_used = fit_frame.filter(pl.col("K_d") > 0)
    icc = (fits_used.select("model", "domain", "icc").pivot(on="domain", index="model", values="icc")
           .sort("model"))
    bad = fits_used.filter(pl.col("degenerate")).select("model", "domain", "K_d", "status", "s2", "s2_upper", "reason")
    return Section(
        title="Domain fits (beta-binomial)", anchor="domain-fits",
        html=("<p>Intraclass correlation 1/(a+b+1) of each domain's beta-binomial fit per model: the share of "
              "item variance that lies between subjects (paper section 7.3). Larger means the subject term "
              "dominates the interval." + (" <b>Not used in the bound (hierarchy 'none').</b>" if item_only else "")
              + "</p>" + _wide_tables(icc)
              + (f"<h3>Degenerate fits ({bad.height})</h3>"
                 "<p>Each is flagged in <code>domain_fits.parquet</code>. The interval does not plug in these fits: "
                 "it uses the worst case 1/4 where a + b is not identifiable, and otherwise an upper confidence "
                 "bound on the whole subject term from the domains' profile likelihoods (finite even for an "
                 "under-dispersed fit). <code>s2_upper</code> is each domain's own bound (Bonferroni over "
                 "domains), shown for reference.</p>" + table_html(bad, float_digits=6)
                 if bad.height else "<p>No degenerate fit.</p>")))


def _split_half_section(split_frame: pl.DataFrame) -> Section:
    t2 = (split_frame.select("model", "domain", "corr").pivot(on="domain", index="model", values="corr")
          .sort("model"))
    neg = split_frame.filter(pl.col("negative"))
    return Section(
        title="Split-half reliability within domains", anchor="split-half",
        html=(f"<p>Mean over random splits (seed {SPLIT_SEED}) of the correlation, across the "
              "subjects of a domain, between the accuracies on two random halves of each subject's items "
              f"(paper Table 2 layout); splits drawn in rounds of {SPLIT_ROUND} until every domain's Monte-Carlo "
              f"standard error (table column <code>mc_se</code>) is at most {SPLIT_MC_TOL}, at most {N_SPLITS} "
              "per model. High values: stable subject differences, so the subject term is real. "
              "Empty: fewer than 3 splittable subjects or no informative split. Negative values are evidence "
              "against exchangeable subjects in that domain.</p>" + _wide_tables(t2)
              + (f"<p><b>{neg.height} negative</b> (model, domain) value(s) flagged.</p>" if neg.height else "")))


def _correlation_section(m, corr) -> Section:
    subj = m.subjects
    labels = subj["subject"].to_list()
    groups = subj["domain"].to_list()
    summary = pl.DataFrame({
        "domain": list(m.domains), "subjects": np.bincount(np.asarray(m.subject_domain), minlength=len(m.domains)),
        "within-domain mean r": [None if not np.isfinite(v) else float(v) for v in corr.within_domain_mean],
        "negative": corr.negative_within})
    svg = heatmap_svg(corr.corr, labels, groups=groups,
                      title="Model-centred subject-subject correlation across models")
    return Section(
        title="Subject correlation across models", anchor="subject-correlation",
        html=("<p>Correlation across models of subject accuracies after removing each model's macro score "
              "(paper Figure 3), subjects ordered by domain. Red blocks on the diagonal: subjects of a domain "
              "that are easy or hard together. Descriptive only: it pools models, not repeated draws. "
              f"Between-domain mean r = {corr.between_domain_mean:.3f}.</p>" + svg
              + table_html(summary, float_digits=3)))
