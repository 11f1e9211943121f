"""Many files in one command (tasks/ingest/many.py) against the one-file path, file after file.

The oracle: the same files ingested by :func:`ingest_files` and one at a time by
:func:`ingest_file` (each in its own store opening and transaction, as every command did before)
give the same store, every row of every table (the sources' ``ingested_at`` aside), and the same
per-file reports, whether the files are clean, bad, contradictory, repeated or stored already.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import polars as pl
import pytest
from filelock import FileLock
from polars.testing import assert_frame_equal

from benchcert.tasks.ingest import many
from benchcert.tasks.ingest.many import ingest_files
from benchcert.tasks.ingest.mapping import ColumnMapping, parse_mapping
from benchcert.tasks.ingest.many import ingest_files_atomic
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import lock_path

from store_support import TABLES, cli, snapshot  # noqa: E402  (tests/store_support.py)

MAPPING = parse_mapping()
HEADER = "model,item_id,subject,domain,score\n"


def _store(db: Path) -> dict[str, pl.DataFrame]:
    snap = snapshot(db)
    snap["sources"] = snap["sources"].drop("ingested_at")
    return snap


def _one_at_a_time(db: Path, paths: list[Path], mapping=MAPPING, benchmark="b", **kw) -> list[dict]:
    return [ingest_file(db, p, benchmark=benchmark, mapping=mapping, **kw).as_dict() for p in paths]


def _together(db: Path, paths: list[Path], mapping=MAPPING, benchmark="b", **kw) -> list[dict]:
    return [r.as_dict() for r in ingest_files(db, [str(p) for p in paths], benchmark=benchmark, mapping=mapping,
                                              **kw)]


def _atomic_one_at_a_time(db: Path, paths: list[Path], mapping=MAPPING, benchmark="b", **kw) -> list[dict]:
    return [r.as_dict() for r in ingest_files_atomic(db, [str(p) for p in paths], benchmark=benchmark,
                                                     mapping=mapping, **kw)]


def _atomic_together(db: Path, paths: list[Path], **kw) -> list[dict]:
    return _together(db, paths, atomic=True, **kw)


def assert_same(tmp_path: Path, paths: list[Path], *, before: list[Path] = (), atomic: bool = False,
                **kw) -> list[dict]:
    """Both ways into fresh stores (each first given ``before`` one at a time); the reports of ``paths``.

    ``atomic``: the command's files in one transaction, against the one-file path's --atomic
    (every file by ingest_file inside one transaction).
    """
    out = {}
    before_kw = {k: kw[k] for k in ("mapping", "benchmark") if k in kw}
    ways = (("one", _atomic_one_at_a_time), ("many", _atomic_together)) if atomic else (
        ("one", _one_at_a_time), ("many", _together))
    for how, fn in ways:
        db = tmp_path / f"{how}.duckdb"
        _one_at_a_time(db, list(before), **before_kw)
        out[how] = (fn(db, paths, **kw), _store(db))
    assert out["many"][0] == out["one"][0]
    for t in TABLES:
        assert_frame_equal(out["many"][1][t], out["one"][1][t], check_row_order=True)
    return out["many"][0]


def rows(model_items: list[tuple], *, subject=lambda i: f"s{i % 3}", domain=lambda i: f"d{i % 2}") -> str:
    return HEADER + "".join(f"{m},q{i},{subject(i)},{domain(i)},{score}\n" for m, i, score in model_items)


def folder(tmp_path: Path, texts: list[str], name: str = "logs") -> list[Path]:
    d = tmp_path / name
    d.mkdir()
    paths = []
    for k, text in enumerate(texts):
        p = d / f"f{k:03d}.csv"
        p.write_text(text)
        paths.append(p)
    return paths


def clean_texts(n_files: int = 12, per_file: int = 10, n_models: int = 3) -> list[str]:
    """Files of distinct keys; items recur across files (one model's file after another's)."""
    rng = random.Random(0)
    out = []
    for k in range(n_files):
        model = f"m{k % n_models}"
        start = (k // n_models) * per_file
        out.append(rows([(model, i, rng.randint(0, 1)) for i in range(start + per_file - 1, start - 1, -1)]))
    return out


def test_clean_folder_matches_one_at_a_time_and_takes_no_file_alone(tmp_path, monkeypatch):
    paths = folder(tmp_path, clean_texts())
    calls = []
    real = many.ingest_file
    monkeypatch.setattr(many, "ingest_file", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    reports = assert_same(tmp_path, paths)
    assert [r["status"] for r in reports] == ["ingested"] * len(paths)
    assert calls == []  # every file stored together, none by the one-file path


def test_a_bad_file_among_good_ones_is_reported_alone_and_the_others_stored(tmp_path):
    texts = clean_texts()
    texts[4] = texts[4].replace(",1\n", ",x\n", 1) if ",1\n" in texts[4] else texts[4].replace(",0\n", ",x\n", 1)
    texts[7] = texts[7].rstrip("\n").rsplit("\n", 1)[0] + "\nm1,q999,s0,d0,2\n"  # a score outside [0, 1]
    paths = folder(tmp_path, texts)
    reports = assert_same(tmp_path, paths)
    assert [r["status"] for r in reports].count("rejected") == 2
    bad = reports[7]
    assert bad["status"] == "rejected" and bad["rejects"][0]["field"] == "score"
    assert bad["rejects"][0]["line"] == texts[7].count("\n")  # the last line of that file
    assert all(r["status"] == "ingested" for k, r in enumerate(reports) if k not in (4, 7))
    (tmp_path / "allow").mkdir()
    reports = assert_same(tmp_path / "allow", paths, allow_rejects=True)  # the good rows of both stored
    assert reports[7]["status"] == "ingested" and reports[7]["rows_rejected"] == 1


def test_keys_and_items_across_files_follow_the_one_file_rules(tmp_path):
    texts = [
        rows([("m0", 1, 1), ("m0", 2, 0)]),
        rows([("m0", 2, 0), ("m1", 2, 1)]),                    # a key stored already, same score
        rows([("m1", 3, 1)]),
        rows([("m0", 1, 0), ("m2", 5, 1)]),                    # contradicts the first file's score
        rows([("m2", 6, 1)]),
        rows([("m3", 3, 1)], subject=lambda i: "other"),        # item q3 with another subject
        rows([("m3", 7, 1), ("m3", 7, 1), ("m3", 8, 0)]),       # a key twice in the file, same score
        rows([("m3", 9, 1), ("m3", 9, 0)]),                    # a key twice with two scores
        rows([("m4", 1, 1), ("m4", 2, 1)]),
    ]
    paths = folder(tmp_path, texts)
    reports = assert_same(tmp_path, paths)
    assert [r["status"] for r in reports] == ["ingested", "ingested", "ingested", "conflict", "ingested",
                                              "conflict", "ingested", "rejected", "ingested"]
    assert reports[1]["rows_already_stored"] == 1 and reports[6]["duplicate_rows_in_file"] == 1


def test_same_content_twice_empty_files_and_a_store_that_holds_the_benchmark(tmp_path):
    texts = clean_texts(6)
    texts.insert(3, texts[1])  # the same content again, under another name
    texts.insert(5, HEADER)    # no rows
    paths = folder(tmp_path, texts)
    first = tmp_path / "first.csv"
    first.write_text(texts[0] + "".join(texts[2].splitlines(keepends=True)[1:3]))
    reports = assert_same(tmp_path, paths, before=[first])
    assert reports[3]["status"] == "unchanged" and reports[3]["source_id"] == reports[1]["source_id"]
    assert reports[0]["rows_already_stored"] == texts[0].count("\n") - 1


def test_reingest_stores_nothing_twice(tmp_path):
    paths = folder(tmp_path, clean_texts())
    db = tmp_path / "s.duckdb"
    _together(db, paths)
    before = _store(db)
    again = _together(db, paths)
    assert [r["status"] for r in again] == ["unchanged"] * len(paths)
    after = _store(db)
    for t in TABLES:
        assert_frame_equal(after[t], before[t], check_row_order=True)
    # A new file beside the stored ones: only it is stored, as one at a time would.
    extra = paths[0].parent / "zz.csv"
    extra.write_text(rows([("m9", 1, 1), ("m9", 0, 1)]))
    (tmp_path / "again").mkdir()
    reports = assert_same(tmp_path / "again", paths + [extra], before=paths)
    assert [r["status"] for r in reports] == ["unchanged"] * len(paths) + ["ingested"]


def test_large_and_unreadable_files_between_small_ones(tmp_path, monkeypatch):
    texts = clean_texts(8)
    paths = folder(tmp_path, texts)
    big = paths[2]
    monkeypatch.setattr(many, "SMALL_FILE_BYTES", max(len(t) for k, t in enumerate(texts) if k != 2) + 1)
    big.write_text(texts[2] + "".join(f"m0,q{i},s{i % 3},d{i % 2},1\n" for i in range(100, 160)))
    (paths[0].parent / "missing.csv").write_text("x")
    missing = paths[0].parent / "missing.csv"
    missing.unlink()
    odd = paths[0].parent / "odd.csv"
    odd.write_text("model,item,score\nm0,q1,1\n")  # no item_id column
    reports = assert_same(tmp_path, paths[:4] + [missing, odd] + paths[4:])
    assert [r["status"] for r in reports][4:6] == ["error", "error"]


def test_random_folders_match_one_at_a_time(tmp_path):
    """Seeded folders with every kind of trouble at random places, against the one-file path."""
    rng = random.Random(27)
    for case in range(12):
        texts = []
        for _ in range(rng.randint(2, 9)):
            lines = [(f"m{rng.randint(0, 3)}", rng.randint(0, 14), rng.randint(0, 1)) for _ in range(rng.randint(1, 8))]
            text = rows(lines, subject=lambda i: f"s{i % 3}" if rng.random() > 0.05 else "x")
            if rng.random() < 0.1:
                text = text.replace(",0\n", ",nan\n", 1)
            if rng.random() < 0.1 and texts:
                text = rng.choice(texts)
            texts.append(text)
        work = tmp_path / f"case{case}"
        work.mkdir()
        paths = folder(work, texts)
        assert_same(work, paths, before=paths[:1] if case % 3 == 0 else (), allow_rejects=case % 4 == 1)


def test_a_locked_store_reports_every_file_locked(tmp_path):
    paths = folder(tmp_path, clean_texts(3))
    db = tmp_path / "s.duckdb"
    with FileLock(str(lock_path(db))):
        reports = ingest_files(db, [str(p) for p in paths], benchmark="b", mapping=MAPPING, lock_timeout=0.1)
    assert [r.status for r in reports] == ["locked"] * 3
    assert "another benchcert process" in reports[0].message


def test_the_command_on_a_folder_with_a_bad_file(tmp_path, capsys):
    texts = clean_texts(5)
    texts[2] = texts[2].rstrip("\n") + "\nm9,q1,s1,d1,oops\n"
    paths = folder(tmp_path, texts)
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", paths[0].parent, "--db", db, "--benchmark", "b")
    assert code == 1
    line = texts[2].count("\n")
    assert f"[rejected] {paths[2]}: 1 bad row(s)" in err and f"line {line}, field score: not a number: 'oops'" in err
    assert "stored: 4 file(s)" in out
    code, out, err = cli(capsys, "ingest", paths[0].parent, "--db", db, "--benchmark", "b")
    assert code == 1 and "0 row(s) added" in out and out.count("(unchanged, 0 row(s) added)") == 4


@pytest.mark.parametrize("copy", [False, True])
def test_the_one_file_path_is_used_for_a_command_of_one_file(tmp_path, copy):
    """One small file alone is stored the same either way (the run of one)."""
    src = folder(tmp_path, clean_texts(1))[0]
    if copy:
        shutil.copy(src, tmp_path / "again.csv")
        src = tmp_path / "again.csv"
    assert_same(tmp_path, [src])


def test_atomic_matches_the_one_file_atomic_path(tmp_path, monkeypatch):
    """--atomic: all stored (the runs in the command's transaction), or nothing at the first refused file."""
    texts = clean_texts()
    paths = folder(tmp_path, texts)
    calls = []
    real = many.ingest_file
    monkeypatch.setattr(many, "ingest_file", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    (tmp_path / "all").mkdir()
    reports = assert_same(tmp_path / "all", paths, atomic=True)
    # The one-file atomic path (the reference) takes each file alone; the command's runs took none.
    assert [r["status"] for r in reports] == ["ingested"] * len(paths) and calls == [str(p) for p in paths]
    bad = list(texts)
    bad[5] = bad[5].rstrip("\n") + "\nm1,q1,s1,d1,-1\n"
    paths = folder(tmp_path, bad, name="bad")
    (tmp_path / "bad-out").mkdir()
    reports = assert_same(tmp_path / "bad-out", paths, atomic=True, before=paths[:2])
    assert [r["status"] for r in reports] == ["rolled-back"] * 5 + ["rejected"] + (
        ["not-tried"] * (len(paths) - 6))


def test_atomic_random_folders(tmp_path):
    rng = random.Random(28)
    for case in range(6):
        texts = [rows([(f"m{rng.randint(0, 2)}", rng.randint(0, 9), rng.randint(0, 1)) for _ in range(rng.randint(1, 5))])
                 for _ in range(rng.randint(2, 6))]
        work = tmp_path / f"case{case}"
        work.mkdir()
        assert_same(work, folder(work, texts), atomic=True)


def test_atomic_a_run_that_fails_half_way_is_redone_file_by_file(tmp_path, monkeypatch):
    paths = folder(tmp_path, clean_texts(4))
    def half(con, rows, sources, book, **kw):  # the store's one write fails after a first statement
        con.execute("INSERT INTO sources SELECT 99, 'b', 'x', 'x', 'csv', '{}', 0, 0, 0, 0, 'ingested', now()")
        raise OSError("the disk went away")

    monkeypatch.setattr(many, "write_sources", half)
    reports = assert_same(tmp_path, paths, atomic=True)
    assert [r["status"] for r in reports] == ["ingested"] * 4


def test_a_refused_first_file_of_a_new_store_keeps_the_ids_of_one_at_a_time(tmp_path):
    """The one-file path on a new store: the opening that made the store also kept the id the
    refused first file took; a later refused file took none."""
    texts = clean_texts(4)
    for k in (0, 2):
        texts[k] = texts[k].rstrip("\n") + "\nm0,q1,s1,d1,7\n"
    reports = assert_same(tmp_path, folder(tmp_path, texts))
    assert [(r["status"], r["source_id"]) for r in reports] == [("rejected", None), ("ingested", 2),
                                                               ("rejected", None), ("ingested", 3)]


def test_formats_types_expressions_and_a_named_model(tmp_path):
    """CSV, JSONL and Parquet side by side, integer and text ids, replicates, variants, a human
    score, a SQL expression and --model: each file's columns and types validated in its own group."""
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "a.csv").write_text("id,correct,rep\n1,1,0\n2,0,0\n3,1,1\n")
    (d / "b.jsonl").write_text("".join(f'{{"id": {i}, "correct": {i % 2}.0, "rep": 0}}\n' for i in range(3, 7)))
    pl.DataFrame({"id": ["7", "8"], "correct": [1, 1], "rep": [0, 0]}).write_parquet(d / "c.parquet")
    (d / "d.csv").write_text("id,correct,rep,human\n01,1,0,1\n9,0,0,\n")
    (d / "e.csv").write_text("id,correct,rep\n 10 ,1,2\n")
    paths = sorted(d.iterdir())
    mapping = ColumnMapping(columns={"item_id": "'q' || id", "score": "correct", "replicate": "rep"}, model="named")
    assert_same(tmp_path, paths, mapping=mapping)
    human = ColumnMapping(columns={"item_id": "id", "score": "correct", "replicate": "rep", "human_score": "human"},
                          model="named")
    (tmp_path / "h").mkdir()
    assert_same(tmp_path / "h", [d / "d.csv", d / "a.csv"], mapping=human)
    # The judge's scores stored first without human scores: the human scores join the stored rows.
    judge_only = tmp_path / "judge_only.csv"
    judge_only.write_text("id,correct,rep,human\n01,1,0,\n9,0,0,\n")
    (tmp_path / "h2").mkdir()
    (report,) = assert_same(tmp_path / "h2", [d / "d.csv"], mapping=human, before=[judge_only])
    assert report["status"] == "ingested" and report["rows_already_stored"] == 2


def test_a_benchmark_column_naming_several_benchmarks(tmp_path, monkeypatch):
    """No --benchmark: each file's benchmark column; codes, items and keys are per benchmark."""
    def bench(name, lines, subject=lambda i: f"s{i % 3}"):
        return "benchmark," + rows(lines, subject=subject).replace("\n", f"\n{name},")[:-len(name) - 1]

    texts = [
        bench("b1", [("m0", 1, 1), ("m1", 1, 0)]),
        bench("b2", [("m0", 1, 0), ("m2", 2, 1)], subject=lambda i: "other"),  # same key and item, other benchmark
        bench("b1", [("m2", 3, 1)]),
        bench("b2", [("m9", 4, 1)]).replace("\nb2,m9", "\nb1,m9") + "b2,m9,q5,s0,d0,1\n",  # two benchmarks in one file
        bench("b1", [("m3", 6, 1)]).replace("\nb1,", "\n,", 1),  # a row without a benchmark
        bench("b2", [("m3", 2, 1)], subject=lambda i: "third"),  # b2's q2 is stored with subject 'other'
    ]
    paths = folder(tmp_path, texts)
    calls = []
    real = many.ingest_file
    monkeypatch.setattr(many, "ingest_file", lambda *a, **k: calls.append(Path(a[1]).name) or real(*a, **k))
    reports = assert_same(tmp_path, paths, benchmark=None)
    assert [r["status"] for r in reports] == ["ingested", "ingested", "ingested", "ingested", "rejected", "conflict"]
    assert set(calls) == {"f003.csv", "f004.csv", "f005.csv"}  # (each of the two ways' runs: the 'many' one)
    rng = random.Random(29)
    for case in range(6):
        texts = [bench(f"b{rng.randint(1, 2)}", [(f"m{rng.randint(0, 2)}", rng.randint(0, 6), rng.randint(0, 1))
                                                   for _ in range(rng.randint(1, 4))]) for _ in range(rng.randint(2, 6))]
        work = tmp_path / f"case{case}"
        work.mkdir()
        assert_same(work, folder(work, texts), benchmark=None, atomic=case == 5)


@pytest.mark.parametrize("stored_before", [False, True])
def test_a_batch_of_small_files_and_the_streaming_path_store_the_same_rows(tmp_path, monkeypatch, stored_before):
    """The small-file batch and the large-file streaming path are one write (tasks/store/ingest_write.py):
    the same files batched, or each streamed (no file small), give the same store and reports; one
    large file of the same rows stores the same responses, items, models and variants.
    ``stored_before``: the benchmark holds rows already (staged, checked against the store and merged,
    a contradicting file refused) rather than new (written straight into response_codes)."""
    texts = clean_texts(9)
    before = []
    if stored_before:  # the first three files stored already, one of them contradicted by a later file
        before = folder(tmp_path, texts[:3], name="before")
        texts[5] = texts[0].replace(",0\n", ",9\n").replace(",1\n", ",0\n").replace(",9\n", ",1\n")
    paths = folder(tmp_path, texts)
    out = {}
    for how, small in (("batch", many.SMALL_FILE_BYTES), ("stream", -1)):
        monkeypatch.setattr(many, "SMALL_FILE_BYTES", small)
        db = tmp_path / f"{how}.duckdb"
        _one_at_a_time(db, before)
        out[how] = (_together(db, paths), _store(db))
    assert out["batch"][0] == out["stream"][0]
    statuses = [r["status"] for r in out["batch"][0]]
    if stored_before:
        assert statuses == ["unchanged"] * 3 + ["ingested"] * 2 + ["conflict"] + ["ingested"] * 3
    else:
        assert statuses == ["ingested"] * 9
    for t in TABLES:
        assert_frame_equal(out["batch"][1][t], out["stream"][1][t], check_row_order=True)
    # One large file holding the same rows (the refused file left out): the same stored facts.
    one = tmp_path / "one.csv"
    one.write_text(HEADER + "".join(t.split("\n", 1)[1] for k, t in enumerate(texts)
                                    if out["batch"][0][k]["status"] == "ingested"))
    db = tmp_path / "one.duckdb"
    _one_at_a_time(db, before)
    assert _one_at_a_time(db, [one])[0]["status"] == "ingested"
    # (Not the codes: a file's new texts are coded in sorted order, so one file numbers them otherwise.)
    facts = {"responses": ["benchmark", "model", "item_id", "variant", "replicate", "score", "human_score"],
             "items": ["benchmark", "item_id", "subject", "domain"], "models": ["benchmark", "model"],
             "variants": ["benchmark", "variant"]}
    large = _store(db)
    for t, cols in facts.items():
        assert_frame_equal(out["batch"][1][t].select(cols).sort(pl.all()), large[t].select(cols).sort(pl.all()))
