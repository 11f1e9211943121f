"""Matrices of one benchmark, against golden CSV files built from tests/data/small.csv.

The golden numbers were checked by hand (tests/data/README.md): e.g. m1 answers algebra
2 of 3, physics 2 of 2, law 1 of 3; m3 has no response to q2 and q5 (null in the wide
matrix, n = 2 for algebra and 1 for physics).
"""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.matrices import (BenchmarkMatrices, MatrixError, RawResponses, load_matrices,
                                      matrices_from_raw, read_responses)
from benchcert.tasks.store.connection import open_store

from conftest import SMALL_CSV, TESTS
from store_support import ingested_text

GOLDEN = TESTS / "golden"
UPDATE = os.environ.get("BENCHCERT_UPDATE_GOLDEN") == "1"


@pytest.fixture()
def small_db(tmp_path, small_mapping):
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="small", mapping=small_mapping).status == "ingested"
    return db


@pytest.fixture()
def small(small_db):
    with open_store(small_db, write=False) as con:
        return load_matrices(con, "small")


def _golden(name: str, frame: pl.DataFrame) -> None:
    path = GOLDEN / f"{name}.csv"
    if UPDATE:
        frame.write_csv(path)
    expected = pl.read_csv(path, schema=frame.schema)
    assert_frame_equal(frame, expected, check_exact=False, rel_tol=1e-12)


@pytest.mark.parametrize("name", ["items_by_models", "subjects_by_models", "domains_by_models"])
def test_matrices_match_golden_files(small, name):
    _golden(name, getattr(small, name)())


def test_long_frame_matches_golden(small):
    _golden("long", small.long.sort("domain", "subject", "item_id", "model"))


def test_hand_checked_numbers(small):
    subj = small.subjects_by_models()
    m1_law = subj.filter((pl.col("model") == "m1") & (pl.col("subject") == "law")).row(0, named=True)
    assert (m1_law["n"], m1_law["sum"]) == (3, 1.0)
    wide = small.items_by_models()
    assert wide.filter(pl.col("item_id").is_in(["q2", "q5"]))["m3"].null_count() == 2
    dom = small.domains_by_models().filter(pl.col("model") == "m3")
    assert dom["n"].to_list() == [3, 3]  # humanities: q6-q8; stem: q1, q3, q4


def test_numpy_views_agree_with_frames(small):
    s = small.scores
    assert s.shape == (8, 3) and np.isnan(s).sum() == 2
    wide = small.items_by_models()
    np.testing.assert_array_equal(np.nan_to_num(s, nan=-1),
                                  wide.select(small.models).fill_null(-1).to_numpy())
    assert [small.subjects["subject"][int(c)] for c in small.item_subject] == wide["subject"].to_list()
    assert [small.domains[int(d)] for d in small.subject_domain] == small.subjects["domain"].to_list()


def test_replicates_are_averaged_and_variants_chosen(tmp_path):
    db = ingested_text(tmp_path / "r.duckdb", tmp_path / "rep.csv", "model,item_id,score,variant,replicate\n"
                       "a,1,1,,0\na,1,0,,1\na,2,1,,0\na,1,1,reworded,0\n")
    with open_store(db, write=False) as con:
        base = load_matrices(con, "b")
        assert base.variant == "" and base.long.sort("item_id")["score"].to_list() == [0.5, 1.0]
        assert base.long.sort("item_id")["n_replicates"].to_list() == [2, 1]
        assert load_matrices(con, "b", "reworded").long["score"].to_list() == [1.0]
        with pytest.raises(MatrixError, match="no variant 'x'"):
            load_matrices(con, "b", "x")
        with pytest.raises(MatrixError, match="no responses"):
            load_matrices(con, "nope")


def _same_matrices(a: BenchmarkMatrices, b: BenchmarkMatrices) -> None:
    assert a.models == b.models and a.domains == b.domains
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.n_replicates, b.n_replicates)
    np.testing.assert_array_equal(a.item_subject, b.item_subject)
    for frame in ("items", "subjects"):
        assert_frame_equal(getattr(a, frame), getattr(b, frame))
    for name in ("items_by_models", "subjects_by_models", "domains_by_models"):
        assert_frame_equal(getattr(a, name)(), getattr(b, name)())
    assert_frame_equal(a.long, b.long, check_row_order=False)


def test_codes_and_long_frame_give_the_same_matrices(small):
    # load_matrices reads codes and never builds the long frame; a long frame built elsewhere
    # (benchmarks, tests) goes through the other constructor: both must agree on everything.
    _same_matrices(small, BenchmarkMatrices(small.benchmark, small.variant, small.long.sample(fraction=1.0, seed=1)))


def test_any_distinct_codes_from_the_store(small_db):
    """The store's keys need not be 0..n-1 (the integer-coded layout has its own): sparse or huge
    codes, items and models without a response, any row order give the same matrices."""
    with open_store(small_db, write=False) as con:
        raw = read_responses(con, "small", "")
    base = matrices_from_raw("small", "", raw)
    shift = 10 ** 12  # too large for a lookup table: the search path
    items = pl.concat([raw.items.with_columns(pl.col("item_code").cast(pl.Int64) * 7 + shift),
                       pl.DataFrame({"item_code": [3], "item_id": ["q_unused"], "subject": ["zz"], "domain": ["zz"]},
                                    schema_overrides={"item_code": pl.Int64})]).reverse()
    models = pl.concat([raw.models.with_columns(pl.col("model_code").cast(pl.Int64) + 5),
                        pl.DataFrame({"model_code": [1], "model": ["never_answered"]})])
    cells = raw.cells.with_columns(pl.col("item_code").cast(pl.Int64) * 7 + shift,
                                   pl.col("model_code").cast(pl.Int64) + 5).reverse()
    _same_matrices(base, matrices_from_raw("small", "", RawResponses(items=items, models=models, cells=cells)))
    bad = RawResponses(items=raw.items, models=raw.models, cells=raw.cells.with_columns(pl.lit(99).alias("item_code")))
    with pytest.raises(MatrixError, match="item codes"):
        matrices_from_raw("small", "", bad)


def test_model_filter_keeps_only_their_items(small_db):
    with open_store(small_db, write=False) as con:
        m = load_matrices(con, "small", models=["m3"])
        none = load_matrices(con, "small", models=["nobody"])
    # m3 did not answer q2 and q5 (tests/data/README.md): they are not rows of its matrix.
    assert m.models == ["m3"] and m.items["item_id"].to_list() == ["q6", "q7", "q8", "q1", "q3", "q4"]
    assert m.scores[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert none.models == [] and none.n_items == 0 and none.scores.shape == (0, 0)


def test_subject_sums_do_not_need_sorted_rows(small):
    # Rows in any order (a caller's own items frame): each subject still sums its own rows.
    order = np.array([7, 0, 5, 2, 4, 1, 6, 3])
    shuffled = BenchmarkMatrices(small.benchmark, small.variant, items=small.items[order], models=small.models,
                                 scores=small.scores[order], n_replicates=small.n_replicates[order])
    assert_frame_equal(shuffled.subjects_by_models(), small.subjects_by_models())
