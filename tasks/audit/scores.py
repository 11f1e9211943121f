"""Scores per model, subject and domain (the exchangeable-bounds paper's Table 1 layout, section 7.2)."""

from __future__ import annotations

import numpy as np
import polars as pl

from benchcert.stats.validation import check_scores
from benchcert.stats.scores import benchmark_scores_from_counts
from benchcert.stats.subject_counts import SubjectCounts
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.model_order import sort_frame
from benchcert.tasks.render.sections import scores as scores_sections


#: How an item with no prediction or no score counts (summary.json ``unscored_convention``).
UNSCORED_CONVENTION = (
    "an item with no score for a model (no row in the store: no log line, or a line quarantined at ingest with "
    "--allow-rejects, such as a missing score value or an inspect_ai sample without a score) is left out of that "
    "model's scores, not counted wrong; n_unscored counts them per model. Adapters that score a prediction "
    "themselves decide before the store: MMLU-Pro outputs score a null pred (failed answer extraction) 0, i.e. "
    "wrong (the ingest line reports 'pred null (scored 0)'). To count missing scores as wrong in a "
    "CSV/JSONL/Parquet log, map the score with an expression (--map score='coalesce(correct + 0, 0)'); to leave "
    "MMLU-Pro's null preds out, drop those entries before ingest")


def _nullable(x: np.ndarray) -> list:
    return [None if not np.isfinite(v) else float(v) for v in x]


def validated_counts(m: BenchmarkMatrices) -> SubjectCounts:
    """The matrix' per-subject counts (BenchmarkMatrices.subject_counts: one pass, shared by the
    analyses), once they show every score in [0, 1]; else the matrix' own check raises its error."""
    counts = m.subject_counts
    if m.n_items == 0 or not m.models or not counts.in_unit_interval:
        check_scores(m.scores, "scores", ndim=2, allow_nan=True)
    return counts


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    # The sums are the per-subject counts every analysis shares, not another pass over the matrix.
    counts = validated_counts(m)
    s = benchmark_scores_from_counts(counts.n, counts.total, subject_domains=m.subject_domain,
                                     n_domains=len(m.domains))
    model_scores = pl.DataFrame({
        "model": m.models,
        "n_items": s.n_items.astype(np.int64),
        "coverage": s.n_items / m.n_items,
        "n_subjects": s.n_subjects.astype(np.int64),
        "pooled": s.pooled,
        "macro": s.macro,
        "subject_sd": _nullable(s.subject_sd),
        "subject_min": _nullable(s.subject_min),
        "subject_max": _nullable(s.subject_max),
    }, schema_overrides={"subject_sd": pl.Float64, "subject_min": pl.Float64, "subject_max": pl.Float64})
    subject_table = m.subjects_by_models()
    missing = model_scores.filter(pl.col("coverage") < 1)
    notes = [f"model {r['model']!r} answered {r['n_items']} of {m.n_items} items; its scores use only those"
             for r in missing.iter_rows(named=True)]
    table1 = sort_frame(model_scores, "pooled").select(
        "model", "n_items", (m.n_items - pl.col("n_items")).alias("no score"), (pl.col("pooled") * 100).alias("pooled %"), (pl.col("macro") * 100).alias("macro %"),
        (pl.col("subject_sd") * 100).alias("subject SD %"),
        (pl.col("subject_min") * 100).alias("subject min %"), (pl.col("subject_max") * 100).alias("subject max %"))
    return AnalysisOutput(
        name="scores",
        tables={
            "model_scores": model_scores,
            "subject_scores": subject_table,
            "domain_scores": m.domains_by_models(),
        },
        sections=[scores_sections.section(table1, UNSCORED_CONVENTION)],
        warnings=notes,
    )
