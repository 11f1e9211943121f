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
from benchcert.tasks.store.matrices import MatrixError, load_matrices, matrices_from_raw, read_responses


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
            # (models answering in this variant: a filter naming none has no streamed read to compare)
            some = sorted({r["model"] for r in rows if (r["benchmark"], r["variant"]) == (benchmark, variant)})[:2]
            # One block and one transpose group (the usual size), then blocks of 1-2 models and
            # groups of one column: every block boundary and column mapping is exercised, by
            # numpy's loops and by the compiled ones (tasks/store/dense_kernels.py) that large
            # reads take, with batches of 1-2 rows and transpose tiles of 1-3 rows.
            # numpy's scatter copies runs of positions, or (MAX_RUNS 0) assigns by fancy index.
            for block_bytes, group, tile, batch, max_runs in (
                    (dense_read.BLOCK_BYTES, dense_read.TRANSPOSE_BLOCK, 8, 1 << 16, 64),
                    (8 * 12, 1, 1, 1, 64), (16 * 12, 2, 3, 2, 0), (dense_read.BLOCK_BYTES, 3, 2, 5, 0)):
                for compiled_min in (1 << 62, 0):
                    with mock.patch.multiple(dense_read, BLOCK_BYTES=block_bytes, TRANSPOSE_BLOCK=group,
                                             TRANSPOSE_GROUP=group, TRANSPOSE_TILE=tile, BATCH_ROWS=batch,
                                             COMPILED_MIN_CELLS=compiled_min, COMPILED_WARM_MIN_CELLS=compiled_min), \
                            mock.patch.object(dense_read._NumpyLoops, "MAX_RUNS", max_runs):
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


@pytest.mark.parametrize("compiled_min, max_runs", [(1 << 62, 64), (1 << 62, 0), (0, 64)])
def test_a_position_outside_the_buffer_is_refused(tmp_path, compiled_min, max_runs):
    """A response whose codes fall outside the plan's ranges (a plan older than the store) is an
    error, never a write outside the block buffer (numba does not check bounds; numpy would
    wrap a negative position)."""
    import dataclasses

    rows = [{"benchmark": "b", "model": m, "item_id": f"q{i}", "subject": "s", "domain": "d", "score": 1.0}
            for m in ("a", "b") for i in range(5)]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con, mock.patch.multiple(dense_read, COMPILED_MIN_CELLS=compiled_min,
                                                                 COMPILED_WARM_MIN_CELLS=compiled_min), \
            mock.patch.object(dense_read._NumpyLoops, "MAX_RUNS", max_runs):
        plan = dense_read.plan_read(con, "b", "")
        for codes in (dataclasses.replace(plan.codes, n_items=4), dataclasses.replace(plan.codes, k0=plan.codes.k0 + 1)):
            stale = dataclasses.replace(plan, codes=codes)
            scores = np.zeros((plan.n_rows, plan.n_cols))
            with pytest.raises(MatrixError, match="outside"):
                dense_read.fill(con, stale, scores, np.arange(plan.n_cols))


def test_the_compiled_scatter_stops_at_a_position_or_item_outside():
    from benchcert.tasks.store import dense_kernels

    # Two models x 3 matrix rows; item codes 0..3 (2 bits) with rows 2, -, 0, 1 (code 1 has none).
    row_of = np.array([2, -1, 0, 1], np.int64)

    def pos(model, item):
        return (model << 2) | item

    flat = np.zeros(6)
    ok = dense_kernels.scatter_rows(flat, np.array([pos(0, 0), pos(1, 3), pos(1, 2)], np.int32),
                                    np.array([1.0, 2.0, 3.0]), row_of, 2, 3)
    assert ok == -1
    np.testing.assert_array_equal(flat, [0, 0, 1.0, 3.0, 2.0, 0])
    for bad in (pos(0, 1), pos(2, 0), -1):  # an item with no row, a model past the block, a negative position
        flat = np.zeros(6)
        assert dense_kernels.scatter_rows(flat, np.array([pos(0, 2), bad, pos(0, 3)], np.int32),
                                          np.array([5.0, 6.0, 7.0]), row_of, 2, 3) == 1
        np.testing.assert_array_equal(flat, [5.0, 0, 0, 0, 0, 0])  # nothing from the bad one on


@pytest.mark.parametrize("compiled_min", [1 << 62, 0])
def test_models_ingested_out_of_name_order_keep_their_columns(tmp_path, compiled_min):
    """Models stored as m0, m2, m1, m3, m4, m6, m5, m7 (codes 0-7) are columns m0 ... m7: each
    half of the block's column targets ([0, 2, 1, 3], [4, 6, 5, 7]) spans as many columns as it
    has without being a run (a transpose that took it for one swapped two models' columns)."""
    ORDER = ["m0", "m2", "m1", "m3", "m4", "m6", "m5", "m7"]  # noqa: N806
    rows = [{"benchmark": "b", "model": m, "item_id": f"q{i}", "subject": f"s{i % 2}", "domain": "d",
             "score": float((i * (j + 2)) % 3 == 0)} for j, m in enumerate(ORDER) for i in range(9)]
    db = tmp_path / "s.duckdb"
    for m in ORDER:
        path = tmp_path / f"{m}.csv"
        pl.DataFrame([r for r in rows if r["model"] == m]).write_csv(path)
        assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con, mock.patch.multiple(dense_read, COMPILED_MIN_CELLS=compiled_min,
                                                                 COMPILED_WARM_MIN_CELLS=compiled_min):
        dense = read_dense(con, "b", "")
        assert dense.models == sorted(ORDER)
        _same(dense, _general(con, "b", ""))


def test_the_compiled_loops_start_once_the_process_has_read_enough(tmp_path):
    """A one-shot read below COMPILED_MIN_CELLS cells stays with numpy (numba's start costs more
    than it saves there); the read that brings the process's cells to it starts the compiled
    loops, and from then on every read of at least COMPILED_WARM_MIN_CELLS uses them."""
    rows = [{"benchmark": "b", "model": m, "item_id": f"q{i}", "subject": "s", "domain": "d", "score": float(i % 2)}
            for m in ("a", "b", "c") for i in range(10)]  # 30 cells a read
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    used = []
    with open_store(db, write=False) as con, \
            mock.patch.multiple(dense_read, COMPILED_MIN_CELLS=70, COMPILED_WARM_MIN_CELLS=20,
                                _process={"cells": 0, "compiled": False, "unavailable": None}), \
            mock.patch.object(dense_read, "_CompiledLoops", wraps=dense_read._CompiledLoops) as compiled:
        general = _general(con, "b", "")
        for _ in range(4):
            _same(read_dense(con, "b", ""), general)
            used.append(compiled.call_count)
        assert used == [0, 0, 1, 2]  # 30, 60 cells: numpy; 90 >= 70: started; then warm
        _same(read_dense(con, "b", "", ["a"]), _general(con, "b", "", ["a"]))  # 10 cells < 20: numpy
        assert compiled.call_count == 2


def _small_store(tmp_path, models=("a", "b", "c", "d", "e"), n_items=6, hole=(2, 1)):
    rows = [{"benchmark": "b", "model": m, "item_id": f"q{i}", "subject": f"s{i % 2}", "domain": "d",
             "score": float((i + j) % 3 == 0)} for j, m in enumerate(models) for i in range(n_items) if (i, j) != hole]
    path = tmp_path / "rows.csv"
    pl.DataFrame(rows).write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark=None, mapping=parse_mapping()).status == "ingested"
    return db


@pytest.mark.parametrize("compiled_min", [1 << 62, 0])
def test_a_block_buffer_is_refilled_only_after_its_transpose(tmp_path, compiled_min):
    """Blocks of one model alternate between two buffers while the transposes run on other
    threads: with each transpose slowed down, a scatter that did not wait for the transpose still
    reading its buffer would overwrite that block's scores before they reached the matrix."""
    import time

    db = _small_store(tmp_path)
    original_np, original_c = dense_read._NumpyLoops.transpose, dense_read._CompiledLoops.transpose

    def slow(original):
        def transpose(self, *args):
            time.sleep(0.05)
            return original(self, *args)
        return transpose

    with open_store(db, write=False) as con, \
            mock.patch.multiple(dense_read, BLOCK_BYTES=8 * 6, COMPILED_MIN_CELLS=compiled_min,
                                COMPILED_WARM_MIN_CELLS=compiled_min), \
            mock.patch.object(dense_read._NumpyLoops, "transpose", slow(original_np)), \
            mock.patch.object(dense_read._CompiledLoops, "transpose", slow(original_c)):
        _same(read_dense(con, "b", ""), _general(con, "b", ""))


def test_blocks_cover_the_ranges_within_the_block_size():
    from hypothesis import given as given_

    @given_(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 40)), max_size=4), st.integers(1, 17))
    def check(ranges, per_block):
        blocks = dense_read._blocks(ranges, per_block)
        assert all(0 < n <= per_block for _, n in blocks)
        assert [c for c, n in blocks for c in range(c, c + n)] == [c for c, n in ranges for c in range(c, c + n)]

    check()


def test_fill_refuses_a_matrix_or_columns_that_do_not_fit_the_plan(tmp_path):
    """The compiled transpose checks no bounds, so fill checks what it is given."""
    import dataclasses

    db = _small_store(tmp_path)
    with open_store(db, write=False) as con:
        plan = dense_read.plan_read(con, "b", "")
        cols = np.arange(plan.n_cols)
        for scores, col_of_code, p in (
                (np.zeros((plan.n_rows + 1, plan.n_cols)), cols, plan),  # more rows than the plan
                (np.zeros((plan.n_rows, plan.n_cols), np.float32), cols, plan),
                (np.zeros((plan.n_cols, plan.n_rows)).T, cols, plan),  # not C-ordered
                (np.zeros((plan.n_rows, plan.n_cols - 1)), cols, plan),  # a column past the matrix
                (np.zeros((plan.n_rows, plan.n_cols)), cols[:-1], plan),  # not one entry per model code
                (np.zeros((plan.n_rows, plan.n_cols)), cols, dataclasses.replace(plan, row_codes=np.r_[plan.row_codes, 0]))):
            with pytest.raises(ValueError, match="expected"):
                dense_read.fill(con, p, scores, col_of_code)


def test_without_numba_the_read_takes_numpys_loops(tmp_path, caplog):
    """numba raises at import where it can write no cache; the read then uses numpy's loops (the
    same matrix) and says why, once."""
    db = _small_store(tmp_path)

    def unavailable(self, plan):
        raise RuntimeError("cannot cache function 'scatter': no locator available")

    with open_store(db, write=False) as con, \
            mock.patch.multiple(dense_read, COMPILED_MIN_CELLS=0, COMPILED_WARM_MIN_CELLS=0,
                                _process={"cells": 0, "compiled": False, "unavailable": None}), \
            mock.patch.object(dense_read._CompiledLoops, "__init__", unavailable):
        for _ in range(2):
            _same(read_dense(con, "b", ""), _general(con, "b", ""))
    assert [r.getMessage() for r in caplog.records].count(
        "the store read's compiled loops are unavailable (RuntimeError: cannot cache function 'scatter': no locator "
        "available); numpy's are used (set NUMBA_CACHE_DIR to a writable folder)") == 1
