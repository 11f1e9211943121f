"""`benchcert plan` and `benchcert subsample`: answers, JSON, exit codes, the subset manifest.

Expected numbers are derived by hand from the formula cited next to each (Theorem 5.2 and
Table 4 of the exchangeable-bounds paper; Hardt ch. 3; docs/methods.md sections 4 and 5).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from filelock import FileLock

from benchcert.flows.cli import plan as cli_plan
from benchcert.flows.cli import main
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import lock_path, open_store

from conftest import SMALL_CSV
from store_support import cli


@pytest.fixture()
def small_db(tmp_path, small_mapping):
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="small", mapping=small_mapping).status == "ingested"
    return db


def answers(out: str) -> dict:
    return {a["method"]: a for a in json.loads(out)["answers"]}


def test_plan_subsample_paper_example(capsys):
    code, out, _ = cli(capsys, "plan", "subsample", "--N", 14042, "--n", 250, "--alpha", 0.05, "--json")
    assert code == 0
    a = answers(out)
    # Theorem 5.2: sqrt((14042 - 250)/(2 * 250 * 14042) * log 40) = 8.51 pp (paper Table 4);
    # Barber non-negative sqrt(log 40/500) = 8.59 pp; Serfling sqrt((1 - 249/14042) log 40/500) = 8.51 pp;
    # exact worst case 6.20 pp (docs/methods.md section 4: "6.20 pp instead of 8.51 pp").
    assert a["theorem_5_2"]["half_width"] == pytest.approx(0.085126, abs=1e-6)
    assert a["barber_nonnegative"]["half_width"] == pytest.approx(0.085894, abs=1e-6)
    assert a["serfling"]["half_width"] == pytest.approx(0.085129, abs=1e-6)
    assert a["exact_worst_case"]["half_width"] == pytest.approx(0.0620, abs=5e-5)
    assert "barber_signed" in a
    assert all(x["cost_fraction"] == pytest.approx(250 / 14042) for x in a.values())
    assert json.loads(out)["source"] == {"N_from": "--N"}
    code, out, _ = cli(capsys, "plan", "subsample", "--N", 14042, "--n", 250)
    assert code == 0 and "8.51 pp" in out and "6.20 pp" in out and "1.78%" in out


def test_plan_questions_hand_values(capsys):
    # Hoeffding log(2/alpha)/(2 eps^2) = 3.688879/0.0008 -> 4612; Theorem 5.2 N L/(2 eps^2 N + L) -> 3472.
    code, out, _ = cli(capsys, "plan", "estimate", "--eps", 0.02, "--N", 14042, "--no-exact", "--json")
    a = answers(out)
    assert code == 0 and a["hoeffding"]["n"] == 4612 and a["theorem_5_2"]["n"] == 3472
    # k = 10: log(400)/0.0008 -> 7490.
    code, out, _ = cli(capsys, "plan", "models", "--eps", 0.02, "--k", 10, "--no-exact", "--json")
    assert code == 0 and answers(out)["hoeffding_bonferroni"]["n"] == 7490
    # Hellinger 1/(8 eps^2) = 312.5 -> 313 (necessary); paired Hoeffding 2 ln 20/eps^2 -> 14979;
    # power (1.959964 + 0.841621)^2 * 0.3/0.0004 -> 5887.
    code, out, _ = cli(capsys, "plan", "compare", "--eps", 0.02, "--var-d", 0.3, "--json")
    a = answers(out)
    assert code == 0 and a["hellinger_lower_bound"]["n"] == 313 and a["hoeffding_paired"]["n"] == 14979
    assert a["paired_power"]["n"] == 5887 and json.loads(out)["notes"]
    # ln(20)/0.01 -> 300; exact binomial ln(0.05)/ln(0.99) = 298.07 -> 299.
    code, out, _ = cli(capsys, "plan", "zero-failure", "--eps", 0.01, "--json")
    a = answers(out)
    assert code == 0 and a["zero_failure_exponential"]["n"] == 300 and a["zero_failure_binomial"]["n"] == 299
    code, out, _ = cli(capsys, "plan", "compare", "--eps", 0.02, "--N", 14042)
    assert code == 0 and "necessary" in out and "more than the benchmark holds" in out


def test_plan_takes_N_from_the_store(capsys, small_db):
    code, out, _ = cli(capsys, "plan", "subsample", "--db", small_db, "--benchmark", "small", "--n", 4, "--json")
    d = json.loads(out)
    assert code == 0 and d["N"] == 8 and d["source"] == {"db": str(small_db), "benchmark": "small"}
    # Theorem 5.2 at n = 4 of N = 8: sqrt((8 - 4)/(2 * 4 * 8) * log 40) = sqrt(0.0625 * 3.688879) = 0.480161
    assert answers(out)["theorem_5_2"]["half_width"] == pytest.approx(0.480161, abs=1e-6)


@pytest.mark.parametrize("argv, code, message", [
    (["plan", "subsample", "--N", 100, "--n", 101], 2, "n must be <= N = 100"),
    (["plan", "subsample", "--N", 100, "--n", 0], 2, "n must be >= 1"),
    (["plan", "subsample", "--N", 100, "--n", 5, "--alpha", 1.0], 2, "--alpha must be in (0, 1)"),
    (["plan", "estimate", "--eps", 0.02, "--alpha", 0], 2, "--alpha must be in (0, 1)"),
    (["plan", "estimate", "--eps", 1.5], 2, "eps must be in (0, 1)"),
    (["plan", "subsample", "--n", 5], 2, "--N or --db FILE --benchmark NAME"),
    (["plan", "subsample", "--N", 0, "--n", 5], 2, "--N must be >= 1"),
    (["plan", "subsample", "--N", 10, "--n", 5, "--benchmark", "x"], 2, "--db and --benchmark go together"),
])
def test_plan_usage_errors(capsys, argv, code, message):
    got, out, err = cli(capsys, *argv)
    assert got == code and message in err and out == ""


def test_plan_store_errors(capsys, tmp_path, small_db):
    # Empty or unknown benchmark: the data do not allow it (1); no store: 3.
    code, _, err = cli(capsys, "plan", "subsample", "--db", small_db, "--benchmark", "empty", "--n", 2)
    assert code == 1 and "no items" in err and "'small'" in err
    code, _, err = cli(capsys, "plan", "estimate", "--eps", 0.1, "--db", tmp_path / "no.duckdb", "--benchmark", "b")
    assert code == 3 and "no such store" in err
    with pytest.raises(SystemExit) as e:
        main(["plan"])
    assert e.value.code == 2


def test_subsample_manifest_recorded_idempotent_and_reproducible(capsys, small_db, tmp_path):
    code, out, _ = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", "--n", 3, "--seed", 11, "--json")
    m = json.loads(out)
    assert code == 0 and m["n"] == 3 and m["N"] == 8 and m["seed"] == 11 and len(m["item_ids"]) == 3
    assert set(m["item_ids"]) <= {f"q{i}" for i in range(1, 9)} and m["cost_fraction"] == 3 / 8
    # Theorem 5.2 at n = 3 of 8: sqrt((8 - 3)/(2 * 3 * 8) * log 40) = sqrt(0.1041667 * 3.688879) = 0.619886.
    assert m["guarantee"]["theorem_5_2_half_width"] == pytest.approx(0.619886, abs=1e-6)
    # Same seed: same subset, same id, nothing added to the store.
    code, out2, _ = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", "--n", 3, "--seed", 11,
                        "--json")
    assert json.loads(out2)["subset_id"] == m["subset_id"]
    with open_store(small_db, write=False) as con:
        assert con.execute("SELECT count(*) FROM subsets").fetchall()[0][0] == 1
        assert con.execute("SELECT count(*) FROM subset_items").fetchall()[0][0] == 3
    # Stratified: one item per subject at least (3 subjects: algebra 3, physics 2, law 3 items),
    # proportional allocation of n = 4: q = (1.5, 1.0, 1.5) -> (2, 1, 1) by largest remainder, stratum order.
    out_csv = tmp_path / "m" / "subset.csv"
    code, out, _ = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", "--n", 4, "--seed", 2,
                       "--stratified", "--out", out_csv, "--json")
    s = json.loads(out)
    assert code == 0 and s["stratified"] and sorted(v["drawn"] for v in s["strata"].values()) == [1, 1, 2]
    assert "item_ids" not in s and s["out"] == str(out_csv)
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "item_id,subject,domain" and len(lines) == 5
    out_json = tmp_path / "subset.json"
    code, out, _ = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", "--n", 2, "--seed", 5,
                       "--out", out_json)
    assert code == 0 and "2 of 8 items" in out and "Theorem 5.2" in out
    assert len(json.loads(out_json.read_text())["item_ids"]) == 2


@pytest.mark.parametrize("extra, code, message", [
    (["--n", 9], 2, "n must be <= N = 8"),
    (["--n", 0], 2, "--n must be >= 1"),
    (["--n", 2, "--stratified"], 2, "number of strata (3)"),
    (["--n", 2, "--alpha", 2], 2, "--alpha must be in (0, 1)"),
    (["--n", 2, "--seed", -1], 2, "--seed must be in"),
])
def test_subsample_usage_errors(capsys, small_db, extra, code, message):
    got, _, err = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", *extra)
    assert got == code and message in err


def test_subsample_data_and_store_errors(capsys, small_db, tmp_path):
    code, _, err = cli(capsys, "subsample", "--db", small_db, "--benchmark", "empty", "--n", 2)
    assert code == 1 and "no items" in err
    code, _, err = cli(capsys, "subsample", "--db", tmp_path / "none.duckdb", "--benchmark", "small", "--n", 2)
    assert code == 3 and "no such store" in err
    with FileLock(str(lock_path(small_db))):
        code, _, err = cli(capsys, "subsample", "--db", small_db, "--benchmark", "small", "--n", 2,
                           "--lock-timeout", 0.2)
    assert code == 3 and "lock" in err


def test_plan_registers_every_question_itself_whatever_the_order():
    # flows/cli/plan.py owns `plan` and adds the questions of perturb (`plan perturbation`) and
    # certify (`plan environments`) itself: no hidden parser attribute, no registration order.
    from benchcert.flows.cli import certify as cli_certify
    from benchcert.flows.cli import perturb as cli_perturb

    assert not hasattr(cli_plan, "plan_subparsers")
    for order in ((cli_plan.register, cli_perturb.register, cli_certify.register),
                  (cli_certify.register, cli_perturb.register, cli_plan.register)):
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        for register in order:
            register(sub)
        assert parser.parse_args(["plan", "perturbation", "--budget", "100"]).func is cli_perturb.cmd_plan_perturbation
        assert parser.parse_args(["plan", "environments", "--envs", "e.toml", "--db", "s.duckdb", "--benchmark", "b",
                                  "--epsilon", "0.1", "--delta", "0.1"]).func is cli_certify.cmd_plan_environments
        assert parser.parse_args(["plan", "subsample", "--N", "5", "--n", "2"]).n == 2
        questions = next(a for a in sub.choices["plan"]._actions if a.dest == "plan_question").choices
        assert list(questions) == ["subsample", "estimate", "models", "compare", "zero-failure", "perturbation",
                                   "environments", "human-labels", "samples"]  # human-labels: issue #28; samples: #38


@pytest.mark.parametrize("argv", [["plan", "subsample", "--help"], ["subsample", "--help"]])
def test_help(argv):
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", *argv], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage: benchcert" in r.stdout
