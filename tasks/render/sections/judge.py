"""The report's section of judge scores: the human-scale score (PPI++) and judge-human agreement."""

from __future__ import annotations

import polars as pl

from benchcert.stats.ppi import MCAR, MIN_HUMAN_LABELS
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html


def _confusion_html(name: str, levels, confusion) -> str:
    """One confusion table (rows: human score, columns: judge score) as an escaped HTML table."""
    head = [f"{v:g}" for v in levels]
    frame = pl.DataFrame({"human \\ judge": head, **{f"judge {h}": [int(r[i]) for r in confusion]
                                                     for i, h in enumerate(head)}})
    return table_html(frame, caption=f"{name}: items by human score (rows) and judge score (columns)")


def section(scale: pl.DataFrame, agree: pl.DataFrame, short: list[str], notes: list[str], alpha: float) -> Section:
    """The judge section: the human-scale scores, then the judge-human agreement.

    Parameters
    ----------
    scale : polars.DataFrame
        Table ``human_scale``.
    agree : polars.DataFrame
        Table ``judge_agreement``.
    short : list of str
        One sentence per model with too few human labels (how many more it needs).
    notes : list of str
        The analysis' warnings (labels that look chosen).
    alpha : float
        1 - confidence level.

    Returns
    -------
    Section
    """
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
        html += "<ul class=\"notes\">" + "".join(f"<li>{escape(r)}</li>" for r in short) + "</ul>"
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
