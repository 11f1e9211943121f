"""Regression tests for issue 14 (ingest side): each bad input of the issue's reproductions ends in a
per-file error naming the file (and line / byte where there is one), the store is left as it
was, and the files after it are still ingested."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping

from store_support import assert_unchanged, snapshot

CANON = parse_mapping()
GOOD_CSV = "model,item_id,score\nm1,q1,1\nm1,q2,0\n"


@pytest.fixture()
def db(tmp_path) -> Path:
    db = tmp_path / "store.duckdb"
    good = tmp_path / "seed.csv"
    good.write_text(GOOD_CSV)
    r = ingest_file(db, good, benchmark="b", mapping=CANON)
    assert r.status == "ingested", r.message
    return db


def refused(db: Path, path: Path, *needles: str, mapping=CANON, benchmark="b"):
    before = snapshot(db)
    r = ingest_file(db, path, benchmark=benchmark, mapping=mapping)
    assert r.status == "error", (r.status, r.message)
    assert str(path) in r.message, r.message
    for n in needles:
        assert n in r.message, (n, r.message)
    assert_unchanged(before, db)
    return r


# --- compressed inputs that are truncated or corrupt ------------------------------------------

@pytest.mark.parametrize("name", ["t.csv.gz", "t.jsonl.gz", "t.parquet.gz"])
def test_truncated_gzip_is_a_file_error(tmp_path, db, name):
    if name.endswith(".parquet.gz"):
        buf = io.BytesIO()
        pl.DataFrame({"model": ["m"] * 500, "item_id": [f"q{i}" for i in range(500)],
                      "score": [1.0] * 500}).write_parquet(buf)
        data = gzip.compress(buf.getvalue())
    else:
        body = GOOD_CSV if name.endswith(".csv.gz") else "".join(
            json.dumps({"model": "m", "item_id": f"q{i}", "score": 1}) + "\n" for i in range(2000))
        data = gzip.compress((body * (1 if name.endswith(".csv.gz") else 1)).encode() * 50)
    p = tmp_path / name
    p.write_bytes(data[: len(data) // 2])
    refused(db, p)


@pytest.mark.parametrize("name", ["g.csv.gz", "g.jsonl.gz", "g.parquet.gz", "g.csv"])
def test_gzip_magic_then_garbage_is_a_file_error(tmp_path, db, name):
    p = tmp_path / name
    p.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    refused(db, p)


# --- numbers no canonical field can hold ------------------------------------------------------

@pytest.mark.parametrize("rep", ["1e30", "9223372036854775808", "18446744073709551615", "9007199254740993"])
def test_huge_replicate_is_a_row_reject_not_a_crash(tmp_path, db, rep):
    p = tmp_path / "rep.csv"
    p.write_text(f"model,item_id,score,replicate\nm2,q1,1,0\nm2,q2,1,{rep}\n")
    before = snapshot(db)
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "rejected" or r.status == "error", r.message
    assert r.rows_rejected == 1 and r.rejects[0]["line"] == 3 and r.rejects[0]["field"] == "replicate"
    assert_unchanged(before, db)


def test_uint64_parquet_replicate_beyond_int64(tmp_path, db):
    p = tmp_path / "u.parquet"
    pq.write_table(pa.table({"model": ["m2", "m2"], "item_id": ["q1", "q2"], "score": [1.0, 0.0],
                             "replicate": pa.array([0, 2**64 - 1], pa.uint64())}), p)
    before = snapshot(db)
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.rows_rejected == 1 and r.rejects[0]["line"] == 2 and "2^53" in r.rejects[0]["reason"], r
    assert_unchanged(before, db)
    # with --allow-rejects the good row is stored, the replicate exactly as written
    r = ingest_file(db, p, benchmark="b", mapping=CANON, allow_rejects=True)
    assert r.status == "ingested" and r.rows_added == 1, r.message


def test_decimal_parquet_columns_are_numbers(tmp_path, db):
    """A decimal column (as SQL exports write scores) is a number: its scores are stored as
    floats, an integral decimal id as its digits, and a decimal outside [0, 1] is a rejected row."""
    import decimal

    import duckdb

    D = decimal.Decimal
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"model": ["m9", "m9"], "item_id": pa.array([D("1"), D("2")], pa.decimal128(10, 0)),
                             "score": pa.array([D("1.0"), D("0.25")], pa.decimal128(5, 2))}), p)
    r = ingest_file(db, p, benchmark="dec", mapping=CANON)
    assert r.status == "ingested" and r.rows_added == 2, r.message
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT item_id, score FROM responses WHERE benchmark = ? ORDER BY item_id", ["dec"]).fetchall()
    assert rows == [("1", 1.0), ("2", 0.25)]
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"model": ["m9"], "item_id": ["q1"], "score": pa.array([D("1.5")], pa.decimal128(5, 2))}), bad)
    before = snapshot(db)
    r = ingest_file(db, bad, benchmark="dec2", mapping=CANON)
    assert r.status == "rejected" and r.rejects[0]["field"] == "score", r.message
    assert_unchanged(before, db)


@pytest.mark.parametrize("column", [pa.array([["a"], ["b"]], pa.list_(pa.string())), pa.array([b"m", b"n"], pa.binary()),
                                    pa.array([{"x": 1}, {"x": 2}])])
def test_list_binary_struct_parquet_columns_are_named(tmp_path, db, column):
    p = tmp_path / "l.parquet"
    pq.write_table(pa.table({"model": column, "item_id": ["q1", "q2"], "score": [1.0, 0.0]}), p)
    refused(db, p, "'model'", "Parquet type")


def test_jsonl_integer_of_more_than_4300_digits(tmp_path, db):
    p = tmp_path / "big.jsonl"
    p.write_text(json.dumps({"model": "m3", "item_id": "q1", "score": 1}) + "\n"
                 + '{"model": "m3", "item_id": "q2", "score": 1, "replicate": ' + "9" * 5000 + "}\n")
    before = snapshot(db)
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "rejected" and r.rejects[0]["line"] == 2, r
    assert_unchanged(before, db)


def test_jsonl_nested_100k_deep(tmp_path, db):
    p = tmp_path / "deep.jsonl"
    p.write_text(json.dumps({"model": "m3", "item_id": "q1", "score": 1}) + "\n"
                 + '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    before = snapshot(db)
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "rejected" and r.rejects[0]["line"] == 2 and "deep" in r.rejects[0]["reason"], r
    assert_unchanged(before, db)


# --- invalid UTF-8: refused with line and byte offset, never merged ---------------------------

@pytest.mark.parametrize("fmt", ["csv", "jsonl", "csv.gz", "jsonl.gz"])
def test_invalid_utf8_is_refused_with_line_and_byte_offset(tmp_path, db, fmt):
    if fmt.startswith("csv"):
        data = b"model,item_id,score\nm\xff,q1,1\nm\xfe,q1,1\n"
        where = "line 2, byte offset 21"
    else:
        data = b'{"model": "ok", "item_id": "q0", "score": 1}\n{"model": "m\xff", "item_id": "q1", "score": 1}\n'
        where = "line 2, byte offset 57"
    if fmt.endswith(".gz"):
        data = gzip.compress(data)
    p = tmp_path / f"bad.{fmt}"
    p.write_bytes(data)
    refused(db, p, where, "not UTF-8")


def test_invalid_utf8_never_merges_two_models(tmp_path):
    """The issue's reproduction: models m\\xff and m\\xfe became one model m\\ufffd."""
    db = tmp_path / "s.duckdb"
    p = tmp_path / "two.jsonl"
    p.write_bytes(b'{"model": "m\xff", "item_id": "q1", "score": 1}\n{"model": "m\xfe", "item_id": "q1", "score": 0}\n')
    r = ingest_file(db, p, benchmark="b", mapping=CANON, allow_rejects=True)
    assert r.status == "error" and "line 1, byte offset 12" in r.message, r.message


# --- the smaller items of point 10 --------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_bom_prefixed_text_reads_its_first_column(tmp_path, db, fmt):
    p = tmp_path / f"bom.{fmt}"
    body = ("model,item_id,score\nm4,q1,1\n" if fmt == "csv"
            else json.dumps({"model": "m4", "item_id": "q1", "score": 1}) + "\n")
    p.write_bytes(b"\xef\xbb\xbf" + body.encode())
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "ingested" and r.rows_added == 1, r.message


def test_jsonl_garbage_first_line_is_reported_as_that_line(tmp_path, db):
    p = tmp_path / "g.jsonl"
    p.write_text("this is not json\n" + json.dumps({"model": "m5", "item_id": "q1", "score": 1}) + "\n")
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "rejected" and r.rejects[0]["line"] == 1 and "unparsable JSON" in r.rejects[0]["reason"], r
    assert "no column" not in r.message


def test_jsonl_with_no_object_names_the_first_bad_line(tmp_path, db):
    p = tmp_path / "g.jsonl"
    p.write_text("garbage\n[1, 2]\n")
    refused(db, p, "line 1", "no line is a JSON object")


def test_duplicate_json_keys_are_a_row_reject(tmp_path, db):
    p = tmp_path / "d.jsonl"
    p.write_text('{"model": "m6", "item_id": "q1", "score": 1}\n{"model": "m6", "item_id": "q2", "score": 1, "score": 0}\n')
    before = snapshot(db)
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "rejected" and r.rejects[0]["line"] == 2 and "'score' appears twice" in r.rejects[0]["reason"]
    assert_unchanged(before, db)


# --- decompression limits -------------------------------------------------------------------------

def test_gzip_bomb_is_refused_by_the_ratio_limit(tmp_path, db, monkeypatch):
    monkeypatch.setattr("benchcert.tasks.ingest.adapters.limits.RATIO_FLOOR", 1 << 20)
    p = tmp_path / "bomb.csv.gz"
    p.write_bytes(gzip.compress(b"model,item_id,score\n" + b"0" * (8 << 20)))
    refused(db, p, "decompresses more than 200 times", "BENCHCERT_MAX_COMPRESSION_RATIO")


def test_gzip_size_limit_is_configurable(tmp_path, db, monkeypatch):
    p = tmp_path / "many.csv.gz"
    p.write_bytes(gzip.compress(("model,item_id,score\n" + "".join(f"m7,q{i},1\n" for i in range(5000))).encode()))
    monkeypatch.setenv("BENCHCERT_MAX_DECOMPRESSED_BYTES", "10000")
    refused(db, p, "more than 10,000 bytes", "BENCHCERT_MAX_DECOMPRESSED_BYTES")
    monkeypatch.delenv("BENCHCERT_MAX_DECOMPRESSED_BYTES")
    assert ingest_file(db, p, benchmark="b", mapping=CANON).status == "ingested"


def _mmlu_zip(path: Path, payload: bytes, extra_members: int = 0) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("model_outputs_x_5shots.json", payload)
        for i in range(extra_members):
            z.writestr(f"pad/{i}.txt", "")
    return path


def test_zip_member_bomb_is_refused(tmp_path, db, monkeypatch):
    monkeypatch.setattr("benchcert.tasks.ingest.adapters.limits.RATIO_FLOOR", 1 << 20)
    rows = json.dumps([{"question_id": 1, "answer": "A", "pred": "A", "src": "s", "category": "c"}])
    p = _mmlu_zip(tmp_path / "model_outputs_x_5shots.zip", rows.encode() + b" " * (16 << 20))
    refused(db, p, "decompresses more than")


def test_zip_member_count_limit(tmp_path, db, monkeypatch):
    monkeypatch.setenv("BENCHCERT_MAX_ARCHIVE_MEMBERS", "10")
    rows = json.dumps([{"question_id": 1, "answer": "A", "pred": "A", "src": "s", "category": "c"}])
    p = _mmlu_zip(tmp_path / "model_outputs_x_5shots.zip", rows.encode(), extra_members=20)
    refused(db, p, "21 members", "BENCHCERT_MAX_ARCHIVE_MEMBERS")


def test_eval_padded_header_is_refused(tmp_path, db, monkeypatch):
    monkeypatch.setattr("benchcert.tasks.ingest.adapters.limits.RATIO_FLOOR", 1 << 20)
    p = tmp_path / "x.eval"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "t", "model": "m"}, "status": "success"})
                   + " " * (16 << 20))
    refused(db, p, "decompresses more than")


# --- the command: one bad file never stops the others; --atomic; the end-of-command summary ---------

def _three_files(tmp_path: Path) -> list[Path]:
    a = tmp_path / "a_good.csv"
    a.write_text("model,item_id,score\nma,q1,1\nma,q2,0\n")
    t = tmp_path / "truncated.csv.gz"
    data = gzip.compress(("model,item_id,score\n" + "".join(f"mt,q{i},1\n" for i in range(3000))).encode())
    t.write_bytes(data[: len(data) // 2])
    z = tmp_path / "z_good.csv"
    z.write_text("model,item_id,score\nmz,q1,1\n")
    return [a, t, z]


@pytest.mark.usefixtures("prefect_harness")
def test_cli_continues_after_a_bad_file_and_summarises(capsys, tmp_path):
    """The issue's reproduction: `benchcert ingest a_good.csv truncated.csv.gz z_good.csv`."""
    from benchcert.flows.cli import main

    db = tmp_path / "s.duckdb"
    files = _three_files(tmp_path)
    code = main(["ingest", *map(str, files), "--db", str(db), "--benchmark", "b"])
    out = capsys.readouterr()
    assert code == 1
    assert "stored: 2 file(s), 3 row(s) added" in out.out and "refused: 1 file(s)" in out.out
    refused_part = out.out.split("refused:")[1]
    assert "truncated.csv.gz (error)" in refused_part and "z_good.csv" not in refused_part
    assert "truncated or corrupt" in out.err and "Traceback" not in out.err
    code = main(["ingest", *map(str, files), "--db", str(db), "--benchmark", "b", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["summary"]["n_stored"] == 2 and report["summary"]["n_refused"] == 1
    assert [f["status"] for f in report["files"]] == ["unchanged", "error", "unchanged"]


@pytest.mark.usefixtures("prefect_harness")
def test_cli_atomic_stores_nothing_when_one_file_fails(capsys, tmp_path):
    from benchcert.flows.cli import main

    db = tmp_path / "s.duckdb"
    seed = tmp_path / "seed.csv"
    seed.write_text(GOOD_CSV)
    assert main(["ingest", str(seed), "--db", str(db), "--benchmark", "b"]) == 0
    capsys.readouterr()
    before = snapshot(db)
    files = _three_files(tmp_path)
    code = main(["ingest", *map(str, files), "--db", str(db), "--benchmark", "b", "--atomic", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["atomic"] is True
    assert [f["status"] for f in report["files"]] == ["rolled-back", "error", "not-tried"]
    assert report["summary"]["n_stored"] == 0 and report["summary"]["n_refused"] == 3
    assert_unchanged(before, db)
    # without the bad file, --atomic stores both, in one transaction
    code = main(["ingest", str(files[0]), str(files[2]), "--db", str(db), "--benchmark", "b", "--atomic"])
    assert code == 0 and "stored: 2 file(s), 3 row(s) added" in capsys.readouterr().out


def test_atomic_files_see_each_other_and_conflicts_roll_back_all(tmp_path):
    from benchcert.tasks.ingest.many import ingest_files_atomic

    db = tmp_path / "s.duckdb"
    one = tmp_path / "one.csv"
    one.write_text("model,item_id,score\nm,q1,1\n")
    two = tmp_path / "two.csv"
    two.write_text("model,item_id,score\nm,q1,0\n")  # contradicts one.csv
    reports = ingest_files_atomic(db, [str(one), str(two)], benchmark="b", mapping=CANON)
    assert [r.status for r in reports] == ["rolled-back", "conflict"]
    assert "one.csv" in reports[1].message
    from benchcert.tasks.store.connection import open_store

    with open_store(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM response_codes").fetchall()[0][0] == 0
        assert con.execute("SELECT count(*) FROM sources").fetchall()[0][0] == 0


# --- paths that are not regular files; the directory walk; the store file ---------------------------

def test_a_fifo_given_as_a_path_is_refused_not_waited_on(tmp_path, db):
    import os

    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    refused(db, fifo, "not a regular file")


def test_walk_reports_out_of_tree_symlinks_fifos_and_dangling_links(tmp_path):
    import os

    from benchcert.tasks.ingest.adapters.detect import walk

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text(GOOD_CSV)
    root = tmp_path / "logs"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_text(GOOD_CSV)
    (root / "sub" / "inner.csv").symlink_to(root / "a.csv")           # inside the tree: read
    (root / "out.csv").symlink_to(outside / "secret.csv")             # out of the tree: reported
    (root / "dangling.csv").symlink_to(tmp_path / "nowhere.csv")      # reported
    (root / "linkdir").symlink_to(outside, target_is_directory=True)  # not descended, reported
    os.mkfifo(root / "pipe.csv")                                      # reported, never opened
    files, unknown = walk(root)
    assert sorted(Path(f).name for f in files) == ["a.csv", "inner.csv"]
    why = {Path(u["path"]).name: u["message"] for u in unknown}
    assert set(why) == {"out.csv", "dangling.csv", "linkdir", "pipe.csv"}
    assert "outside" in why["out.csv"] and "dangling" in why["dangling.csv"] and "FIFO" in why["pipe.csv"]
    assert all(u["status"] == "error" for u in unknown)


@pytest.mark.parametrize("content", [b"this is a text file, not a database\n" * 10, b"\x00" * 4096])
def test_a_non_duckdb_store_file_is_named_as_such_not_as_locked(tmp_path, content):
    from benchcert.tasks.store.connection import StoreError, StoreLockedError, open_store

    db = tmp_path / "not.duckdb"
    db.write_bytes(content)
    for write in (True, False):
        with pytest.raises(StoreError) as err:
            with open_store(db, write=write):
                pass
        assert not isinstance(err.value, StoreLockedError) and "not a DuckDB database" in str(err.value)
    r = ingest_file(db, tmp_path / "x.csv", benchmark="b", mapping=CANON)  # a missing file: reported, store untouched
    assert r.status == "error"
    assert db.read_bytes() == content


def test_a_truncated_store_file_is_named_as_damaged(tmp_path, db):
    from benchcert.tasks.store.connection import StoreError, StoreLockedError, open_store

    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    with pytest.raises(StoreError) as err:
        with open_store(db, write=False):
            pass
    assert not isinstance(err.value, StoreLockedError) and "damaged or truncated" in str(err.value)


def test_ingest_into_a_non_duckdb_file_exits_3_and_leaves_it_alone(capsys, tmp_path):
    from benchcert.tasks.ingest.many import ingest_files_atomic

    db = tmp_path / "notes.duckdb"
    db.write_text("my notes, not a database\n")
    good = tmp_path / "g.csv"
    good.write_text(GOOD_CSV)
    r = ingest_file(db, good, benchmark="b", mapping=CANON)
    assert r.status == "unusable" and "not a DuckDB database" in r.message
    assert [r.status for r in ingest_files_atomic(db, [str(good)], benchmark="b", mapping=CANON)] == ["unusable"]
    assert db.read_text() == "my notes, not a database\n"


def _zip_bomb(path: Path, mib: int) -> Path:
    """The issue's reproduction: a 522 KB zip whose one member decompresses to 512 MiB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("model_outputs_x_5shots.json", "w", force_zip64=True) as fh:
            fh.write(b'[{"question_id": 1, "answer": "A", "pred": "A", "src": "s", "category": "c"}')
            for _ in range(mib):
                fh.write(b" " * (1 << 20))
            fh.write(b"]")
    return path


def test_the_issue_zip_bomb_is_refused_with_default_limits(tmp_path, db):
    p = _zip_bomb(tmp_path / "model_outputs_x_5shots.zip", 512)
    assert p.stat().st_size < 600_000
    refused(db, p, "decompresses more than 200 times", "decompression bomb")


def test_member_sizes_that_lie_are_caught_while_reading(tmp_path, db, monkeypatch):
    """A zip directory can declare small sizes; the bytes actually read are what count."""
    monkeypatch.setattr("benchcert.tasks.ingest.adapters.limits.check_archive", lambda z, path: None)
    monkeypatch.setattr("benchcert.tasks.ingest.adapters.limits.RATIO_FLOOR", 1 << 20)
    p = _zip_bomb(tmp_path / "model_outputs_x_5shots.zip", 8)
    refused(db, p, "member 'model_outputs_x_5shots.json' decompresses more than")


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_far_into_a_csv_is_located(tmp_path, db, gz):
    """Past the header's first read, the byte is found by pyarrow; the error still names line and offset."""
    body = b"model,item_id,score\n" + b"".join(b"m8,q%d,1\n" % i for i in range(5000))
    bad_line = 5002
    data = body + b"m\xff,qx,1\n"
    p = tmp_path / ("far.csv.gz" if gz else "far.csv")
    p.write_bytes(gzip.compress(data) if gz else data)
    refused(db, p, f"line {bad_line}, byte offset {len(body) + 1}", "not UTF-8")


# --- gzip members (review finding 6) -----------------------------------------------------------

def test_gzip_with_too_many_members_is_refused_naming_the_file(tmp_path, db, monkeypatch):
    # 20-byte empty members decompress to nothing: the byte and ratio limits never see them
    from benchcert.tasks.ingest.adapters import limits

    assert limits.current().max_gzip_members == 1_000_000  # the default (a BGZF file at 16 GiB has 262,144)
    p = tmp_path / "members.csv.gz"
    p.write_bytes(gzip.compress(b"model,item_id,score\nm9,q1,1\n") + gzip.compress(b"", mtime=0) * 200)
    monkeypatch.setenv("BENCHCERT_MAX_GZIP_MEMBERS", "100")
    refused(db, p, "the gzip stream has more than 100 members", "BENCHCERT_MAX_GZIP_MEMBERS")
    monkeypatch.setenv("BENCHCERT_MAX_GZIP_MEMBERS", "201")
    r = ingest_file(db, p, benchmark="b", mapping=CANON)
    assert r.status == "ingested", r.message


def test_multi_member_gzip_reads_exactly_as_the_gzip_module(tmp_path):
    # the member-counting reader against gzip.decompress: members of every size, zero padding
    # between them, reads of any size; and truncated streams fail with the gzip module's error class
    import os
    import random

    from benchcert.tasks.ingest.adapters.limits import GzipMembers

    rng = random.Random(6)

    def read_all(data: bytes, step: int) -> bytes:
        r, out = GzipMembers(io.BytesIO(data), "x", max_members=10**6), []
        while chunk := r.read(step):
            out.append(chunk)
        return b"".join(out)

    def outcome(f):
        try:
            return f()
        except (EOFError, gzip.BadGzipFile) as exc:
            return type(exc)
        except Exception as exc:  # zlib.error
            return type(exc).__name__

    for _ in range(60):
        parts = []
        for _ in range(rng.randint(1, 4)):
            n = rng.choice([0, 1, 33, 5000, 100_000])
            payload = rng.choice([bytes(n), os.urandom(n), b"m,q,1\n" * (n // 6 + 1)])
            parts.append(gzip.compress(payload, compresslevel=rng.randint(1, 9)) + bytes(rng.choice([0, 0, 2])))
        data = b"".join(parts)
        ref = gzip.decompress(data)
        for step in (7, 4096, 1 << 20):
            assert read_all(data, step) == ref
        cut = data[:rng.randint(1, len(data) - 1)]
        assert outcome(lambda: read_all(cut, 4096)) == outcome(lambda: gzip.decompress(cut))
