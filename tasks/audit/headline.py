"""The audit's headline interval: which question each model's headline answers, by one stated rule.

Two questions, two intervals (both computed for every model and weighting):

* **new subjects** (method ``hierarchical``): how good is the model on new subjects drawn like
  these (subjects exchangeable within domains; the exchangeable-bounds paper's Corollary 6.1).
  With a handful of subjects this cannot be bounded tightly, whatever the number of items.
* **same subjects** (method ``same_subjects``, stats/same_subjects.py): how good is the model on
  this benchmark's subjects, items sampled within them (subjects as fixed strata).

The rule (:func:`headline_question`), one per weighting so that a column of the table answers one
question: the headline is the new-subjects interval unless, for some model, it is wider than
:data:`MAX_NEW_SUBJECTS_HALF_WIDTH` on either side (it covers more than half of [0, 1]); then
every model's headline is the same-subjects interval and the new-subjects one stands beside it
with one sentence saying why it is wide. With hierarchy ``none`` the hierarchical interval treats
items as independent (question ``items``); the same rule applies.

Table ``headline``: one row per (model, weighting).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from benchcert.tasks.schemas import Headline, ScoreSummary

#: Above this half-width (25 pp: the interval covers more than half of [0, 1]) for any model, the
#: headline of that weighting is the same-subjects interval.
MAX_NEW_SUBJECTS_HALF_WIDTH = 0.25

#: Short names of the questions (summary.json ``headline.question``) and their column headers.
QUESTIONS = {"new_subjects": "new subjects", "same_subjects": "these subjects", "items": "items independent"}

RULE = (f"headline = the new-subjects (hierarchical) interval unless, for some model of that weighting, it is "
        f"wider than ±{100 * MAX_NEW_SUBJECTS_HALF_WIDTH:g} pp (covers more than half of [0, 1]); then the "
        "same-subjects interval (this benchmark's subjects, items sampled within them), with the new-subjects "
        "one beside it")

HEADLINE_SCHEMA = {
    "model": pl.String, "metric": pl.String, "method": pl.String, "question": pl.String, "estimate": pl.Float64,
    "lower": pl.Float64, "upper": pl.Float64, "half_width": pl.Float64,
    "new_subjects_lower": pl.Float64, "new_subjects_upper": pl.Float64, "new_subjects_half_width": pl.Float64,
    "same_subjects_lower": pl.Float64, "same_subjects_upper": pl.Float64, "same_subjects_half_width": pl.Float64,
    "n_subjects": pl.Int64, "note": pl.String,
}


def headline_question(new_half_width: np.ndarray, *, item_only: bool = False) -> str:
    """The question a weighting's headline answers: ``same_subjects`` when some model's new-subjects
    half-width exceeds :data:`MAX_NEW_SUBJECTS_HALF_WIDTH`, else ``new_subjects`` (``items`` when the
    hierarchy is ``none``)."""
    hw = np.asarray(new_half_width, dtype=float)
    if hw.size and np.nanmax(hw) > MAX_NEW_SUBJECTS_HALF_WIDTH:
        return "same_subjects"
    return "items" if item_only else "new_subjects"


def wide_note(n_subjects: int, half_width: float) -> str:
    """The one sentence beside a wide new-subjects interval."""
    return (f"with {n_subjects} subject{'s' if n_subjects != 1 else ''}, generalisation to new subjects cannot be "
            f"bounded more tightly than ±{100 * half_width:.0f} pp")


def headline_frame(models: list[str], metric: str, new, same, *, item_only: bool) -> pl.DataFrame:
    """The headline rows of one weighting: ``new`` the hierarchical bound, ``same`` the same-subjects
    interval (per-model arrays ``estimate``, ``lower``, ``upper``, ``half_width``; ``new.n_subjects``)."""
    question = headline_question(new.half_width, item_only=item_only)
    chosen = same if question == "same_subjects" else new
    n_subj = np.asarray(new.n_subjects, dtype=np.int64)
    notes = ([wide_note(int(k), float(h)) for k, h in zip(n_subj, new.half_width)] if question == "same_subjects"
             else [None] * len(models))
    return pl.DataFrame({
        "model": models, "metric": metric, "method": "same_subjects" if question == "same_subjects" else "hierarchical",
        "question": question, "estimate": chosen.estimate, "lower": chosen.lower, "upper": chosen.upper,
        "half_width": chosen.half_width, "new_subjects_lower": new.lower, "new_subjects_upper": new.upper,
        "new_subjects_half_width": new.half_width, "same_subjects_lower": same.lower,
        "same_subjects_upper": same.upper, "same_subjects_half_width": same.half_width, "n_subjects": n_subj,
        "note": notes}, schema=HEADLINE_SCHEMA)


def headline_of(score: ScoreSummary) -> Headline | None:
    """The interval a score is headlined with; runs before schema 1.2 led with the hierarchical bound."""
    if score.headline is not None:
        return score.headline
    hier = next((i for i in score.intervals if i.method == "hierarchical"), None)
    return None if hier is None else Headline(method=hier.method, question="new_subjects", lower=hier.lower,
                                               upper=hier.upper, half_width=hier.half_width)


def interval_of(score: ScoreSummary, method: str):
    """The interval of ``score`` made by ``method`` (e.g. ``"iid_clt"``), or None."""
    return next((i for i in score.intervals if i.method == method), None)
