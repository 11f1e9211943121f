"""Comparator intervals users already know: iid CLT, Wilson, clustered by subject, and
lm-evaluation-harness' group stderr, for the pooled and the macro score of every model
(the exchangeable-bounds paper's Table 3 comparators; formulas in stats/intervals.py).

Models with fractional scores get the iid interval from their sample variance and no Wilson
row. Degenerate cases are reported one line per condition, naming the models."""

from __future__ import annotations

import warnings
from html import escape

import numpy as np
import polars as pl

from benchcert.stats._common import DegenerateDataWarning
from benchcert.stats.intervals import comparator_intervals
from benchcert.tasks.analyses import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.matrices import BenchmarkMatrices
from benchcert.tasks.report import Section, table_html


def _names(models: list[str], idx) -> str:
    names = [models[i] for i in idx]
    return ", ".join(names[:12]) + (f" ... ({len(names)} in all)" if len(names) > 12 else "")


def _grouped_warnings(models: list[str], results: dict[str, dict], binary: np.ndarray) -> list[str]:
    """One line per condition, listing the models by name (the stats layer only knows columns)."""
    out = []
    if not binary.all():
        out.append("comparator intervals: non-binary scores for " + _names(models, np.flatnonzero(~binary))
                   + ": iid_clt uses the sample variance of the item scores, and wilson (defined for 0/1 scores) "
                   "is not reported")
    for metric, res in results.items():
        for method, r in res.items():
            hw = np.broadcast_to(np.asarray(r.half_width, dtype=float), (len(models),))
            zero = np.flatnonzero(hw == 0)
            if zero.size:
                out.append(f"comparator intervals ({metric}): zero-width {method} interval for {_names(models, zero)}: "
                           "the data show no variation, which is not the same as none")
            if r.se is not None:
                worst = np.flatnonzero(np.broadcast_to(np.asarray(r.se, dtype=float), (len(models),)) == 0.5)
                if worst.size:
                    out.append(f"comparator intervals ({metric}): {method} standard error not estimable for "
                               f"{_names(models, worst)}; the interval is the worst case [0, 1]")
    return out


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    frames = []
    assumptions = {}
    all_results = {}
    with warnings.catch_warnings():
        # restated below by model name, one line per condition
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for metric in ("pooled", "macro"):
            all_results[metric] = comparator_intervals(m.scores, m.item_subject, weighting=metric,
                                                       alpha=config.alpha)
    s = m.scores
    binary = np.all(np.isnan(s) | (s == 0.0) | (s == 1.0), axis=0)
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
    wide = (intervals.filter(pl.col("metric") == "macro")
            .select("model", "estimate", "method", (pl.col("half_width") * 100).alias("hw"))
            .pivot(on="method", index=["model", "estimate"], values="hw")
            .with_columns((pl.col("estimate") * 100).alias("macro %")).drop("estimate")
            .sort("macro %"))
    notes = "".join(f"<li><b>{escape(method)}</b>: {escape('; '.join(assumption))}</li>"
                    for method, assumption in assumptions.items())
    return AnalysisOutput(
        name="comparator_intervals",
        warnings=_grouped_warnings(m.models, all_results, binary),
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
