"""Issue #26 finding 5: a .json file of records (a top-level list, or an object with one
list-of-records field, or the field --records names) is read like JSONL, detected from the content."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchcert.tasks.store.connection import open_store

from store_support import cli


def _rows(db) -> list[tuple]:
    with open_store(db, write=False) as con:
        return con.execute("SELECT model, item_id, score FROM responses ORDER BY model, item_id").fetchall()


RECORDS = [{"model": "m", "question_id": "q1", "passed": True}, {"model": "m", "question_id": "q2", "passed": False}]


def test_object_with_one_list_of_records_is_read_like_jsonl(capsys, tmp_path):
    """The public code benchmark's results: {"meta": ..., "performances": [{...}, ...]}."""
    f = tmp_path / "results.json"
    f.write_text(json.dumps({"meta": {"date": "2024-06-01"}, "performances": RECORDS}, indent=2))
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", f, "--db", db, "--benchmark", "code",
                         "--map", "item_id=question_id", "--map", "score=passed")
    assert code == 0, err
    assert _rows(db) == [("m", "q1", 1.0), ("m", "q2", 0.0)]


def test_top_level_list_is_detected_from_the_content_whatever_the_name(capsys, tmp_path):
    f = tmp_path / "results.txt"
    f.write_text(json.dumps([{"model": "m", "item_id": "a", "score": 1}, {"model": "m", "item_id": "b", "score": 0}]))
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", f, "--db", db, "--benchmark", "b")
    assert code == 0, err
    assert _rows(db) == [("m", "a", 1.0), ("m", "b", 0.0)]


def test_a_bad_record_is_a_reject_with_its_position(capsys, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps([{"model": "m", "item_id": "a", "score": 1}, {"model": "m", "item_id": "b", "score": "1"},
                             7]))
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", f, "--db", db, "--benchmark", "b")
    assert code == 1
    assert "line 2, field score: a JSON string" in err and "line 3, field <row>: expected a JSON object" in err


def test_several_lists_need_records_and_the_message_names_what_it_saw(capsys, tmp_path):
    f = tmp_path / "two.json"
    f.write_text(json.dumps({"train": RECORDS, "test": RECORDS[:1]}))
    db = tmp_path / "s.duckdb"
    common = ("--db", db, "--benchmark", "code", "--map", "item_id=question_id", "--map", "score=passed")
    code, out, err = cli(capsys, "ingest", f, *common)
    assert code == 1 and "several lists of records (train, test)" in err and "--records FIELD" in err
    code, out, err = cli(capsys, "ingest", f, *common, "--records", "test")
    assert code == 0, err
    assert _rows(db) == [("m", "q1", 1.0)]
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"a": 1, "b": [1, 2]}))
    code, out, err = cli(capsys, "ingest", none, *common)
    assert code == 1 and "a JSON object with fields a, b, none of them a list of records" in err
    odd = tmp_path / "odd.dat"
    odd.write_text("hello\n")
    code, out, err = cli(capsys, "ingest", odd, *common)
    assert code == 1 and "cannot tell the format" in err and "'hello" in err


def test_a_walked_folder_reads_its_json_records(capsys, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "r.json").write_text(json.dumps({"performances": RECORDS}))
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", tmp_path / "logs", "--db", db, "--benchmark", "code",
                         "--map", "item_id=question_id", "--map", "score=passed")
    assert code == 0, err
    assert len(_rows(db)) == 2


_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-1, 2, allow_nan=False),
                   st.text(max_size=4), st.lists(st.integers(), max_size=2))
_RECORD = st.one_of(st.fixed_dictionaries({"model": _VALUE, "item_id": _VALUE, "score": _VALUE}), _VALUE)


@settings(max_examples=int(os.environ.get("BENCHCERT_HYPOTHESIS_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_RECORD, max_size=6), wrap=st.sampled_from([None, "performances"]))
def test_random_record_arrays_are_stored_exactly_or_refused(tmp_path_factory, records, wrap):
    """Random record-array JSON: ingest never raises; when it stores, it stores exactly the good
    records (a string model / item id, a numeric or boolean score in [0, 1])."""
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    work = tmp_path_factory.mktemp("rec")
    f = work / "r.json"
    f.write_text(json.dumps(records if wrap is None else {"meta": 1, wrap: records}))
    r = ingest_file(work / "s.duckdb", f, benchmark="b", mapping=parse_mapping())
    assert r.status in ("ingested", "rejected", "error", "unchanged"), r.message
    if r.status != "ingested":
        return

    def good(rec) -> bool:
        ok_text = all(isinstance(rec.get(k), (str, int, float)) and str(rec[k]).strip() for k in ("model", "item_id"))
        s = rec.get("score")
        return ok_text and not isinstance(s, str) and isinstance(s, (int, float)) and 0 <= float(s) <= 1
    assert all(isinstance(rec, dict) and good(rec) for rec in records)
    assert r.rows_read == len(records)
