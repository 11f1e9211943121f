"""One comparisons analysis never contradicts itself: a pair's verdict, its simultaneous
interval, the rank intervals and the tied groups all come from one decision (review finding:
Holm's step-down rejected pairs whose Bonferroni-simultaneous interval still covered 0).

The decision is "the simultaneous interval excludes 0" (Bonferroni on the p-values' own
reference); why not Holm is argued in ``benchcert.stats.comparisons.simultaneous_intervals``.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.compare.analysis import analyze
from benchcert.tasks.store.matrices import BenchmarkMatrices

from conftest import matrices_from_scores

N = int(os.environ.get("BENCHCERT_HYPOTHESIS_EXAMPLES", "40"))
FAST = settings(max_examples=N, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _analyze(m: BenchmarkMatrices, config: AuditConfig):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(m, config)


def _check_consistent(out, alpha: float) -> None:
    t = out.tables["comparisons"].filter(pl.col("n_shared") > 0)
    lo, hi = t["simultaneous_lower"].to_numpy(), t["simultaneous_upper"].to_numpy()
    verdict = t["verdict"].to_numpy()
    # the decision is the interval's, pair by pair and in direction
    assert ((verdict == "improved") == (lo > 0)).all()
    assert ((verdict == "regressed") == (hi < 0)).all()
    assert ((verdict == "inconclusive") == ((lo <= 0) & (hi >= 0))).all()
    # ... which is Bonferroni on the same reference (away from float ties at alpha itself)
    p_bonf = t["p_bonferroni"].to_numpy()
    clear = np.abs(p_bonf - alpha) > 1e-9
    assert ((p_bonf <= alpha) == (verdict != "inconclusive"))[clear].all()
    # rank intervals count exactly the pairs the table calls different
    winner = np.where(verdict == "improved", t["model"].to_numpy(),
                      np.where(verdict == "regressed", t["versus"].to_numpy(), None))
    loser = np.where(verdict == "improved", t["versus"].to_numpy(),
                     np.where(verdict == "regressed", t["model"].to_numpy(), None))
    ranks = out.tables["comparison_ranks"]
    beats = {name: int((winner == name).sum()) for name in ranks["model"]}
    beaten = {name: int((loser == name).sum()) for name in ranks["model"]}
    assert dict(zip(ranks["model"], ranks["n_significantly_worse"])) == beats
    assert dict(zip(ranks["model"], ranks["n_significantly_better"])) == beaten
    # and two models the table calls different never share a tied group
    member = {mname: set(g.split(",")) for mname, g in zip(ranks["model"], ranks["groups"])}
    for w, l_ in zip(winner, loser):
        if w is not None:
            assert not member[w] & member[l_]


def test_holm_rejection_inside_a_covering_interval_is_not_called_significant():
    # Three models on 400 items, no subjects (paired_clt: on 0/1 scores Tango's score test). "top" is right
    # everywhere, far ahead of both others (p ~ 1e-40). b against c: b alone right on 30 items, c alone on
    # 15, so D-bar = 15/400 = 0.0375; Tango's Z(0) is McNemar's 15 / sqrt(45) times sqrt(399/400) = 2.233,
    # p = 0.0255 - between alpha/3 and alpha. Holm over the 3 pairs rejects it (third step, threshold
    # alpha/1); Bonferroni (3p = 0.077) does not, and the simultaneous interval (Tango's at alpha/3, checked
    # against his closed form in tests/stats/comparisons/test_score.py) is [-0.0029, 0.0806]: it covers 0.
    # The old code called the pair "improved" beside that interval.
    n = 400
    top = np.ones(n)
    b = np.zeros(n)
    c = np.zeros(n)
    b[:230] = 1.0          # both right on 0..199, b alone on 200..229
    c[:200] = 1.0
    c[230:245] = 1.0       # c alone on 230..244
    out = _analyze(matrices_from_scores({"top": top, "b": b, "c": c}, np.zeros(n, dtype=int)), AuditConfig(hierarchy=()))
    t = out.tables["comparisons"]
    row = t.filter((pl.col("model") == "b") & (pl.col("versus") == "c")).row(0, named=True)
    assert row["method"] == "paired_clt" and row["gap"] == pytest.approx(0.0375)
    assert row["p_value"] == pytest.approx(2 * stats.norm.sf(15 / np.sqrt(45 * 400 / 399)), rel=1e-9)
    assert row["p_holm"] <= 0.05 < row["p_bonferroni"]          # Holm alone would reject it
    assert row["simultaneous_lower"] < 0 < row["simultaneous_upper"]
    assert row["simultaneous_lower"] == pytest.approx(-0.00286, abs=2e-5)
    assert row["verdict"] == "inconclusive"
    assert set(t.filter(pl.col("model") == "top")["verdict"]) == {"improved"}
    ranks = {r["model"]: r for r in out.tables["comparison_ranks"].iter_rows(named=True)}
    assert (ranks["b"]["rank_lower"], ranks["b"]["rank_upper"]) == (2, 3)
    assert (ranks["c"]["rank_lower"], ranks["c"]["rank_upper"]) == (2, 3)
    assert set(ranks["b"]["groups"].split(",")) & set(ranks["c"]["groups"].split(","))
    assert "Holm's step-down can reject" in out.sections[0].html
    _check_consistent(out, 0.05)


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), n=st.integers(6, 120),
       fractional=st.booleans(), subjects=st.integers(0, 5), missing=st.sampled_from([0.0, 0.1]),
       alpha=st.sampled_from([0.05, 0.2]))
def test_every_verdict_is_its_simultaneous_interval(seed, k, n, fractional, subjects, missing, alpha):
    rng = np.random.default_rng(seed)
    # gaps from none to large, so that Holm and Bonferroni often part ways
    acc = rng.uniform(0.2, 0.9, k)
    x = rng.random((n, k))
    scores = np.where(fractional, np.clip(acc + 0.3 * (x - 0.5), 0, 1), (x < acc).astype(float))
    scores = np.round(scores, 2)
    scores[rng.random((n, k)) < missing] = np.nan
    subj = rng.integers(0, max(subjects, 1), n)
    m = matrices_from_scores({f"m{i}": scores[:, i] for i in range(k)}, subj)
    if len(m.models) < 2:
        return
    out = _analyze(m, AuditConfig(alpha=alpha, hierarchy=("subject",) if subjects else ()))
    _check_consistent(out, alpha)


def test_with_a_baseline_the_report_says_the_tied_groups_answer_the_wider_ranking_family():
    # With --baseline the verdicts are the K - 1 pairs against it, the rank intervals and tied groups
    # every pair: a different family, which the report must name so the two do not read as a contradiction.
    rng = np.random.default_rng(5)
    base = (rng.random(300) < 0.5).astype(float)
    m = matrices_from_scores({"base": base, "b": (rng.random(300) < 0.6).astype(float),
                   "c": (rng.random(300) < 0.55).astype(float)}, np.repeat(np.arange(10), 30))
    html = _analyze(m, AuditConfig(baseline="base")).sections[0].html
    assert "a wider family than the verdicts against the baseline" in html
    html = _analyze(m, AuditConfig()).sections[0].html
    assert "as the verdicts" in html and "wider family" not in html
