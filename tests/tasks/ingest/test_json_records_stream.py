"""Issue #39 (finding 4, second part): a JSON records file is read with bounded memory whatever it holds.

The reader refuses a syntax error where it finds it (a file of NUL bytes at its first byte, not
after reading it whole), a value longer than the line limit after about that much of it (one
endless string, in ASCII or in 4-byte characters), and reads records in batches bounded by their
text as well as by their rows.  The peak memory of each case at full size (2 GiB hostile files, a
200 MB records file) is measured by benchmarks/json_memory.py, not here.
"""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from benchcert.tasks.ingest.adapters import base, generic, json_records

from store_support import cli


class _CountingReads:
    """Counts the characters a cursor reads from its text stream."""

    def __init__(self, monkeypatch):
        self.chars = 0
        self.largest_text_bytes = 0  # the largest text the cursor held joined, in memory
        original = json_records._Cursor._more
        counter = self

        def _more(cursor, *args):
            before = len(cursor.buf) - cursor.pos
            more = original(cursor, *args)
            counter.chars += (len(cursor.buf) - before) if more else 0
            counter.largest_text_bytes = max(counter.largest_text_bytes, sys.getsizeof(cursor.buf))
            return more

        monkeypatch.setattr(json_records._Cursor, "_more", _more)


def test_nul_bytes_are_refused_at_the_first_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(json_records, "_CHUNK", 1 << 10)
    reads = _CountingReads(monkeypatch)
    log = tmp_path / "nul.json"
    log.write_bytes(b"\0" * (1 << 20))
    with pytest.raises(generic.AdapterError, match="not valid JSON .*Expecting value at column 1"):
        generic.file_columns(log, "json")
    assert reads.chars <= 1 << 10  # one chunk of the 1 MiB, not the whole file (it was read whole before)


def test_a_syntax_error_mid_document_is_refused_where_it_is_found(tmp_path, monkeypatch):
    """A record that breaks the grammar is the document's error at once, whatever follows it (before,
    the reader doubled its buffer until the end of the file before it gave up)."""
    monkeypatch.setattr(json_records, "_CHUNK", 1 << 10)
    reads = _CountingReads(monkeypatch)
    log = tmp_path / "broken.json"
    rows = ",".join(json.dumps({"model": "m", "item_id": f"q{i}", "score": 1}) for i in range(20))
    log.write_text("[" + rows + ', {"model": "m", "item_id": x}' + " " * (1 << 20) + "]")
    with pytest.raises(generic.AdapterError, match="not valid JSON"):
        list(generic.read_batches(log, "json", ["model", "item_id", "score"], 100))
    assert reads.chars <= 1 << 12


@pytest.mark.parametrize("char", ["x", "\u00e9", "\U0001F600"])
def test_one_value_past_the_line_limit_is_refused_naming_the_limit(tmp_path, monkeypatch, capsys, char):
    monkeypatch.setattr(json_records, "_CHUNK", 1 << 10)
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", str(1 << 16))
    reads = _CountingReads(monkeypatch)
    log = tmp_path / "huge.json"
    log.write_text('[{"model": "m", "item_id": "q1", "score": 1, "note": "' + char * (1 << 20) + '"}]',
                   encoding="utf-8")
    with pytest.raises(generic.AdapterError, match="longer than 65,536 bytes .*BENCHCERT_MAX_LINE_BYTES"):
        generic.file_columns(log, "json")
    # About the limit in memory: fewer characters the wider each one is.
    assert reads.chars <= 2 * (1 << 16), reads.chars
    # Refused before the chunks past the limit are joined into one text: the value is held once,
    # not twice (a 2 GiB endless string peaked at 260 MB before; benchmarks/json_memory.py).
    assert reads.largest_text_bytes <= 1 << 16, reads.largest_text_bytes
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", log, "--db", db, "--benchmark", "b")
    assert code == 1 and "BENCHCERT_MAX_LINE_BYTES" in err and str(log) in err, (out, err)


def test_a_long_record_within_the_limit_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(json_records, "_CHUNK", 1 << 8)
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", str(1 << 16))
    note = "\u00e9" * 20_000  # 20,000 characters, 40 KB in memory: within the 64 KiB limit
    log = tmp_path / "long.json"
    rows = [{"model": "m", "item_id": f"q{i}", "score": i % 2, "note": note} for i in range(3)]
    log.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    assert list(json_records.records(log, "json")) == rows


def test_batches_are_bounded_by_their_text_as_well_as_their_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(base, "BATCH_TEXT_CHARS", 2_000)
    rows = [{"model": "m", "item_id": f"q{i}", "score": i % 2, "note": "y" * 80} for i in range(100)]
    heights = {}
    for fmt in ("json", "jsonl"):
        log = tmp_path / f"r.{fmt}"
        log.write_text(json.dumps(rows) if fmt == "json" else "".join(json.dumps(r) + "\n" for r in rows))
        if fmt == "jsonl":
            monkeypatch.setattr(generic, "BATCH_TEXT_CHARS", 2_000)
        batches = list(generic.read_batches(log, fmt, ["model", "item_id", "score"], 1_000))
        heights[fmt] = [b.frame.height for b in batches]
        assert sum(heights[fmt]) == 100 and max(heights[fmt]) <= 20, (fmt, heights[fmt])
        lines = [n for b in batches for n in b.frame[base.LINE].to_list()]
        assert lines == (list(range(1, 101))), fmt


def test_batches_of_short_records_end_at_the_row_cap_whatever_rows_the_caller_asks(tmp_path, monkeypatch):
    # Short records fill the text budget only after many rows, each Python objects until its batch
    # is a frame: the cap (BATCH_RECORD_ROWS) bounds them (issue #39: a million 200-byte records).
    monkeypatch.setattr(generic, "BATCH_RECORD_ROWS", 7)
    rows = [{"model": "m", "item_id": f"q{i}", "score": i % 2} for i in range(30)]
    for fmt in ("json", "jsonl"):
        log = tmp_path / f"r.{fmt}"
        log.write_text(json.dumps(rows) if fmt == "json" else "".join(json.dumps(r) + "\n" for r in rows))
        batches = list(generic.read_batches(log, fmt, ["model", "item_id", "score"], 1_000_000))
        assert [b.frame.height for b in batches] == [7, 7, 7, 7, 2], fmt
        assert [n for b in batches for n in b.frame[base.LINE].to_list()] == list(range(1, 31)), fmt


@pytest.mark.parametrize("part_rows", [1, 3, 4096])
def test_a_batch_gathered_in_parts_holds_the_same_rows_lines_and_rejects(tmp_path, monkeypatch, part_rows):
    # A batch's records become Polars columns every _PART_ROWS records (fewer Python objects alive at
    # once; issue #39): the batch must be the same frame whatever the part size, bad records between
    # parts (a reject, a record that is no object) included.
    monkeypatch.setattr(json_records, "_PART_ROWS", part_rows)
    rows: list = [{"model": "m", "item_id": f"q{i}", "score": i % 2} for i in range(11)]
    rows[4] = {"model": "m", "item_id": "q4", "score": "1"}  # a score given as a string: a reject
    rows[7] = [1, 2]  # not a record
    log = tmp_path / "r.json"
    log.write_text(json.dumps(rows))
    batches = list(generic.read_batches(log, "json", ["model", "item_id", "score"], 5, numbers=("score",)))
    assert [b.frame.height for b in batches] == [4, 4, 1]
    assert [b.frame.height + len(b.rejects) for b in batches] == [5, 5, 1]
    frame = pl.concat(b.frame for b in batches)
    assert frame[base.LINE].to_list() == [1, 2, 3, 4, 6, 7, 9, 10, 11]
    assert frame["item_id"].to_list() == [f"q{i}" for i in (0, 1, 2, 3, 5, 6, 8, 9, 10)]
    assert frame["score"].to_list() == [str(i % 2) for i in (0, 1, 2, 3, 5, 6, 8, 9, 10)]
    assert [(r.line, r.field) for b in batches for r in b.rejects] == [(5, "score"), (8, "<row>")]
