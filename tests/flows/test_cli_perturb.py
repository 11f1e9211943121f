"""`benchcert perturb` and `benchcert plan perturbation`: outputs, exit codes, --json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchcert.flows.cli import main

from conftest import GRICE, GRICE_CSV, ingest_native
from store_support import cli


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return ingest_native(tmp_path_factory.mktemp("cli_perturb") / "s.duckdb", GRICE_CSV)


def test_plan_perturbation_json_matches_the_issue_example(capsys):
    code, out, _ = cli(capsys, "plan", "perturbation", "--a-hat", "0.4", "--b-hat", "0.6", "--budget", "10000000",
                       "--alpha", "0.1", "--json")
    d = json.loads(out)
    assert code == 0 and d["valid"]
    # Algorithm C with Theorems 2 and 4 (eps grid step 0.001; test_stats_perturbation checks the argmax)
    assert (d["eps"], d["m"], d["r"]) == (pytest.approx(0.062), 7, 1428571)
    assert d["size_bound"] <= 0.1 and d["power_bound"] == pytest.approx(0.8357, abs=1e-4)
    assert "Algorithm C, line 3" in d["eps_max_rule"]


def test_plan_perturbation_without_valid_design_names_the_budget(capsys):
    code, out, _ = cli(capsys, "plan", "perturbation", "--a-hat", "0.4", "--b-hat", "0.6", "--budget", "1e4",
                       "--alpha", "0.1")
    assert code == 1 and "smallest budget that gives one is 22,370" in out
    code, out, _ = cli(capsys, "plan", "perturbation", "--pilot-rates", "0.9,0.95,1,0.92", "--pilot-r", "50",
                       "--budget", "5e6", "--alpha", "0.1", "--json")
    d = json.loads(out)
    assert code == 0 and d["pilot_m"] == 4 and d["pilot_range"]["method"] == "unbiased_uniform_endpoints"
    assert "b_hat = 1" in d["eps_max_rule"]


def test_plan_perturbation_usage_errors(capsys):
    code, _, err = cli(capsys, "plan", "perturbation", "--budget", "100", "--alpha", "0.1")
    assert code == 2 and "--a-hat" in err
    code, _, err = cli(capsys, "plan", "perturbation", "--a-hat", "0.6", "--b-hat", "0.4", "--budget", "100")
    assert code == 2 and "b_hat" in err
    with pytest.raises(SystemExit) as e:
        main(["plan", "perturbation", "--a-hat", "0.4", "--b-hat", "0.6", "--budget", "-3"])
    assert e.value.code == 2


def test_perturb_user_design_text_and_json(capsys, db):
    """Three null variants and 1-28 replicates: the widened-range test can test nothing here, and
    says so instead of printing 0%; the assumptions come with the table."""
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE, "--base", "0",
                       "--null", "schema,answ_schema,grice", "--test", "chomsky,str_chomsky", "--items", "3")
    assert code == 0 and "'chomsky'" in out and "Benjamini-Hochberg" in out
    assert "no power" in out and " 0.0%" not in out.split("classical =")[0].split("---")[-1]
    assert "this says nothing about whether the prompt matters" in out
    assert "the composite test assumes:" in out and "Assumption 2" in out and "widened-range test" in out
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE, "--base", "0",
                       "--null", "schema,answ_schema,grice", "--test", "str_chomsky", "--json")
    d = json.loads(out)
    assert code == 0 and d["design"]["test"] == ["str_chomsky"] and len(d["items"]) == 100
    (v,) = d["variants"]
    assert v["classical_rejections"] == 9 and v["n_tested"] == 0 and v["composite_share"] is None
    assert v["n_no_power"] + v["n_no_alternative"] == 100 and "no test can reject" in v["no_power"]
    assert {i["status"] for i in d["items"]} <= {"no_power", "no_alternative"}
    assert any("Assumption 2" in a for a in d["assumptions"])
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE, "--base", "0", "--null",
                       "schema,answ_schema,grice", "--test", "str_chomsky", "--method", "plugin_exact")
    assert code == 0 and "assumption-dependent" in out.splitlines()[0] and "ASSUMPTION-DEPENDENT" in out


def test_perturb_one_replicate_says_no_power(capsys, tmp_path):
    """Issue #13: with one replicate per variant the output was 0.0% for every variant."""
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    rng = __import__("random").Random(1)
    for item in range(30):
        for variant in ("a", "b", "c", "d"):
            rows.append(f"r1,m,{item},s,d,{variant},0,{int(rng.random() < 0.9)}")
    path = tmp_path / "r1.csv"
    path.write_text("\n".join(rows) + "\n")
    db = tmp_path / "r1.duckdb"
    ingest_native(db, path)
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "r1", "--base", "a")
    assert code == 0
    table = out.split("---")[-1].split("items = items tested")[0]
    assert "%" not in table.replace("classical", "").split("no power")[0]   # no composite share printed
    assert ("with r = 1 replicate per variant no test can reject at alpha = 0.05: this says nothing about "
            "whether the prompt matters") in out
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "r1", "--base", "a", "--json")
    d = json.loads(out)
    assert all(v["composite_share"] is None and v["no_power"].startswith("with r = 1 replicate")
               for v in d["variants"])
    # --json says what the table says instead of a share (issue #34: the CLI derived it, --json lacked it)
    assert {v["composite_status"] for v in d["variants"]} == {"no power"}
    assert all(f"{v['composite_status']:>9}" in table for v in d["variants"])
    assert {i["status"] for i in d["items"]} <= {"no_power", "no_alternative"}


def test_perturb_exit_codes(capsys, db, tmp_path):
    code, _, err = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE, "--base", "0", "--test", "nope")
    assert code == 1 and "not in the benchmark" in err
    # No base given, several variants and no '': the rule every command uses refuses and says how to choose.
    code, _, err = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE)
    assert code == 1 and "--base" in err and "default-variant" in err and len(err.splitlines()) == 1
    code, _, err = cli(capsys, "perturb", "--db", db, "--benchmark", "unknown")
    assert code == 1 and "no responses" in err
    code, _, err = cli(capsys, "perturb", "--db", tmp_path / "none.duckdb", "--benchmark", GRICE)
    assert code == 3 and "no such store" in err
    code, _, err = cli(capsys, "perturb", "--db", db, "--benchmark", GRICE, "--alpha", "1.5")
    assert code == 2 and "--alpha" in err


@pytest.mark.parametrize("argv", [["perturb", "--help"], ["plan", "perturbation", "--help"]])
def test_help(argv):
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", *argv], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage: benchcert" in r.stdout


def test_perturb_fractional_scores_reach_the_energy_test(capsys, tmp_path):
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    rng = __import__("random").Random(2)
    for item in range(5):
        for variant in ("a", "b", "c", "d", "e"):
            for rep in range(20):
                rows.append(f"fr,m,{item},s,d,{variant},{rep},{rng.choice([0, 0.25, 0.5, 0.75, 1])}")
    path = tmp_path / "fr.csv"
    path.write_text("\n".join(rows) + "\n")
    db = tmp_path / "fr.duckdb"
    ingest_native(db, path)
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "fr", "--base", "a", "--json")
    d = json.loads(out)
    assert code == 0 and {i["classical_method"] for i in d["items"]} == {"energy_distance"}
    assert {i["scores"] for i in d["items"]} == {"fractional"}
    assert {i["method"] for i in d["items"] if i["method"]} == {"widened_mean_score"}
    assert all(v["classical_tested"] == 5 for v in d["variants"])


def test_perturb_classical_test_without_power_says_so(capsys, tmp_path):
    """Fractional scores, 2 replicates per variant: the energy test's smallest p-value is 1/3, so the
    classical columns say 'no power' (they printed 0.0% before) and the sentence names the replicates."""
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    for item in range(10):
        for variant, scores in (("a", (0, 0.25)), ("b", (0.5, 0.25)), ("c", (0.75, 0.5)), ("d", (1, 1))):
            rows += [f"fr2,m,{item},s,d,{variant},{rep},{x}" for rep, x in enumerate(scores)]
    path = tmp_path / "fr2.csv"
    path.write_text("\n".join(rows) + "\n")
    db = tmp_path / "fr2.duckdb"
    ingest_native(db, path)
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "fr2", "--base", "a", "--null", "b,c",
                       "--test", "d")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("m ") and "'d'" in x)
    assert line.split()[-4:] == ["no", "power", "no", "power"] and "%" not in line
    assert ("(classical): 10 of 10 items - with 2 tested and 2 base replicates the energy test cannot reject at "
            "alpha = 0.05 (its smallest attainable p-value is 0.333)") in out
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "fr2", "--base", "a", "--null", "b,c",
                       "--test", "d", "--json")
    (v,) = json.loads(out)["variants"]
    assert v["classical_share"] is None and v["n_classical_no_power"] == 10


def _store(tmp_path, name, rows):
    """A store ingested from CSV rows (header first)."""
    path = tmp_path / f"{name}.csv"
    path.write_text("\n".join(rows) + "\n")
    db = tmp_path / f"{name}.duckdb"
    ingest_native(db, path)
    return db


@pytest.mark.montecarlo
def test_perturb_default_test_has_power_and_keeps_its_level(capsys, tmp_path):
    """Issue #25: 150 items x (base + 8 null variants) x 400 replicates, null rates Unif[0.4, 0.6]
    per item: a variant with rate 0.8 is flagged on >= 85% of the items, one with rate 0.6 (the edge
    of the null range: the null holds) on <= 8%.  The assumption-light widened test flags 0.8 on
    about 86% and 0.6 on none; the old default failed the first half on ranges as wide as 0.3."""
    import numpy as np

    rng = np.random.default_rng(7)
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    for item in range(150):
        probs = {"base": rng.uniform(0.4, 0.6), **{f"n{j}": rng.uniform(0.4, 0.6) for j in range(8)},
                 "t8": 0.8, "t6": 0.6}
        for v, p in probs.items():
            x = (rng.random(400) < p).astype(int)
            rows += [f"pt,m,{item},s,d,{v},{i},{x[i]}" for i in range(400)]
    db = _store(tmp_path, "pt", rows)
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "pt", "--base", "base",
                       "--null", ",".join(f"n{j}" for j in range(8)), "--test", "t8,t6", "--json")
    assert code == 0
    d = json.loads(out)
    share = {v["variant"]: v["composite_share"] for v in d["variants"]}
    n = {v["variant"]: v["n_tested"] for v in d["variants"]}
    assert d["method"] == "calibrated" and n == {"t8": 150, "t6": 150}
    assert share["t8"] >= 0.85 and share["t6"] <= 0.08, share


@pytest.mark.parametrize("method", ["calibrated", "widened", "plugin_exact", "plugin_union"])
def test_no_share_over_items_that_cannot_reject_for_every_method(capsys, tmp_path, method):
    """Issue #25: one run per variant of 16 variants (a temperature study); --method plugin_exact
    printed 0.0% over items that can never reject.  Under every method such items are no power,
    outside every share; the header lists null and tested variants apart."""
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    rng = __import__("random").Random(2)
    for item in range(40):
        for variant in range(16):
            rows.append(f"t,m,{item},s,d,t{variant:02d},0,{int(rng.random() < 0.6)}")
    db = _store(tmp_path, "t", rows)
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "t", "--base", "t00", "--method", method,
                       "--json")
    d = json.loads(out)
    assert code == 0 and all(v["composite_share"] is None and v["n_tested"] == 0 for v in d["variants"])
    assert {i["status"] for i in d["items"]} <= {"no_power", "no_alternative", "no_valid_eps"}
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "t", "--base", "t00", "--method", method,
                       "--null", "t01,t02,t03", "--test", "t04,t05")
    table = out.split("---")[-1].split("items = items tested")[0]
    assert code == 0 and "%" not in table.replace("classical", "").split("no power")[0]
    assert "  null variants:   't01', 't02', 't03'" in out and "  tested variants: 't04', 't05'" in out


def test_plan_from_the_store_and_under_no_power(capsys, tmp_path):
    """Issue #25: a store with one replicate per variant: `plan perturbation --db` answers a replicate
    count and its cost in calls, and `perturb` prints the same answer under its "no power" line."""
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    rng = __import__("random").Random(3)
    for item in range(30):
        for variant in ("a", "b", "c", "d", "e"):
            rows.append(f"r1,m,{item},s,d,{variant},0,{int(rng.random() < 0.55)}")
    db = _store(tmp_path, "r1", rows)
    design = ["--base", "a", "--null", "b,c,d", "--test", "e"]
    code, out, _ = cli(capsys, "plan", "perturbation", "--db", db, "--benchmark", "r1", "--detect", "0.2", *design,
                       "--json")
    assert code == 0
    (plan,) = json.loads(out)["plans"]
    code, out, _ = cli(capsys, "plan", "perturbation", "--db", db, "--benchmark", "r1", "--detect", "0.2", *design)
    assert code == 0 and "replicates per variant" in out and "calls" in out
    assert plan["replicates_per_variant"] >= 2 and plan["null_variants"] >= 2 and plan["power"] >= 0.8
    assert plan["calls"] == 30 * (plan["null_variants"] + 1) * plan["replicates_per_variant"]
    code, out, _ = cli(capsys, "perturb", "--db", db, "--benchmark", "r1", *design, "--detect", "0.2")
    assert code == 0 and "no test can reject" in out
    line = out.split("no test can reject")[1].splitlines()[1]
    assert line.strip().startswith("plan: ") and "replicates per variant" in line and "calls" in line


def test_plan_bounds_state_their_true_relation():
    """Issue #25: `size bound (Theorem 2) = 13.2281 <= 0.05` and a negative power bound were printed
    where the exact calibration made the design valid."""
    from types import SimpleNamespace

    from benchcert.flows.cli.perturb import _bounds_text

    text = _bounds_text(SimpleNamespace(size_bound=13.2281, alpha=0.05, power_bound=-2.5))
    assert "13.2281 > 0.05" in text and "<=" not in text and "-2.5" not in text and "says nothing" in text
    text = _bounds_text(SimpleNamespace(size_bound=0.04, alpha=0.05, power_bound=0.8357))
    assert "0.0400 <= 0.05" in text and "= 0.8357" in text


def test_plan_uses_the_items_own_spread(capsys, tmp_path):
    """Issue #36: with replicates the plan's power is over the items' own null ranges (not the spread of
    the benchmark-level rates), says so, gives the current design's power, and its JSON is standard
    (no NaN where the benchmark-level range is not used)."""
    rows = ["benchmark,model,item_id,subject,domain,variant,replicate,score"]
    rng = __import__("random").Random(4)
    for item in range(30):
        centre = rng.uniform(0.3, 0.7)
        for variant in ("a", "b", "c", "d", "e"):
            p = centre + rng.uniform(-0.05, 0.05)
            rows += [f"r4,m,{item},s,d,{variant},{rep},{int(rng.random() < p)}" for rep in range(4)]
    db = _store(tmp_path, "r4", rows)
    design = ["--base", "a", "--null", "b,c,d", "--test", "e"]
    code, out, _ = cli(capsys, "plan", "perturbation", "--db", db, "--benchmark", "r4", "--detect", "0.3", *design,
                       "--json")

    def no_nan(token):
        raise AssertionError(f"non-standard JSON token {token}")

    (plan,) = json.loads(out, parse_constant=no_nan)["plans"]
    assert code == 0 and plan["spread"] == "per item" and plan["a_hat"] is None and plan["n_items_spread"] == 30
    assert plan["replicates_now"] == 4 and 0.0 <= plan["power_now"] < plan["power"]
    code, out, _ = cli(capsys, "plan", "perturbation", "--db", db, "--benchmark", "r4", "--detect", "0.3", *design)
    assert code == 0 and "root-mean-square spread" in out and "the current design (4 replicates) has power" in out
