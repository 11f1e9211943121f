"""A judge-scored pairwise-preference benchmark end to end through the command line (issue #28):
ingest with a human-labelled subset, audit, compare --scale human, plan human-labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchcert.flows.cli import main
from benchcert.stats.ppi import MCAR, ppi_gap, ppi_mean

from judge_support import MAP, write_preferences
from store_support import cli

MAPS = [a for m in MAP for a in ("--map", m)]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """(store, artifacts root, truth) of the generated benchmark, ingested and audited once."""
    tmp = tmp_path_factory.mktemp("judge")
    truth = write_preferences(tmp / "prefs.csv")
    assert main(["ingest", str(tmp / "prefs.csv"), "--db", str(tmp / "s.duckdb"), "--benchmark", "prefs", *MAPS]) == 0
    return tmp / "s.duckdb", tmp / "arts", truth


def _order(n):
    return np.argsort([f"q{i:04d}" for i in range(n)])


def test_audit_reports_the_human_scale_and_agreement(capsys, judged):
    db, arts, truth = judged
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "prefs", "--artifacts", arts)
    assert code == 0, err
    assert "human scale (PPI++)" in out and "uniform random sample" in out
    run_dir = Path(out.split("report: ")[1].strip()).parent
    summary = json.loads((run_dir / "summary.json").read_text())
    for row in summary["human_scale"]:
        human, judge, lab = truth[row["model"]]
        want = ppi_mean(human[lab], judge[lab], judge[~lab])
        assert row["estimate"] == pytest.approx(want.estimate, abs=1e-12)
        assert (row["lower"], row["upper"], row["lam"]) == pytest.approx((want.lower, want.upper, want.lam), abs=1e-12)
        assert (row["n_human"], row["n_judge"], row["method"]) == (120, 400, "ppi++")
        assert f"{100 * row['estimate']:6.2f}%" in out
    agree = {r["model"]: r for r in summary["judge_agreement"]}
    assert set(agree) == {"base", "cand", "other", "(all models)"} and agree["(all models)"]["n"] == 360
    assert agree["base"]["confusion"] is not None and agree["base"]["kappa_weights"] is None
    html = (run_dir / "report.html").read_text()
    assert 'id="judge"' in html and "Judge-human agreement" in html
    assert not any("look chosen" in w for w in summary["warnings"])


def test_compare_on_the_human_scale(capsys, judged):
    db, _, truth = judged
    code, out, err = cli(capsys, "compare", "base", "cand", "--db", db, "--benchmark", "prefs", "--scale", "human",
                         "--json")
    assert code == 0, err
    doc = json.loads(out)
    (row,) = doc["comparisons"]
    (hb, jb, lab), (hc, jc, _) = truth["base"], truth["cand"]
    want = ppi_gap(hc[lab], hb[lab], jc[lab], jb[lab], jc[~lab], jb[~lab])
    assert row["gap"] == pytest.approx(want.estimate, abs=1e-12)
    assert (row["interval"]["lower"], row["interval"]["upper"]) == pytest.approx((want.lower, want.upper), abs=1e-12)
    assert row["verdict"] == ("improved" if want.lower > 0 else "regressed" if want.upper < 0 else "inconclusive")
    assert row["verdict"] == "improved"  # people prefer cand (0.62) to base (0.45)
    assert doc["scale"] == "human" and "people" in doc["question"] and MCAR in doc["assumptions"]
    # Same gate as compare: base against cand regressed, so --fail-on regressed exits 4.
    code, out, err = cli(capsys, "compare", "cand", "base", "--db", db, "--benchmark", "prefs", "--scale", "human",
                         "--fail-on", "regressed")
    assert code == 4 and "regressed" in out and "gate failed" in err
    # Several candidates: the Bonferroni interval (alpha / 2 each) decides.
    code, out, err = cli(capsys, "compare", "--baseline", "base", "--db", db, "--benchmark", "prefs",
                         "--scale", "human", "--json")
    doc = json.loads(out)
    wide = ppi_gap(hc[lab], hb[lab], jc[lab], jb[lab], jc[~lab], jb[~lab], alpha=0.025)
    assert doc["adjustment"] == "bonferroni"
    assert doc["comparisons"][0]["simultaneous_interval"]["lower"] == pytest.approx(wide.lower, abs=1e-12)
    # ... and the row's own interval is the marginal one at alpha, as compare reports it (review)
    assert doc["comparisons"][0]["interval"]["lower"] == pytest.approx(want.lower, abs=1e-12)


def test_plan_human_labels(capsys, judged):
    db, _, _ = judged
    code, out, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                         "--model", "cand", "--json")
    assert code == 0, err
    (plan,) = json.loads(out)["plans"]
    assert plan["model"] == "cand" and plan["n_items"] == 400 and plan["pilot_n"] == 120
    assert plan["n_ppi"] is not None and plan["n_ppi"] <= plan["n_human_only"]
    code, out, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05")
    assert code == 0 and "with judge" in out and "by hand" in out
    code, _, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "2")
    assert code == 2 and "--epsilon" in err
    # --assurance 0.8: at least the typical plan's labels, and it says what it plans for
    code, out, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                         "--model", "cand", "--assurance", "0.8", "--json")
    assert code == 0, err
    doc = json.loads(out)
    (sure,) = doc["plans"]
    assert doc["assurance"] == sure["assurance"] == 0.8 and doc["warnings"] == []
    assert sure["n_ppi"] is None or sure["n_ppi"] >= plan["n_ppi"]
    code, out, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                         "--model", "cand", "--assurance", "0.8")
    assert code == 0, err
    assert "reached by 80% of (pilot, label set) pairs" in out  # what --help and docs/analyses.md say it counts
    code, _, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                       "--assurance", "1.5")
    assert code == 2 and "--assurance" in err
    code, _, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                       "--assurance", "0.999")  # 400 draws per n can show at most 0.9943
    assert code == 2 and "--assurance 0.999: at most 0.9943" in err
    code, _, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "prefs", "--epsilon", "0.05",
                       "--model", "nobody")
    assert code == 1 and "nobody" in err


def test_an_assurance_plan_from_a_pilot_of_all_ones_says_what_it_planned_at(capsys, tmp_path):
    # every pilot label 1: no variance to bootstrap, so the plan is made at the rate's 90% bound and the
    # warning reaches the reader (the service used to silence the planner's RuntimeWarnings)
    write_preferences(tmp_path / "p.csv", n_labelled=60, models={"base": 0.45, "sure": 1.0})
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(tmp_path / "p.csv"), "--db", str(db), "--benchmark", "p", *MAPS]) == 0
    code, out, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "p", "--epsilon", "0.05",
                         "--assurance", "0.8")
    assert code == 0, err
    assert "warning: 'sure': all 60 pilot human labels are 1" in err and "0.9624" in err
    assert "'base'" not in err
    code, out, _ = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "p", "--epsilon", "0.05",
                       "--model", "sure", "--assurance", "0.8", "--json")
    (note,) = json.loads(out)["warnings"]
    assert note.startswith("'sure': all 60 pilot human labels are 1")


def test_labels_chosen_by_the_judge_are_flagged(capsys, tmp_path):
    write_preferences(tmp_path / "p.csv", n_items=600, n_labelled=400, chosen_by_judge=True)
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(tmp_path / "p.csv"), "--db", str(db), "--benchmark", "p", *MAPS]) == 0
    capsys.readouterr()
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "p", "--artifacts", tmp_path / "a", "--json")
    assert code == 0, err
    assert sum("look chosen, not drawn at random" in w for w in json.loads(out)["warnings"]) == 3


def test_a_benchmark_without_human_scores_is_unchanged(capsys, tmp_path):
    write_preferences(tmp_path / "p.csv", n_items=50, n_labelled=0)
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(tmp_path / "p.csv"), "--db", str(db), "--benchmark", "p", *MAPS]) == 0
    capsys.readouterr()
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "p", "--artifacts", tmp_path / "a", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["human_scale"] is None and doc["judge_agreement"] is None
    run_dir = Path(doc["run_dir"])
    assert not (run_dir / "tables" / "human_scale.parquet").exists()
    assert 'id="judge"' not in (run_dir / "report.html").read_text()
    code, _, err = cli(capsys, "compare", "base", "cand", "--db", db, "--benchmark", "p", "--scale", "human")
    assert code == 1 and "no human scores" in err
    code, _, err = cli(capsys, "plan", "human-labels", "--db", db, "--benchmark", "p", "--epsilon", "0.05")
    assert code == 1 and "no human scores" in err
