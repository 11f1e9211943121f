"""Comparator intervals users already know (STATS.md A2): iid CLT, Wilson, clustered by subject,
and lm-evaluation-harness' group stderr, for the pooled and the macro score of every model."""

from __future__ import annotations

from html import escape

import numpy as np
import polars as pl

from benchcert.stats.intervals import comparator_intervals
from benchcert.tasks.analyses import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.matrices import BenchmarkMatrices
from benchcert.tasks.report import Section, table_html


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    frames = []
    assumptions = {}
    for metric in ("pooled", "macro"):
        results = comparator_intervals(m.scores, m.item_subject, weighting=metric, alpha=config.alpha)
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
    intervals = pl.concat(frames)
    wide = (intervals.filter(pl.col("metric") == "macro")
            .select("model", "estimate", "method", (pl.col("half_width") * 100).alias("hw"))
            .pivot(on="method", index=["model", "estimate"], values="hw")
            .with_columns((pl.col("estimate") * 100).alias("macro %")).drop("estimate")
            .sort("macro %"))
    notes = "".join(f"<li><b>{escape(method)}</b>: {escape('; '.join(assumption))}</li>"
                    for method, assumption in assumptions.items())
    return AnalysisOutput(
        name="comparator_intervals",
        tables={"comparator_intervals": intervals},
        intervals=intervals,
        sections=[Section(
            title="Comparator intervals",
            anchor="comparators",
            html=(f"<p>{100 * (1 - config.alpha):g}% half-widths (percentage points) of the macro score by method "
                  "(the paper's Table 3 layout). The iid interval treats items as independent; the clustered one "
                  "allows dependence within subjects.</p>" + table_html(wide, float_digits=2)
                  + f"<ul class=\"assumptions\">{notes}</ul>"),
        )],
    )
