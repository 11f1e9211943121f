"""The human_score field: validated like score, stored per response, read beside the judge's score."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from benchcert.tasks.ingest.adapters.generic import LINE
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.validate import HUMAN_ONLY, validate_batch
from benchcert.tasks.schemas import ResponseRow
from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import load_matrices

from judge_support import MAP, write_preferences

COLS = {"benchmark": None, "model": "m", "item_id": "i", "subject": None, "domain": None, "score": "s",
        "variant": None, "replicate": None, "human_score": "h"}


def _frame(scores, humans):
    n = len(scores)
    return pl.DataFrame({"m": ["a"] * n, "i": [f"q{k}" for k in range(n)], "s": scores, "h": humans,
                         LINE: list(range(1, n + 1))}, schema={"m": pl.String, "i": pl.String, "s": pl.String,
                                                               "h": pl.String, LINE: pl.Int64})


def test_human_score_is_optional_and_validated_like_score():
    good, bad = validate_batch(_frame(["1", "0", "0.5", "1", "1", "1", ""],
                                      ["0", "", None, "1.5", "abc", "NaN", "1"]), COLS, benchmark="b")
    assert good["line"].to_list() == [1, 2, 3]
    assert good["human_score"].to_list() == [0.0, None, None]
    got = {(r["line"], r["field"], r["reason"]) for r in bad.to_dicts()}
    assert got == {(4, "h", "score 1.5 outside [0, 1]"), (5, "h", "not a number: 'abc'"),
                   (6, "h", "not a number: NaN"), (7, "s", HUMAN_ONLY)}


def test_validator_agrees_with_pydantic_on_human_scores():
    values = ["0", "1", "0.25", "", None, "-0.1", "2", "x", "NaN", "true"]
    rng = np.random.default_rng(28)
    n = 600
    scores = [values[i] for i in rng.integers(0, len(values), n)]
    humans = [values[i] for i in rng.integers(0, len(values), n)]

    def num(s):
        if s is None or not s.strip():
            return None
        return 1.0 if s.strip().lower() == "true" else float(s)

    def ok(s, h):
        try:
            score = num(s)
            if score is None:
                return False
            ResponseRow(benchmark="b", model="a", item_id="q", score=score, human_score=num(h))
        except (ValidationError, ValueError):
            return False
        return True

    good, _ = validate_batch(_frame(scores, humans), COLS, benchmark="b")
    expected = [ok(s, h) for s, h in zip(scores, humans)]
    assert sorted(good["line"].to_list()) == [i + 1 for i, e in enumerate(expected) if e]
    assert 0.1 < np.mean(expected) < 0.9


def test_a_log_without_the_field_reads_null_human_scores():
    frame = _frame(["1", "0"], ["0", "1"]).drop("h")
    good, bad = validate_batch(frame, {**COLS, "human_score": "human_score"}, benchmark="b")  # a harness log's frame
    assert bad.height == 0 and good["human_score"].null_count() == 2


def test_ingest_stores_human_scores_and_later_labels_fill_them(tmp_path):
    db = tmp_path / "s.duckdb"
    truth = write_preferences(tmp_path / "prefs.csv", n_items=60, n_labelled=40)
    judge_only = tmp_path / "judge.csv"
    pl.read_csv(tmp_path / "prefs.csv").with_columns(pl.lit(None, dtype=pl.String).alias("human_preference")
                                                     ).write_csv(judge_only)
    mapping = parse_mapping(MAP)
    assert ingest_file(db, judge_only, benchmark="p", mapping=mapping).status == "ingested"
    with open_store(db, write=False) as con:
        assert load_matrices(con, "p").human is None  # no human score stored: nothing read
    # The human labels arrive later, with the same judge scores: the stored responses gain them.
    r = ingest_file(db, tmp_path / "prefs.csv", benchmark="p", mapping=mapping)
    assert r.status == "ingested" and r.rows_added == 0
    with open_store(db, write=False) as con:
        m = load_matrices(con, "p")
        n_stored = con.execute("SELECT count(human_score) FROM responses").fetchall()[0][0]
    assert n_stored == 3 * 40
    for j, name in enumerate(m.models):
        human, judge, lab = truth[name]
        order = np.argsort([f"q{i:04d}" for i in range(60)])
        np.testing.assert_array_equal(m.scores[:, j], judge[order])
        np.testing.assert_array_equal(np.isnan(m.human[:, j]), ~lab[order])
        np.testing.assert_array_equal(m.human[lab[order], j], human[order][lab[order]])


def test_a_bad_human_score_is_rejected_with_file_line_and_field(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("model,instruction,preference,human_preference\na,q1,2,2\na,q2,1,7\n")
    r = ingest_file(tmp_path / "s.duckdb", f, benchmark="p", mapping=parse_mapping(MAP))
    assert r.status == "rejected" and "file not ingested" in r.message
    assert [(x["line"], x["field"], x["reason"]) for x in r.rejects] == [
        (3, "human_preference - 1 (human_score)", "score 6.0 outside [0, 1]")]


def test_a_version_2_store_gains_the_column_and_keeps_working(tmp_path):
    db = tmp_path / "s.duckdb"
    write_preferences(tmp_path / "prefs.csv", n_items=20, n_labelled=0)
    assert ingest_file(db, tmp_path / "prefs.csv", benchmark="p", mapping=parse_mapping(MAP[:2])).status == "ingested"
    with open_store(db, write=True) as con:  # make it what benchcert wrote before the column existed
        con.execute(schema.RESPONSES_VIEW.replace(", r.human_score,\n           r.parsed", ""))
        con.execute("ALTER TABLE response_codes DROP COLUMN parsed")
        con.execute("ALTER TABLE response_codes DROP COLUMN human_score")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'store_version'")
    with open_store(db, write=False) as con:  # version 2 -> 3 -> 4 (the parse flag, issue #39)
        assert schema.stored_version(con) == schema.STORE_VERSION == "4"
        assert con.execute("SELECT count(*), count(human_score) FROM responses").fetchall()[0] == (60, 0)
        assert load_matrices(con, "p").human is None


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_jsonl_and_parquet_carry_human_scores(tmp_path, fmt):
    frame = pl.DataFrame({"model": ["a"] * 4, "item_id": ["q1", "q2", "q3", "q4"], "score": [1.0, 0.0, 1.0, 0.5],
                          "human_score": [1.0, None, 0.0, None]})
    path = tmp_path / f"x.{fmt}"
    frame.write_ndjson(path) if fmt == "jsonl" else frame.write_parquet(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark="b", mapping=parse_mapping([])).status == "ingested"
    with open_store(db, write=False) as con:
        rows = con.execute("SELECT item_id, score, human_score FROM responses ORDER BY item_id").fetchall()
    assert rows == [("q1", 1.0, 1.0), ("q2", 0.0, None), ("q3", 1.0, 0.0), ("q4", 0.5, None)]
