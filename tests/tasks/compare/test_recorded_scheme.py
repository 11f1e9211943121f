"""The recorded verdict's tests since issue #36 through the store: which test answers a question,
that it stays the one its first look recorded, --assume, and the e-values read back for suites.

The statistics are simulated in tests/stats/test_recorded_verdicts.py; here the plumbing is checked
against those functions as oracles.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchcert.stats.recorded import subject_e_process
from benchcert.stats.sequential import betting_test_counts
from benchcert.tasks.compare.evalues import look_e_values, recorded_e_values
from benchcert.tasks.compare.verdicts import VerdictError, checkpoint_verdict, read_question
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import open_store

BASE, CAND = "org/base", "org/cand"


def _rows(n_subj, sizes, wins, start=0, models=(BASE, CAND)):
    """Subject s has sizes[s] items; the candidate wins the first wins[s] (loses -wins[s]); the rest tie."""
    rows = []
    for s in range(n_subj):
        for i in range(start, start + sizes[s]):
            flip = i - start < abs(wins[s])
            sb, sc = (0, 1) if flip and wins[s] > 0 else (1, 0) if flip else (1, 1)
            for m, v in zip((BASE, CAND), (sb, sc)):
                if m in models:
                    rows.append((m, f"s{s}q{i}", f"s{s}", "d0", v))
    return rows


def _ingest(db, path, rows):
    path.write_text("model,item_id,subject,domain,score\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    assert ingest_file(db, path, benchmark="bench", mapping=parse_mapping()).status == "ingested"


def test_items_first_look_is_the_stratified_test_and_later_looks_keep_it(tmp_path):
    db = tmp_path / "a.duckdb"
    _ingest(db, tmp_path / "a.csv", _rows(6, [100] * 6, [12, 10, 9, 11, 8, 10]))
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.first_method == "store_weighted_batches" and "600 items in the store (6 subjects" in v.estimand
    assert (v.verdict, v.decided_by, v.decided_at_look) == ("improved", "first_look", 1)
    # the betting part at alpha x (1 - share), every subject shared in proportion (R = 1, no margin): the pooled
    # item betting test
    seq = betting_test_counts(np.array([60]), np.array([0]), np.array([600]), alpha=0.025)
    assert v.log_e_improved == pytest.approx(seq.log_e_improved[-1])
    assert v.cs_lower == pytest.approx(seq.lower[-1])
    v2 = checkpoint_verdict(db, "bench", BASE, CAND)
    assert (v2.look, v2.first_method, v2.first_p_value) == (2, v.first_method, pytest.approx(v.first_p_value))


def test_a_first_look_with_a_margin_and_few_differences_records_its_interval(tmp_path):
    # 3 subjects of 100 items with the candidate winning 30 each (90 discordant items: below MIN_EFFECTIVE, so the
    # betting bound decides), a 4th of 10 items not yet answered by the candidate (w0 = 10/310, margin w0/(1-w0)):
    # the first look decides at the margin and records its interval (before: none, and the verdict was shown with
    # the fixed-sample interval at full alpha); the gate reads that interval
    from benchcert.tasks.compare.recorded import MIN_EFFECTIVE, deciding_interval
    from benchcert.stats.sequential import betting_test

    db = tmp_path / "m.duckdb"
    rows = [r for r in _rows(4, [100, 100, 100, 10], [30, 30, 30, 0]) if not (r[0] == CAND and r[2] == "s3")]
    _ingest(db, tmp_path / "m.csv", rows)
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert 90 < MIN_EFFECTIVE and (v.verdict, v.decided_by) == ("improved", "first_look")
    w0 = 10 / 310
    ref = betting_test(np.repeat([1.0, 0.0], [90, 210]), alpha=0.025, margin=w0 / (1 - w0))
    assert v.first_lower == pytest.approx((1 - w0) * ref.lower[-1] - w0) and v.first_lower > 0
    assert v.first_upper == pytest.approx(min(1.0, (1 - w0) * ref.upper[-1] + w0))
    lower, upper, key, _ = deciding_interval(v.as_dict())
    assert (lower, upper, key) == (v.first_lower, v.first_upper, "first_look")
    from benchcert.tasks.compare.gate import GateOptions
    from benchcert.tasks.compare.service import CompareRequest, record_look

    gate = GateOptions(require="non-inferior", margin=0.01)
    look = record_look(CompareRequest(db=db, benchmark="bench", baseline=BASE, candidates=(CAND,), gate=gate))
    assert look.gate.passed
    assert look.verdict.first_lower == pytest.approx(v.first_lower)  # look 2 keeps the first look's interval


def test_items_first_look_with_unequal_sharing_tests_the_store_gap(tmp_path):
    # A log written one subject at a time: the candidate answered 20 of subject s0's 600 items (all ties) and all 30
    # of s1's (all wins). Pooled, the first look's bets claimed "improved" with an interval [23.6, 95.9] points
    # beside its own store-weighted gap of 4.8 points (issue #36's review); reweighted to the store
    # (store_weighted_bets) they make no claim and their interval holds that gap
    from benchcert.stats.sequential import betting_test
    from benchcert.tasks.compare.recorded import store_weighted_bets

    db = tmp_path / "u.duckdb"
    rows = [r for r in _rows(2, [600, 30], [0, 30]) if not (r[0] == CAND and r[2] == "s0" and int(r[1][3:]) >= 20)]
    _ingest(db, tmp_path / "u.csv", rows)
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.first_gap == pytest.approx(30 / 630) and v.first_p_value > 0.025 and v.decided_by != "first_look"
    assert v.first_lower < v.first_gap < v.first_upper
    d, subj = np.r_[np.zeros(20), np.ones(30)], np.repeat([0, 1], [20, 30])
    assert betting_test(d, alpha=0.025).lower[-1] > 0.2  # the pooled bets' claim
    x, big_r = store_weighted_bets(d, subj, np.array([600.0, 30.0]))
    ref = betting_test(x, alpha=0.025)
    assert v.first_lower == pytest.approx(max(-1.0, big_r * ref.lower[-1]))
    assert v.first_upper == pytest.approx(min(1.0, big_r * ref.upper[-1]))


def test_items_subject_missing_at_the_first_look_waits_for_it(tmp_path, capsys):
    # the baseline answered all 4 subjects; the candidate only 3 so far: the 4th (25% of the store's items) can carry
    # any gap. The first look's test counts it at the worst case; the anytime part (store_weighted_batches) holds
    # the first look's items back until the 4th subject is shared (at most MAX_WAIT looks), then bets on all 800 as
    # one batch reweighted to the store (here in proportion: the pooled test at alpha x (1 - share))
    from benchcert.stats.store_batches import MAX_WAIT

    db = tmp_path / "b.duckdb"
    rows = _rows(4, [200] * 4, [20, 20, 20, 20])
    rows = [r for r in rows if not (r[0] == CAND and r[2] == "s3")]
    _ingest(db, tmp_path / "b.csv", rows)
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.first_method == "store_weighted_batches" and v.gap == pytest.approx(0.10) and MAX_WAIT > 1
    assert v.verdict == "inconclusive" and (v.cs_lower, v.cs_upper) == (-1.0, 1.0) and v.log_e_improved == 0
    assert any("600 of 600 items wait" in a for a in v.assumptions), v.assumptions
    # what it says is what it does (reviewer of #36): the warning names the waiting, not the pooled split; no
    # assumption says a look's items must represent the store or that late subjects are left out; the null is the
    # store's gap, not the pooled test's "every item"; 0 items bet on so far, of 600 in the ledger
    text = " ".join(v.warnings + v.assumptions)
    assert "then also bets on all items" not in text and "are left out" not in text, text
    assert "E[D_i | earlier items] <= 0 for every item" not in text
    assert "the null of the 'improved' claim is that the store's item-weighted gap" in text
    assert any("holds the items back until the items waiting cover every subject" in w for w in v.warnings)
    assert (v.n_sequential, v.n_sequential_units) == (600, 0)
    from store_support import cli

    code, out, _ = cli(capsys, "compare", BASE, CAND, "--db", db, "--benchmark", "bench", "--record")
    assert code == 0 and "0 in the sequential test (600 of the 600 shared so far not bet on: waiting" in out, out
    late = [r for r in _rows(4, [200] * 4, [20, 20, 20, 20]) if r[0] == CAND and r[2] == "s3"]
    _ingest(db, tmp_path / "b3.csv", late)
    v2 = checkpoint_verdict(db, "bench", BASE, CAND)  # look 3 (the CLI recorded look 2, adding nothing)
    every = betting_test_counts(np.array([80]), np.array([0]), np.array([800]), alpha=0.025)
    assert v2.log_e_improved == pytest.approx(every.log_e_improved[-1])
    assert v2.verdict == "improved" and v2.decided_by == "anytime" and v2.cs_lower == pytest.approx(every.lower[-1])
    assert (v2.n_sequential, v2.n_sequential_units) == (800, 800)
    assert not any("items wait to be bet on" in a for a in v2.assumptions)


def test_a_store_grown_since_the_first_look_is_said(tmp_path):
    # store_weighted_batches weighs every batch by the store's counts at the look: more items in the store since the
    # first look reweight the batches already bet on, which its guarantee (fixed counts) does not cover - said
    db = tmp_path / "g.duckdb"
    _ingest(db, tmp_path / "g.csv", _rows(3, [200] * 3, [20, 20, 20]))
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert not any("the store holds" in w for w in v.warnings), v.warnings
    v = checkpoint_verdict(db, "bench", BASE, CAND)  # nothing new: the same store
    assert not any("the store holds" in w for w in v.warnings), v.warnings
    _ingest(db, tmp_path / "g2.csv", _rows(3, [50] * 3, [5, 5, 5], start=200))
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert any("the store holds 750 items either model answered, 600 at this question's first look" in w
               for w in v.warnings), v.warnings


def test_items_question_recorded_with_pooled_betting_keeps_it(tmp_path, monkeypatch):
    # a question first asked while the items question's method was stratified_store_weights (its anytime part pooled
    # the items: one test when every subject was shared at look 1, else two at half the level) keeps that path
    from benchcert.tasks.compare import recorded as v2

    db = tmp_path / "b.duckdb"
    rows = _rows(4, [200] * 4, [20, 20, 20, 20])
    rows = [r for r in rows if not (r[0] == CAND and r[2] == "s3")]
    _ingest(db, tmp_path / "b.csv", rows)
    with monkeypatch.context() as mp:
        mp.setitem(v2.V2_METHODS, ("items", "none"), v2.POOLED_ITEMS)  # the earlier version's first look
        v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.first_method == "stratified_store_weights" and v.gap == pytest.approx(0.10)
    assert v.verdict == "inconclusive" and v.cs_lower < 0 < v.cs_upper
    assert any("25.0% of the benchmark's items are in subjects with no item shared" in a for a in v.assumptions)
    # its texts are the pooled test's, as recorded then
    assert any("then also bets on all items" in w for w in v.warnings), v.warnings
    assert any("are left out" in a for a in v.assumptions) and any("E[D_i | earlier items] <= 0" in a
                                                                   for a in v.assumptions)
    # half the betting level on the first look's subjects at the worst-case margin (1/3), its interval on the
    # store's scale (shrunk by 3/4, widened by 1/4); the other half waits for every subject to be shared
    seq = betting_test_counts(np.array([60]), np.array([0]), np.array([600]), alpha=0.0125, margin=1 / 3)
    assert v.log_e_improved == pytest.approx(seq.log_e_improved[-1] - np.log(2))
    assert v.cs_lower == pytest.approx(0.75 * seq.lower[-1] - 0.25)
    # look 2 (this version): the candidate answers the 4th subject; the second half bets on every item from here
    late = [r for r in _rows(4, [200] * 4, [20, 20, 20, 20]) if r[0] == CAND and r[2] == "s3"]
    _ingest(db, tmp_path / "b3.csv", late)
    v2_ = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v2_.first_method == "stratified_store_weights"
    every = betting_test_counts(np.array([80]), np.array([0]), np.array([800]), alpha=0.0125)
    assert v2_.log_e_improved == pytest.approx(max(every.log_e_improved[-1], seq.log_e_improved[-1]) - np.log(2))
    assert v2_.verdict == "improved" and v2_.decided_by == "anytime" and v2_.cs_lower == pytest.approx(every.lower[-1])
    assert any("(from look 2)" in a for a in v2_.assumptions)


def test_new_subjects_is_one_test_with_all_of_alpha(tmp_path):
    db = tmp_path / "c.duckdb"
    _ingest(db, tmp_path / "c.csv", _rows(40, [50] * 40, [6 + (s % 3) for s in range(40)]))
    v = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    assert v.first_method == "plugin_betting_all_alpha" and v.first_p_value == 1.0
    assert v.verdict == "improved" and v.decided_by == "anytime"
    # one test at all of alpha: its e-value reaches 2 / alpha (a 14-point gap; the smallest claimable is 9.3)
    assert v.log_e_improved >= np.log(2 / 0.05) and v.log_e_regressed < 0
    assert any("no separate first look" in a for a in v.assumptions)
    assert any("no claim is possible below a gap of about" in a for a in v.assumptions)
    with pytest.raises(VerdictError, match="first asked with --assume none"):
        checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects", assume="symmetric")


def test_assume_symmetric_is_recorded_and_fixed(tmp_path):
    db = tmp_path / "d.duckdb"
    wins = [2 + (s % 3) for s in range(30)]
    _ingest(db, tmp_path / "d.csv", _rows(30, [60] * 30, wins))
    v = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects", assume="symmetric")
    assert v.first_method == "symmetric_selfnormalised"
    assert any("symmetric about their mean" in a for a in v.assumptions)
    means = np.array(wins) / 60.0
    ref = subject_e_process(means, np.array([30]), alpha=0.05, n_planned=30, assume="symmetric")
    # the subjects are bet on in the store's hash order; the sum of the capital's increments depends on
    # the order through the predictable bets, so the oracle is the verdict, not the number
    assert v.verdict == ref.verdict[-1] == "improved"
    again = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects", record=False, assume="symmetric")
    assert again.look == 2 and again.first_method == v.first_method
    with pytest.raises(VerdictError, match="first asked with --assume symmetric"):
        checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    with pytest.raises(VerdictError, match="assume"):
        checkpoint_verdict(db, "bench", BASE, CAND, assume="symmetric")
    # without the assumption 5 points with 30 subjects cannot be claimed (the smallest claimable gap is 12.4)
    db2 = tmp_path / "d2.duckdb"
    _ingest(db2, tmp_path / "d2.csv", _rows(30, [60] * 30, wins))
    assert checkpoint_verdict(db2, "bench", BASE, CAND, question="new-subjects").verdict == "inconclusive"


def test_a_question_recorded_before_36_keeps_its_tests(tmp_path):
    db = tmp_path / "e.duckdb"
    _ingest(db, tmp_path / "e.csv", _rows(6, [100] * 6, [3, 2, 4, 1, 2, 3]))
    checkpoint_verdict(db, "bench", BASE, CAND)
    with open_store(db, write=True) as con:
        con.execute("UPDATE verdicts SET first_method = 'betting_constant_mixture_items', first_p_value = 1.0")
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.first_method == "betting_constant_mixture_items" and v.look == 2
    # its betting test is the one it was recorded with: at alpha x (1 - share), no margin
    seq = betting_test_counts(np.array([15, 15]), np.array([0, 0]), np.array([600, 600]), alpha=0.025)
    assert v.log_e_improved == pytest.approx(seq.log_e_improved[-1])
    db2 = tmp_path / "e2.duckdb"
    _ingest(db2, tmp_path / "e2.csv", _rows(40, [50] * 40, [6 + (s % 3) for s in range(40)]))
    checkpoint_verdict(db2, "bench", BASE, CAND, question="new-subjects")
    with open_store(db2, write=True) as con:
        con.execute("UPDATE verdicts SET first_method = 'betting_plugin_subject_means'")
    old = checkpoint_verdict(db2, "bench", BASE, CAND, question="new-subjects")
    assert old.first_method == "betting_plugin_subject_means" and old.first_look_share == 0.5
    with pytest.raises(VerdictError, match="before --assume existed"):
        checkpoint_verdict(db2, "bench", BASE, CAND, question="new-subjects", assume="symmetric")


def test_recorded_e_values_per_look(tmp_path):
    db = tmp_path / "f.duckdb"
    _ingest(db, tmp_path / "f.csv", _rows(6, [100] * 6, [3, 2, 4, 1, 2, 3]))
    v1 = checkpoint_verdict(db, "bench", BASE, CAND)
    _ingest(db, tmp_path / "f2.csv", _rows(6, [50] * 6, [5, 5, 5, 5, 5, 5], start=100))
    v2 = checkpoint_verdict(db, "bench", BASE, CAND)
    ev = recorded_e_values(db, "bench", BASE, CAND)
    assert (ev.question, ev.method, ev.variant) == (v1.question, "store_weighted_batches", "")
    assert [x.look for x in ev.looks] == [1, 2]
    for x, v in zip(ev.looks, (v1, v2)):
        assert x.log_e_better == pytest.approx(v.log_e_improved) and x.log_e_worse == pytest.approx(v.log_e_regressed)
        assert x.e_better == pytest.approx(np.exp(v.log_e_improved)) and x.e_worse == pytest.approx(
            np.exp(v.log_e_regressed))
    assert ev.looks[1].e_better > ev.looks[0].e_better
    with open_store(db, write=False) as con:
        assert look_e_values(read_question(con, "bench", "", BASE, CAND)) == ev.looks
    assert recorded_e_values(db, "bench", CAND, BASE).looks == ()


def test_cli_assume_symmetric(tmp_path, capsys):
    from benchcert.flows.cli import main

    db = tmp_path / "g.duckdb"
    _ingest(db, tmp_path / "g.csv", _rows(30, [60] * 30, [2 + (s % 3) for s in range(30)]))
    ask = ["compare", BASE, CAND, "--db", str(db), "--benchmark", "bench", "--record", "--question", "new-subjects"]
    assert main([*ask, "--assume", "symmetric", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["first_method"] == "symmetric_selfnormalised" and js["verdict"] == "improved"
    assert main([*ask, "--assume", "symmetric"]) == 0
    assert "one anytime-valid test (symmetric_selfnormalised) with all of alpha" in capsys.readouterr().out
    assert main(["compare", BASE, CAND, "--db", str(db), "--benchmark", "bench", "--assume", "symmetric"]) == 2
    assert "--assume symmetric applies to the recorded new-subjects verdict" in capsys.readouterr().err
