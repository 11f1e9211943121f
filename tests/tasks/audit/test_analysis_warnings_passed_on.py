"""Every stats-layer warning of the comparator-interval and comparison analyses reaches the run's
warnings, named by run_analysis (tasks/audit/analyses.py ``_named``), and none is invented a
second time from the results (review finding 2)."""

from __future__ import annotations

import numpy as np

from benchcert.stats.degenerate import DegenerateDataWarning, Ref
from benchcert.tasks.audit.analyses import _named, run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.compare import analysis as comparisons
from benchcert.tasks.audit import intervals

from conftest import matrices_from_scores


def test_pairs_of_model_columns_are_named():
    m = matrices_from_scores({"a": np.r_[0.0, 1.0], "b": np.r_[1.0, 1.0], "c": np.r_[0.0, 0.0]}, np.zeros(2, int))
    w = DegenerateDataWarning("x ({}) y", Ref("model pair", [(1, 0), (2, 1)]))
    assert _named(w, m) == "x (model pair(s) 'b vs a', 'c vs b') y"
    assert (_named(DegenerateDataWarning("{}", Ref("model pair", [(0, 2)] * 9)), m)
            == "model pair(s) " + ", ".join(["'a vs c'"] * 8) + ", ... (9 in all)")
    no_such = DegenerateDataWarning("{}", Ref("model pair", [(0, 7)]))
    assert _named(no_such, m) == "model column pair(s) [(0, 7)]"  # no such model: the index wording stays
    # text is never parsed back (issue #23): the same wording as plain text passes on unchanged
    assert _named("x (model column pair(s) [(1, 0), (2, 1)]) y", m) == "x (model column pair(s) [(1, 0), (2, 1)]) y"


def test_a_degenerate_pair_outside_the_baseline_family_is_reported_not_suppressed():
    # Against the baseline "other" nothing is degenerate; the rank intervals compare every pair, and
    # twin-a against twin-b has a zero standard error. The old code silenced that family's warnings.
    rng = np.random.default_rng(3)
    x = (rng.random(120) < 0.6).astype(float)
    m = matrices_from_scores({"twin-a": x, "twin-b": x.copy(), "other": (rng.random(120) < 0.5).astype(float)},
                  np.repeat(np.arange(4), 30))
    out = run_analysis("comparisons", comparisons.analyze, m, AuditConfig(baseline="other"))
    ranks = [w for w in out.warnings if w.startswith("comparisons: DegenerateDataWarning: rank intervals (every pair)")]
    assert any("zero standard error" in w and "model pair(s) 'twin-b vs twin-a'" in w for w in ranks), out.warnings
    assert any("no discordant item" in w and "'twin-b vs twin-a'" in w for w in ranks)
    assert not any("comparison(s)" in w or "column" in w for w in out.warnings)


def test_every_comparison_warning_is_the_stats_layers_once():
    rng = np.random.default_rng(9)
    x = (rng.random(120) < 0.6).astype(float)
    m = matrices_from_scores({"twin-a": x, "twin-b": x.copy(), "other": (rng.random(120) < 0.5).astype(float)},
                  np.repeat(np.arange(4), 30))
    out = run_analysis("comparisons", comparisons.analyze, m, AuditConfig())
    degenerate = [w for w in out.warnings if "DegenerateDataWarning" in w]
    # the stats layer's wording (method first), named; no restated copy beside it
    assert degenerate and all(w.startswith("comparisons: DegenerateDataWarning: ") for w in degenerate)
    bodies = [w.split("DegenerateDataWarning: ", 1)[1] for w in degenerate]
    assert all(b.split(":")[0] in ("paired_clt", "stratified_items", "clustered_subject", "mcnemar_exact/sign_test",
                                   "unpaired_z") for b in bodies), bodies
    assert len(bodies) == len(set(bodies))
    assert not any(w.startswith("comparisons: comparisons: ") for w in out.warnings)


def test_a_single_answered_item_is_the_stats_layers_worst_case_warning_by_name():
    n = 40
    scores = {"full": (np.arange(n) % 3 == 0).astype(float), "one-item": np.r_[0.5, np.full(n - 1, np.nan)]}
    out = run_analysis("comparator_intervals", intervals.analyze, m := matrices_from_scores(scores, np.repeat(np.arange(4), 10)),
                       AuditConfig())
    assert m.models == ["full", "one-item"]
    worst = [w for w in out.warnings if "a single answered item" in w]
    # the stats layer's text (the old code replaced it with its own), once per score, by name
    assert [w.split("DegenerateDataWarning: ")[1].split(":")[0] for w in worst] == ["pooled score", "macro score"]
    assert all("model(s) 'one-item'" in w and "worst-case interval [0, 1]" in w for w in worst)
    assert not any("column(s)" in w for w in out.warnings)
