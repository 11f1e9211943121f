"""The judge service and the audit's judge analysis on matrices (no store)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchcert.stats.ppi import MIN_HUMAN_LABELS, judge_agreement, labelled_subset_check, ppi_mean
from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.judge import analysis
from benchcert.tasks.judge.service import POOLED, agreement, human_scale, labels_needed_sentence
from benchcert.tasks.store.matrices import BenchmarkMatrices, ITEM_SCHEMA

from judge_support import judge_of
from simcheck import rate_ci


def _matrices(judge: np.ndarray, human: np.ndarray | None, models=("a", "b")) -> BenchmarkMatrices:
    n = judge.shape[0]
    items = pl.DataFrame({"item_id": [f"q{i:05d}" for i in range(n)], "subject": "all", "domain": "all"},
                         schema=ITEM_SCHEMA)
    return BenchmarkMatrices("b", "", items=items, models=list(models), scores=judge,
                             n_replicates=np.ones(judge.shape, np.uint32), human=human)


def _bench(rng, n_items=2000, n_labelled=100, p=(0.5, 0.6), chosen=False):
    human = (rng.random((n_items, len(p))) < np.array(p)).astype(float)
    judge = np.column_stack([judge_of(human[:, j], rng) for j in range(len(p))])
    lab = np.zeros(n_items, bool)
    lab[rng.choice(n_items, n_labelled, replace=False)] = True
    mask = (lab[:, None] & (judge == 1.0)) if chosen else np.repeat(lab[:, None], len(p), axis=1)
    return judge, np.where(mask, human, np.nan), human


def test_no_human_scores_means_nothing_changes():
    judge = np.random.default_rng(1).integers(0, 2, (50, 2)).astype(float)
    m = _matrices(judge, None)
    assert human_scale(m) == [] and agreement(m) == []
    out = analysis.analyze(m, AuditConfig())
    assert out.tables == {} and out.sections == [] and out.warnings == []


def test_each_model_gets_the_stats_layer_numbers():
    rng = np.random.default_rng(2)
    judge, human, _ = _bench(rng, n_items=500, n_labelled=80)
    judge[:20, 1] = np.nan  # model b did not answer 20 items (two of them maybe labelled)
    human[:20, 1] = np.nan
    m = _matrices(judge, human)
    rows = human_scale(m, alpha=0.1)
    for j, row in enumerate(rows):
        lab = ~np.isnan(human[:, j])
        rest = ~np.isnan(judge[:, j]) & ~lab
        want = ppi_mean(human[lab, j], judge[lab, j], judge[rest, j], alpha=0.1)
        assert row.result == want
        assert (row.n_human, row.n_judge) == (lab.sum(), (~np.isnan(judge[:, j])).sum())
        assert row.subset_check == labelled_subset_check(judge[lab, j], judge[rest, j], alpha=0.1)
    pairs = dict(agreement(m, alpha=0.1))
    both = ~np.isnan(human)
    assert pairs["a"] == judge_agreement(judge[both[:, 0], 0], human[both[:, 0], 0], alpha=0.1)
    assert pairs[POOLED] == judge_agreement(np.concatenate([judge[both[:, 0], 0], judge[both[:, 1], 1]]),
                                            np.concatenate([human[both[:, 0], 0], human[both[:, 1], 1]]), alpha=0.1)


def test_point_estimate_and_lambda_equal_the_reference_implementation():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(3)
    judge, human, _ = _bench(rng, n_items=800, n_labelled=120)
    row = human_scale(_matrices(judge, human))[0]
    lab = ~np.isnan(human[:, 0])
    y, yh, yu = human[lab, 0], judge[lab, 0], judge[~lab, 0]
    assert abs(row.result.estimate - float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yh, yu))[0])) < 1e-8
    lower, upper = ppi_py.ppi_mean_ci(y, yh, yu, alpha=0.05)
    normal = ppi_mean(y, yh, yu, quantile="normal")
    assert abs(normal.lower - float(np.ravel(lower)[0])) < 1e-8 and abs(normal.upper - float(np.ravel(upper)[0])) < 1e-8
    assert normal.lam == row.result.lam


def test_too_few_labels_say_how_many_more_and_all_labelled_is_human_only():
    rng = np.random.default_rng(4)
    judge, human, _ = _bench(rng, n_items=200, n_labelled=MIN_HUMAN_LABELS - 5)
    short = human_scale(_matrices(judge, human))[0]
    assert short.result is None and short.labels_needed == 5
    assert "needs at least 30, so 5 more" in labels_needed_sentence(short)
    out = analysis.analyze(_matrices(judge, human), AuditConfig())
    assert "so 5 more" in out.sections[0].html
    assert out.tables["human_scale"]["estimate"].null_count() == 2
    full = judge.copy()
    every = human_scale(_matrices(full[:40], np.where(np.isnan(human[:40]), full[:40], human[:40])))[0]
    assert every.result.method.startswith("human only") and every.result.lam == 0.0 and every.n_judge == 40


def test_labels_chosen_by_the_judge_raise_the_warning_and_random_ones_do_not():
    rng = np.random.default_rng(5)
    judge, human, _ = _bench(rng, n_labelled=300, chosen=True)
    out = run_analysis("judge", analysis.analyze, _matrices(judge, human), AuditConfig())
    assert sum("look chosen, not drawn at random" in w for w in out.warnings) == 2
    assert "look chosen" in out.sections[0].html
    judge, human, _ = _bench(np.random.default_rng(6), n_labelled=300)
    out = run_analysis("judge", analysis.analyze, _matrices(judge, human), AuditConfig())
    assert not any("look chosen" in w for w in out.warnings)
    assert out.tables["judge_agreement"]["model"].to_list() == ["a", "b", POOLED]
    assert "Assumption:" in out.sections[0].html


@pytest.mark.montecarlo
@pytest.mark.parametrize("n_labelled", [100, 300])
def test_audit_human_scale_covers_the_truth_and_the_judge_does_not(n_labelled):
    # Issue #28's setting through the service: human rate 0.6, +10 pp judge bias, 70% agreement, 2,000
    # judged items, labels drawn at random.  The truth is the benchmark's human-scale mean.
    rng = np.random.default_rng([28, n_labelled])
    reps = 1200
    hits = narrower = judge_hits = 0
    for _ in range(reps):
        judge, human, full = _bench(rng, n_labelled=n_labelled, p=(0.6,))
        p = full.mean()
        r = human_scale(_matrices(judge, human, models=("a",)))[0].result
        hits += r.lower <= p <= r.upper
        narrower += (r.upper - r.lower) < (r.human_only_upper - r.human_only_lower)
        se = judge[:, 0].std(ddof=1) / np.sqrt(judge.shape[0])
        judge_hits += abs(judge[:, 0].mean() - p) <= 1.96 * se
    _, lo, hi = rate_ci(hits, reps)
    # The wiring check (the acceptance-size simulation is tests/stats/test_ppi.py): the rate must be
    # consistent with 95%, and can fail: at a true coverage of 0.92 the 99% interval's top sits below 0.95.
    assert hi >= 0.95 and lo >= 0.92, (hits / reps, lo, hi)
    assert narrower / reps > 0.9
    assert judge_hits / reps < 0.10
