"""Answers that failed to parse stay visible (issue #39 finding 11).

The canonical row carries ``parsed``; the adapters fill it where the log says, a table maps it, the
store keeps it (a version-3 store gains the column), and the audit reports per model the share
unparsed, the score counting them wrong and the score over parsed answers, each with its interval,
in its table, summary.json and report, warning above 5%.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.ingest.adapters import inspect_ai, lm_eval
from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import open_store

from store_support import cli

NATIVE = Path(__file__).resolve().parents[2] / "data" / "native"
LLAMA = NATIVE / "mmlu_pro" / "model_outputs_Llama-2-7b-hf_5shots.zip"
SUBJECTS = ("ori_mmlu-physics", "ori_mmlu-law", "stemez-Chemistry", "theoremqa-Math", "scibench-chem", "ori_mmlu-econ")


def _flags(db) -> dict[str, tuple[int, int, int]]:
    """model -> (responses, unparsed, flagged) as stored."""
    with open_store(db, write=False) as con:
        rows = con.execute("SELECT model, count(*), count(*) FILTER (WHERE NOT parsed), count(parsed) "
                           "FROM responses GROUP BY model").fetchall()
    return {m: (n, u, f) for m, n, u, f in rows}


def write_mmlu_pro_outputs(folder: Path, model: str, unparsed_share: float, seed: int, n: int = 300) -> Path:
    """An MMLU-Pro ``model_outputs_<model>_5shots.json`` (the release's entries, shortened) in which
    ``unparsed_share`` of the preds are null (answer extraction failed), the rest right 60% of the time."""
    rng = np.random.default_rng(seed)
    letters = "ABCDEFGHIJ"
    entries = []
    null = rng.permutation(n) < round(unparsed_share * n)
    for q in range(n):
        answer = letters[q % 10]
        pred = None if null[q] else (answer if rng.random() < 0.6 else letters[(q + 3) % 10])
        entries.append({"question_id": q, "question": f"question {q}", "options": list(letters), "answer": answer,
                        "answer_index": q % 10, "cot_content": "", "category": SUBJECTS[q % 6].split("-")[-1],
                        "src": SUBJECTS[q % 6], "pred": pred, "model_outputs": "The answer is (?)"})
    path = folder / f"model_outputs_{model}_5shots.json"
    path.write_text(json.dumps(entries))
    return path


def test_an_mmlu_pro_fixture_with_a_fifth_unparsed_shows_both_scores_and_the_share(capsys, tmp_path):
    """Acceptance: one model 20% unparsed, one 1%: the audit's table, summary.json and report show the
    share and both scores with intervals, and the warning names the first model only."""
    db, art = tmp_path / "s.duckdb", tmp_path / "art"
    files = [write_mmlu_pro_outputs(tmp_path, "deepseek-like", 0.20, seed=1),
             write_mmlu_pro_outputs(tmp_path, "steady-model", 0.01, seed=2)]
    code, out, err = cli(capsys, "ingest", *files, "--db", db, "--in-process")
    assert code == 0, (out, err)
    assert _flags(db) == {"deepseek-like": (300, 60, 300), "steady-model": (300, 3, 300)}
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "mmlu_pro", "--artifacts", art, "--in-process")
    assert code == 0, (out, err)
    run_dir = Path(next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: "))).parent
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {r["model"]: r for r in summary["parse_failures"]}
    deep, steady = rows["deepseek-like"], rows["steady-model"]
    assert (deep["n_unparsed"], deep["n_responses"], deep["share_unparsed"], deep["warn"]) == (60, 300, 0.2, True)
    assert (steady["n_unparsed"], steady["share_unparsed"], steady["warn"]) == (3, 0.01, False)
    # Counted wrong, the score is the audit's own pooled score (the log scored a null pred 0).
    pooled = {m["model"]: m["pooled"]["estimate"] for m in summary["models"]}
    assert deep["score_unparsed_wrong"] == pytest.approx(pooled["deepseek-like"], abs=1e-12)
    # Over parsed answers only: the same right answers over the 240 parsed items.
    assert deep["score_parsed_only"] == pytest.approx(pooled["deepseek-like"] * 300 / 240, abs=1e-12)
    assert deep["n_items_parsed"] == 240 and deep["method"] == "clustered_subject"
    for r in (deep, steady):
        assert r["unparsed_wrong_lower"] < r["score_unparsed_wrong"] < r["unparsed_wrong_upper"]
        assert r["parsed_only_lower"] < r["score_parsed_only"] < r["parsed_only_upper"]
    # The terminal table: the share and both scores with their intervals, the flag on the first model.
    line = next(x for x in out.splitlines() if x.startswith("deepseek-like ") and "%" in x and "[" in x
                and "20.0%" in x)
    assert f"{100 * deep['score_unparsed_wrong']:.2f}%" in line and f"{100 * deep['score_parsed_only']:.2f}%" in line
    assert f"[{100 * deep['parsed_only_lower']:5.1f}, {100 * deep['parsed_only_upper']:5.1f}]" in line
    assert line.rstrip().endswith("!")
    warned = [w for w in summary["warnings"] if w.startswith("parsing:")]
    assert len(warned) == 1 and "'deepseek-like' 60 of 300 (20.0%)" in warned[0] and "steady-model" not in warned[0]
    assert any(x.startswith("warning: parsing:") for x in out.splitlines())
    # The report's section, and the table behind it.
    html = (run_dir / "report.html").read_text()
    assert 'id="parsing"' in html and "Answers that failed to parse" in html and "20.00" in html
    table = pl.read_parquet(run_dir / "tables" / "parse_failures.parquet")
    assert table.filter(pl.col("model") == "deepseek-like")["n_unparsed"].item() == 60
    # The Python API reads the same rows.
    from benchcert.tasks.audit.audit_result import AuditResult

    result = AuditResult.from_summary(summary)
    assert {r.model: r.n_unparsed for r in result.parse_failures} == {"deepseek-like": 60, "steady-model": 3}
    assert "answers that failed to parse" in str(result)
    frame = result.to_polars()
    assert dict(zip(frame["model"], frame["n_unparsed"])) == {"deepseek-like": 60, "steady-model": 3}
    share = dict(zip(frame["model"], frame["share_unparsed"]))
    assert share["deepseek-like"] == pytest.approx(0.2)


def test_an_audit_without_parse_flags_says_nothing_of_them(capsys, tmp_path):
    log = tmp_path / "t.csv"
    log.write_text("model,item_id,score\n" + "".join(f"m{i % 2},q{i // 2},{i % 3 % 2}\n" for i in range(40)))
    db, art = tmp_path / "s.duckdb", tmp_path / "art"
    assert cli(capsys, "ingest", log, "--db", db, "--benchmark", "b", "--in-process")[0] == 0
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", art, "--in-process")
    assert code == 0, err
    assert "failed to parse" not in out
    run_dir = Path(next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: "))).parent
    assert json.loads((run_dir / "summary.json").read_text())["parse_failures"] is None
    assert not (run_dir / "tables" / "parse_failures.parquet").exists()


def test_the_real_mmlu_pro_outputs_keep_their_null_preds_as_unparsed(tmp_path):
    from benchcert.tasks.ingest.mapping import ColumnMapping
    from benchcert.tasks.ingest.service import ingest_file

    with zipfile.ZipFile(LLAMA) as z:
        outputs = json.loads(z.read(z.namelist()[0]))
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, LLAMA, benchmark=None, mapping=ColumnMapping())
    assert r.status == "ingested", r.message
    n_null = sum(o["pred"] is None for o in outputs)
    assert _flags(db) == {"Llama-2-7b-hf": (len(outputs), n_null, len(outputs))} and n_null == 247


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_table_maps_the_flag_with_an_expression_over_its_columns(capsys, tmp_path, fmt):
    """--map "parsed=pred IS NOT NULL": a blank CSV cell, a JSON null and a Parquet null all read unparsed."""
    frame = pl.DataFrame({"model": ["m"] * 4, "item_id": ["q1", "q2", "q3", "q4"], "correct": [1, 0, 0, 1],
                          "pred": ["A", None, "C", "B"]})
    log = tmp_path / f"t.{fmt}"
    {"csv": frame.write_csv, "jsonl": frame.write_ndjson, "parquet": frame.write_parquet}[fmt](log)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b", "--map", "score=correct",
                         "--map", "parsed=pred IS NOT NULL")
    assert code == 0, (out, err)
    with open_store(db, write=False) as con:
        assert con.execute("SELECT item_id, parsed FROM responses ORDER BY item_id").fetchall() == [
            ("q1", True), ("q2", False), ("q3", True), ("q4", True)]


def test_a_parsed_column_is_read_as_a_flag_and_a_bad_value_is_a_reject(capsys, tmp_path):
    log = tmp_path / "t.csv"
    log.write_text("model,item_id,score,parsed\nm,q1,1,true\nm,q2,0,0\nm,q3,0,\nm,q4,1,YES\n")
    db = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")[0] == 0
    with open_store(db, write=False) as con:
        assert con.execute("SELECT item_id, parsed FROM responses ORDER BY item_id").fetchall() == [
            ("q1", True), ("q2", False), ("q3", None), ("q4", True)]
    bad = tmp_path / "bad.csv"
    bad.write_text("model,item_id,score,parsed\nm,q5,1,maybe\n")
    code, out, err = cli(capsys, "ingest", bad, "--db", db, "--benchmark", "b")
    assert code == 1 and "line 2, field parsed" in err and "not a parse flag: 'maybe'" in err, (out, err)


def test_a_contradicting_parse_flag_is_a_conflict_and_an_unknown_one_is_filled(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    first = tmp_path / "a.csv"
    first.write_text("model,item_id,score,parsed\nm,q1,0,false\nm,q2,1,\n")
    assert cli(capsys, "ingest", first, "--db", db, "--benchmark", "b")[0] == 0
    second = tmp_path / "b.csv"
    second.write_text("model,item_id,score,parsed\nm,q2,1,true\nm,q1,0,true\n")
    code, out, err = cli(capsys, "ingest", second, "--db", db, "--benchmark", "b")
    assert code == 1 and "parse flags" in err and f"parsed true at {second}:3 but false at {first}:2" in err, err
    third = tmp_path / "c.csv"
    third.write_text("model,item_id,score,parsed\nm,q2,1,true\n")
    assert cli(capsys, "ingest", third, "--db", db, "--benchmark", "b")[0] == 0
    with open_store(db, write=False) as con:
        assert con.execute("SELECT item_id, parsed FROM responses ORDER BY item_id").fetchall() == [
            ("q1", False), ("q2", True)]


def test_a_version_3_store_gains_the_column_and_loses_nothing(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    log = tmp_path / "t.csv"
    log.write_text("model,item_id,score,human_score\nm,q1,1,1\nm,q2,0,\nm,q3,0.5,0\n")
    assert cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")[0] == 0
    with open_store(db, write=True) as con:  # what benchcert wrote before the flag existed
        con.execute(schema.RESPONSES_VIEW.replace(",\n           r.parsed", ""))
        con.execute("ALTER TABLE response_codes DROP COLUMN parsed")
        con.execute("UPDATE meta SET value = '3' WHERE key = 'store_version'")
        before = con.execute("SELECT * FROM responses ORDER BY item_id").fetchall()
    with open_store(db, write=False) as con:
        assert schema.stored_version(con) == schema.STORE_VERSION == "4"
        after = con.execute("SELECT * EXCLUDE (parsed) FROM responses ORDER BY item_id").fetchall()
        assert after == before and len(after) == 3
        assert con.execute("SELECT count(parsed) FROM responses").fetchall()[0][0] == 0


def test_the_lm_eval_and_inspect_adapters_read_the_flag_where_the_log_says():
    assert lm_eval.parse_flag(["[invalid]"], "strict-match") is False
    assert lm_eval.parse_flag("[invalid]", "none") is False
    assert lm_eval.parse_flag(["42"], "flexible-extract") is True
    assert lm_eval.parse_flag(["42"], "none") is None  # no extraction to fail
    assert lm_eval.parse_flag([["-1.2", "False"], ["-0.3", "True"]], "none") is None
    assert inspect_ai.parse_flag({"value": "N"}) is False
    assert inspect_ai.parse_flag({"value": "I", "explanation": "Scoring pattern not matched in output: foo"}) is False
    assert inspect_ai.parse_flag({"value": "C", "answer": "B"}) is True
    assert inspect_ai.parse_flag({"value": 0.5}) is None


def test_an_lm_eval_log_with_invalid_filtered_responses_stores_them_unparsed(tmp_path):
    from benchcert.tasks.ingest.mapping import ColumnMapping
    from benchcert.tasks.ingest.service import ingest_file

    src = next((NATIVE / "lm_eval").glob("samples_*.jsonl"))
    results = next((NATIVE / "lm_eval").glob("results_*.json"))
    lines = src.read_text().splitlines()
    for k in (0, 3):
        obj = json.loads(lines[k])
        obj["filtered_resps"] = ["[invalid]"]
        lines[k] = json.dumps(obj)
    (tmp_path / src.name).write_text("\n".join(lines) + "\n")
    (tmp_path / results.name).write_text(results.read_text())
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, tmp_path / src.name, benchmark="b", mapping=ColumnMapping())
    assert r.status == "ingested", r.message
    with open_store(db, write=False) as con:
        got = con.execute("SELECT line, parsed FROM responses ORDER BY line").fetchall()
    assert [p for _, p in got] == [False, None, None, False] + [None] * (len(lines) - 4)


def test_an_inspect_log_with_noanswer_stores_it_unparsed(tmp_path):
    from benchcert.tasks.ingest.mapping import ColumnMapping
    from benchcert.tasks.ingest.service import ingest_file

    log = json.loads((NATIVE / "inspect_ai" / "data_arc_qwen.json").read_text())
    first = log["samples"][0]["scores"]["choice"]
    first["value"] = "N"
    path = tmp_path / "arc.json"
    path.write_text(json.dumps(log))
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=ColumnMapping())
    assert r.status == "ingested", r.message
    with open_store(db, write=False) as con:
        got = [p for (p,) in con.execute("SELECT parsed FROM responses ORDER BY line").fetchall()]
    assert got == [False, True, True]


def _draw_benchmark(rng: np.random.Generator, n_subjects: int, clustered: bool) -> pl.DataFrame:
    """One model's items as the store's read gives them (tasks/store/parse_flags.py): subjects of unequal
    size (20-80 items); ability and parse-failure rate vary by subject (clustered) or not, and a model
    fails to parse more where it knows less, as happens (failures are not at random)."""
    sizes = rng.integers(20, 81, n_subjects)
    p = rng.beta(4, 4, n_subjects) if clustered else np.full(n_subjects, 0.55)
    fail = 0.05 + 0.3 * (1 - p) * (rng.beta(2, 2, n_subjects) if clustered else 0.5)
    subject = np.repeat(np.arange(n_subjects), sizes)
    unparsed = rng.random(subject.size) < fail[subject]
    right = rng.random(subject.size) < p[subject]
    score = np.where(unparsed, 0.0, right.astype(float))
    return pl.DataFrame({"model": "m", "item_key": np.arange(subject.size), "subject": [f"s{s:03d}" for s in subject],
                         "n": 1, "n_flagged": 1, "n_unparsed": unparsed.astype(np.int64), "score_wrong": score,
                         "score_parsed": np.where(unparsed, np.nan, score)}).with_columns(pl.col("score_parsed").fill_nan(None))


def _truths(rng: np.random.Generator, clustered: bool) -> tuple[float, float]:
    """The two estimands over the population the draws come from (item-weighted; sizes independent of
    ability, so the subject-level expectations): E[(1 - f) p] and E[(1 - f) p] / E[1 - f]."""
    big = 2_000_000
    p = rng.beta(4, 4, big) if clustered else np.full(big, 0.55)
    fail = 0.05 + 0.3 * (1 - p) * (rng.beta(2, 2, big) if clustered else 0.5)
    wrong = float(np.mean((1 - fail) * p))
    return wrong, wrong / float(np.mean(1 - fail))


@pytest.mark.montecarlo
@pytest.mark.parametrize("n_subjects, clustered", [(30, True), (8, True), (6, False)])
def test_both_intervals_cover_their_estimands_at_the_nominal_level(n_subjects, clustered):
    """Seeded simulation: the interval of the score counting unparsed answers wrong and the one of the score
    over parsed answers each cover their population value at about 95% (99% Clopper-Pearson interval of the
    simulated rate), with 30 or 8 subjects of unequal size (clustered interval) and with items independent
    (hierarchy none: Wilson on 0/1 scores); parse failures depend on the model's ability."""
    from simcheck import rate_ci

    from benchcert.tasks.parsing.analysis import model_row

    rng = np.random.default_rng(39 + n_subjects)
    wrong_truth, parsed_truth = _truths(rng, clustered)
    reps, hits_w, hits_p = 400, 0, 0
    for _ in range(reps):
        row = model_row("m", _draw_benchmark(rng, n_subjects, clustered), alpha=0.05, clustered=clustered)
        hits_w += row["unparsed_wrong_lower"] <= wrong_truth <= row["unparsed_wrong_upper"]
        hits_p += row["parsed_only_lower"] <= parsed_truth <= row["parsed_only_upper"]
    assert row["method"] == ("clustered_subject" if clustered else "wilson")
    for hits in (hits_w, hits_p):
        rate, lo, hi = rate_ci(hits, reps)
        assert lo <= 0.95 <= hi, (rate, hits_w / reps, hits_p / reps)


def test_a_model_whose_log_says_nothing_of_parsing_is_left_out_not_reported_at_zero(capsys, tmp_path):
    flagged = tmp_path / "a.csv"
    flagged.write_text("model,item_id,score,parsed\n" + "".join(f"a,q{i},{i % 2},{'false' if i < 3 else 'true'}\n"
                                                                 for i in range(20)))
    silent = tmp_path / "b.csv"
    silent.write_text("model,item_id,score\n" + "".join(f"b,q{i},{(i + 1) % 2}\n" for i in range(20)))
    db, art = tmp_path / "s.duckdb", tmp_path / "art"
    assert cli(capsys, "ingest", flagged, silent, "--db", db, "--benchmark", "b")[0] == 0
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", art, "--in-process", "--json")
    assert code == 0, err
    rows = json.loads(out)["parse_failures"]
    assert [(r["model"], r["n_unparsed"], r["share_unparsed"]) for r in rows] == [("a", 3, 0.15)]
