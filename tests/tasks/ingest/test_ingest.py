"""Ingestion: formats, mapping, idempotence, and every bad-input case leaving the store unchanged."""

from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import MappingError, parse_mapping
from benchcert.tasks.store.connection import open_store, query_pl

from conftest import SMALL_CSV, SMALL_MAP

from store_support import TABLES, assert_unchanged, snapshot  # noqa: E402  (tests/store_support.py)


@pytest.fixture()
def base_db(tmp_path, small_mapping) -> Path:
    db = tmp_path / "store.duckdb"
    r = ingest_file(db, SMALL_CSV, benchmark="small", mapping=small_mapping)
    assert r.status == "ingested" and r.rows_added == 22, r.message
    return db


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


HEADER = "model,question,topic,area,correct\n"


# --- formats -------------------------------------------------------------------------------

def test_csv_jsonl_parquet_and_gzip_give_the_same_rows(tmp_path, small_mapping):
    src = pl.read_csv(SMALL_CSV, infer_schema=False)
    files = {"a.csv": SMALL_CSV}
    gz = tmp_path / "b.csv.gz"
    gz.write_bytes(gzip.compress(SMALL_CSV.read_bytes()))
    files["b.csv.gz"] = gz
    jl = tmp_path / "c.jsonl"
    jl.write_text("".join(json.dumps({**r, "correct": int(r["correct"])}) + "\n" for r in src.to_dicts()))
    files["c.jsonl"] = jl
    jlgz = tmp_path / "d.jsonl.gz"
    jlgz.write_bytes(gzip.compress(jl.read_bytes()))
    files["d.jsonl.gz"] = jlgz
    pq = tmp_path / "e.parquet"
    src.with_columns(pl.col("correct").cast(pl.Int8)).write_parquet(pq)
    files["e.parquet"] = pq
    pqgz = tmp_path / "f.parquet.gz"
    pqgz.write_bytes(gzip.compress(pq.read_bytes()))
    files["f.parquet.gz"] = pqgz
    frames = []
    for name, path in files.items():
        db = tmp_path / f"{name}.duckdb"
        r = ingest_file(db, path, benchmark="small", mapping=small_mapping)
        assert r.status == "ingested" and r.rows_added == 22, (name, r.message)
        frames.append(snapshot(db)["responses"].drop("source_id", "line"))
    for f in frames[1:]:
        assert_frame_equal(frames[0], f)


def test_mapping_from_toml_equals_flags(tmp_path):
    toml = write(tmp_path, "m.toml", '[map]\nitem_id = "question"\nsubject = "topic"\ndomain = "area"\n'
                                     'score = "correct"\n')
    a = ingest_file(tmp_path / "a.duckdb", SMALL_CSV, benchmark="s", mapping=parse_mapping(config=toml))
    b = ingest_file(tmp_path / "b.duckdb", SMALL_CSV, benchmark="s", mapping=parse_mapping(SMALL_MAP))
    assert a.rows_added == b.rows_added == 22
    assert_frame_equal(snapshot(tmp_path / "a.duckdb")["items"].drop("source_id"),
                       snapshot(tmp_path / "b.duckdb")["items"].drop("source_id"))


@pytest.mark.parametrize("pairs, msg", [
    (["itemid=question"], "unknown canonical field"),
    (["item_id"], "expected FIELD=COLUMN"),
    (["item_id="], "empty column name"),
])
def test_bad_mapping_flags_name_the_problem(pairs, msg):
    with pytest.raises(MappingError, match=msg):
        parse_mapping(pairs)


def test_unknown_column_is_an_error_naming_the_file_and_columns(tmp_path, base_db):
    before = snapshot(base_db)
    r = ingest_file(base_db, SMALL_CSV, benchmark="small", mapping=parse_mapping(["item_id=qid", "score=correct"]))
    assert r.status == "error"
    assert str(SMALL_CSV) in r.message and "'qid'" in r.message and "question" in r.message
    assert_unchanged(before, base_db)


# --- idempotence ---------------------------------------------------------------------------

def test_reingesting_the_same_file_adds_nothing(base_db, small_mapping):
    before = snapshot(base_db)
    r = ingest_file(base_db, SMALL_CSV, benchmark="small", mapping=small_mapping)
    assert r.status == "unchanged" and r.rows_added == 0
    assert_unchanged(before, base_db)


def test_same_rows_in_another_file_add_nothing_but_are_recorded(tmp_path, base_db, small_mapping):
    copy = tmp_path / "copy.csv"
    copy.write_text(SMALL_CSV.read_text() + "\n")  # different bytes, same rows
    r = ingest_file(base_db, copy, benchmark="small", mapping=small_mapping)
    assert r.status == "ingested" and r.rows_added == 0 and r.rows_already_stored == 22
    snap = snapshot(base_db)
    assert snap["responses"].height == 22 and snap["sources"].height == 2


def test_blanks_around_text_and_integer_ids_give_the_same_rows(tmp_path, small_mapping):
    """Values are stripped whether a column needs it or not, and an integer id column codes as
    its decimal text: a padded CSV, a clean CSV and a Parquet of integer ids hold the same rows,
    and re-ingesting one after another adds nothing."""
    src = pl.read_csv(SMALL_CSV, infer_schema=False)
    numbered = src.with_columns(pl.col("question").str.strip_prefix("q").cast(pl.Int64).alias("question"))
    clean = tmp_path / "clean.csv"
    numbered.write_csv(clean)
    padded = tmp_path / "padded.csv"
    # Some values padded, some not: each column then holds both forms of a text.
    numbered.with_columns(pl.when(pl.int_range(pl.len()) % 2 == 0).then("  " + pl.col(c) + "\t")
                          .otherwise(pl.col(c)).alias(c) for c in ("model", "topic", "area")
                          ).with_columns((" " + pl.col("question").cast(pl.String)).alias("question")).write_csv(padded)
    ints = tmp_path / "ints.parquet"
    numbered.with_columns(pl.col("correct").cast(pl.Int8)).write_parquet(ints)
    frames = []
    for path in (clean, padded, ints):
        db = tmp_path / f"{path.name}.duckdb"
        r = ingest_file(db, path, benchmark="small", mapping=small_mapping)
        assert r.status == "ingested" and r.rows_added == 22, (path.name, r.message)
        snap = snapshot(db)
        frames.append((snap["responses"].drop("source_id", "line"), snap["items"].drop("source_id", "line")))
        assert snap["models"].height == src["model"].n_unique()
    for responses, items in frames[1:]:
        assert_frame_equal(frames[0][0], responses)
        assert_frame_equal(frames[0][1].drop("item_key"), items.drop("item_key"))
    assert sorted(frames[0][1]["item_id"].unique()) == sorted(numbered["question"].cast(pl.String).unique())
    db = tmp_path / "all.duckdb"
    added = [ingest_file(db, p, benchmark="small", mapping=small_mapping).rows_added for p in (padded, ints, clean)]
    assert added == [22, 0, 0]


def test_identical_duplicate_rows_in_a_file_count_once(tmp_path, small_mapping):
    p = write(tmp_path, "d.csv", HEADER + "m1,q1,algebra,stem,1\nm1,q1,algebra,stem,1\nm1,q2,algebra,stem,0\n")
    r = ingest_file(tmp_path / "s.duckdb", p, benchmark="b", mapping=small_mapping)
    assert r.status == "ingested" and r.rows_added == 2 and r.duplicate_rows_in_file == 1


# --- bad rows: all-or-nothing by default -----------------------------------------------------

BAD_CASES = {
    # name: (file text, expected (line, field substring, reason substring))
    "missing model": (HEADER + "m9,q1,algebra,stem,1\n,q2,algebra,stem,1\n", (3, "model", "missing value")),
    "missing score": (HEADER + "m9,q1,algebra,stem,\n", (2, "correct (score)", "missing value")),
    "mistyped score": (HEADER + "m9,q1,algebra,stem,1\nm9,q2,algebra,stem,yes\n",
                       (3, "correct (score)", "not a number: 'yes'")),
    "score above 1": (HEADER + "m9,q1,algebra,stem,1.5\n", (2, "correct (score)", "outside [0, 1]")),
    "negative score": (HEADER + "m9,q1,algebra,stem,-0.1\n", (2, "correct (score)", "outside [0, 1]")),
    "NaN score": (HEADER + "m9,q1,algebra,stem,NaN\n", (2, "correct (score)", "NaN")),
    "too few fields": (HEADER + "m9,q1,algebra,stem,1\nm9,q2,algebra\n", (3, "<row>", "expected 5 fields, found 3")),
    "too many fields": (HEADER + "m9,q1,algebra,stem,1,extra\n", (2, "<row>", "expected 5 fields, found 6")),
    "missing subject": (HEADER + "m9,q1,,stem,1\n", (2, "topic (subject)", "missing value")),
    "conflicting duplicate in file": (HEADER + "m9,q1,algebra,stem,1\nm9,q1,algebra,stem,0\n",
                                      (2, "correct (score)", "different score")),
    "item with two subjects in file": (HEADER + "m9,q1,algebra,stem,1\nm8,q1,law,humanities,1\n",
                                       (2, "topic (subject)/area (domain)", "2 different subject/domain")),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_rows_reject_the_whole_file_and_change_nothing(case, tmp_path, base_db, small_mapping):
    text, (line, field, reason) = BAD_CASES[case]
    p = write(tmp_path, "bad.csv", text)
    before = snapshot(base_db)
    r = ingest_file(base_db, p, benchmark="small", mapping=small_mapping)
    assert r.status == "rejected", r.message
    assert str(p) in r.message and "not ingested" in r.message
    hit = [x for x in r.rejects if x["line"] == line and field in x["field"] and reason in x["reason"]]
    assert hit, r.rejects
    assert hit[0]["raw"] is not None  # the offending text is kept for the user
    assert_unchanged(before, base_db)


def test_jsonl_unparsable_and_non_object_lines(tmp_path, base_db, small_mapping):
    p = write(tmp_path, "bad.jsonl",
              '{"model": "m9", "question": "q1", "topic": "algebra", "area": "stem", "correct": 1}\n'
              '{"model": "m9", "question": "q2", \n'
              '[1, 2]\n'
              '{"model": "m9", "question": "q3", "topic": "algebra", "area": "stem", "correct": [1]}\n')
    before = snapshot(base_db)
    r = ingest_file(base_db, p, benchmark="small", mapping=small_mapping)
    assert r.status == "rejected"
    got = {(x["line"], x["field"]) for x in r.rejects}
    assert got == {(2, "<row>"), (3, "<row>"), (4, "correct (score)")}
    assert r.rows_rejected == 3 and r.rows_read == 4
    assert_unchanged(before, base_db)


def test_line_numbers_survive_embedded_newlines_and_skipped_lines(tmp_path, small_mapping):
    text = (HEADER + 'm9,q1,"alg\nebra",stem,1\n'   # record on lines 2-3
            + "m9,q2\n"                             # line 4: malformed
            + "m9,q3,algebra,stem,2\n")             # line 5: bad score
    p = write(tmp_path, "nl.csv", text)
    r = ingest_file(tmp_path / "s.duckdb", p, benchmark="b", mapping=small_mapping)
    assert {(x["line"], x["field"]) for x in r.rejects} == {(4, "<row>"), (5, "correct (score)")}
    assert [x["raw"] for x in r.rejects if x["line"] == 5] == ["m9,q3,algebra,stem,2"]


def test_bad_rows_are_found_across_batches(tmp_path, small_mapping):
    rows = [f"m{i % 3},q{i},s{i % 4},d{i % 2},{i % 2}" for i in range(2500)]
    rows[1700] = "m1,q1700,s0,d0,7"
    p = write(tmp_path, "big.csv", HEADER + "\n".join(rows) + "\n")
    r = ingest_file(tmp_path / "s.duckdb", p, benchmark="b", mapping=small_mapping, batch_rows=500)
    assert r.status == "rejected" and [x["line"] for x in r.rejects] == [1702]


def test_allow_rejects_ingests_good_rows_and_quarantines_bad_ones(tmp_path, base_db, small_mapping):
    p = write(tmp_path, "mixed.csv", HEADER + "m9,q1,algebra,stem,1\nm9,q2,algebra,stem,oops\nm9,q3,algebra\n")
    r = ingest_file(base_db, p, benchmark="small", mapping=small_mapping, allow_rejects=True)
    assert r.status == "ingested" and r.rows_added == 1 and r.rows_rejected == 2
    snap = snapshot(base_db)
    assert snap["responses"].height == 23
    rej = snap["rejects"].sort("line")
    assert rej["line"].to_list() == [3, 4]
    assert rej["path"].to_list() == [str(p)] * 2
    assert rej["raw"].to_list() == ["m9,q2,algebra,stem,oops", "m9,q3,algebra"]
    assert "not a number" in rej["reason"][0] and "expected 5 fields" in rej["reason"][1]


# --- contradictions with the store: an error naming both sources, whatever --allow-rejects says ---

@pytest.mark.parametrize("allow", [False, True])
def test_conflicting_score_names_both_sources_and_changes_nothing(tmp_path, base_db, small_mapping, allow):
    p = write(tmp_path, "conflict.csv", HEADER + "m9,q9,algebra,stem,1\nm1,q2,algebra,stem,1\n")
    before = snapshot(base_db)
    r = ingest_file(base_db, p, benchmark="small", mapping=small_mapping, allow_rejects=allow)
    assert r.status == "conflict"
    assert f"{p}:3" in r.message and f"{SMALL_CSV}:3" in r.message and "'q2'" in r.message
    assert_unchanged(before, base_db)


@pytest.mark.parametrize("allow", [False, True])
def test_item_with_a_different_subject_names_both_sources_and_changes_nothing(tmp_path, base_db, small_mapping,
                                                                              allow):
    p = write(tmp_path, "subj.csv", HEADER + "m9,q1,geometry,stem,1\n")
    before = snapshot(base_db)
    r = ingest_file(base_db, p, benchmark="small", mapping=small_mapping, allow_rejects=allow)
    assert r.status == "conflict"
    assert "'geometry'" in r.message and "'algebra'" in r.message
    assert f"{p}:2" in r.message and f"{SMALL_CSV}:2" in r.message
    assert_unchanged(before, base_db)


def test_missing_or_empty_file_is_an_error(tmp_path, base_db, small_mapping):
    before = snapshot(base_db)
    r = ingest_file(base_db, tmp_path / "nope.csv", benchmark="small", mapping=small_mapping)
    assert r.status == "error" and "no such file" in r.message
    empty = write(tmp_path, "empty.csv", "")
    r = ingest_file(base_db, empty, benchmark="small", mapping=small_mapping)
    assert r.status == "error" and "empty" in r.message
    assert_unchanged(before, base_db)


# --- concurrency -----------------------------------------------------------------------------

def _ingest_in_child(db: str, path: str, q) -> None:
    from benchcert.tasks.ingest.mapping import parse_mapping as pm

    r = ingest_file(db, path, benchmark="b", mapping=pm(SMALL_MAP), lock_timeout=120)
    q.put((r.status, r.rows_added))


def test_concurrent_writers_wait_for_each_other_and_lose_nothing(tmp_path):
    files = []
    for k in range(4):
        rows = [f"w{k},q{i},s{i % 5},d{i % 2},{(i * 7 + k) % 2}" for i in range(3000)]
        files.append(write(tmp_path, f"w{k}.csv", HEADER + "\n".join(rows) + "\n"))
    files.append(files[0])  # the same file twice at once: exactly one copy is stored
    db = tmp_path / "shared.duckdb"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_ingest_in_child, args=(str(db), str(f), q)) for f in files]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    results = [q.get(timeout=5) for _ in procs]
    assert all(s in ("ingested", "unchanged") for s, _ in results), results
    assert sum(n for _, n in results) == 4 * 3000
    snap = snapshot(db)
    assert snap["responses"].height == 4 * 3000
    assert snap["responses"].select("model", "item_id").n_unique() == 4 * 3000
    assert snap["items"].height == 3000


def test_lock_timeout_gives_a_clear_message(tmp_path, base_db, small_mapping):
    from filelock import FileLock

    from benchcert.tasks.store.connection import lock_path

    with FileLock(str(lock_path(base_db))):
        r = ingest_file(base_db, SMALL_CSV, benchmark="other", mapping=small_mapping, lock_timeout=0.2)
    assert r.status == "locked" and "another benchcert process" in r.message and str(base_db) in r.message


def test_store_is_a_real_duckdb_file_on_disk(base_db):
    import duckdb

    con = duckdb.connect(str(base_db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM responses").fetchall()[0][0] == 22
    finally:
        con.close()
    shutil.copy(base_db, base_db.with_suffix(".copy"))
