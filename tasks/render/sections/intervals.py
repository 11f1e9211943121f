"""The report's section of comparator intervals (the exchangeable-bounds paper's Table 3 layout)."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html


def section(wide: pl.DataFrame, assumptions: dict[str, list[str]], alpha: float) -> Section:
    """``wide``: a row per model, the macro half-width of each method in a column; ``assumptions``:
    each method's assumptions, listed under the table."""
    notes = "".join(f"<li><b>{escape(method)}</b>: {escape('; '.join(assumption))}</li>"
                    for method, assumption in assumptions.items())
    return Section(
        title="Comparator intervals",
        anchor="comparators",
        html=(f"<p>{100 * (1 - alpha):g}% half-widths (percentage points) of the macro score by method "
              "(the paper's Table 3 layout). The iid interval treats items as independent; the clustered one "
              "allows dependence within subjects.</p>" + table_html(wide, float_digits=2)
              + f"<ul class=\"assumptions\">{notes}</ul>"),
    )
