"""The report's section of scores per model (the exchangeable-bounds paper's Table 1 layout)."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html


def section(table1: pl.DataFrame, unscored_convention: str) -> Section:
    """``table1``: a row per model (items, scores in %, subject spread); ``unscored_convention``: how an
    item with no score counts (summary.json's ``unscored_convention``)."""
    return Section(
        title="Scores per model",
        anchor="scores",
        html=("<p>Pooled = mean over answered items; macro = mean of subject accuracies. Subject SD and "
              "range are descriptive (exchangeable-bounds paper, Table 1 layout), not standard errors. No score: "
              + escape(unscored_convention) + ".</p>"
              + table_html(table1, float_digits=2)),
    )
