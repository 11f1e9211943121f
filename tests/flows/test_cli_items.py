"""``benchcert items`` and ``benchcert audit --items`` on a small store: the text, --json, --out, the
choices file, the audit's tables, summary field and report section, and refusals."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from item_sim import two_pl
from store_support import cli, store_of_correct


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("items")
    x, swapped, *_ = two_pl(np.random.default_rng(38), n_models=24, n_items=400, n_swapped=2)
    x[:6] = 1.0
    models = {f"m{j:02d}": x[:, j].astype(int).tolist() for j in range(x.shape[1])}
    return store_of_correct(root, "b", models, n_subjects=8), root


def test_items_text_json_and_out(capsys, store, tmp_path):
    db, _ = store
    code, out, err = cli(capsys, "items", "--db", db, "--benchmark", "b")
    assert code == 0, err
    assert "inert (every model scored alike): 6 items" in out
    assert "suspected broken keys:" in out and "reliability" in out and "reduced set:" in out
    code, out, _ = cli(capsys, "items", "--db", db, "--benchmark", "b", "--json", "--out", tmp_path / "t")
    doc = json.loads(out)
    assert code == 0 and doc["overview"]["n_inert"] == 6 and doc["overview"]["n_models"] == 24
    reduced = pl.read_csv(tmp_path / "t" / "reduced_items.csv")
    assert reduced.height == doc["reduced"]["n_evaluated"]
    assert pl.read_parquet(tmp_path / "t" / "items.parquet").height == 400


def test_items_reads_the_chosen_options(capsys, store, tmp_path):
    db, _ = store
    path = tmp_path / "choices.csv"
    pl.DataFrame({"who": ["m00", "m01"], "question": ["i10", "i10"], "pred": ["B", "B"],
                  "answer": ["A", "A"]}).write_csv(path)
    code, out, err = cli(capsys, "items", "--db", db, "--benchmark", "b", "--choices", path, "--choice-columns",
                         "model=who,item_id=question,choice=pred,key=answer", "--json")
    assert code == 0, err
    code, out, err = cli(capsys, "items", "--db", db, "--benchmark", "b", "--choices", path)
    assert code == 1 and "no column for" in err and "choices.csv" in err


@pytest.mark.parametrize("argv,message", [
    (["--fdr", "1.5"], "--fdr"),
    (["--tolerance", "0"], "--tolerance"),
    (["--choice-columns", "nope=x", "--choices", "f.csv"], "--choice-columns"),
    (["--choice-columns", "model=x"], "needs --choices"),
])
def test_items_refuses_bad_options(capsys, store, argv, message):
    db, _ = store
    code, _, err = cli(capsys, "items", "--db", db, "--benchmark", "b", *argv)
    assert code == 2 and message in err


def test_items_unknown_benchmark(capsys, store):
    db, _ = store
    code, _, err = cli(capsys, "items", "--db", db, "--benchmark", "nope")
    assert code == 1 and "nope" in err


def test_audit_items_writes_tables_summary_and_section(capsys, store, tmp_path):
    db, _ = store
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", tmp_path / "a",
                         "--in-process", "--items", "--json")
    assert code == 0, err
    summary = json.loads(out)
    run_dir = summary["run_dir"]
    doc = json.loads(open(f"{run_dir}/summary.json").read())
    assert doc["item_analysis"]["n_inert"] == 6
    for name in ("items", "items_resolution", "items_neighbours", "items_overview", "items_reduced"):
        assert pl.read_parquet(f"{run_dir}/tables/{name}.parquet").height >= 1
    assert "Item analysis" in open(f"{run_dir}/report.html").read()
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", tmp_path / "b",
                         "--in-process", "--json")
    doc = json.loads(open(f"{json.loads(out)['run_dir']}/summary.json").read())
    assert code == 0 and doc["item_analysis"] is None


def test_items_finds_near_duplicates_from_a_texts_file(capsys, store, tmp_path):
    db, _ = store
    path = tmp_path / "texts.csv"
    words = [f"word{i}" for i in range(40)]
    texts = {f"i{i}": " ".join(np.random.default_rng(i).choice(words, 25)) for i in range(400)}
    texts["i7"] = texts["i3"].upper() + "!"
    pl.DataFrame({"qid": list(texts), "prompt": list(texts.values())}).write_csv(path)
    code, out, err = cli(capsys, "items", "--db", db, "--benchmark", "b", "--texts", path, "--text-columns",
                         "item_id=qid,text=prompt", "--json", "--out", tmp_path / "o")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["overview"]["n_near_duplicate_pairs"] == 1 and doc["overview"]["n_near_duplicate_items"] == 2
    pairs = pl.read_parquet(tmp_path / "o" / "items_near_duplicates.parquet")
    assert pairs.row(0, named=True)["item_a"] == "i3" and pairs.row(0, named=True)["item_b"] == "i7"
    code, out, _ = cli(capsys, "items", "--db", db, "--benchmark", "b")
    assert "near-duplicates not looked for" in out
    code, _, err = cli(capsys, "items", "--db", db, "--benchmark", "b", "--text-columns", "text=x")
    assert code == 2 and "needs --texts" in err
