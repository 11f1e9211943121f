"""The report's section of answers that failed to parse (tasks/parsing/analysis.py)."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html


def section(table: pl.DataFrame, notes: list[str], alpha: float, warn_share: float) -> Section:
    """Per model: responses, unparsed and their share, the score counting them wrong and the score over
    parsed answers only, each with its interval.

    Parameters
    ----------
    table : polars.DataFrame
        Table ``parse_failures``.
    notes : list of str
        The analysis' warnings (models above ``warn_share`` unparsed).
    alpha : float
        1 - confidence level.
    warn_share : float
        The share of unparsed responses above which a model is warned about.

    Returns
    -------
    Section
    """
    level = f"{100 * (1 - alpha):g}%"

    def iv(lo: str, hi: str) -> pl.Expr:
        return pl.format("[{}, {}]", (pl.col(lo) * 100).round(1), (pl.col(hi) * 100).round(1))

    shown = table.sort("share_unparsed", descending=True).select(
        "model", pl.col("n_responses").alias("responses"), pl.col("n_unparsed").alias("unparsed"),
        (pl.col("share_unparsed") * 100).alias("unparsed %"),
        (pl.col("score_unparsed_wrong") * 100).alias("score, unparsed wrong %"),
        iv("unparsed_wrong_lower", "unparsed_wrong_upper").alias(f"{level} interval (wrong) %"),
        (pl.col("score_parsed_only") * 100).alias("score over parsed %"),
        iv("parsed_only_lower", "parsed_only_upper").alias(f"{level} interval (parsed) %"),
        pl.col("method").alias("interval"))
    html = ("<p>Responses whose answer could not be read from the model's output (the log's parse flag: "
            "MMLU-Pro's <code>pred</code> null, an lm-evaluation-harness filter that matched nothing, inspect_ai's "
            "NOANSWER, or a mapped <code>parsed</code> column) are scored wrong by the releases, so a model that "
            "answers in a form the harness cannot read looks like one that knows less. <i>Score, unparsed wrong</i> "
            "counts them 0 (the releases' convention); <i>score over parsed</i> is the mean over the items whose "
            f"answer was read, a different estimand: failures are rarely at random, so it is not what the model "
            f"would score if every answer parsed. Models above {100 * warn_share:g}% unparsed are warned about.</p>")
    html += table_html(shown, float_digits=2, caption=f"Answers that failed to parse per model, {level} intervals")
    if notes:
        html += "<ul class=\"notes\">" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    return Section(title="Answers that failed to parse", anchor="parsing", html=html)
