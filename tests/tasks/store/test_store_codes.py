"""The coded store: codes agree with a plain dictionary, version-1 stores upgrade losslessly,
several benchmarks in one file keep their own codes, and texts are matched exactly."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benchcert.tasks.store.codes import ITEM, MODEL, CodeBook
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.store.connection import STORE_VERSION, open_store, query_pl

from conftest import SMALL_CSV, SMALL_MAP

RESPONSES = "SELECT benchmark, model, item_id, variant, replicate, score, source_id, line FROM responses"


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(pl.all())


def test_codes_agree_with_a_plain_dictionary_sorted_or_not(tmp_path):
    """Oracle: the codes give the same partition as a Python dict, in any row order."""
    rng = np.random.default_rng(7)
    texts = [f"item-{i}" for i in range(500)] + ["", " x ", "ünï", "a" * 40]
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        book = CodeBook(con)
        for order in ("sorted", "shuffled", "runs"):
            idx = rng.integers(0, len(texts), 20_000)
            if order == "sorted":
                idx = np.sort(idx)
            elif order == "runs":
                idx = np.repeat(idx[:200], 100)
            col = pl.Series([texts[i] for i in idx], dtype=pl.String)
            codes = book.codes(ITEM, "b", col).to_list()
            first: dict[str, int] = {}
            for t, c in zip(col.to_list(), codes):
                assert first.setdefault(t, c) == c  # one text, one code
            assert len(set(first.values())) == len(first)  # different texts, different codes
        # Codes persist across calls within the book: the same text keeps its code.
        again = book.codes(ITEM, "b", pl.Series(["item-3", "item-3", "item-4"]))
        assert again[0] == again[1] != again[2]
        # Another benchmark gives the same text its own code.
        other = book.codes(ITEM, "other", pl.Series(["item-3"]))
        assert other[0] != again[0]


def test_texts_are_matched_exactly_and_keep_their_stored_codes(tmp_path):
    """Texts that differ in one byte, case, blanks or normal form get different codes, and a
    second book over the same store gives each stored text the code the first book stored."""
    texts = ["model-a", "model-b", "Model-a", "model-a ", "caf\u00e9", "cafe\u0301", "x" * 300, "x" * 299 + "y"]
    db = tmp_path / "s.duckdb"
    with open_store(db, write=True) as con:
        book = CodeBook(con, new_benchmarks=("b",))
        codes = book.codes(MODEL, "b", pl.Series(texts * 3)).to_list()
        assert codes[:8] == codes[8:16] == codes[16:] and len(set(codes[:8])) == 8
        con.register("_new", book.new_entries(MODEL).to_arrow())
        con.execute("INSERT INTO models SELECT code, benchmark, text, 1 FROM _new")
    with open_store(db, write=True) as con:
        book = CodeBook(con)
        again = book.codes(MODEL, "b", pl.Series(texts[::-1] + ["model-c"])).to_list()
        assert again[:8] == codes[:8][::-1] and again[8] not in codes  # stored codes kept, a new one added
        assert book.new_entries(MODEL)["text"].to_list() == ["model-c"]
        with pytest.raises(ValueError, match="null"):
            book.codes(MODEL, "b", pl.Series(["m", None]))


@pytest.mark.parametrize("ids", [
    [7, 3, 7, 5, 3, 3],                      # dense: looked up by offset
    [-2, 10**12, -2, 0, 10**12],             # sparse, negative: through the sorted distinct values
])
@pytest.mark.parametrize("dtype", [pl.Int64, pl.Int32])
def test_integer_ids_get_the_codes_of_their_decimal_text(tmp_path, ids, dtype):
    if dtype == pl.Int32:
        ids = [i for i in ids if abs(i) < 2**31]
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        book = CodeBook(con, new_benchmarks=("b",))
        as_int = book.codes(ITEM, "b", pl.Series(ids, dtype=dtype)).to_list()
        as_text = book.codes(ITEM, "b", pl.Series([str(i) for i in ids])).to_list()
        assert as_int == as_text and len(set(as_int)) == len(set(ids))
        big = [2**64 - 1, 5, 2**64 - 1]  # UInt64 beyond Int64
        assert (book.codes(ITEM, "b", pl.Series(big, dtype=pl.UInt64)).to_list()
                == book.codes(ITEM, "b", pl.Series([str(i) for i in big])).to_list())


def test_constant_and_varying_columns_share_codes(tmp_path):
    with open_store(tmp_path / "s.duckdb", write=True) as con:
        book = CodeBook(con)
        const = book.codes(MODEL, "b", pl.Series(["m"] * 5))
        mixed = book.codes(MODEL, "b", pl.Series(["n", "m", "n"]))
        assert const.to_list() == [const[0]] * 5 and mixed[1] == const[0] != mixed[0]


def test_one_file_naming_several_benchmarks(tmp_path):
    p = tmp_path / "multi.csv"
    p.write_text("bench,model,item,correct\n"
                 "x,m1,q1,1\ny,m1,q1,0\nx,m2,q1,0\ny,m2,q2,1\nx,m1,q2,1\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, p, benchmark=None,
                    mapping=parse_mapping(["benchmark=bench", "model=model", "item_id=item", "score=correct"]))
    assert r.status == "ingested" and r.rows_added == 5, r.message
    with open_store(db, write=False) as con:
        got = query_pl(con, RESPONSES + " ORDER BY line").select("benchmark", "model", "item_id", "score", "line")
        n_models = con.execute("SELECT count(*) FROM models").fetchall()[0][0]
        n_items = con.execute("SELECT count(*) FROM items").fetchall()[0][0]
    expected = pl.DataFrame({"benchmark": ["x", "y", "x", "y", "x"], "model": ["m1", "m1", "m2", "m2", "m1"],
                             "item_id": ["q1", "q1", "q1", "q2", "q2"], "score": [1.0, 0.0, 0.0, 1.0, 1.0],
                             "line": [2, 3, 4, 5, 6]})
    assert_frame_equal(got, expected)
    assert (n_models, n_items) == (4, 4)  # (x, m1), (x, m2), (y, m1), (y, m2); (x|y, q1|q2)


def _make_v1_store(db, small_rows: pl.DataFrame) -> None:
    """A store as benchcert wrote it before responses were coded (store version 1)."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('store_version', '1')")
    con.execute("CREATE SEQUENCE source_ids START 1")
    con.execute("""CREATE TABLE sources (source_id BIGINT PRIMARY KEY, benchmark VARCHAR, path VARCHAR NOT NULL,
        sha256 VARCHAR NOT NULL, format VARCHAR NOT NULL, config VARCHAR NOT NULL, rows_read BIGINT NOT NULL,
        rows_accepted BIGINT NOT NULL, rows_added BIGINT NOT NULL, rows_rejected BIGINT NOT NULL,
        status VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL)""")
    con.execute("""CREATE TABLE responses (benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, replicate BIGINT NOT NULL, score DOUBLE NOT NULL,
        source_id BIGINT NOT NULL, line BIGINT NOT NULL)""")
    con.execute("""CREATE TABLE items (benchmark VARCHAR NOT NULL, item_id VARCHAR NOT NULL, subject VARCHAR NOT NULL,
        domain VARCHAR NOT NULL, source_id BIGINT NOT NULL, line BIGINT NOT NULL)""")
    con.execute("""CREATE TABLE rejects (source_id BIGINT NOT NULL, path VARCHAR NOT NULL, line BIGINT,
        field VARCHAR NOT NULL, reason VARCHAR NOT NULL, raw VARCHAR)""")
    con.execute("""CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, flow_run_id VARCHAR,
        status VARCHAR NOT NULL, started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP, run_dir VARCHAR,
        n_models BIGINT, n_items BIGINT, config VARCHAR, error VARCHAR)""")
    con.execute("""CREATE TABLE run_results (run_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
        metric VARCHAR NOT NULL, method VARCHAR NOT NULL, estimate DOUBLE, lower DOUBLE, upper DOUBLE,
        half_width DOUBLE, alpha DOUBLE)""")
    con.execute("SELECT nextval('source_ids')")
    con.execute("INSERT INTO sources VALUES (1, 'small', ?, 'abc', 'csv', '{}', 22, 22, 22, 0, 'ingested', now())",
                [str(SMALL_CSV)])
    con.register("_rows", small_rows.to_arrow())
    con.execute("INSERT INTO responses SELECT benchmark, model, item_id, variant, replicate, score, source_id, line "
                "FROM _rows")
    con.execute("INSERT INTO items SELECT benchmark, item_id, any_value(subject), any_value(domain), 1, min(line) "
                "FROM _rows GROUP BY benchmark, item_id")
    con.close()


@pytest.mark.parametrize("write", [True, False])
def test_a_version_1_store_is_upgraded_losslessly(tmp_path, small_mapping, write):
    # The reference rows: what version 2 stores for the same file.
    ref_db = tmp_path / "ref.duckdb"
    assert ingest_file(ref_db, SMALL_CSV, benchmark="small", mapping=small_mapping).status == "ingested"
    with open_store(ref_db, write=False) as con:
        ref = query_pl(con, RESPONSES)
        ref_items = query_pl(con, "SELECT benchmark, item_id, subject, domain FROM items")
    old = tmp_path / "old.duckdb"
    _make_v1_store(old, ref.join(ref_items, on=["benchmark", "item_id"]))
    with open_store(old, write=write) as con:  # readers upgrade too: they hold the same lock
        assert con.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchall()[0][0] == STORE_VERSION
        assert_frame_equal(_sorted(query_pl(con, RESPONSES)), _sorted(ref))
        assert_frame_equal(_sorted(query_pl(con, "SELECT benchmark, item_id, subject, domain FROM items")),
                           _sorted(ref_items))
    # The upgraded store keeps working: the same rows again add nothing, a new model adds its rows.
    again = ingest_file(old, SMALL_CSV, benchmark="small", mapping=small_mapping)
    assert again.status == "ingested" and again.rows_added == 0 and again.rows_already_stored == 22
    extra = tmp_path / "extra.csv"
    extra.write_text("model,question,topic,area,correct\nm9,q1,algebra,stem,1\n", encoding="utf-8")
    more = ingest_file(old, extra, benchmark="small", mapping=small_mapping)
    assert more.status == "ingested" and more.rows_added == 1, more.message


def test_a_model_whose_rows_are_all_quarantined_is_not_listed(tmp_path):
    p = tmp_path / "bad_model.csv"
    p.write_text("model,item,correct\nm1,q1,1\nm2,q1,7\nm1,q2,0\nm2,q2,9\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, p, benchmark="b", mapping=parse_mapping(["item_id=item", "score=correct"]),
                    allow_rejects=True)
    assert r.status == "ingested" and r.rows_added == 2 and r.rows_rejected == 2, r.message
    with open_store(db, write=False) as con:
        assert con.execute("SELECT model FROM models").fetchall() == [("m1",)]
        assert con.execute("SELECT count(*) FROM variants").fetchall()[0][0] == 1


@pytest.mark.parametrize("batch_rows", [2, 1000])
def test_an_item_given_two_subjects_is_caught_within_and_across_batches(tmp_path, batch_rows):
    p = tmp_path / "split.csv"
    p.write_text("model,item,topic,correct\nm1,q1,algebra,1\nm1,q2,algebra,0\nm2,q1,physics,1\nm2,q2,algebra,1\n",
                 encoding="utf-8")
    r = ingest_file(tmp_path / "s.duckdb", p, benchmark="b", batch_rows=batch_rows,
                    mapping=parse_mapping(["item_id=item", "subject=topic", "score=correct"]))
    assert r.status == "rejected", r.message
    assert sorted({x["line"] for x in r.rejects}) == [2, 4]  # every row of q1
    assert all("2 different subject/domain pairs" in x["reason"] for x in r.rejects)


def test_a_repeated_key_is_found_in_a_file_naming_several_benchmarks(tmp_path):
    p = tmp_path / "multi_dup.csv"
    p.write_text("bench,model,item,correct\nx,m1,q1,1\ny,m1,q1,0\nx,m1,q1,0\n", encoding="utf-8")
    r = ingest_file(tmp_path / "s.duckdb", p, benchmark=None,
                    mapping=parse_mapping(["benchmark=bench", "model=model", "item_id=item", "score=correct"]))
    assert r.status == "rejected", r.message  # x/m1/q1 is given twice with different scores; y/m1/q1 is another key
    assert sorted({x["line"] for x in r.rejects}) == [2, 4]


def test_several_files_coded_at_once_get_the_codes_of_file_after_file(tmp_path):
    """``files=``: one call for a run of files gives each text the code it gets when the files are
    coded one call each, in order (new texts by first file, then sorted text), stored texts kept."""
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="b", mapping=parse_mapping(SMALL_MAP)).status == "ingested"
    rng = np.random.default_rng(3)
    with open_store(db, write=True) as con:
        stored = query_pl(con, "SELECT model FROM models WHERE benchmark = 'b'")["model"].to_list()
        pool = stored + [f"m{k}" for k in range(30)] + ["zz", "a", "M"]
        files = [pl.Series([pool[i] for i in rng.integers(0, len(pool), rng.integers(1, 12))], dtype=pl.String)
                 for _ in range(15)]
        one_by_one, at_once = CodeBook(con), CodeBook(con)
        expected = pl.concat([one_by_one.codes(MODEL, "b", f) for f in files])
        got = at_once.codes(MODEL, "b", pl.concat(files),
                            files=pl.Series([k for k, f in enumerate(files) for _ in range(f.len())]))
    assert got.to_list() == expected.to_list()
    assert_frame_equal(at_once.new_entries(MODEL).sort("code"), one_by_one.new_entries(MODEL).sort("code"))
    assert at_once.new_entries(MODEL).height > 10  # new texts were coded, not only stored ones
    with pytest.raises(ValueError, match="files"):
        at_once.codes(MODEL, "b", pl.Series([1, 2]), files=pl.Series([0, 0]))
