"""The report's headline section: which question each weighting's headline interval answers."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.audit.headline import QUESTIONS, RULE, wide_note
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.model_order import sort_frame
from benchcert.tasks.render.report import Section, table_html


def section(headline: pl.DataFrame, alpha: float) -> Section:
    """The report's headline section: the rule, then per weighting the question and each model's headline
    interval, with the new-subjects interval and its sentence beside a same-subjects headline."""
    level = f"{100 * (1 - alpha):g}%"
    parts = [f"<p>{level} intervals. Two questions: <b>new subjects</b> (how good is the model on new subjects "
             "drawn like these: the hierarchical bound) and <b>these subjects</b> (how good is it on this "
             "benchmark's subjects, items sampled within them: the same-subjects interval). Rule: "
             f"{escape(RULE)}.</p>"]
    pooled = headline.filter(pl.col("metric") == "pooled").select("model", pl.col("estimate").alias("_pooled"))
    for (metric,), rows in headline.group_by("metric", maintain_order=True):
        question = rows["question"][0]
        # one order in every table and chart of the report: the pooled score, ties by name
        table = sort_frame(rows.join(pooled, on="model", how="left"), "_pooled").select(
            "model", (pl.col("estimate") * 100).alias(f"{metric[0]} %"),
            (pl.col("lower") * 100).alias(f"{QUESTIONS[question]}: lower %"),
            (pl.col("upper") * 100).alias(f"{QUESTIONS[question]}: upper %"),
            (pl.col("half_width") * 100).alias("± pp"),
            *([(pl.col("new_subjects_lower") * 100).alias("new subjects: lower %"),
               (pl.col("new_subjects_upper") * 100).alias("new subjects: upper %"),
               (pl.col("new_subjects_half_width") * 100).alias("new subjects ± pp")]
              if question == "same_subjects" else
              [(pl.col("same_subjects_half_width") * 100).alias("these subjects ± pp")]))
        why = ""
        if question == "same_subjects":
            tight = rows.sort("new_subjects_half_width").row(0, named=True)
            why = (f" The new-subjects interval stands beside it: "
                   f"{escape(wide_note(tight['n_subjects'], tight['new_subjects_half_width']))}.")
        parts.append(f"<h3>{escape(metric.capitalize())} score: headline = {escape(QUESTIONS[question])}</h3>"
                     f"<p>{why}</p>" + table_html(table, float_digits=2, max_rows=500))
    return Section(title="Headline interval", anchor="headline", html="".join(parts))
