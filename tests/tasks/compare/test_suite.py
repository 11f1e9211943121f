"""Suites (issue #35): ``benchcert suite``, ``compare --suite`` (text, --json, gates, --record), the
suite's Holm decisions and score against the per-benchmark service they are built from."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file

from store_support import cli

N_ITEMS = 600


def _ingest(root, db, benchmark, shifts, seed):
    """Models 'base' and 'cand' on N_ITEMS items in 6 subjects; cand's accuracy = base's + shift."""
    rng = np.random.default_rng(seed)
    p = rng.beta(3, 2, N_ITEMS)
    common = rng.random(N_ITEMS)
    lines = ["model,item_id,subject,score"]
    for name, shift in (("base", 0.0), ("cand", shifts)):
        u = np.where(rng.random(N_ITEMS) < 0.3, rng.random(N_ITEMS), common)
        sc = (u < np.clip(p + shift, 0, 1)).astype(int)
        lines += [f"{name},q{i},s{i % 6},{sc[i]}" for i in range(N_ITEMS)]
    path = root / f"{benchmark}.csv"
    path.write_text("\n".join(lines) + "\n")
    assert ingest_file(db, path, benchmark=benchmark, mapping=parse_mapping()).status == "ingested"


@pytest.fixture()
def db(tmp_path):
    """Four benchmarks: 'better' (+25 points), 'worse' (-25 points), 'same1', 'same2' (no change);
    a fifth, 'onlybase', has the baseline alone."""
    store = tmp_path / "s.duckdb"
    for j, (b, shift) in enumerate((("better", 0.25), ("worse", -0.25), ("same1", 0.0), ("same2", 0.0))):
        _ingest(tmp_path, store, b, shift, seed=j)
    path = tmp_path / "onlybase.csv"
    path.write_text("model,item_id,subject,score\n" + "".join(f"base,q{i},s0,1\n" for i in range(20)))
    ingest_file(store, path, benchmark="onlybase", mapping=parse_mapping())
    return store


def test_suite_define_list_show_and_errors(capsys, db, tmp_path):
    code, out, _ = cli(capsys, "suite", "define", "core", "better", "same1", "--weights", "2,1", "--db", db)
    assert code == 0 and "2 benchmark(s)" in out
    code, out, _ = cli(capsys, "suite", "show", "core", "--db", db, "--json")
    assert code == 0 and json.loads(out) == {"name": "core", "benchmarks": ["better", "same1"], "weights": [2.0, 1.0],
                                             "source": "store"}
    code, out, _ = cli(capsys, "suite", "list", "--db", db)
    assert code == 0 and out.startswith("core: 2 benchmark(s)")
    # redefining replaces; an unknown suite is a data error naming the known ones; bad weights are usage errors
    assert cli(capsys, "suite", "define", "core", "worse", "--db", db)[0] == 0
    code, out, err = cli(capsys, "suite", "show", "nope", "--db", db)
    assert code == 1 and "no suite 'nope'" in err and "core" in err
    code, _, err = cli(capsys, "suite", "define", "x", "a", "b", "--weights", "1", "--db", db)
    assert code == 2 and "one value per benchmark" in err
    code, _, err = cli(capsys, "suite", "define", "x", "a", "a", "--db", db)
    assert code == 2 and "distinct" in err
    assert cli(capsys, "suite", "delete", "core", "--db", db)[0] == 0
    assert cli(capsys, "suite", "show", "core", "--db", db)[0] == 1


def test_compare_suite_answers_and_rows(capsys, db):
    from benchcert.tasks.compare.service import CompareRequest, compare_models

    cli(capsys, "suite", "define", "four", "better", "worse", "same1", "same2", "--db", db)
    code, out, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "four")
    assert code == 0, err
    assert "(a) regressed on some benchmark: YES" in out and "improved: better" in out and "regressed: worse" in out
    assert "(c) suite score" in out
    code, out, _ = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "four", "--json")
    doc = json.loads(out)
    assert doc["regressed_somewhere"] is True and doc["improved"] == ["better"] and doc["regressed"] == ["worse"]
    # each row is the per-benchmark service's row, its MDE stated at the suite's first Holm step (alpha / 4,
    # family=4), which is what a suite claim can detect: larger than the benchmark's alone, the rest unchanged
    for line in doc["benchmarks"]:
        one = compare_models(CompareRequest(db=db, benchmark=line["benchmark"], baseline="base",
                                            candidates=("cand",), family=4))
        assert line["comparison"] == one.comparisons[0].as_dict()
        alone = compare_models(CompareRequest(db=db, benchmark=line["benchmark"], baseline="base",
                                              candidates=("cand",))).comparisons[0].as_dict()
        assert line["comparison"]["mde_alpha"] == pytest.approx(0.05 / 4) and alone["mde_alpha"] == 0.05
        assert line["comparison"]["mde"] > alone["mde"]
        assert {k: v for k, v in alone.items() if k not in ("mde", "mde_alpha", "more_items")} == {
            k: v for k, v in line["comparison"].items() if k not in ("mde", "mde_alpha", "more_items")}
    # the suite score is the equal-weight mean of the items gaps, its SE the root of the weighted variances
    gaps = np.array([ln["item_weighted_gap"] for ln in doc["benchmarks"]])
    ses = np.array([ln["item_weighted_se"] for ln in doc["benchmarks"]])
    assert doc["score"]["gap"] == pytest.approx(gaps.mean())
    assert doc["score"]["se"] == pytest.approx(np.sqrt(np.sum(ses ** 2)) / 4)
    assert set(doc["guarantees"]) >= {"regressed_somewhere", "named", "score"}
    # the unchanged benchmarks are not named, and say what more items would do at the suite's level
    same = [ln for ln in doc["benchmarks"] if ln["benchmark"] in ("same1", "same2")]
    assert all(ln["suite_claim"] is None for ln in same)
    assert all(ln["more_items_suite"] is None or ln["more_items_suite"]["alpha"] == pytest.approx(0.05 / 4)
               for ln in same)
    # at that level the MDE shown needs no more items (it is that level's); on 0/1 scores the score test's number
    assert all(ln["more_items_suite"] is None or (ln["more_items_suite"].get("more_for_mde", 0) == 0
                                                  and ln["more_items_suite"]["method"] == "score_test_power"
                                                  and not ln["more_items_suite"]["lower_bound"])
               for ln in same)


def test_suite_gates_exit_codes(capsys, db, tmp_path):
    # fail-on regressed at the suite's family-wise level: 'worse' is named, so exit 4
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "all", "--fail-on", "regressed")
    assert code == 4 and "worse: regressed (suite family-wise, Holm)" in err
    toml = tmp_path / "nice.toml"
    toml.write_text('name = "nice"\nbenchmarks = ["better", "same1"]\nweights = [1, 3]\n')
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", str(toml), "--fail-on", "regressed")
    assert code == 0 and "gate passed" in err
    # every benchmark non-inferior within 30 points: shown for better and the unchanged ones (IUT)
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", str(toml), "--require",
                       "non-inferior", "--margin", "0.3")
    assert code == 0 and "intersection-union" in err
    # within 0.1 point: not shown for the unchanged benchmark
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", str(toml), "--require",
                       "non-inferior", "--margin", "0.001")
    assert code == 4 and "same1" in err
    code, out, _ = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", str(toml), "--require",
                       "suite-non-inferior", "--margin", "0.05", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["gate"]["passed"] and doc["suite"]["weights"] == [1.0, 3.0]
    assert doc["benchmarks"][1]["weight"] == pytest.approx(0.75)
    # usage errors
    assert cli(capsys, "compare", "base", "cand", "--db", db, "--benchmark", "better", "--require",
               "suite-non-inferior", "--margin", "0.01")[0] == 2
    assert cli(capsys, "compare", "base", "cand", "x", "--db", db, "--suite", "all")[0] == 2
    assert cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "all", "--benchmark", "better")[0] == 2
    # a suite naming a benchmark the candidate lacks is refused (exit 1), naming it
    cli(capsys, "suite", "define", "bad", "better", "onlybase", "--db", db)
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "bad")
    assert code == 1 and "onlybase" in err


def test_suite_all_excludes_benchmarks_one_model_lacks(capsys, db):
    code, out, _ = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "all", "--json")
    assert code == 0 and json.loads(out)["suite"]["benchmarks"] == ["better", "same1", "same2", "worse"]


def test_suite_record_looks(capsys, db):
    for look in (1, 2):
        code, out, err = cli(capsys, "compare", "base", "cand", "--db", db, "--suite", "all", "--record", "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["recorded"] and doc["look"] == look
        assert doc["regressed_somewhere"] and doc["regressed"] == ["worse"]
        assert "every look" in doc["guarantees"]["regressed_somewhere"]
        for ln in doc["benchmarks"]:
            assert ln["comparison"]["look"] == look
            # the anytime-valid p-values: a named benchmark's recorded verdict agrees with the suite's side
            if ln["suite_claim"] is not None:
                assert ln["comparison"]["verdict"] == ln["suite_claim"]
            # an open one's number is the fixed-sample test's; the recorded tests need more: a lower bound
            elif ln["more_items_suite"] is not None:
                more = ln["more_items_suite"]
                assert more["lower_bound"] and any("lower bound" in a for a in more["assumptions"]), more
    from benchcert.tasks.compare.suite_record import suite_history

    hist = suite_history(db, "all", "base")
    assert [h["look"] for h in hist] == [1, 2] and hist[1]["document"]["look"] == 2


def test_python_api_suite(db):
    import benchcert as bc

    r = bc.Store(db).compare("cand", "base", suite=["better", "same1"])
    assert r.improved == ("better",) and not r.regressed_somewhere and r.line("same1").suite_claim is None
    assert r.to_polars().height == 2
    # the MDE's level is a column: alpha / m, the suite claim's level, beside the row's own verdict at alpha
    assert r.to_polars()["mde_alpha"].to_list() == [pytest.approx(0.05 / 2)] * 2
    alone = bc.Store(db).compare("cand", "base", benchmark="same1").to_polars()
    assert alone["mde_alpha"].to_list() == [0.05]


def test_series_in_step_order(capsys, db, tmp_path):
    # two more checkpoints of 'cand' named by step; the baseline and unmatched models are left out
    import polars as pl  # noqa: F401 - the store's reader

    for step, seed in ((12000, 7), (8000, 8)):
        rng = np.random.default_rng(seed)
        for b in ("better", "same1"):
            path = tmp_path / f"{b}-{step}.csv"
            sc = (rng.random(N_ITEMS) < 0.6).astype(int)
            path.write_text("model,item_id,subject,score\n" + "".join(
                f"org/m@step-{step},q{i},s{i % 6},{sc[i]}\n" for i in range(N_ITEMS)))
            assert ingest_file(db, path, benchmark=b, mapping=parse_mapping()).status == "ingested"
    toml = tmp_path / "two.toml"
    toml.write_text('benchmarks = ["better", "same1"]\n')
    out_file = tmp_path / "series.json"
    code, out, err = cli(capsys, "compare", "--series", "org/m@step-*", "--baseline", "base", "--db", db,
                         "--suite", str(toml), "--out", out_file)
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    assert doc["kind"] == "benchcert.suite_series" and doc["version"] == 1
    assert [c["step"] for c in doc["checkpoints"]] == [8000, 12000]
    assert all(set(c) >= {"model", "regressed_somewhere", "improved", "regressed", "score", "benchmarks"}
               for c in doc["checkpoints"])
    assert "step 8000" in out
    assert cli(capsys, "compare", "--series", "org/m@step-*", "--baseline", "base", "--db", db)[0] == 2
    assert cli(capsys, "compare", "--series", "zzz*", "--baseline", "base", "--db", db, "--suite", "all")[0] == 1


# --------------------------------------------------------------------------------------
# recorded suite verdicts against each benchmark's own recorded verdict, look by look (issue #36's schemes)

#: (benchmark, question, items per look per subject, subjects, shift, arrival): "spread" - every look
#: brings new items of every subject; "late" - the last subject's candidate scores of look 1 arrive at
#: look 2 (nothing of it shared at the first look); "chunks" - the baseline's items of every subject at
#: look 1, the candidate's a quarter of the subjects per look (the new-subjects test's prefix grows)
RECORDED = (("r_big", "items", 100, 6, 0.15, "spread"),       # stratified first look decides
            ("r_null", "items", 25, 6, 0.0, "spread"),
            ("r_small", "items", 6, 6, 0.3, "spread"),        # < 100 nonzero differences: betting bound at look 1
            ("r_late", "items", 25, 6, -0.12, "late"),        # two betting tests at half level each
            ("n_big", "new-subjects", 24, 48, 0.2, "chunks"),  # one anytime-valid test with all of alpha
            ("n_null", "new-subjects", 24, 48, 0.0, "chunks"))


def _scores(rng, n, subj, shift):
    """Baseline and candidate 0/1 scores of n items (subject effects when shift != 0)."""
    p = rng.beta(3, 2, n) + rng.normal(0, 0.05, subj.max() + 1)[subj] * (shift != 0)
    common = rng.random(n)
    out = []
    for s in (0.0, shift):
        u = np.where(rng.random(n) < 0.3, rng.random(n), common)
        out.append((u < np.clip(p + s, 0, 1)).astype(int))
    return out


def _night(root, dbs, look, rng, n_looks):
    """One look's new rows of every RECORDED benchmark, ingested into each store of ``dbs``."""
    for b, _, per, n_subj, shift, arrival in RECORDED:
        n = per * n_subj
        subj = np.arange(n) % n_subj
        rows = ["model,item_id,subject,score"]
        if arrival == "chunks":
            if look == 1:
                base, cand = _scores(rng, n, subj, shift)
                np.save(root / f"{b}-cand.npy", cand)
                rows += [f"base,q{i},s{subj[i]},{base[i]}" for i in range(n)]
            cand = np.load(root / f"{b}-cand.npy")
            mine = subj % n_looks == look - 1
            rows += [f"cand,q{i},s{subj[i]},{cand[i]}" for i in np.flatnonzero(mine)]
        else:
            base, cand = _scores(rng, n, subj, shift)
            held = (arrival == "late") & (subj == n_subj - 1)
            rows += [f"base,l{look}q{i},s{subj[i]},{base[i]}" for i in range(n)]
            rows += [f"cand,l{look}q{i},s{subj[i]},{cand[i]}" for i in range(n) if not (held[i] and look == 1)]
            if arrival == "late" and look == 2:  # the first look's held-back candidate scores
                rows += [f"cand,l1q{i},s{n_subj - 1},{int(rng.random() < 0.5)}" for i in np.flatnonzero(held)]
        path = root / f"{b}-{look}.csv"
        path.write_text("\n".join(rows) + "\n")
        for db in dbs:
            assert ingest_file(db, path, benchmark=b, mapping=parse_mapping()).status == "ingested"


def test_recorded_suite_of_one_says_what_its_recorded_verdict_says_at_every_look(capsys, tmp_path):
    """A suite of one benchmark, recorded: its suite claim is the benchmark's own recorded verdict at
    every look, for each recorded scheme (first_method), and the claimed side's anytime p-value is
    <= alpha/2 exactly when the verdict claims it. A suite of all of them (recorded in a second store
    on the same data) names a benchmark only on the side its own verdict names."""
    from benchcert.tasks.compare.evalues import recorded_e_values

    one, many = tmp_path / "one.duckdb", tmp_path / "many.duckdb"
    rng = np.random.default_rng(3536)
    alpha, methods, decided, trace = 0.05, {}, set(), []
    for look in range(1, 5):
        _night(tmp_path, (one, many), look, rng, 4)
        for b, question, *_ in RECORDED:
            if look == 1:
                assert cli(capsys, "suite", "define", f"only-{b}", b, "--db", one)[0] == 0
            code, out, err = cli(capsys, "compare", "base", "cand", "--db", one, "--suite", f"only-{b}", "--record",
                                 "--question", question, "--json")
            assert code == 0, err
            (ln,) = json.loads(out)["benchmarks"]
            row = ln["comparison"]
            own = row["verdict"]
            assert row["look"] == look
            trace.append(f"{b} look {look}: verdict {own}, p improved {ln['p_improved']:.4g}, p regressed "
                         f"{ln['p_regressed']:.4g}")
            assert ln["suite_claim"] == (own if own in ("improved", "regressed") else None), (b, look, ln)
            assert (ln["p_improved"] <= alpha / 2) == (own == "improved"), (b, look, ln["p_improved"], own)
            assert (ln["p_regressed"] <= alpha / 2) == (own == "regressed"), (b, look, ln["p_regressed"], own)
            methods[b] = recorded_e_values(one, b, "base", "cand").method
            decided |= {(b, own)} if own != "inconclusive" else set()
        for q in ("items", "new-subjects"):
            bs = [b for b, question, *_ in RECORDED if question == q]
            if look == 1:
                assert cli(capsys, "suite", "define", f"all-{q}", *bs, "--db", many)[0] == 0
            code, out, err = cli(capsys, "compare", "base", "cand", "--db", many, "--suite", f"all-{q}", "--record",
                                 "--question", q, "--json")
            assert code == 0, err
            for ln in json.loads(out)["benchmarks"]:
                if ln["suite_claim"] is not None:
                    assert ln["comparison"]["verdict"] == ln["suite_claim"], (ln["benchmark"], look)
    with capsys.disabled():
        print("\n" + "\n".join(trace))
    # every scheme of the new engine was exercised, and the data decided both ways on both questions
    assert set(methods.values()) == {"store_weighted_batches", "plugin_betting_all_alpha"}, methods
    assert {("r_big", "improved"), ("r_small", "improved"), ("r_late", "regressed"), ("n_big", "improved")} <= decided, \
        decided
    assert ("r_null", "improved") not in decided and ("n_null", "improved") not in decided


def test_side_p_values_split_the_level_as_each_scheme_spends_it():
    import math

    from benchcert.tasks.compare.suite_evidence import RecordedMethodError, side_p_values

    a = 0.05
    at = math.log(2 / a) + 1e-9  # an e-value just at the all-alpha verdict's threshold 2/alpha
    for m in ("plugin_betting_all_alpha", "symmetric_selfnormalised"):
        # the stored share (0.5) is not used: one test with all of alpha
        up, down = side_p_values(m, first_p_value=1.0, first_gap=0.1, first_look_share=0.5, max_log_e_improved=at,
                                 max_log_e_regressed=0.0)
        assert up <= a / 2 < up * 1.001 and down == 1.0
    half = math.log(2 / (a * 0.5)) - 1e-6  # just short of the betting part's threshold 2/(alpha (1 - s))
    for m in ("store_weighted_batches", "stratified_store_weights", "betting_constant_mixture_items",
              "betting_plugin_subject_means", "", None):
        up, _ = side_p_values(m, first_p_value=1.0, first_gap=0.1, first_look_share=0.5, max_log_e_improved=half,
                              max_log_e_regressed=0.0)
        assert a / 2 < up < a / 2 * 1.001
    # the first look decides at alpha s (two-sided p) on the side of its gap, except before issue #24
    kw = dict(first_p_value=0.025, first_look_share=0.5, max_log_e_improved=0.0, max_log_e_regressed=0.0)
    assert side_p_values("stratified_store_weights", first_gap=-0.1, **kw) == (1.0, 0.025)
    assert side_p_values("", first_gap=-0.1, **kw) == (1.0, 1.0)
    assert side_p_values("plugin_betting_all_alpha", first_gap=-0.1, **kw) == (1.0, 1.0)
    with pytest.raises(RecordedMethodError, match="not one this version knows"):
        side_p_values("some_future_scheme", first_gap=0.1, **kw)


def _agreement(method, seq, first_p, first_gap, share, alpha):
    """Looks at which (p <= alpha/2 on a side) and the engine's own verdict (nightly_verdicts, as
    answer_look combines the tests) disagree; the number of looks with a decision."""
    import warnings

    from benchcert.stats.sequential import nightly_verdicts
    from benchcert.tasks.compare.suite_evidence import side_p_values

    used = 0.0 if method in ("plugin_betting_all_alpha", "symmetric_selfnormalised") else share
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both sides at once: the verdict reverts (counted below)
        nv = nightly_verdicts(np.float64(first_p), np.float64(first_gap), seq, alpha=alpha, first_look_share=used)
    up, down = np.maximum.accumulate(seq.log_e_improved), np.maximum.accumulate(seq.log_e_regressed)
    bad = decided = 0
    for t in range(up.size):
        pu, pd = side_p_values(method, first_p_value=first_p, first_gap=first_gap, first_look_share=share,
                               max_log_e_improved=up[t], max_log_e_regressed=down[t], alpha=alpha)
        own = nv.verdict[t] if 0 <= nv.decided_at <= t else "inconclusive"
        bad += (pu <= alpha / 2) != (own == "improved") or (pd <= alpha / 2) != (own == "regressed")
        decided += own != "inconclusive"
    return bad, decided


def test_side_p_values_agree_with_the_engines_verdicts_look_by_look():
    """At the stats level, many runs and looks, gaps around each test's power: a suite of one says what
    the recorded verdict says at every look, for the all-alpha new-subjects tests (share stored 0.5 but
    not used), the items question's first look plus betting, and its two-test form (either_of at half
    level each). Near-threshold crossings are common here, so a wrong split of the level (a factor 2)
    fails this test."""
    from benchcert.stats.recorded import either_of, subject_e_process
    from benchcert.stats.sequential import betting_test

    alpha, share, rng = 0.05, 0.5, np.random.default_rng(3537)
    looks = np.arange(6, 61, 6)
    total = {"bad": 0, "decided": 0}
    for r in range(60):
        mu = rng.choice([-0.3, -0.15, 0.0, 0.15, 0.3])
        x = np.clip(rng.normal(mu, 0.3, 60), -1, 1)
        for assume, method in (("none", "plugin_betting_all_alpha"), ("symmetric", "symmetric_selfnormalised")):
            seq = subject_e_process(x, looks, alpha=alpha, n_planned=60, assume=assume)
            b, d = _agreement(method, seq, 1.0, float(x[:6].mean()), share, alpha)
            total["bad"] += b
            total["decided"] += d
        # items: first look at alpha x share (a one-sided p drawn near its threshold), betting after
        d_items = rng.choice([-1.0, 0.0, 1.0], size=600, p=[0.2 - mu / 6, 0.6, 0.2 + mu / 6])
        cum = np.arange(60, 601, 60)
        seq_alpha = alpha * (1 - share)
        first_p, first_gap = float(rng.uniform(0, 0.1)), float(rng.choice([-0.1, 0.1]))
        seq = betting_test(d_items, cum, alpha=seq_alpha, interval=False)
        b, d = _agreement("stratified_store_weights", seq, first_p, first_gap, share, alpha)
        total["bad"] += b
        total["decided"] += d
        # the two-test form: one test from look 1, the other from look 4, each at half the level
        one = betting_test(d_items, cum, alpha=seq_alpha / 2, interval=False)
        tail = betting_test(d_items, cum[3:], alpha=seq_alpha / 2, interval=False)
        pad = np.zeros(3)
        two = replace(tail, log_e_improved=np.r_[pad, tail.log_e_improved],
                      log_e_regressed=np.r_[pad, tail.log_e_regressed])
        seq = either_of(one, two, alpha=seq_alpha, estimate=one.estimate)
        b, d = _agreement("stratified_store_weights", seq, 1.0, first_gap, share, alpha)
        total["bad"] += b
        total["decided"] += d
    assert total["bad"] == 0 and total["decided"] > 500, total
