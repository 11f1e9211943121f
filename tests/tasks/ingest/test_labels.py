"""Issue #26 findings 1-4: labels that cannot mislabel, duplicates inside one source, strict score types.

Each test goes through the command line, as the findings did, and checks nothing wrong is stored."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from benchcert.tasks.store.connection import open_store

from conftest import TESTS
from store_support import cli

NATIVE = TESTS / "data" / "native"
JAMBA = NATIVE / "mmlu_pro" / "model_outputs_jamba-1.5-large_5shots.zip"
LM_SAMPLES = NATIVE / "lm_eval" / "samples_math_perturbed_full_2026-01-21T03-44-18.458309.jsonl"
LM_RESULTS = NATIVE / "lm_eval" / "results_2026-01-21T03-44-18.458309.json"
EVAL = NATIVE / "inspect_ai" / "log_read_sample.eval"


def _models(db) -> dict[str, int]:
    if not Path(db).exists():
        return {}
    with open_store(db, write=False) as con:
        return dict(con.execute("SELECT model, count(*) FROM responses GROUP BY model").fetchall())


def _result(folder: Path, category: str, n: int = 6) -> None:
    with zipfile.ZipFile(JAMBA) as z:
        (name,) = z.namelist()
        rows = [o for o in json.loads(z.read(name)) if isinstance(o, dict) and o.get("category") == category][:n]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{category}_result.json").write_text(json.dumps(rows))


def test_model_flag_on_a_folder_of_several_models_is_refused_naming_them(capsys, tmp_path):
    logs = tmp_path / "eval_results"
    _result(logs / "gpt-4o", "law")
    _result(logs / "claude-3", "law", n=5)  # another model: other outputs
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", logs, "--db", db, "--model", "gpt-4o")
    assert code == 2, (out, err)
    assert "--model" in err and "'gpt-4o'" in err and "'claude-3'" in err and "nothing is stored" in err
    assert _models(db) == {}
    # Without --model each folder names its model, and the output says the name came from the folder.
    code, out, err = cli(capsys, "ingest", logs, "--db", db)
    assert code == 0, err
    assert set(_models(db)) == {"gpt-4o", "claude-3"}
    assert out.count("model taken from the folder name") == 2


def test_model_flag_on_a_table_naming_several_models_is_refused(capsys, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("model,item_id,score\nm1,q1,1\nm2,q1,0\n")
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b", "--model", "m1")
    assert code == 2 and "'m1'" in err and "'m2'" in err
    assert _models(db) == {}
    one = tmp_path / "one.csv"  # one model, renamed: allowed
    one.write_text("model,item_id,score\nm1,q1,1\nm1,q2,0\n")
    code, _, err = cli(capsys, "ingest", one, "--db", db, "--benchmark", "b", "--model", "renamed")
    assert code == 0, err
    assert _models(db) == {"renamed": 2}


def test_benchmark_flag_on_a_table_naming_several_benchmarks_is_refused(capsys, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("benchmark,model,item_id,score\nb1,m,q1,1\nb2,m,q1,0\n")
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b1")
    assert code == 2 and "--benchmark" in err and "'b1'" in err and "'b2'" in err
    assert _models(db) == {}


def _lm_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(LM_SAMPLES, folder / LM_SAMPLES.name)
    shutil.copy(LM_RESULTS, folder / LM_RESULTS.name)
    return folder


def test_lm_eval_damaged_results_file_is_refused_never_the_folder_name(capsys, tmp_path):
    run = _lm_run(tmp_path / "some__folder")
    results = run / LM_RESULTS.name
    results.write_text(LM_RESULTS.read_text()[:500])  # damaged: cut short
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", run, "--db", db)
    assert code == 1
    assert LM_RESULTS.name in err and "cannot be read" in err and "model" in err
    assert _models(db) == {}
    shutil.copy(LM_RESULTS, results)  # repaired: stored once, under the run's own model
    code, out, err = cli(capsys, "ingest", run, "--db", db)
    assert code == 0, err
    model = json.loads(LM_RESULTS.read_text())["model_name"]
    assert set(_models(db)) == {model}


def test_lm_eval_log_stored_under_the_folder_name_is_not_stored_again_under_a_second(capsys, tmp_path):
    run = tmp_path / "org__folder-name"
    run.mkdir()
    shutil.copy(LM_SAMPLES, run / LM_SAMPLES.name)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", run, "--db", db)
    assert code == 0, err
    assert "model taken from the folder name" in out  # announced
    assert set(_models(db)) == {"org/folder-name"}
    shutil.copy(LM_RESULTS, run / LM_RESULTS.name)  # the results file turns up: it names another model
    code, out, err = cli(capsys, "ingest", run, "--db", db)
    assert code == 1
    assert "stored already as model 'org/folder-name'" in err and "two models" in err
    assert set(_models(db)) == {"org/folder-name"}


def _eval_with_repeated_member(src: Path, dst: Path, *, same: bool) -> str:
    with zipfile.ZipFile(src) as zin:
        members = [(n, zin.read(n)) for n in zin.namelist()]
    name, data = next((n, d) for n, d in members if n.startswith("samples/"))
    sample = json.loads(data)
    if not same:
        for score in sample["scores"].values():
            score["value"] = "I" if score["value"] == "C" else "C"
    with zipfile.ZipFile(dst, "w") as zout:
        for n, d in members:
            zout.writestr(n, d)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Duplicate name": the point of the test
            zout.writestr(name, json.dumps(sample) if not same else data)
    return name


def test_eval_archive_with_a_sample_twice_and_opposite_scores_is_refused(capsys, tmp_path):
    log = tmp_path / "twice.eval"
    name = _eval_with_repeated_member(EVAL, log, same=False)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db)
    assert code == 1
    assert name in err and "appears twice" in err and "entries" in err
    assert _models(db) == {}
    same = tmp_path / "same.eval"  # an identical copy is read once
    _eval_with_repeated_member(EVAL, same, same=True)
    code, out, err = cli(capsys, "ingest", same, "--db", db)
    assert code == 0, err


def test_jsonl_score_given_as_a_string_is_a_typed_field_error(capsys, tmp_path):
    log = tmp_path / "s.jsonl"
    log.write_text('{"model": "m", "item_id": "q1", "score": 1}\n{"model": "m", "item_id": "q2", "score": "1"}\n')
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")
    assert code == 1
    assert "line 2, field score" in err and "JSON string" in err
    assert _models(db) == {}


def test_control_characters_in_names_are_refused_with_field_and_line(capsys, tmp_path):
    """Finding 13: a name holding NUL was stored and could never be named on the command line."""
    log = tmp_path / "s.jsonl"
    log.write_text('{"model": "m", "item_id": "q1", "score": 1, "variant": ""}\n'
                   '{"model": "m\\u0000x", "item_id": "q2", "score": 0, "variant": ""}\n'
                   '{"model": "m", "item_id": "q3", "score": 0, "variant": "v\\tw"}\n')
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")
    assert code == 1
    assert "line 2, field model: contains a control character" in err
    assert "line 3, field variant: contains a control character" in err
    assert _models(db) == {}
    bench = tmp_path / "t.csv"
    bench.write_text("benchmark,model,item_id,score\nb\x01c,m,q1,1\n")
    code, out, err = cli(capsys, "ingest", bench, "--db", db)
    assert code == 1 and "line 2, field benchmark: contains a control character" in err
    assert _models(db) == {}


def _table(path: Path, n: int = 3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("item_id,score\n" + "".join(f"{path.stem}{i},{i % 2}\n" for i in range(n)))
    return path


def test_model_flag_on_a_folder_of_plain_tables_in_several_sub_folders_is_refused(capsys, tmp_path):
    """Rule 1 for plain tables: a folder per model, tables without a model column, and one --model."""
    root = tmp_path / "results"
    _table(root / "gpt-4o" / "a.csv")
    _table(root / "claude" / "b.csv", n=4)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", root, "--db", db, "--benchmark", "b", "--model", "gpt-4o")
    assert code == 2, (out, err)
    assert "--model" in err and "gpt-4o/" in err and "claude/" in err and "2 folder(s)" in err
    assert "nothing is stored" in err and "its own --model" in err and "name the files" in err
    assert _models(db) == {}
    # Each sub-folder with its own --model: stored, each as its model.
    for name in ("gpt-4o", "claude"):
        code, out, err = cli(capsys, "ingest", root / name, "--db", db, "--benchmark", "b", "--model", name)
        assert code == 0, err
    assert _models(db) == {"gpt-4o": 3, "claude": 4}


def test_model_flag_on_plain_tables_named_explicitly_or_in_one_folder_is_taken(capsys, tmp_path):
    root = tmp_path / "results"
    a, b = _table(root / "x" / "a.csv"), _table(root / "y" / "b.csv", n=4)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", a, b, "--db", db, "--benchmark", "b1", "--model", "m")  # the user's word
    assert code == 0, err
    assert _models(db) == {"m": 7}
    one = tmp_path / "one"  # every table in one sub-folder, and the folder walked
    _table(one / "gpt-4o" / "a.csv")
    (one / "gpt-4o" / "c.jsonl").write_text('{"item_id": "q9", "score": 1}\n')
    code, out, err = cli(capsys, "ingest", one, "--db", db, "--benchmark", "b2", "--model", "gpt-4o")
    assert code == 0, err
    flat = tmp_path / "flat"  # every table in the walked folder itself
    _table(flat / "a.csv")
    _table(flat / "b.csv", n=5)
    code, out, err = cli(capsys, "ingest", flat, "--db", db, "--benchmark", "b3", "--model", "gpt-4o")
    assert code == 0, err
    assert _models(db) == {"m": 7, "gpt-4o": (3 + 1) + (3 + 5)}


def test_model_flag_on_a_folder_mixing_harness_logs_and_plain_tables(capsys, tmp_path):
    """A table beside a harness log naming a model counts as that model; a table in a folder of
    its own counts as one more: two labels and the folder is refused."""
    root = tmp_path / "eval_results"
    _result(root / "gpt-4o", "law")  # MMLU-Pro per-model layout: names gpt-4o by its folder
    _table(root / "gpt-4o" / "extra.csv")
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", root, "--db", db, "--benchmark", "b", "--model", "gpt-4o")
    assert code == 0, err
    _table(root / "claude" / "b.csv")
    code, out, err = cli(capsys, "ingest", root, "--db", tmp_path / "t.duckdb", "--benchmark", "b",
                         "--model", "gpt-4o")
    assert code == 2, (out, err)
    assert "claude/" in err and "'gpt-4o'" in err and "harness logs naming 1 model" in err
    assert _models(tmp_path / "t.duckdb") == {}


def test_model_flag_refusal_names_the_first_folders_and_the_count(capsys, tmp_path):
    root = tmp_path / "results"
    for i in range(9):
        _table(root / f"m{i}" / "a.csv")
    code, out, err = cli(capsys, "ingest", root, "--db", tmp_path / "s.duckdb", "--benchmark", "b", "--model", "m0")
    assert code == 2
    assert "9 folder(s)" in err and "m0/" in err and "m5/" in err and "m6/" not in err and "and 3 more" in err
