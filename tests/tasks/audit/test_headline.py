"""The audit's headline interval (tasks/audit/headline.py): the rule, the code-benchmark case and the
MMLU-Pro demo, and what summary.json carries.

The code-benchmark case: 16 models, 1,055 items, 3 subjects (easy / medium / hard) as in issue #25
finding 4, where the new-subjects interval was [0, 100] for most models. Measured here: macro
same-subjects half-widths 2.3-2.8 pp against new-subjects ones of 64-71 pp. MMLU-Pro (91 subjects,
14 domains) keeps the new-subjects headline: macro ±3.8-5.6 pp, pooled ±5.8-9.8 pp (the same-subjects
interval beside it ±0.9-1.5 / ±0.7-0.9 pp).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.hierarchical import analysis as H
from benchcert.tasks.audit import scores as scores_analysis
from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.audit.headline import MAX_NEW_SUBJECTS_HALF_WIDTH, headline_question, wide_note
from benchcert.tasks.audit.results import build_report, build_summary
from benchcert.tasks.compare import analysis as comparisons
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import BenchmarkMatrices, load_matrices

from headline_support import code_benchmark


def test_rule_threshold():
    assert MAX_NEW_SUBJECTS_HALF_WIDTH == 0.25
    assert headline_question([0.05, 0.249]) == "new_subjects"
    assert headline_question([0.05, 0.251]) == "same_subjects"
    assert headline_question([0.05], item_only=True) == "items"
    assert wide_note(3, 0.4812) == ("with 3 subjects, generalisation to new subjects cannot be bounded more "
                                    "tightly than ±48 pp")


@pytest.fixture(scope="module")
def code_run():
    m = code_benchmark()
    cfg = AuditConfig(hierarchy=("subject",))
    outputs = [run_analysis("scores", scores_analysis.analyze, m, cfg), run_analysis("hierarchical", H.analyze, m, cfg),
               run_analysis("comparisons", comparisons.analyze, m, cfg)]
    return m, cfg, outputs


def test_code_benchmark_headline_is_the_same_subjects_interval(code_run):
    m, cfg, outputs = code_run
    head = outputs[1].tables["headline"]
    assert head.height == 32 and set(head["metric"]) == {"macro", "pooled"}
    assert (head["question"] == "same_subjects").all() and (head["method"] == "same_subjects").all()
    # at most a few points wide on 1,055 items; the new-subjects one is the [0, 100]-like interval beside it
    assert head["half_width"].max() < 0.03, head["half_width"].max()
    assert head["new_subjects_half_width"].min() > MAX_NEW_SUBJECTS_HALF_WIDTH
    assert (head["estimate"] >= head["lower"]).all() and (head["estimate"] <= head["upper"]).all()
    note = head["note"][0]
    assert note.startswith("with 3 subjects, generalisation to new subjects cannot be bounded more tightly than ±")
    # the estimate is the model's macro / pooled score
    scores = outputs[0].tables["model_scores"]
    macro = head.filter(pl.col("metric") == "macro").join(scores, on="model")
    np.testing.assert_allclose(macro["estimate"], macro["macro"], rtol=0, atol=1e-12)


def test_code_benchmark_summary_and_report_carry_the_headline(code_run):
    m, cfg, outputs = code_run
    summary = build_summary(run_id="r", created_at="t", matrices=m, config=cfg, outputs=outputs)
    for model in summary.models:
        for score in (model.macro, model.pooled):
            h = score.headline
            assert h.method == "same_subjects" and h.question == "same_subjects"
            assert h.upper - h.lower < 0.06
            assert h.beside.method == "hierarchical" and h.beside.half_width > 0.25 and "3 subjects" in h.note
        assert model.n_unscored == 0
    # ranks and tied groups as the comparisons' tables hold them
    ranks = outputs[2].tables["comparison_ranks"]
    tied = outputs[2].tables["tied_groups"]
    for model in summary.models:
        r = ranks.filter(pl.col("model") == model.model).row(0, named=True)
        assert (model.rank, model.rank_lower, model.rank_upper) == (r["rank"], r["rank_lower"], r["rank_upper"])
        assert model.tied_groups == sorted(tied.filter(pl.col("model") == model.model)["group"].to_list())
        assert model.rank_lower <= model.rank <= model.rank_upper
    assert "±25 pp" in summary.headline_rule and "left out" in summary.unscored_convention
    # the headline table of the report names the question and says why the new-subjects one is wide
    html = build_report(summary, outputs, sources=pl.DataFrame({"path": ["x"]}))
    assert "Headline interval" in html and "headline = these subjects" in html
    assert "with 3 subjects, generalisation to new subjects cannot be bounded more tightly than" in html
    # the scores table counts items with no score and states the convention
    assert ">no score</th>" in html and "No score: an item with no score" in html


def test_unscored_items_are_counted_per_model():
    # model m1 has no score for 10 items of subject a: they are unscored for it, left out of its scores
    frames = []
    rng = np.random.default_rng(1)
    for subj, n in {"a": 30, "b": 40}.items():
        for j in range(3):
            keep = n - (10 if (j == 1 and subj == "a") else 0)
            frames.append(pl.DataFrame({"model": f"m{j}", "item_id": [f"{subj}{i}" for i in range(keep)],
                                        "subject": subj, "domain": "d", "score": rng.random(keep)}))
    m = BenchmarkMatrices("b", "", pl.concat(frames))
    cfg = AuditConfig()
    outputs = [run_analysis("scores", scores_analysis.analyze, m, cfg), run_analysis("hierarchical", H.analyze, m, cfg)]
    summary = build_summary(run_id="r", created_at="t", matrices=m, config=cfg, outputs=outputs)
    assert {x.model: x.n_unscored for x in summary.models} == {"m0": 0, "m1": 10, "m2": 0}


def test_mmlu_pro_keeps_the_new_subjects_headline(mmlu_db):
    with open_store(mmlu_db, write=False) as con:
        m = load_matrices(con, "mmlu_pro")
    head = run_analysis("hierarchical", H.analyze, m, AuditConfig()).tables["headline"]
    assert (head["question"] == "new_subjects").all() and (head["method"] == "hierarchical").all()
    assert head["note"].is_null().all()
    # measured: macro ±3.8-5.6 pp, pooled ±5.8-9.8 pp; same-subjects beside it ±0.7-1.5 pp
    assert head["half_width"].max() < 0.11
    assert (head["same_subjects_half_width"] < head["new_subjects_half_width"]).all()
