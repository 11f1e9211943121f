"""The CI gate: `compare --fail-on regressed [--margin D]` exits 4 with a one-line reason.

Synthetic data with a known truth: a baseline with accuracy 0.70 on 3,000 items in 30 subjects and
candidates drawn independently of it per item (paired gap SE about 1.2 pp, so a 10 pp loss lies
far outside every interval and an equal candidate far inside).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchcert.flows.cli import main
from benchcert.flows.cli.errors import EXIT_GATE

from store_support import store_of_correct

N_ITEMS = 3000


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    rng = np.random.default_rng(20261126)
    base = rng.random(N_ITEMS) < 0.70
    models = {"base": base,
              # 10 pp worse: a tenth of the items the baseline gets right flip to wrong... and then some
              "worse10": base & (rng.random(N_ITEMS) >= 0.10 / 0.70),
              # the same accuracy in distribution: every item redrawn at 0.70
              "equal": rng.random(N_ITEMS) < 0.70}
    path = store_of_correct(tmp_path_factory.mktemp("gate"), "g", models, 30)
    gaps = {k: v.mean() - base.mean() for k, v in models.items()}
    assert gaps["worse10"] == pytest.approx(-0.10, abs=0.02) and abs(gaps["equal"]) < 0.03
    return path


def gate(capsys, db, *argv):
    code = main(["compare", "--baseline", "base", *argv, "--db", str(db), "--benchmark", "g", "--fail-on",
                 "regressed", "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_a_candidate_10pp_worse_fails_the_gate(capsys, db):
    code, out, err = gate(capsys, db, "worse10")
    assert code == EXIT_GATE == 4
    assert out["gate"]["passed"] is False and out["comparisons"][0]["verdict"] == "regressed"
    (line,) = [x for x in err.splitlines() if x.startswith("gate")]
    assert line.startswith("gate failed: 'worse10'") and "regressed" in line


def test_an_equal_candidate_passes(capsys, db):
    code, out, err = gate(capsys, db, "equal")
    assert code == 0 and out["gate"]["passed"] is True and "gate passed" in err
    assert out["comparisons"][0]["verdict"] == "inconclusive"


def test_margin_is_respected_on_both_sides(capsys, db):
    code, out, _ = gate(capsys, db, "worse10")
    upper = out["comparisons"][0]["interval"]["upper"]
    assert -0.13 < upper < -0.07  # the 10 pp loss is known to within a few points
    # A margin the loss clearly exceeds (5 pp): fail; one it clearly stays within (15 pp): pass.
    code, out, err = gate(capsys, db, "worse10", "--margin", "0.05")
    assert code == EXIT_GATE and "margin" in out["gate"]["failed"][0]["reason"]
    code, out, err = gate(capsys, db, "worse10", "--margin", "0.15")
    assert code == 0 and out["gate"]["passed"]
    # Exactly at the interval's upper end, on either side.
    assert gate(capsys, db, "worse10", "--margin", f"{-upper - 0.002:.4f}")[0] == EXIT_GATE
    assert gate(capsys, db, "worse10", "--margin", f"{-upper + 0.002:.4f}")[0] == 0
    # An equal candidate passes any margin.
    assert gate(capsys, db, "equal", "--margin", "0")[0] == 0


def test_several_candidates_use_the_family_and_name_the_failure(capsys, db):
    code, out, err = gate(capsys, db, "equal", "worse10", "--margin", "0.05")
    assert code == EXIT_GATE and [f["candidate"] for f in out["gate"]["failed"]] == ["worse10"]
    row = {r["candidate"]: r for r in out["comparisons"]}["worse10"]
    # The simultaneous (Bonferroni) interval decides with several candidates.
    assert out["gate"]["failed"][0]["upper"] == row["simultaneous_interval"]["upper"]


def test_gate_usage_errors(capsys, db):
    code = main(["compare", "--baseline", "base", "worse10", "--db", str(db), "--benchmark", "g", "--margin", "0.1"])
    assert code == 2 and "--fail-on" in capsys.readouterr().err
    code = main(["compare", "--baseline", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on",
                 "regressed", "--margin", "5"])
    assert code == 2 and "--margin" in capsys.readouterr().err


def test_text_output_and_recorded_looks_gate_too(capsys, db):
    code = main(["compare", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on", "regressed"])
    err = capsys.readouterr().err
    assert code == EXIT_GATE and "gate failed" in err
    code = main(["compare", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on", "regressed",
                 "--record", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_GATE and out["verdict"] == "regressed" and out["gate"]["passed"] is False


def test_a_candidate_without_an_interval_is_named_undecided_not_passed_silently():
    """Review finding: a comparison with no interval (NaN SE) passed as "no candidate is worse"."""
    from benchcert.tasks.compare.gate import GateOptions, decide

    options = GateOptions(fail_on="regressed", margin=0.02)
    rows = [{"candidate": "c1", "baseline": "b", "verdict": "inconclusive", "gap": None,
             "interval": {"lower": None, "upper": None, "method": "clustered_subject"}},
            {"candidate": "c2", "baseline": "b", "verdict": "inconclusive", "gap": 0.0,
             "interval": {"lower": -0.01, "upper": 0.01, "method": "clustered_subject"}}]
    d = decide(rows, 0.05, options).as_dict()
    assert d["passed"] and d["undecided"] == ["c1"]
    assert "not decided" in d["reason"] and "'c1'" in d["reason"] and "'c2'" not in d["reason"]
