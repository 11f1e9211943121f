"""The CI gate: `compare --fail-on regressed` and `--require non-inferior|equivalent --margin D` exit 4
with a one-line reason.

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


def require(capsys, db, mode, margin, *argv, benchmark="g"):
    code = main(["compare", "--baseline", "base", *argv, "--db", str(db), "--benchmark", benchmark, "--require",
                 mode, "--margin", str(margin), "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_non_inferiority_needs_the_lower_end_above_minus_the_margin(capsys, db):
    code, out, _ = gate(capsys, db, "equal")
    lower = out["comparisons"][0]["interval"]["lower"]
    assert -0.04 < lower < -0.01  # 3,000 items: the interval reaches about 2 points either way
    # A 1-point margin: the data do not show the loss is under 1 point (issue 24 finding 4: this passed
    # `--fail-on regressed --margin 0.01` before), so the gate fails.
    code, out, err = require(capsys, db, "non-inferior", 0.01, "equal")
    assert code == EXIT_GATE and out["gate"]["require"] == "non-inferior" and not out["gate"]["passed"]
    assert "not shown non-inferior" in out["gate"]["failed"][0]["reason"] and "gate failed" in err
    # Exactly at the interval's lower end, on either side.
    assert require(capsys, db, "non-inferior", f"{-lower - 0.002:.4f}", "equal")[0] == EXIT_GATE
    assert require(capsys, db, "non-inferior", f"{-lower + 0.002:.4f}", "equal")[0] == 0


def test_a_regressed_candidate_never_passes_whatever_the_margin(capsys, db):
    code, out, _ = gate(capsys, db, "worse10")
    assert out["comparisons"][0]["verdict"] == "regressed" and out["comparisons"][0]["interval"]["lower"] > -0.15
    # `--fail-on regressed --margin 0.15` passed this candidate while its table said regressed; now:
    for mode in ("non-inferior", "equivalent"):
        code, out, err = require(capsys, db, mode, 0.15, "worse10")
        assert code == EXIT_GATE and out["gate"]["failed"][0]["reason"] == "regressed (verdict)", mode
    code = main(["compare", "--baseline", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on",
                 "regressed", "--margin", "0.15"])
    err = capsys.readouterr().err
    assert code == 2 and "--require non-inferior" in err


def test_several_candidates_use_the_family_and_name_the_failure(capsys, db):
    code, out, err = require(capsys, db, "non-inferior", 0.05, "equal", "worse10")
    assert code == EXIT_GATE and [f["candidate"] for f in out["gate"]["failed"]] == ["worse10"]
    row = {r["candidate"]: r for r in out["comparisons"]}["worse10"]
    # The simultaneous (Bonferroni) interval decides with several candidates.
    assert out["gate"]["failed"][0]["lower"] == row["simultaneous_interval"]["lower"]


def test_gate_usage_errors(capsys, db):
    def usage(*argv):
        code = main(["compare", "--baseline", "base", "worse10", "--db", str(db), "--benchmark", "g", *argv])
        return code, capsys.readouterr().err

    code, err = usage("--margin", "0.1")
    assert code == 2 and "--require" in err
    code, err = usage("--require", "non-inferior", "--margin", "5")
    assert code == 2 and "--margin" in err
    code, err = usage("--require", "non-inferior")
    assert code == 2 and "needs --margin" in err
    code, err = usage("--require", "equivalent", "--margin", "0")
    assert code == 2 and "above 0" in err


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """60,000 items in 30 subjects: 'zero' differs from the baseline on 12% of the items, half each way
    (gap exactly 0, 95% interval about +-0.28 pp); 'up08' is 'zero' with 0.8% more items right."""
    rng = np.random.default_rng(24)
    n = 60000
    base = rng.random(n) < 0.70
    right, wrong = np.flatnonzero(base), np.flatnonzero(~base)
    zero = base.copy()
    k = int(0.06 * n)
    zero[rng.choice(right, k, replace=False)] = False
    zero[rng.choice(wrong, k, replace=False)] = True
    up = zero.copy()
    up[rng.choice(np.flatnonzero(~zero), int(0.008 * n), replace=False)] = True
    return store_of_correct(tmp_path_factory.mktemp("gate_large"), "big", {"base": base, "zero": zero, "up08": up},
                            30)


def test_a_large_sample_with_no_gap_is_shown_non_inferior_and_equivalent(capsys, large):
    code, out, err = require(capsys, large, "non-inferior", 0.01, "zero", benchmark="big")
    row = out["comparisons"][0]
    assert row["gap"] == 0 and -0.004 < row["interval"]["lower"] < -0.002  # 0 +- 0.3 pp
    assert code == 0 and out["gate"]["passed"] and "shown non-inferior within 1 pp" in err
    code, out, err = require(capsys, large, "equivalent", 0.01, "zero", benchmark="big")
    assert code == 0 and out["gate"]["passed"] and "shown equivalent" in err


def test_equivalence_fails_when_either_end_is_outside_the_margin(capsys, db, large):
    # upper end outside: +0.8 pp known to +-0.3 pp (an improvement, but not within 1 point of the baseline)
    code, out, _ = require(capsys, large, "equivalent", 0.01, "up08", benchmark="big")
    row = out["comparisons"][0]
    assert row["interval"]["upper"] > 0.01 > row["interval"]["lower"] > -0.01 and row["verdict"] == "improved"
    assert code == EXIT_GATE and "not shown equivalent" in out["gate"]["failed"][0]["reason"]
    # ...which non-inferiority passes
    assert require(capsys, large, "non-inferior", 0.01, "up08", benchmark="big")[0] == 0
    # both ends outside: 3,000 items, the interval reaches about 2 points either way
    code, out, _ = require(capsys, db, "equivalent", 0.01, "equal")
    assert code == EXIT_GATE and out["comparisons"][0]["verdict"] == "inconclusive"


def test_the_decision_rule_on_given_intervals():
    """Finding 4's interval, and each end outside the margin, through the rule itself."""
    from benchcert.tasks.compare.gate import GateOptions, decide

    def row(lower, upper, verdict="inconclusive"):
        return {"candidate": "c", "baseline": "b", "verdict": verdict, "gap": (lower + upper) / 2,
                "interval": {"lower": lower, "upper": upper, "method": "stratified_items"}}

    ni = GateOptions(require="non-inferior", margin=0.01)
    eq = GateOptions(require="equivalent", margin=0.01)
    assert not decide([row(-0.0224, 0.0149)], 0.05, ni).passed  # finding 4: a 2-point loss is possible
    assert decide([row(-0.003, 0.003)], 0.05, ni).passed
    assert decide([row(-0.003, 0.003)], 0.05, eq).passed
    assert not decide([row(-0.012, 0.003)], 0.05, eq).passed  # lower end outside
    assert not decide([row(-0.003, 0.012)], 0.05, eq).passed  # upper end outside
    assert not decide([row(-0.01, 0.003)], 0.05, eq).passed  # the margin itself is outside (open interval)
    # a significant loss inside the margin: the table says regressed, so no gate passes
    d = decide([row(-0.008, -0.001, "regressed")], 0.05, ni)
    assert not d.passed and d.failed[0]["reason"] == "regressed (verdict)"
    # no interval: non-inferiority is not shown
    none = {**row(0, 0), "interval": {"lower": None, "upper": None}}
    assert not decide([none], 0.05, ni).passed and decide([none], 0.05, GateOptions(fail_on="regressed")).passed
    # frozen
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        decide([row(-0.003, 0.003)], 0.05, ni).passed = False  # type: ignore[misc]


def test_text_output_and_recorded_looks_gate_too(capsys, db):
    code = main(["compare", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on", "regressed"])
    err = capsys.readouterr().err
    assert code == EXIT_GATE and "gate failed" in err
    code = main(["compare", "base", "worse10", "--db", str(db), "--benchmark", "g", "--fail-on", "regressed",
                 "--record", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_GATE and out["verdict"] == "regressed" and out["gate"]["passed"] is False
    # --require under --record decides on the anytime-valid interval (wider than the fixed one)
    code = main(["compare", "base", "equal", "--db", str(db), "--benchmark", "g", "--require", "non-inferior",
                 "--margin", "0.03", "--record", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["gate"]["require"] == "non-inferior"
    assert code == (0 if out["gate"]["passed"] else EXIT_GATE)
    if out.get("cs_lower") is not None:
        assert out["cs_lower"] <= out["lower"]
        assert out["gate"]["passed"] == (out["cs_lower"] > -0.03 and out["verdict"] != "regressed")


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
