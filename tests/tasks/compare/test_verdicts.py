"""Checkpoint verdicts (tasks/compare/verdicts.py): the answer, its record in the store, and how repeated
looks at the same question accumulate.

The statistical guarantee (false alarms <= alpha over any number of looks) is simulated in
tests/stats/test_stats_sequential.py; here the plumbing is checked against those functions as oracles:
the recorded e-values equal the betting test run on the item ledger, and the first-look numbers
equal the fixed-sample paired test.
"""

from __future__ import annotations

import shutil

import numpy as np
import polars as pl
import pytest

from benchcert.stats.comparisons import paired_comparison
from benchcert.stats.recorded import stratified_first_look
from benchcert.stats.sequential import betting_test, betting_test_counts
from benchcert.stats.store_batches import store_weighted_batches
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.store.matrices import MatrixError
from benchcert.tasks.store.connection import StoreError, open_store, query_pl
from benchcert.tasks.compare.verdicts import CheckpointVerdict, VerdictError, checkpoint_verdict, read_question

BASE, CAND = "org/base", "org/model@step-12000"


def _write(path, rows):
    path.write_text("model,item_id,subject,domain,score\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def _night(rng, first, n, p_base, p_cand, rho=0.6, n_subj=8, fractional=False):
    """Rows for items first..first+n-1: two models with accuracies p_base / p_cand whose responses
    share a common draw with probability rho (correlated errors)."""
    rows = []
    for i in range(first, first + n):
        u = rng.random()
        ub, uc = (u, u) if rng.random() < rho else (rng.random(), rng.random())
        sb, sc = float(ub < p_base), float(uc < p_cand)
        if fractional:
            sb, sc = round(0.5 * sb + 0.5 * rng.random(), 3), round(0.5 * sc + 0.5 * rng.random(), 3)
        subj = f"s{i % n_subj}"
        rows += [(BASE, f"q{i}", subj, f"d{i % 2}", sb), (CAND, f"q{i}", subj, f"d{i % 2}", sc)]
    return rows


def _ingest(db, path):
    assert ingest_file(db, path, benchmark="bench", mapping=parse_mapping()).status == "ingested"


@pytest.fixture()
def store(tmp_path):
    rng = np.random.default_rng(0)
    db = tmp_path / "v.duckdb"
    _ingest(db, _write(tmp_path / "n1.csv", _night(rng, 0, 600, 0.6, 0.6)))
    return db, rng


def _history(db):
    """The question's recorded looks, oldest first, read as checkpoint_verdict reads them (empty if never recorded)."""
    with open_store(db, write=False) as con:
        return read_question(con, "bench", "", BASE, CAND).looks


def _ledger_counts(db):
    with open_store(db, write=False) as con:
        led = query_pl(con, "SELECT look, d FROM verdict_items ORDER BY look")
    agg = led.group_by("look").agg(pos=(pl.col("d") == 1).sum(), neg=(pl.col("d") == -1).sum(), n=pl.len()).sort("look")
    return (np.cumsum(agg["pos"].to_numpy()), np.cumsum(agg["neg"].to_numpy()), np.cumsum(agg["n"].to_numpy()))


def test_first_look_answers_and_is_recorded(store):
    db, _ = store
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert isinstance(v, CheckpointVerdict)
    assert (v.look, v.recorded, v.n_shared, v.n_excluded, v.n_new, v.n_sequential) == (1, True, 600, 0, 600, 600)
    # 8 subjects: the question is the fixed-strata items one, betting on items
    assert v.verdict in ("improved", "regressed", "inconclusive") and v.method == "stratified_items"
    assert v.question.startswith("items") and v.sequential_unit == "item" and v.n_sequential_units == 600
    assert any("fewer than 30" in w for w in v.warnings)
    # oracle: the fixed-sample numbers are paired_comparison's on the same items
    with open_store(db, write=False) as con:
        wide = query_pl(con, "SELECT item_id, model, score FROM responses").pivot(on="model", index="item_id",
                                                                                values="score")
        subj = query_pl(con, "SELECT item_id, subject FROM items")
    wide = wide.join(subj, on="item_id")
    codes = wide["subject"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    ref = paired_comparison(wide[BASE].to_numpy(), wide[CAND].to_numpy(), codes, alpha=0.05)
    assert v.gap == pytest.approx(ref.estimate) and v.p_value == pytest.approx(ref.p_value)
    assert v.mde == pytest.approx(ref.mde) and v.p_exact == pytest.approx(ref.tests["mcnemar_exact"].p_value)
    # the first look's directional test (issue #36) is the stratified test of the store's item-weighted gap at
    # alpha x share: with every item shared, compare's stratified estimate with each subject's own variance
    # (stratified_first_look, whose formula tests/stats/test_recorded_verdicts.py checks against Cochran's one
    # subject at a time); shared in proportion its se is compare's pooled one within 2%
    assert v.first_method == "store_weighted_batches" and v.first_gap == pytest.approx(v.gap)
    strat = paired_comparison(wide[BASE].to_numpy(), wide[CAND].to_numpy(), codes, alpha=0.025,
                              primary="stratified_items").tests["stratified_items"]
    first = stratified_first_look(wide[CAND].to_numpy() - wide[BASE].to_numpy(), codes,
                                  np.bincount(codes).astype(float), alpha=0.025)
    assert first.estimate == pytest.approx(strat.estimate) and first.se == pytest.approx(strat.se, rel=0.02)
    assert v.first_p_value == pytest.approx(min(1.0, 2 * min(first.p_improved, first.p_regressed)))
    # oracle: the e-values are the betting test's on the ledger, at alpha * (1 - share)
    pos, neg, n = _ledger_counts(db)
    seq = betting_test_counts(pos, neg, n, alpha=0.025)
    assert v.log_e_improved == pytest.approx(seq.log_e_improved[-1])
    assert (v.cs_lower, v.cs_upper) == (pytest.approx(seq.lower[-1]), pytest.approx(seq.upper[-1]))
    hist = _history(db)
    assert hist.height == 1 and hist["verdict"][0] == v.verdict and hist["n_shared"][0] == 600
    d = v.as_dict()
    assert d["candidate"] == CAND and isinstance(d["assumptions"], list)


def test_repeated_looks_accumulate_and_items_enter_once(store, tmp_path):
    db, rng = store
    v1 = checkpoint_verdict(db, "bench", BASE, CAND)
    # Night 2: nothing new. The look is recorded but adds no evidence.
    v2 = checkpoint_verdict(db, "bench", BASE, CAND)
    assert (v2.look, v2.n_new, v2.n_sequential) == (2, 0, 600)
    assert v2.log_e_improved == pytest.approx(v1.log_e_improved) and v2.verdict == v1.verdict
    # Night 3: 300 new items, and the candidate answers an item only the baseline had answered.
    _ingest(db, _write(tmp_path / "n3.csv", _night(rng, 600, 300, 0.6, 0.6) + [(BASE, "q900", "s0", "d0", 1)]))
    v3 = checkpoint_verdict(db, "bench", BASE, CAND)
    assert (v3.look, v3.n_new, v3.n_sequential, v3.n_shared, v3.n_only_baseline) == (3, 300, 900, 900, 1)
    _ingest(db, _write(tmp_path / "n4.csv", [(CAND, "q900", "s0", "d0", 0)]))
    v4 = checkpoint_verdict(db, "bench", BASE, CAND)
    assert (v4.look, v4.n_new, v4.n_sequential, v4.n_excluded) == (4, 1, 901, 0)
    pos, neg, n = _ledger_counts(db)
    assert n.tolist() == [600, 900, 901]  # looks with items; look 2 added none
    # oracle: the anytime part on the ledger (each item once, at its look), reweighted to the store's subjects
    # (store_weighted_batches): look 4's one item of s0 misses 7 subjects that have nothing left to share, so it
    # is bet on alone at the worst case for them, which it cannot beat (not bet on: the capital of looks 1-3)
    with open_store(db, write=False) as con:
        led = query_pl(con, "SELECT v.look, v.d, i.subject FROM verdict_items v JOIN items i USING (item_id) "
                            "ORDER BY v.look")
        answered = query_pl(con, "SELECT DISTINCT r.item_id, i.subject FROM responses r JOIN items i USING (item_id)")
    names = sorted(answered["subject"].unique().to_list())
    code = {s: k for k, s in enumerate(names)}
    store = np.bincount([code[s] for s in answered["subject"]], minlength=len(names)).astype(float)
    seq = store_weighted_batches(led["d"].to_numpy(), np.array([code[s] for s in led["subject"]]),
                                 led["look"].to_numpy().astype(np.int64), store, alpha=0.025, n_looks=4)
    assert v4.log_e_improved == pytest.approx(seq.log_e_improved[-1]) == pytest.approx(seq.log_e_improved[2])
    assert v4.anytime_p == pytest.approx(seq.p_value[-1])
    assert (v4.cs_lower, v4.cs_upper) == (pytest.approx(seq.lower[-1]), pytest.approx(seq.upper[-1]))
    # the first look's fixed-sample test is what the headline keeps spending on
    assert v4.first_p_value == pytest.approx(v1.first_p_value) and v4.first_method == v1.first_method
    hist = _history(db)
    assert hist["look"].to_list() == [1, 2, 3, 4] and hist["n_new"].to_list() == [600, 0, 300, 1]
    with open_store(db, write=False) as con:
        dup = con.execute("SELECT count(*) - count(DISTINCT item_id) FROM verdict_items").fetchall()[0][0]
    assert dup == 0


def test_a_clear_improvement_is_decided_at_the_first_look_and_stays(tmp_path):
    rng = np.random.default_rng(1)
    db = tmp_path / "imp.duckdb"
    _ingest(db, _write(tmp_path / "a.csv", _night(rng, 0, 800, 0.5, 0.65)))
    v = checkpoint_verdict(db, "bench", BASE, CAND, hierarchy=())
    assert (v.verdict, v.decided_by, v.decided_at_look, v.method) == ("improved", "first_look", 1, "paired_clt")
    # a later night where the candidate looks worse does not flip a decision already reached
    _ingest(db, _write(tmp_path / "b.csv", _night(rng, 800, 100, 0.6, 0.5)))
    v2 = checkpoint_verdict(db, "bench", BASE, CAND, hierarchy=())
    assert v2.verdict == "improved" and v2.decided_at_look == 1 and v2.look == 2


def test_questions_are_kept_apart_and_their_settings_fixed(store):
    db, _ = store
    checkpoint_verdict(db, "bench", BASE, CAND)
    with pytest.raises(VerdictError, match="first asked with alpha=0.05"):
        checkpoint_verdict(db, "bench", BASE, CAND, alpha=0.1)
    # the reverse question is a different question
    r = checkpoint_verdict(db, "bench", CAND, BASE, alpha=0.1)
    assert r.look == 1 and r.gap == pytest.approx(-checkpoint_verdict(db, "bench", BASE, CAND, record=False).gap)


def test_dry_run_writes_nothing(store):
    db, _ = store
    v = checkpoint_verdict(db, "bench", BASE, CAND, record=False)
    assert not v.recorded and v.look == 1
    with open_store(db, write=False) as con:
        n = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'verdict%'").fetchall()
    assert n[0][0] == 0
    assert _history(db).height == 0


def test_partial_credit_scores_use_the_item_path(tmp_path):
    rng = np.random.default_rng(2)
    db = tmp_path / "pc.duckdb"
    _ingest(db, _write(tmp_path / "a.csv", _night(rng, 0, 200, 0.6, 0.6, fractional=True)))
    v = checkpoint_verdict(db, "bench", BASE, CAND)
    assert v.exact_test == "sign_test" and v.cs_lower is not None and v.cs_lower < v.gap < v.cs_upper


def test_errors_are_explicit(store, tmp_path):
    db, _ = store
    with pytest.raises(VerdictError, match=r"no model\(s\) \['nope'\]"):
        checkpoint_verdict(db, "bench", BASE, "nope")
    with pytest.raises(MatrixError, match="no responses"):
        checkpoint_verdict(db, "other", BASE, CAND)
    with pytest.raises(VerdictError, match="must differ"):
        checkpoint_verdict(db, "bench", BASE, BASE)
    with pytest.raises(VerdictError, match="alpha"):
        checkpoint_verdict(db, "bench", BASE, CAND, alpha=2)
    with pytest.raises(StoreError):
        checkpoint_verdict(tmp_path / "missing.duckdb", "bench", BASE, CAND, record=False)
    _ingest(db, _write(tmp_path / "solo.csv", [("loner", "z1", "s", "d", 1)]))
    with pytest.raises(VerdictError, match="share no answered item"):
        checkpoint_verdict(db, "bench", BASE, "loner")


def test_real_mmlu_pro_checkpoint_verdicts(mmlu_db, tmp_path):
    # gemini-1.5-pro-002 against Meta-Llama-3_1-70B-Instruct: +7.4 pp on 12,020 shared items,
    # decided at the first look. DeepSeek-Coder-V2 (answered 10,351 items) against the same
    # baseline: -0.9 pp on the shared items, inconclusive; its 1,681 unanswered items are counted.
    db = tmp_path / "mmlu.duckdb"
    shutil.copy(mmlu_db, db)
    items = checkpoint_verdict(db, "mmlu_pro", "Meta-Llama-3_1-70B-Instruct", "gemini-1.5-pro-002", record=False)
    # the default question: items, the item-weighted gap (+7.41 pp, the accuracy difference)
    assert (items.verdict, items.decided_by, items.question_key) == ("improved", "first_look", "items")
    assert items.estimand.startswith("item-weighted") and items.gap == pytest.approx(0.0741, abs=5e-4)
    v = checkpoint_verdict(db, "mmlu_pro", "Meta-Llama-3_1-70B-Instruct", "gemini-1.5-pro-002",
                           question="new-subjects")
    assert v.verdict == "improved" and v.question_key == "new-subjects"
    assert v.n_shared == 12020 and v.n_only_baseline == 12
    # --question new-subjects: the estimand is the subject-weighted gap (+7.75 pp, the mean of the
    # 91 subjects' gaps; oracle below from the store); the item-weighted +7.41 pp is the other
    # question's (kept here as the contrast).
    assert v.estimand.startswith("subject-weighted") and v.n_subjects == 91 and v.method == "subject_means_hall_t"
    with open_store(db, write=False) as con:
        per = query_pl(con, "SELECT i.subject, r.item_id, r.model, r.score FROM responses r JOIN items i "
                            "ON i.item_id = r.item_id AND i.benchmark = r.benchmark WHERE r.benchmark = 'mmlu_pro' "
                            "AND r.model IN ('Meta-Llama-3_1-70B-Instruct', 'gemini-1.5-pro-002')")
    wide = per.group_by("subject", "item_id", "model").agg(pl.col("score").mean()).pivot(
        on="model", index=["subject", "item_id"], values="score").drop_nulls()
    wide = wide.with_columns(d=pl.col("gemini-1.5-pro-002") - pl.col("Meta-Llama-3_1-70B-Instruct"))
    assert wide.height == 12020 and wide["d"].mean() == pytest.approx(0.0741, abs=5e-4)  # item-weighted
    assert v.gap == pytest.approx(wide.group_by("subject").agg(pl.col("d").mean())["d"].mean(), abs=1e-12)
    assert v.gap == pytest.approx(0.0775, abs=5e-4) and v.lower > 0 and v.cs_lower is not None
    w = checkpoint_verdict(db, "mmlu_pro", "Meta-Llama-3_1-70B-Instruct", "DeepSeek-Coder-V2", question="new-subjects")
    assert w.verdict == "inconclusive" and (w.n_shared, w.n_only_baseline, w.n_excluded) == (10351, 1681, 1681)
    assert w.mde > abs(w.gap)


def test_many_subjects_bet_on_subject_entry_means(tmp_path):
    # 40 subjects: the clustered question; the betting test's units are the subjects, each at the
    # look of its first item with the mean of its items at that look (oracle: subject_entry_means
    # + betting_test on the ledger, written out here).
    rng = np.random.default_rng(3)
    db = tmp_path / "s.duckdb"
    _ingest(db, _write(tmp_path / "n1.csv", _night(rng, 0, 500, 0.6, 0.62, n_subj=40)))
    v1 = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    assert v1.method == "subject_means_hall_t" and v1.question.startswith("subjects")  # was the item-weighted CR2 test
    assert v1.sequential_unit == "subject" and v1.n_sequential_units == 40
    # night 2: new items of the same subjects and of 10 new subjects s40..s49
    rows = _night(rng, 500, 300, 0.6, 0.62, n_subj=40)
    rows += [(m, f"x{i}", f"s{40 + i % 10}", "d0", float(rng.random() < 0.6)) for i in range(50) for m in (BASE, CAND)]
    _ingest(db, _write(tmp_path / "n2.csv", rows))
    v2 = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    assert v2.method == "subject_means_hall_t" and v2.n_sequential_units == 50 and v2.n_new == 350
    with open_store(db, write=False) as con:
        led = query_pl(con, "SELECT v.item_id, v.look, v.d, i.subject FROM verdict_items v JOIN items i "
                            "ON i.item_id = v.item_id AND i.benchmark = v.benchmark ORDER BY v.look, v.item_id")
    first = led.group_by("subject").agg(pl.col("look").min().alias("first"))
    units = (led.join(first, on="subject").filter(pl.col("look") == pl.col("first"))
             .group_by("subject", "first").agg(pl.col("d").mean()).sort("first", "subject"))
    cum = np.array([units.filter(pl.col("first") <= t).height for t in (1, 2)])
    assert cum.tolist() == [40, 50]
    # since #36 one anytime-valid test with all of alpha, on the subjects in the store's hash order of
    # "domain/subject" (subject sK is in domain d(K mod 2); the new ones in d0), tuned for the 50 subjects
    import zlib

    from benchcert.stats.recorded import subject_e_process

    name = {s: f"d{int(s[1:]) % 2 if int(s[1:]) < 40 else 0}/{s}" for s in units["subject"].to_list()}
    ordered = units.with_columns(h=pl.col("subject").map_elements(lambda s: zlib.crc32(name[s].encode()),
                                                                  return_dtype=pl.Int64)).sort("h")
    seq = subject_e_process(ordered["d"].to_numpy(), np.array([50]), alpha=0.05, n_planned=50)
    assert v2.first_method == "plugin_betting_all_alpha"
    assert v2.log_e_improved == pytest.approx(seq.log_e_improved[-1])
    assert v2.log_e_regressed == pytest.approx(seq.log_e_regressed[-1])


def _size_gap_rows(small_d, big_d, n_small=30, n_big=30, small=5, big=200):
    """30 small subjects (5 items) and 30 big ones (200 items): on small subjects the candidate wins
    ``small_d`` of each subject's items (baseline wrong, candidate right), on big ones the baseline wins
    ``big_d`` of each subject's items; every other item is a tie (both right)."""
    rows = []
    for s in range(n_small + n_big):
        size, wins = (small, small_d) if s < n_small else (big, big_d)
        for i in range(size):
            flip = i < abs(wins)
            cand_better = wins > 0
            sb, sc = (0, 1) if flip and cand_better else (1, 0) if flip else (1, 1)
            rows += [(BASE, f"s{s}q{i}", f"s{s}", "d0", sb), (CAND, f"s{s}q{i}", f"s{s}", "d0", sc)]
    return rows


@pytest.mark.parametrize("small_d, big_d, direction", [(5, -6, "improved"), (-5, 6, "regressed")])
def test_verdict_gap_and_intervals_answer_one_estimand(tmp_path, small_d, big_d, direction):
    # Constructed so the two estimands have opposite signs: the candidate wins every item of the 30
    # small subjects and loses 6 of 200 items of each of the 30 big ones. Item-weighted gap
    # (150 - 180) / 6150 = -0.49 pp; subject-weighted gap (30 * 1 - 30 * 0.03) / 60 = +48.5 pp.
    # Before the fix the betting part (on subject means) said 'improved' while the reported gap
    # (and the clustered first-look test, inconclusive) were item-weighted: 'improved' with a gap
    # of -0.49 pp (checked against main's code: this test fails there). Now every number is about
    # the one estimand the verdict names, and they agree (mirrored for 'regressed').
    db = tmp_path / "sz.duckdb"
    _ingest(db, _write(tmp_path / "a.csv", _size_gap_rows(small_d, big_d)))
    # the default question (items) is about the item-weighted gap (-0.49 pp): not 'improved', and the
    # opposite signs of the two estimands are said in words. Since #36 the first look spends its share on
    # the stratified test (z = -2.27 here, one-sided p 0.012 <= 0.0125): the item-weighted gap's own sign
    items = checkpoint_verdict(db, "bench", BASE, CAND, record=False)
    other = "regressed" if direction == "improved" else "improved"
    assert items.verdict in ("inconclusive", other) and items.estimand.startswith("item-weighted")
    # the fixed-sample interval beside it (the score test's since #36: it pools the subjects' variance, so
    # with gaps swinging from +100 to -3 points it is wider than the stratified t the first look spends on)
    # never claims the subject-weighted direction either
    assert items.fixed_verdict in ("inconclusive", other)
    assert -np.sign(items.gap) == (1 if direction == "improved" else -1)
    assert any("have opposite signs" in w for w in items.warnings)
    v = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    sign = 1 if direction == "improved" else -1
    assert v.verdict == direction, v
    assert sign * v.gap > 0, (v.verdict, v.gap)  # the headline and the reported gap agree
    assert v.estimand.startswith("subject-weighted") and v.gap == pytest.approx(sign * 0.485)
    assert v.lower <= v.gap <= v.upper and v.cs_lower <= v.gap <= v.cs_upper
    assert v.fixed_verdict in (direction, "inconclusive")
    assert (v.cs_lower > 0) if sign > 0 else (v.cs_upper < 0)  # the anytime interval excludes 0 the same way
    assert v.hoeffding_lower <= v.gap <= v.hoeffding_upper
    with open_store(db, write=False) as con:
        row = query_pl(con, "SELECT question, estimand, gap, verdict FROM verdicts").row(0, named=True)
    assert row["question"] == v.question and row["estimand"] == v.estimand and row["verdict"] == direction


def test_cli_names_the_estimand_for_both_questions(tmp_path, capsys):
    import json

    from benchcert.flows.cli import main

    db = tmp_path / "cli.duckdb"
    _ingest(db, _write(tmp_path / "a.csv", _size_gap_rows(5, -6)))  # 60 subjects
    ask = ["compare", BASE, CAND, "--db", str(db), "--benchmark", "bench", "--record", "--question", "new-subjects"]
    assert main([*ask, "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["estimand"].startswith("subject-weighted") and js["n_subjects"] == 60
    assert js["question_key"] == "new-subjects" and js["first_method"] == "plugin_betting_all_alpha"
    assert js["p_exact"] is None and js["exact_test"] == "none" and js["gap"] > 0 and js["verdict"] == "improved"
    # asked as the other question, the recorded looks are not silently reinterpreted
    assert main(["compare", BASE, CAND, "--db", str(db), "--benchmark", "bench", "--record"]) == 1
    assert "answer --question new-subjects" in capsys.readouterr().err
    assert main(ask) == 0
    out = capsys.readouterr().out
    assert "estimand (gap, intervals and tests): subject-weighted" in out and "in 60 subjects" in out
    db2 = tmp_path / "cli2.duckdb"
    _ingest(db2, _write(tmp_path / "b.csv", _night(np.random.default_rng(5), 0, 300, 0.6, 0.6)))  # 8 subjects
    assert main(["compare", BASE, CAND, "--db", str(db2), "--benchmark", "bench", "--record"]) == 0
    out = capsys.readouterr().out
    assert "estimand (gap, intervals and tests): item-weighted" in out and "mcnemar_exact p = " in out


def test_a_store_recorded_before_the_estimand_columns_is_continued(tmp_path):
    # A question recorded by the earlier version (no question / estimand columns, method
    # 'clustered_subject', first look = item-weighted CR2 test) gains the columns; its first-look
    # decision is about another estimand, so it is not used (its share of alpha stays spent).
    db = tmp_path / "old.duckdb"
    _ingest(db, _write(tmp_path / "a.csv", _size_gap_rows(5, -6)))
    checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    with open_store(db, write=True) as con:
        con.execute("ALTER TABLE verdicts DROP COLUMN question")
        con.execute("ALTER TABLE verdicts DROP COLUMN estimand")
        con.execute("ALTER TABLE verdicts DROP COLUMN first_method")
        con.execute("UPDATE verdicts SET method = 'clustered_subject', first_p_value = 1e-9, first_gap = -0.0049")
    # recorded under the old rule (30 or more subjects: new-subjects): the default question is refused
    with pytest.raises(VerdictError, match="answer --question new-subjects"):
        checkpoint_verdict(db, "bench", BASE, CAND, record=False)
    v = checkpoint_verdict(db, "bench", BASE, CAND, question="new-subjects")
    assert v.look == 2 and v.method == "subject_means_hall_t" and v.first_p_value == 1.0
    assert v.verdict == "improved" and v.decided_by == "anytime"  # the betting part alone (entry means > 0)
    assert any("earlier version" in w for w in v.warnings)
    hist = _history(db)
    assert hist["estimand"].to_list() == [None, v.estimand]


def test_subjects_without_a_shared_item_are_named(tmp_path):
    # The baseline answered two more subjects the candidate has not reached yet: the subjects with
    # shared items may not stand for all of them (e.g. when small subjects come late), so it is said.
    db = tmp_path / "cov.duckdb"
    rows = _size_gap_rows(5, -6) + [(BASE, f"late{s}q{i}", f"late{s}", "d0", 1) for s in range(2) for i in range(5)]
    _ingest(db, _write(tmp_path / "a.csv", rows))
    v = checkpoint_verdict(db, "bench", BASE, CAND, record=False, question="new-subjects")
    assert v.n_subjects == 60 and v.n_only_baseline == 10
    assert any(w.startswith("2 subject(s) have items one model answered but no shared item") for w in v.warnings)


def test_items_question_keeps_the_subjects_of_its_first_look(tmp_path):
    # Look 1: subjects s0..s4. Look 2: more items of s0..s4
    # and three new subjects where the candidate wins everything. The new subjects are not part of
    # the items question (fixed strata, fixed at its first look): left out of the betting ledger
    # and of the fixed-sample numbers, and named in a warning.
    rng = np.random.default_rng(8)
    db = tmp_path / "strata.duckdb"
    _ingest(db, _write(tmp_path / "n1.csv", _night(rng, 0, 400, 0.6, 0.6, n_subj=5)))
    v1 = checkpoint_verdict(db, "bench", BASE, CAND)
    # (subjects are keyed within domains: s0..s4 in d0 and d1 are 10 subjects)
    assert v1.method == "stratified_items" and v1.n_subjects == 10 and "400 items in the store (10 subjects" in v1.estimand
    rows = _night(rng, 400, 100, 0.6, 0.6, n_subj=5)
    rows += [(m, f"new{i}", f"t{i % 3}", "d0", 0 if m == BASE else 1) for i in range(150) for m in (BASE, CAND)]
    _ingest(db, _write(tmp_path / "n2.csv", rows))
    # a question recorded before #36 (its first look's test named so): it keeps its fixed strata. Since #36
    # the subjects stay and count at the worst case (tests/tasks/compare/test_recorded_scheme.py)
    with open_store(db, write=True) as con:
        con.execute("UPDATE verdicts SET first_method = 'betting_constant_mixture_items'")
    v2 = checkpoint_verdict(db, "bench", BASE, CAND)
    assert (v2.n_new, v2.n_sequential, v2.n_shared, v2.n_subjects) == (100, 500, 500, 10)
    assert any(w.startswith("3 subject(s) (150 shared item(s)) were not shared at this question's first look")
               for w in v2.warnings)
    with open_store(db, write=False) as con:
        n_new_subjects = con.execute("SELECT count(*) FROM verdict_items WHERE item_id LIKE 'new%'").fetchall()[0][0]
    assert n_new_subjects == 0
    assert v2.gap < 0.2  # the new subjects' +100 pp gap is not pooled in
