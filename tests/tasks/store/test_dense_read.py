"""The streamed store read (tasks/store/dense_read.py) against the general read it short-cuts.

Oracle: ``matrices_from_raw(read_responses(...))`` is the general path (every cell a row of
codes); ``read_dense`` must give the same matrices to the last bit - scores, items in row order,
models in column order, replicate counts, every derived table - on random stores: missing
cells, fractional scores, several benchmarks and variants (so a benchmark's codes are not the
store's first ones), items or models answered only in another variant, models ingested out of
name order, a model filter, and the Parquet export the Dask workers read.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store import dense_read
from benchcert.tasks.store.dense_read import read_dense
from benchcert.tasks.store.export import export_parquet, open_export
from benchcert.tasks.store.matrices import load_matrices, matrices_from_raw, read_responses


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.n_replicates, b.n_replicates)
    assert a.models == b.models
    assert_frame_equal(a.items, b.items)
    for name in ("subjects_by_models", "domains_by_models"):
        assert_frame_equal(getattr(a, name)(), getattr(b, name)())
    assert_frame_equal(a.long, b.long)


def _general(con, benchmark, variant, models=None):
    return matrices_from_raw(benchmark, variant, read_responses(con, benchmark, variant, models))


@st.composite
def stores(draw):
    """Rows of 1-3 benchmarks, 1-2 variants each, with holes and fractional scores."""
    rows = []
    for b in range(draw(st.integers(1, 3))):
        n_models, n_items = draw(st.integers(1, 4)), draw(st.integers(1, 12))
        models = draw(st.permutations([f"m{j}" for j in range(n_models)]))  # ingest order != name order
        fractional = draw(st.booleans())
        for variant in draw(st.sampled_from([[""], ["", "v2"], ["v2"]])):
            for model in models:
                for i in draw(st.permutations(range(n_items))):
                    if draw(st.integers(0, 5)) == 0:
                        continue  # a hole: no response
                    score = draw(st.sampled_from([0.0, 0.25, 1.0])) if fractional else float(draw(st.integers(0, 1)))
                    rows.append({"benchmark": f"b{b}", "model": model, "item_id": f"q{i:02d}",
                                 "subject": f"s{i % 3}", "domain": f"d{i % 2}", "score": score, "variant": variant})
    return rows


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=stores())
def test_streamed_read_equals_the_general_read(tmp_path_factory, rows):
    if not rows:
        return
    d = tmp_path_factory.mktemp("dense")
    db = d / "s.duckdb"
    # Models arrive in files in the drawn order (one file per model name): the store's model
    # codes are then not in name order, as after nightly ingests of new checkpoints.
    frame = pl.DataFrame(rows)
    for k, model in enumerate(frame["model"].unique(maintain_order=True)):
        path = d / f"rows{k}.csv"
        frame.filter(pl.col("model") == model).write_csv(path)
        assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    pairs = {(r["benchmark"], r["variant"]) for r in rows}
    with open_store(db, write=False) as con:
        for benchmark, variant in sorted(pairs):
            general = _general(con, benchmark, variant)
            some = sorted({r["model"] for r in rows if r["benchmark"] == benchmark})[:2]
            # One block and one transpose group (the usual size), then blocks of 1-2 models and
            # groups of one column: every block boundary and column mapping is exercised.
            for block_bytes, group in ((dense_read.BLOCK_BYTES, dense_read.TRANSPOSE_BLOCK), (8 * 12, 1), (16 * 12, 2)):
                with mock.patch.object(dense_read, "BLOCK_BYTES", block_bytes), \
                        mock.patch.object(dense_read, "TRANSPOSE_BLOCK", group):
                    dense = read_dense(con, benchmark, variant)
                    assert dense is not None  # no replicates, no human scores, dense codes: the streamed read
                    _same(dense, general)
                    _same(read_dense(con, benchmark, variant, some), _general(con, benchmark, variant, some))


def test_the_export_gives_the_same_matrices(tmp_path):
    rows = [{"benchmark": "b", "model": m, "item_id": f"q{i}", "subject": f"s{i % 2}", "domain": "d",
             "score": float((i + j) % 2)} for j, m in enumerate(["z", "a", "k"]) for i in range(7) if (i, j) != (3, 1)]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    export_parquet(db, tmp_path / "export")
    con = open_export(tmp_path / "export", "b")
    try:
        dense = read_dense(con, "b", "")
        assert dense is not None
        _same(dense, _general(con, "b", ""))
    finally:
        con.close()
    with open_store(db, write=False) as con:
        _same(load_matrices(con, "b"), dense)


@pytest.mark.parametrize("extra", ["replicate", "human_score"])
def test_replicates_and_human_scores_take_the_general_read(tmp_path, extra):
    rows = [{"benchmark": "b", "model": "m", "item_id": f"q{i}", "subject": "s", "domain": "d", "score": 1.0,
             extra: (i % 2 if extra == "replicate" else 1.0)} for i in range(4)]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con:
        assert read_dense(con, "b", "") is None
        _same(load_matrices(con, "b"), _general(con, "b", ""))
