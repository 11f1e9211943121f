"""The audit's ``judge`` analysis: human-scale scores and judge-human agreement.

Runs only when the benchmark carries human scores (``human_score`` beside the judge's ``score``);
otherwise it returns nothing (no table, no section, no summary field).  Writes the tables
``human_scale`` (one row per model, :meth:`ModelHumanScale.as_dict`) and ``judge_agreement``
(one row per model and one pooled), a report section, and warnings when a model's labelled
items look chosen rather than drawn at random.  summary.json carries both tables' rows under
``human_scale`` and ``judge_agreement`` (:func:`summary_fields`, declared on its registry entry).
"""

from __future__ import annotations

import math

import polars as pl

from benchcert.stats.ppi import MCAR, MIN_HUMAN_LABELS
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.judge.service import agreement, human_scale, labels_needed_sentence, mcar_warning
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html
from benchcert.tasks.store.matrices import BenchmarkMatrices

HUMAN_SCALE_SCHEMA = {
    "model": pl.String, "n_human": pl.Int64, "n_judge": pl.Int64, "labels_needed": pl.Int64,
    "estimate": pl.Float64, "lower": pl.Float64, "upper": pl.Float64, "alpha": pl.Float64, "lam": pl.Float64,
    "method": pl.String, "human_only_lower": pl.Float64, "human_only_upper": pl.Float64,
    "judge_only_estimate": pl.Float64, "subset_p_value": pl.Float64, "subset_suspicious": pl.Boolean,
}
AGREEMENT_SCHEMA = {
    "model": pl.String, "n": pl.Int64, "bias": pl.Float64, "bias_lower": pl.Float64, "bias_upper": pl.Float64,
    "exact_agreement": pl.Float64, "kappa": pl.Float64, "kappa_weights": pl.String, "spearman": pl.Float64,
    "levels": pl.List(pl.Float64), "confusion": pl.List(pl.List(pl.Int64)), "alpha": pl.Float64, "method": pl.String,
}


def _finite(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def agreement_rows(pairs) -> list[dict]:
    rows = []
    for name, a in pairs:
        rows.append({"model": name, "n": a.n, "bias": a.bias, "bias_lower": a.bias_lower, "bias_upper": a.bias_upper,
                     "exact_agreement": a.exact_agreement, "kappa": _finite(a.kappa), "kappa_weights": a.kappa_weights,
                     "spearman": _finite(a.spearman), "levels": list(a.levels) if a.levels else None,
                     "confusion": [list(r) for r in a.confusion] if a.confusion else None, "alpha": a.alpha,
                     "method": a.method})
    return rows


def _confusion_html(name: str, levels, confusion) -> str:
    """One confusion table (rows: human score, columns: judge score) as an escaped HTML table."""
    head = [f"{v:g}" for v in levels]
    frame = pl.DataFrame({"human \\ judge": head, **{f"judge {h}": [int(r[i]) for r in confusion]
                                                     for i, h in enumerate(head)}})
    return table_html(frame, caption=f"{name}: items by human score (rows) and judge score (columns)")


def _section(scale: pl.DataFrame, agree: pl.DataFrame, short: list, notes: list[str], alpha: float) -> Section:
    level = f"{100 * (1 - alpha):g}%"
    html = ("<p>The benchmark's scores come from a model judge; some responses also carry a human score. "
            f"The <b>human-scale score</b> is the mean score people would give, with a {level} prediction-powered "
            "interval (PPI++, Angelopoulos, Duchi and Zrnic 2023): the judge's mean over every judged item, "
            "corrected by the judge's error measured on the human-labelled items, with the tuning parameter "
            "<code>lam</code> (0 = human labels alone, 1 = plain PPI). The human-only interval on the same labels "
            "and the judge's plain mean are shown beside it; <i>labels p</i> is the p-value of the check that the "
            "labelled items' judge scores look like the rest's (small: the labels look chosen). A model needs at least "
            f"{MIN_HUMAN_LABELS} human labels.</p>"
            f"<p><b>Assumption:</b> {escape(MCAR)}.</p>")
    def iv(lo: str, hi: str) -> pl.Expr:
        return pl.format("[{}, {}]", (pl.col(lo) * 100).round(1), (pl.col(hi) * 100).round(1))

    shown = scale.filter(pl.col("estimate").is_not_null()).select(
        "model", pl.col("n_human").alias("labelled"), pl.col("n_judge").alias("judged"),
        (pl.col("estimate") * 100).alias("human-scale %"), iv("lower", "upper").alias(f"{level} interval %"),
        "lam", iv("human_only_lower", "human_only_upper").alias("human-only %"),
        (pl.col("judge_only_estimate") * 100).alias("judge %"), pl.col("subset_p_value").alias("labels p"))
    if shown.height:
        html += table_html(shown, float_digits=3, caption=f"Human-scale score per model, {level} intervals")
    if short:
        html += "<ul class=\"notes\">" + "".join(f"<li>{escape(labels_needed_sentence(r))}</li>" for r in short) + "</ul>"
    if notes:
        html += "<ul class=\"notes\">" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    if agree.height:
        html += ("<h3>Judge-human agreement</h3><p>On the items scored by both: the judge's bias (mean judge - human, "
                 f"{level} t interval), exact agreement, Cohen's kappa (quadratic-weighted for more than two ordered "
                 "levels; empty for continuous scores), Spearman's rank correlation, and the confusion table.</p>")
        html += table_html(agree.select("model", "n", "bias", "bias_lower", "bias_upper", "exact_agreement", "kappa",
                                        "kappa_weights", "spearman"), float_digits=3,
                           caption="Judge-human agreement per model and pooled")
        for row in agree.iter_rows(named=True):
            if row["confusion"] is not None and row["levels"] is not None and len(row["levels"]) <= 5:
                html += _confusion_html(row["model"], row["levels"], row["confusion"])
    return Section(title="Judge scores on the human scale", anchor="judge", html=html)


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    """Nothing (no table, no section) when the benchmark carries no human score."""
    if m.human is None:
        return AnalysisOutput(name="judge")
    results = human_scale(m, alpha=config.alpha)
    scale = pl.DataFrame([r.as_dict() for r in results], schema=HUMAN_SCALE_SCHEMA)
    agree = pl.DataFrame(agreement_rows(agreement(m, alpha=config.alpha)), schema=AGREEMENT_SCHEMA)
    notes = [f"judge: {mcar_warning(r.model, r.subset_check)}" for r in results
             if r.subset_check is not None and r.subset_check.suspicious]
    short = [r for r in results if r.result is None]
    return AnalysisOutput(name="judge", tables={"human_scale": scale, "judge_agreement": agree},
                          sections=[_section(scale, agree, short, notes, config.alpha)], warnings=notes)


#: summary.json's fields this analysis fills (tasks/schemas.py Summary), each from its table of that name.
SUMMARY_FIELDS = ("human_scale", "judge_agreement")


def summary_fields(tables: dict[str, pl.DataFrame]) -> dict:
    """summary.json's ``human_scale`` and ``judge_agreement``: the rows of those tables (absent: no field)."""
    return {name: tables[name].to_dicts() for name in SUMMARY_FIELDS if name in tables}
