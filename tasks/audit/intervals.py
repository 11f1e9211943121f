"""Comparator intervals users already know: iid CLT, Wilson, clustered by subject, and
lm-evaluation-harness' group stderr, for the pooled and the macro score of every model
(the exchangeable-bounds paper's Table 3 comparators; formulas in stats/intervals.py).

Models with fractional scores get the iid interval from their sample variance and no Wilson
row. The stats layer's warnings (zero-width or worst-case intervals) reach the run's warnings with
the score they concern and the models' names (one line per condition)."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from benchcert.stats.degenerate import IndexedWarning
from benchcert.stats.comparator_intervals import comparator_intervals, comparator_intervals_from_counts
from benchcert.tasks.audit.scores import validated_counts
from benchcert.tasks.audit.contract import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.model_order import sort_frame
from benchcert.tasks.render.sections import intervals as intervals_sections


def _fractional_note(models: list[str], binary: np.ndarray) -> list[str]:
    """What the table does for non-binary models (a choice of this analysis, not a stats warning)."""
    if binary.all():
        return []
    names = [models[i] for i in np.flatnonzero(~binary)]
    listed = ", ".join(names[:12]) + (f" ... ({len(names)} in all)" if len(names) > 12 else "")
    return [f"comparator intervals: non-binary scores for {listed}: iid_clt uses the sample variance of the item "
            "scores, and wilson (defined for 0/1 scores) is not reported"]


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    frames = []
    assumptions = {}
    all_results = {}
    counts = validated_counts(m)
    binary = counts.binary
    for metric in ("pooled", "macro"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if binary.all():  # from the per-subject counts the analyses share: no pass over the matrix
                all_results[metric] = comparator_intervals_from_counts(counts.n, counts.total, weighting=metric,
                                                                       alpha=config.alpha)
            else:
                all_results[metric] = comparator_intervals(m.scores, m.item_subject, weighting=metric,
                                                           alpha=config.alpha)
        # Passed on with the score they concern; run_analysis turns the model columns they refer to
        # into model names (tasks/audit/analyses.py _named), one line per condition and score.
        for message in dict(((str(w.message), w.category), w.message) for w in caught).values():
            if isinstance(message, IndexedWarning):  # its refs kept, for _named to name
                warnings.warn(message.retold(f"{metric} score: "), stacklevel=2)
            else:
                warnings.warn(f"{metric} score: {message}", type(message), stacklevel=2)
    for metric, results in all_results.items():
        for method, r in results.items():
            frames.append(pl.DataFrame({
                "model": m.models, "metric": metric, "method": method,
                "estimate": np.broadcast_to(r.estimate, len(m.models)).astype(float),
                "lower": np.broadcast_to(r.lower, len(m.models)).astype(float),
                "upper": np.broadcast_to(r.upper, len(m.models)).astype(float),
                "half_width": np.broadcast_to(r.half_width, len(m.models)).astype(float),
                "alpha": float(r.alpha),
            }, schema=INTERVAL_SCHEMA))
            assumptions[method] = r.assumptions
    # Wilson is defined for 0/1 scores only: its rows for fractional models are left out.
    intervals = pl.concat(frames).filter(pl.col("half_width").is_not_nan())
    pooled = pl.DataFrame({"model": m.models, "_pooled": all_results["pooled"]["iid_clt"].estimate})
    wide = (intervals.filter(pl.col("metric") == "macro")
            .select("model", "estimate", "method", (pl.col("half_width") * 100).alias("hw"))
            .pivot(on="method", index=["model", "estimate"], values="hw")
            .with_columns((pl.col("estimate") * 100).alias("macro %")).drop("estimate")
            .join(pooled, on="model", how="left").pipe(sort_frame, "_pooled").drop("_pooled"))
    return AnalysisOutput(
        name="comparator_intervals",
        warnings=_fractional_note(m.models, binary),
        tables={"comparator_intervals": intervals},
        intervals=intervals,
        sections=[intervals_sections.section(wide, assumptions, config.alpha)],
    )
