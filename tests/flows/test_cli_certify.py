"""`benchcert plan environments` and `benchcert certify` on the bundled MMLU-Pro data, and the
environments file's usage errors (certifying-capabilities paper, section 3)."""

from __future__ import annotations

import csv
import pathlib
import json
import shutil

import numpy as np
import polars as pl
import pytest

from benchcert.stats.failure_rates import failure_rate_upper, failure_rate_upper_new_subjects
from benchcert.tasks.certify.service import EnvironmentsError, parse_environments
from benchcert.tasks.store.matrices import load_matrices
from benchcert.tasks.store.connection import open_store

from conftest import DATA
from store_support import cli

ENVS = DATA / "mmlu_pro" / "environments.toml"


@pytest.fixture(scope="module")
def db(mmlu_db, tmp_path_factory):
    """A copy of the session's MMLU-Pro store (plans are written into it)."""
    path = tmp_path_factory.mktemp("certify") / "store.duckdb"
    shutil.copy(mmlu_db, path)
    return path


@pytest.fixture(scope="module")
def truth(db):
    """Every model's benchmark score per environment, from the full matrix (the target of a plan)."""
    with open_store(db, write=False) as con:
        m = load_matrices(con, "mmlu_pro")
    spec_env = {"clinic": {"health": 0.7, "biology": 0.3}, "legal": {"law": 1.0}}
    dom = np.array(m.items["domain"].to_list())
    out = {}
    for j, model in enumerate(m.models):
        x = m.scores[:, j]
        for env, w in spec_env.items():
            out[(model, env)] = sum(v * np.nanmean(x[dom == d]) for d, v in w.items())
    return out


def plan(capsys, db, *extra):
    code, out, err = cli(capsys, "plan", "environments", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro",
                         "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_plan_json_keys_budgets_and_reproducible_draw(capsys, db, tmp_path):
    a = plan(capsys, db, "--epsilon", "0.05", "--delta", "0.05", "--seed", "7", "--out", tmp_path / "p.csv")
    assert set(a["chi2_radius_bounds"]) == {"mixture", "uniform", "shtarkov"}
    assert a["chi2_radius_lower"] <= a["chi2_radius"] <= min(a["chi2_radius_bounds"].values()) + 1e-9
    assert set(a["budget"]) == {"theorem_3_4", "per_environment", "stratified"}
    # Remark 3.2 by hand: 8 environments (5 + 3 simplex vertices), ceil(log(2*8/0.05) / (2 * 0.05^2)) = 1154 each.
    assert a["budget"]["per_environment"] == 8 * 1154
    assert a["protocol"] == "stratified" and a["n_draws"] == a["budget"]["stratified"]
    assert sum(a["sampling_distribution"].values()) == pytest.approx(1)
    assert a["family"]["tv_cover"]["size"] == 861 and a["family"]["tv_cover"]["radius"] <= 0.025
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert len(rows) == a["n_items"] and sum(int(r["draws"]) for r in rows) == a["n_draws"]
    b = plan(capsys, db, "--epsilon", "0.05", "--delta", "0.05", "--seed", "7")
    assert b["plan_id"] == a["plan_id"] and b["item_ids"] == sorted(r["item_id"] for r in rows)
    with open_store(db, write=False) as con:
        n = con.execute("SELECT count(*) FROM environment_plan_draws WHERE plan_id = ?", [a["plan_id"]]).fetchall()
    assert n[0][0] == a["n_draws"]          # recorded once, not twice


@pytest.mark.parametrize("protocol,eps", [("stratified", "0.05"), ("theorem", "0.2"), ("naive", "0.05")])
def test_certify_on_a_plan_covers_the_benchmark_scores(capsys, db, truth, tmp_path, protocol, eps):
    p = plan(capsys, db, "--epsilon", eps, "--delta", "0.05", "--seed", "3", "--protocol", protocol,
             "--out", tmp_path / "plan.json")
    code, out, err = cli(capsys, "certify", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro",
                         "--subset", tmp_path / "plan.json", "--json")
    assert code == 0, err
    c = json.loads(out)
    assert c["subset"] == p["plan_id"] and c["delta"] == 0.05
    rows = c["environments"]
    assert {"environment", "model", "score", "lower", "upper", "method"} <= set(rows[0])
    checked = 0
    for r in rows:
        assert r["lower"] <= r["score"] <= r["upper"]
        if not r["worst_of_family"]:
            assert r["upper"] - r["lower"] <= 2 * float(eps) + 1e-9   # the plan delivers +/- epsilon
        if (r["model"], r["environment"]) in truth:
            t = truth[(r["model"], r["environment"])]
            assert r["lower"] - 1e-12 <= t <= r["upper"] + 1e-12
            checked += 1
    assert checked >= 40
    worst = [r for r in rows if r["worst_of_family"]]
    assert worst and all(w["environment"] == "care_mix (worst mix)" for w in worst)
    assert set(c["failure_rate_upper"]) == {r["model"] for r in rows}
    # the failure bound is for the plan's items, as the band; exact binomial for i.i.d. draws from q,
    # the unequal-rate bound for pooled environments or atoms (stats.failure_rates.failure_rate_upper)
    iid = protocol == "theorem"
    for f in c["failure_rate_upper"].values():
        assert f["question"] == "finite_population" and f["upper_new_subjects"] is None
        assert f["method"] == "clopper_pearson_one_sided" + ("" if iid else "_unequal_rates")
        assert f["upper"] == pytest.approx(failure_rate_upper(f["failures"], f["n"], alpha=0.05,
                                                              unequal_rates=not iid).upper)
    assert "black-box" in c["black_box"]


def test_certify_full_benchmark_and_failure_rate(capsys, db):
    code, out, err = cli(capsys, "certify", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro", "--json")
    assert code == 0, err
    c = json.loads(out)
    assert {r["method"] for r in c["environments"]} == {"stratified_superpopulation"}
    with open_store(db, write=False) as con:
        m = load_matrices(con, "mmlu_pro")
    j = m.models.index("DeepSeek-Coder-V2")
    x = m.scores[:, j][~np.isnan(m.scores[:, j])]
    f = c["failure_rate_upper"]["DeepSeek-Coder-V2"]
    assert f["failures"] == int((x < 1).sum()) and f["n"] == x.size
    # the failure bound answers the band's questions: same subjects (unequal-rate exact bound) and new subjects
    assert f["question"] == "same_subjects" and {r["question"] for r in c["environments"]} == {"same_subjects"}
    assert f["upper"] == pytest.approx(failure_rate_upper(f["failures"], f["n"], alpha=0.05, unequal_rates=True).upper)
    subjects = (m.items["domain"] + "\x00" + m.items["subject"]).to_numpy()[~np.isnan(m.scores[:, j])]
    nb = failure_rate_upper_new_subjects(x < 1, subjects, alpha=0.05)
    assert f["upper_new_subjects"] == pytest.approx(nb.upper) and f["question_new_subjects"] == "new_subjects"
    # new subjects: each subject weighs the same (oracle: the mean of the subjects' failure shares)
    shares = pl.DataFrame({"s": subjects, "f": (x < 1).astype(float)}).group_by("s").agg(pl.col("f").mean())["f"]
    assert f["estimate_new_subjects"] == pytest.approx(shares.mean()) and f["effective_subjects"] == shares.len()
    assert f["estimate_new_subjects"] <= f["upper_new_subjects"] and f["estimate"] <= f["upper"]
    code, out, _ = cli(capsys, "certify", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro")
    assert "cannot be certified by black-box testing" in out
    assert "for new items from the same subjects" in out and "for a new subject" in out
    assert "subjects, each weighing the same; subject-weighted failure rate" in out
    # the text table shows the new-subjects score and band the note points to, as --json has them
    assert "new-subj" in out.splitlines()[1]
    row = next(r for r in c["environments"] if r["model"] == "DeepSeek-Coder-V2")
    line = next(ln for ln in out.splitlines() if ln.startswith("DeepSeek-Coder-V2") and row["environment"][:28] in ln)
    assert f"{100 * row['score_new_subjects']:.2f}% {100 * row['lower_new_subjects']:6.2f}%" in line


@pytest.mark.parametrize("body,needle", [
    ('[environments.clinic]\nweights = { helth = 1.0 }\n', "[environments.clinic] weights.helth: unknown domain"),
    ('[environments.clinic]\nweights = { health = 1.2, law = -0.2 }\n', "weights.law: weight must be >= 0"),
    ('[environments.clinic]\nweights = { health = 0.5, law = 0.4 }\n', "weights must sum to 1; they sum to 0.9"),
    ('level = "topic"\n[environments.a]\nweights = { law = 1 }\n', "level: must be"),
    ('[family]\nsimplex = ["law", "nope"]\n', "[family] simplex entry 'nope': unknown domain"),
    ('[environments.a]\nweights = { law = 1 }\n[family]\nhull = ["a", "b"]\n', "[family] hull: unknown environment"),
    ('[environments.a\n', "not valid TOML"),
])
def test_environment_file_usage_errors_name_the_entry(capsys, db, tmp_path, body, needle):
    f = tmp_path / "envs.toml"
    f.write_text(body)
    for argv in (("plan", "environments", "--epsilon", "0.1", "--delta", "0.1"), ("certify",)):
        code, _, err = cli(capsys, *argv, "--envs", f, "--db", db, "--benchmark", "mmlu_pro")
        assert code == 2 and needle in err and str(f) in err


def test_certify_data_and_usage_errors(capsys, db, tmp_path):
    code, _, err = cli(capsys, "certify", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro", "--subset", "env-0")
    assert code == 1 and "no environment plan 'env-0'" in err
    code, _, err = cli(capsys, "plan", "environments", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro",
                       "--epsilon", "1.5", "--delta", "0.1")
    assert code == 2 and "--epsilon must be in (0, 1)" in err
    code, _, err = cli(capsys, "certify", "--envs", ENVS, "--db", tmp_path / "none.duckdb", "--benchmark", "x")
    assert code == 3


def test_parse_environments_normalises_and_builds_simplex_vertices():
    s = parse_environments({"environments": {"a": {"weights": {"x": 0.25, "y": 0.75}}},
                            "family": {"simplex": ["x", "z"]}}, "t.toml")
    assert s.level == "domain" and [r[0] for r in s.rows()] == ["a", "family:x", "family:z"]
    with pytest.raises(EnvironmentsError, match=r"t.toml: \[family\] name"):
        parse_environments({"environments": {"a": {"weights": {"x": 1}}}, "family": {"name": "a", "simplex": ["x", "y"]}},
                           "t.toml")
    with pytest.raises(EnvironmentsError, match="exactly one key"):
        parse_environments({"environments": {"a": {"weight": {"x": 1}}}}, "t.toml")


def test_end_to_end_plan_certify_audit(capsys, db, tmp_path, prefect_harness):
    # The whole path on the bundled MMLU-Pro data: plan -> certify on the drawn subset -> audit --environments.
    p = plan(capsys, db, "--epsilon", "0.05", "--delta", "0.05", "--seed", "11", "--protocol", "stratified")
    code, out, err = cli(capsys, "certify", "--envs", ENVS, "--db", db, "--benchmark", "mmlu_pro",
                         "--subset", p["plan_id"], "--json")
    assert code == 0, err
    assert json.loads(out)["environments"]
    arts = tmp_path / "artifacts"
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "mmlu_pro", "--artifacts", arts,
                         "--environments", ENVS, "--json")
    assert code == 0, err
    run_dir = pathlib.Path(json.loads(out)["run_dir"])
    risks = pl.read_parquet(run_dir / "tables" / "environment_risks.parquet")
    assert risks["model"].n_unique() == 29 and risks["environment"].n_unique() == 9
    html = (run_dir / "report.html").read_text()
    assert 'id="environments"' in html and "cannot be certified by black-box testing" in html
    bad = tmp_path / "bad.toml"
    bad.write_text('[environments.x]\nweights = { lawyers = 1.0 }\n')
    code, _, err = cli(capsys, "audit", "--db", db, "--benchmark", "mmlu_pro", "--artifacts", arts,
                       "--environments", bad)
    assert code == 2 and "[environments.x] weights.lawyers: unknown domain" in err


def test_subject_level_environments(capsys, db, tmp_path):
    f = tmp_path / "subjects.toml"
    f.write_text('level = "subject"\n[environments.ethics]\n'
                 'weights = { "ori_mmlu-business_ethics" = 0.5, "ori_mmlu-moral_disputes" = 0.5 }\n')
    a = plan(capsys, db, "--envs", f, "--epsilon", "0.1", "--delta", "0.1", "--seed", "2")
    assert set(a["sampling_distribution"]) == {"ori_mmlu-business_ethics", "ori_mmlu-moral_disputes"}
    assert a["chi2_radius"] == pytest.approx(0, abs=1e-9) and a["level"] == "subject"
    code, out, err = cli(capsys, "certify", "--envs", f, "--db", db, "--benchmark", "mmlu_pro", "--subset",
                         a["plan_id"], "--json")
    assert code == 0, err
    assert {r["environment"] for r in json.loads(out)["environments"]} == {"ethics"}
    f.write_text('level = "subject"\n[environments.ethics]\nweights = { business = 1.0 }\n')
    code, _, err = cli(capsys, "certify", "--envs", f, "--db", db, "--benchmark", "mmlu_pro")
    assert code == 2 and "unknown subject 'business'" in err
