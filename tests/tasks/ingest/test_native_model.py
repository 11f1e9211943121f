"""--model for logs whose names do not carry it, and MMLU-Pro's folder-per-model layout
``<model>/<subject>_result.json`` beside ``<subject>_summary.json`` (the repository's early release)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from benchcert.tasks.store.connection import open_store

from conftest import TESTS
from store_support import cli

NATIVE = TESTS / "data" / "native"
JAMBA = NATIVE / "mmlu_pro" / "model_outputs_jamba-1.5-large_5shots.zip"
LM_SAMPLES = NATIVE / "lm_eval" / "samples_math_perturbed_full_2026-01-21T03-44-18.458309.jsonl"
LM_RESULTS = NATIVE / "lm_eval" / "results_2026-01-21T03-44-18.458309.json"


def _outputs() -> list[dict]:
    with zipfile.ZipFile(JAMBA) as z:
        (name,) = z.namelist()
        return json.loads(z.read(name))


def _write_subject(folder: Path, category: str) -> list[dict]:
    """One subject's <category>_result.json and <category>_summary.json, as the early script wrote them."""
    rows = [o for o in _outputs() if isinstance(o, dict) and o.get("category") == category]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{category}_result.json").write_text(json.dumps(rows))
    corr = sum(1 for o in rows if o.get("pred") is not None and o["pred"] == o["answer"])
    summary = {category: {"corr": float(corr), "wrong": float(len(rows) - corr), "acc": corr / len(rows)},
               "total": {"corr": float(corr), "wrong": float(len(rows) - corr), "acc": corr / len(rows)}}
    (folder / f"{category}_summary.json").write_text(json.dumps(summary))
    return rows


def _per_model(db) -> dict[str, tuple[int, float]]:
    with open_store(db, write=False) as con:
        rows = con.execute("SELECT model, count(*), sum(score) FROM responses GROUP BY model").fetchall()
    return {m: (n, s) for m, n, s in rows}


def test_folder_per_model_layout_reads_the_folder_as_the_model(capsys, tmp_path):
    logs = tmp_path / "eval_results"
    law = _write_subject(logs / "jamba-1.5-large", "law")
    bio = _write_subject(logs / "jamba-1.5-large", "biology")
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", logs, "--db", db, "--json")
    files = {Path(f["path"]).name: f for f in json.loads(out)["files"]}
    assert code == 0, err
    assert {k: v["status"] for k, v in files.items()} == {
        "law_result.json": "ingested", "law_summary.json": "metadata",
        "biology_result.json": "ingested", "biology_summary.json": "metadata"}
    assert files["law_result.json"]["read"]["model"] == "jamba-1.5-large"
    correct = sum(1 for o in law + bio if o.get("pred") is not None and o["pred"] == o["answer"])
    # Scores are pred == answer, the same rule as the zip: the summary's own counts agree.
    assert _per_model(db) == {"jamba-1.5-large": (len(law) + len(bio), correct)}


def test_model_flag_names_the_model_of_any_layout(capsys, tmp_path):
    rows = _write_subject(tmp_path / "run-17", "law")
    flat = tmp_path / "outputs.json"  # no model in the name, no model folder layout
    flat.write_text(json.dumps(rows))
    db = tmp_path / "s.duckdb"
    code, out, _ = cli(capsys, "ingest", flat, "--db", db, "--json")
    (f,) = json.loads(out)["files"]
    assert code == 1 and "cannot tell the model" in f["message"] and "--model" in f["message"]
    code, out, err = cli(capsys, "ingest", flat, "--db", db, "--model", "org/jamba@ckpt-3", "--json")
    assert code == 0, err
    code, out, err = cli(capsys, "ingest", tmp_path / "run-17" / "law_result.json", "--db", db,
                         "--model", "org/jamba@ckpt-4", "--json")
    assert code == 0, err
    # --model wins over the folder name; a zip named for its model can be renamed too.
    code, out, err = cli(capsys, "ingest", JAMBA, "--db", db, "--model", "jamba-renamed", "--json")
    assert code == 0, err
    got = _per_model(db)
    assert set(got) == {"org/jamba@ckpt-3", "org/jamba@ckpt-4", "jamba-renamed"}
    assert got["org/jamba@ckpt-3"] == got["org/jamba@ckpt-4"] and got["org/jamba@ckpt-3"][0] == len(rows)


def test_model_flag_for_a_table_and_a_harness_log(capsys, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("item_id,score\nq1,1\nq2,0\n")
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b")
    assert code == 1 and "model" in err  # no model column and no --model
    assert cli(capsys, "ingest", table, "--db", db, "--benchmark", "b", "--model", "it's/m1")[0] == 0
    code, _, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b", "--model", "x", "--map",
                       "model=item_id")
    assert code == 2 and "not both" in err
    logs = tmp_path / "lm"
    logs.mkdir()
    for f in (LM_SAMPLES, LM_RESULTS):
        (logs / f.name).write_bytes(f.read_bytes())
    code, out, err = cli(capsys, "ingest", logs / LM_SAMPLES.name, "--db", db, "--model", "org/m@step-5", "--json")
    assert code == 0, err
    (f,) = json.loads(out)["files"]
    assert f["read"]["model"] == "org/m@step-5"
    with open_store(db, write=False) as con:
        models = {r[0] for r in con.execute("SELECT DISTINCT model FROM responses").fetchall()}
    assert {"it's/m1", "org/m@step-5"} <= models


@pytest.mark.parametrize("name", ["law_summary.json"])
def test_a_summary_alone_is_metadata_not_an_error(capsys, tmp_path, name):
    _write_subject(tmp_path / "m", "law")
    (tmp_path / "m" / "law_result.json").unlink()
    code, out, _ = cli(capsys, "ingest", tmp_path / "m" / name, "--db", tmp_path / "s.duckdb", "--json")
    (f,) = json.loads(out)["files"]
    assert code == 0 and f["status"] == "metadata"
