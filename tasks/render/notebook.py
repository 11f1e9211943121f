"""The HTML a typed result shows in Jupyter (``_repr_html_``): its table and its interval chart.

Names come from logs, so every cell, heading and note goes through
:func:`~benchcert.tasks.render.escape.escape`; the chart is the report's forest plot
(:func:`~benchcert.tasks.render.charts.interval_plot_svg`), inline SVG with no script.
"""

from __future__ import annotations

import math

from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.escape import escape

#: Rows shown in a notebook before the table says how many more there are (to_polars() has all).
MAX_ROWS = 40


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "\u2014"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def table_html(frame, max_rows: int = MAX_ROWS) -> str:
    """An HTML table of a polars DataFrame's first ``max_rows`` rows, every cell escaped."""
    head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.head(max_rows).iter_rows():
        rows.append("<tr>" + "".join(f"<td>{escape(_cell(v))}</td>" for v in row) + "</tr>")
    more = (f'<p class="benchcert-more">{frame.height - max_rows} more row(s): to_polars() holds them all</p>'
            if frame.height > max_rows else "")
    return f'<table class="benchcert"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{more}'


def result_html(title: str, frame, *, chart: dict | None = None, notes: list[str] | None = None) -> str:
    """A result's notebook view: a heading, its notes, the interval chart (when it has one) and its table."""
    parts = [f'<div class="benchcert-result"><h4>{escape(title)}</h4>']
    for note in notes or []:
        parts.append(f"<p>{escape(note)}</p>")
    if chart is not None and chart["labels"]:
        parts.append(interval_plot_svg(chart["labels"], chart["series"], title=chart.get("title", ""),
                                       x_label=chart.get("x_label", "score"), percent=chart.get("percent", True),
                                       width=720))
    parts.append(table_html(frame))
    parts.append("</div>")
    return "".join(parts)
