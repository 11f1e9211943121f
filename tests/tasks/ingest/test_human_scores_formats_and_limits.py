"""Issue #39 probe findings about ingest: a human label never silently dropped, typed human scores,
JSONL content in a file named .json, the limit variables' range, a JSON file of records read as a
stream.

Most tests go through the command line, as the probes did, and check what is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchcert.tasks.store.connection import open_store

from store_support import cli


def _human(db) -> dict[str, float | None]:
    with open_store(db, write=False) as con:
        return dict(con.execute("SELECT item_id, human_score FROM responses ORDER BY item_id").fetchall())


def _jsonl(path: Path, *rows: tuple) -> Path:
    path.write_text("".join(f'{{"model": "m", "item_id": "{i}", "score": {s}, "human_score": {h}}}\n'
                            for i, s, h in rows))
    return path


def test_a_contradicting_human_score_is_refused_naming_both_files_and_lines(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    first = _jsonl(tmp_path / "first.jsonl", ("q1", 1, 1), ("q2", 0, 0))
    code, _, err = cli(capsys, "ingest", first, "--db", db, "--benchmark", "b")
    assert code == 0, err
    second = _jsonl(tmp_path / "second.jsonl", ("q2", 0, 0), ("q1", 1, 0))
    code, out, err = cli(capsys, "ingest", second, "--db", db, "--benchmark", "b")
    assert code == 1, (out, err)
    assert "human" in err and f"{second}:2" in err and f"{first}:1" in err and "nothing ingested" in err
    assert _human(db) == {"q1": 1.0, "q2": 0.0}
    # Among several files (the many-files path), the same rule.
    other = _jsonl(tmp_path / "other.jsonl", ("q3", 1, 1))
    code, out, err = cli(capsys, "ingest", other, second, "--db", db, "--benchmark", "b")
    assert code == 1 and f"{second}:2" in err, (out, err)
    assert _human(db) == {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    # A stored response without a human score still gains one; the same human score is no conflict.
    judge_only = tmp_path / "judge.jsonl"
    judge_only.write_text('{"model": "m", "item_id": "q4", "score": 1}\n')
    assert cli(capsys, "ingest", judge_only, "--db", db, "--benchmark", "b")[0] == 0
    labels = _jsonl(tmp_path / "labels.jsonl", ("q4", 1, 0), ("q1", 1, 1))
    code, _, err = cli(capsys, "ingest", labels, "--db", db, "--benchmark", "b")
    assert code == 0, err
    assert _human(db) == {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 0.0}


def test_a_key_given_twice_in_one_file_with_two_human_scores_is_refused(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    log = _jsonl(tmp_path / "twice.jsonl", ("q1", 1, 1), ("q2", 0, 0), ("q1", 1, 0))
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")
    assert code == 1, (out, err)
    assert "line 3, field human_score" in err and "different human score" in err
    assert not db.exists() or not _human(db)


def test_jsonl_human_score_given_as_a_string_is_a_typed_field_error(capsys, tmp_path):
    log = tmp_path / "h.jsonl"
    log.write_text('{"model": "m", "item_id": "q1", "score": 1, "human_score": 1}\n'
                   '{"model": "m", "item_id": "q2", "score": 1, "human_score": "1"}\n')
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")
    assert code == 1, (out, err)
    assert str(log) in err and "line 2, field human_score" in err and "JSON string" in err
    assert not db.exists() or not _human(db)


def test_jsonl_content_in_a_file_named_json_is_read_as_jsonl(capsys, tmp_path):
    log = tmp_path / "lines.json"
    log.write_text('{"model": "m", "item_id": "q1", "score": 1}\n{"model": "m", "item_id": "q2", "score": 0}\n')
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b", "--json")
    assert code == 0, (out, err)
    assert '"format": "jsonl"' in out
    with open_store(db, write=False) as con:
        assert con.execute("SELECT item_id, score, line FROM responses ORDER BY line").fetchall() == [
            ("q1", 1.0, 1), ("q2", 0.0, 2)]
    # One JSON document stays one document, on one line or several.
    for name, text in (("one_line.json", '{"meta": 1, "rows": [{"model": "m2", "item_id": "q1", "score": 1}]}\n'),
                       ("pretty.json", '{\n "rows": [\n  {"model": "m3", "item_id": "q1", "score": 1}\n ]\n}\n')):
        (tmp_path / name).write_text(text)
        code, out, err = cli(capsys, "ingest", tmp_path / name, "--db", db, "--benchmark", "b", "--json")
        assert code == 0 and '"format": "json"' in out, (name, out, err)
    # A bad JSON line in a .json file is a reject with its line, as in a .jsonl file.
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "m4", "item_id": "q1", "score": 1}\n{"model": "m4", "item_id": \n')
    code, out, err = cli(capsys, "ingest", bad, "--db", db, "--benchmark", "b")
    assert code == 1 and "line 2" in err, (out, err)


def test_a_limit_variable_past_its_range_is_a_usage_error_naming_it(capsys, tmp_path, monkeypatch):
    table = tmp_path / "t.csv"
    table.write_text("model,item_id,score\nm,q1,1\n")
    db = tmp_path / "s.duckdb"
    for name in ("BENCHCERT_MAX_LINE_BYTES", "BENCHCERT_MAX_DECOMPRESSED_BYTES", "BENCHCERT_MAX_GZIP_MEMBERS"):
        monkeypatch.setenv(name, "1" * 30)
        code, out, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b")
        assert code == 2, (name, out, err)
        assert name in err and "from 1 to" in err and "OverflowError" not in err
        monkeypatch.delenv(name)
    assert not db.exists()
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", str((1 << 30) + 1))
    assert cli(capsys, "ingest", table, "--db", db, "--benchmark", "b")[0] == 2
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", str(1 << 30))  # the largest: the CSV reader takes it
    code, out, err = cli(capsys, "ingest", table, "--db", db, "--benchmark", "b")
    assert code == 0, (out, err)


def test_a_json_file_of_records_is_read_as_a_stream_not_whole(tmp_path, monkeypatch):
    """Finding 4: a JSON list of records was parsed whole (about eight times the file in memory);
    it is read a record at a time, so memory holds a batch of rows and a chunk of text."""
    import json
    import tracemalloc

    from benchcert.tasks.ingest.adapters import generic, json_records

    monkeypatch.setattr(json_records, "_CHUNK", 1 << 16, raising=False)
    for wrap in (False, True):
        log = tmp_path / f"big{int(wrap)}.json"
        rows = [{"model": f"m{i % 3}", "item_id": f"q{i}", "score": i % 2, "note": "x" * 60} for i in range(40_000)]
        log.write_text(json.dumps({"meta": {"n": len(rows)}, "rows": rows} if wrap else rows, indent=1))
        size = log.stat().st_size
        del rows
        fmt = generic.detect_format(log)
        tracemalloc.start()
        try:
            cols = generic.file_columns(log, fmt)
            n = 0
            for batch in generic.read_batches(log, fmt, cols, 1000):
                n += batch.frame.height
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert n == 40_000
        assert peak < size / 2, (wrap, peak, size)
    # A document that goes wrong after its first records is still refused whole, naming the problem.
    bad = tmp_path / "bad.json"
    bad.write_text('[{"model": "m", "item_id": "q1", "score": 1},\n {"model": "m", "item_id": "q2", "score": 0}\n] x\n')
    with pytest.raises(generic.AdapterError, match="not valid JSON"):
        list(generic.read_batches(bad, "json", ["model", "item_id", "score"], 1))


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_streamed_json_records_equal_the_parsed_document_at_any_chunk_boundary(tmp_path, monkeypatch, chunk):
    import json

    from benchcert.tasks.ingest.adapters import json_records

    monkeypatch.setattr(json_records, "_CHUNK", chunk)
    rows = [{"model": "m\u00e9", "item_id": "q1", "score": 1.5e-3, "x": [1, {"y": 'a]b", ,'}]}, 5, "s", None,
            1.5e300, -0.25, 12, True, {}, {"model": "m", "item_id": "q2", "score": 123456789012}]
    for i, doc in enumerate((rows, {"a": [1, 2], "meta": {"k": [{"z": 1}]}, "rows": rows, "tail": 12.345})):
        for j, text in enumerate((json.dumps(doc), json.dumps(doc, indent=2),
                                  json.dumps(doc, separators=(" ,\n ", " : ")))):
            log = tmp_path / f"d{i}{j}.json"
            log.write_text(text)
            assert list(json_records.records(log, "json")) == rows, text
    log = tmp_path / "bad.json"
    log.write_text('[{"a": 1}, 1.5e]')
    with pytest.raises(ValueError, match="not valid JSON"):
        list(json_records.records(log, "json"))
