"""Suites (issue #35): ``benchcert suite``, ``compare --suite`` (text, --json, gates, --record), the
suite's Holm decisions and score against the per-benchmark service they are built from."""

from __future__ import annotations

import json

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
    # each row is the per-benchmark service's row, unchanged
    for line in doc["benchmarks"]:
        one = compare_models(CompareRequest(db=db, benchmark=line["benchmark"], baseline="base",
                                            candidates=("cand",)))
        assert line["comparison"] == one.comparisons[0].as_dict()
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
    from benchcert.tasks.compare.suite_record import suite_history

    hist = suite_history(db, "all", "base")
    assert [h["look"] for h in hist] == [1, 2] and hist[1]["document"]["look"] == 2


def test_python_api_suite(db):
    import benchcert as bc

    r = bc.Store(db).compare("cand", "base", suite=["better", "same1"])
    assert r.improved == ("better",) and not r.regressed_somewhere and r.line("same1").suite_claim is None
    assert r.to_polars().height == 2


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
