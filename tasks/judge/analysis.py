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

from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.judge.service import agreement, human_scale, labels_needed_sentence, mcar_warning
from benchcert.tasks.render.sections import judge as judge_sections
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


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    """Nothing (no table, no section) when the benchmark carries no human score."""
    if m.human is None:
        return AnalysisOutput(name="judge")
    results = human_scale(m, alpha=config.alpha)
    scale = pl.DataFrame([r.as_dict() for r in results], schema=HUMAN_SCALE_SCHEMA)
    agree = pl.DataFrame(agreement_rows(agreement(m, alpha=config.alpha)), schema=AGREEMENT_SCHEMA)
    notes = [f"judge: {mcar_warning(r.model, r.subset_check)}" for r in results
             if r.subset_check is not None and r.subset_check.suspicious]
    short = [labels_needed_sentence(r) for r in results if r.result is None]
    return AnalysisOutput(name="judge", tables={"human_scale": scale, "judge_agreement": agree},
                          sections=[judge_sections.section(scale, agree, short, notes, config.alpha)], warnings=notes)


#: summary.json's fields this analysis fills (tasks/schemas.py Summary), each from its table of that name.
SUMMARY_FIELDS = ("human_scale", "judge_agreement")


def summary_fields(tables: dict[str, pl.DataFrame]) -> dict:
    """summary.json's ``human_scale`` and ``judge_agreement``: the rows of those tables (absent: no field)."""
    return {name: tables[name].to_dicts() for name in SUMMARY_FIELDS if name in tables}
