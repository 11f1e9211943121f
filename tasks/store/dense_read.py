"""The store read at scan speed: one variant's scores streamed straight into the dense matrix.

The general read (:func:`benchcert.tasks.store.matrices.read_responses`) materialises every
cell as a row of codes (item, model, score, replicate count: 28 bytes per response, 2.2 GB at
80M responses) before scattering them into the matrix. Here, in the common case, DuckDB
computes each cell's position in a buffer indexed by the store's own codes and hands over
only (position, score) in Arrow batches of a million rows; numpy scatters each batch into the
buffer, and one blocked, permuting transpose puts rows in (domain, subject, item_id) order and
columns in model-name order. Memory: the matrix twice (buffer and result) plus one batch;
no per-row Python.

The common case, checked by one aggregate query before the read: one response per (item,
model) (no replicates), no human scores, and codes dense enough that the buffer is at most
about twice the matrix. Anything else returns None and the caller takes the general path;
both give the same matrices (tests/tasks/store/test_dense_read.py).

``benchmarks/scale.py`` prints this read beside a DuckDB ``SELECT sum(score)`` over the same
rows (docs/scale.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.matrices import ITEM_SCHEMA, BenchmarkMatrices, MatrixError

#: Rows per Arrow batch: 16 MB of (position, score) per batch.
BATCH_ROWS = 1 << 20
#: Models per block of the final transpose: a block's rows of the buffer stay in cache while
#: the result's rows are written.
TRANSPOSE_BLOCK = 64


def _model_filter(models: list[str] | None) -> tuple[str, list]:
    # The model filter is a list of bound parameters; with no filter the clause is empty.
    if not models:
        return "", []
    marks = ", ".join("?" for _ in models)
    return f" AND model_id IN (SELECT model_id FROM models WHERE benchmark = ? AND model IN ({marks}))", models


def read_dense(con, benchmark: str, variant: str, models: list[str] | None = None) -> BenchmarkMatrices | None:
    """The matrices of one benchmark and variant by the streamed read, or None when the general
    read must do it (replicates, human scores, sparse codes, no responses).

    Parameters
    ----------
    con
        An open store (or Parquet export) connection.
    benchmark, variant
        What to read (``variant`` as :func:`choose_variant` chose it).
    models
        Read only these models (None: every model).
    """
    ids = con.execute("SELECT variant_id FROM variants WHERE benchmark = ? AND variant = ?",
                      [benchmark, variant]).fetchall()
    if len(ids) != 1:
        return None
    variant_id = ids[0][0]
    flt, flt_params = _model_filter(models)
    where = f"FROM response_codes WHERE variant_id = ?{flt}"
    params = [variant_id, *([benchmark, *flt_params] if models else [])]
    n, max_rep, n_human, k0, k1, m0, m1 = con.execute(
        f"SELECT count(*), max(replicate), count(human_score), min(item_key), max(item_key), min(model_id), "
        f"max(model_id) {where}", params).fetchall()[0]
    if not n or max_rep or n_human:
        return None
    items = query_pl(con, "SELECT item_key AS item_code, item_id, subject, domain FROM items WHERE benchmark = ?",
                     [benchmark])
    model_frame = query_pl(con, "SELECT model_id AS model_code, model FROM models WHERE benchmark = ?", [benchmark])
    n_item_codes, n_model_codes = k1 - k0 + 1, m1 - m0 + 1
    # Dense codes only: the buffer is indexed by code, so sparse codes would waste its memory.
    if n_item_codes > 2 * items.height + 1024 or n_model_codes > 2 * model_frame.height + 1024:
        return None
    # As many responses as buffer cells (one per cell): every cell is written, no NaN fill needed.
    buffer = _scatter(con, where, params, k0, m0, n_item_codes, n_model_codes, full=n == n_item_codes * n_model_codes)
    return _ordered(benchmark, variant, buffer, items, model_frame, k0, m0, n)


def _scatter(con, where: str, params: list, k0: int, m0: int, n_item_codes: int, n_model_codes: int, *,
             full: bool) -> np.ndarray:
    """(model code, item code) buffer of scores, NaN where there is no response (``full``: every
    cell has one response, so the buffer needs no NaN fill)."""
    shape = (n_model_codes, n_item_codes)
    buffer = np.empty(shape) if full else np.full(shape, np.nan)
    flat = buffer.reshape(-1)
    # Model-major positions: logs arrive model by model, so the writes are (nearly) sequential.
    sql = f"SELECT (model_id - ?)::BIGINT * ? + (item_key - ?) AS pos, score {where}"
    reader = con.sql(sql, params=[m0, n_item_codes, k0, *params]).to_arrow_reader(BATCH_ROWS)

    def put(batch) -> None:
        flat[batch.column(0).to_numpy()] = batch.column(1).to_numpy()

    # Scatter one batch while DuckDB produces the next (both release the GIL).
    with ThreadPoolExecutor(1) as pool:
        pending = None
        for batch in reader:
            if pending is not None:
                pending.result()
            pending = pool.submit(put, batch)
        if pending is not None:
            pending.result()
    return buffer


def _ordered(benchmark: str, variant: str, buffer: np.ndarray, items: pl.DataFrame, model_frame: pl.DataFrame,
             k0: int, m0: int, n_cells: int) -> BenchmarkMatrices:
    """The matrix: answered items in (domain, subject, item_id) order by answering models in name order."""
    n_model_codes, n_item_codes = buffer.shape
    item_codes = items["item_code"].to_numpy().astype(np.int64) - k0
    model_codes = model_frame["model_code"].to_numpy().astype(np.int64) - m0
    if n_cells == n_item_codes * n_model_codes and _all_listed(item_codes, n_item_codes) and \
            _all_listed(model_codes, n_model_codes):
        # As many responses as cells, one per cell, every code listed: every cell is answered.
        item_seen, model_seen = np.ones(n_item_codes, bool), np.ones(n_model_codes, bool)
    else:
        item_seen, model_seen = np.zeros(n_item_codes, bool), np.empty(n_model_codes, bool)
        for a in range(0, n_model_codes, TRANSPOSE_BLOCK):
            answered = ~np.isnan(buffer[a:a + TRANSPOSE_BLOCK])
            model_seen[a:a + TRANSPOSE_BLOCK] = answered.any(axis=1)
            item_seen |= answered.any(axis=0)
        _check_listed(item_seen, item_codes, "item")
        _check_listed(model_seen, model_codes, "model")
    listed = (item_codes >= 0) & (item_codes < n_item_codes)
    answered_items = listed.copy()
    answered_items[listed] = item_seen[item_codes[listed]]
    rows = (items.select(pl.col("item_code").cast(pl.Int64) - k0, *(pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()))
            .filter(pl.Series(answered_items)).sort("domain", "subject", "item_id"))
    in_range = (model_codes >= 0) & (model_codes < n_model_codes)
    names = model_frame["model"].cast(pl.String).to_list()
    cols = sorted((names[i], int(model_codes[i])) for i in np.flatnonzero(in_range)
                  if model_seen[model_codes[i]])
    row_codes = rows["item_code"].to_numpy()
    col_codes = np.array([c for _, c in cols], dtype=np.int64)
    scores = np.empty((row_codes.size, col_codes.size))
    identity_rows = row_codes.size == n_item_codes and bool((np.diff(row_codes) == 1).all()) and row_codes[0] == 0

    def transpose(a: int) -> None:
        codes = col_codes[a:a + TRANSPOSE_BLOCK]
        contiguous = bool((np.diff(codes) == 1).all())
        block = buffer[codes[0]:codes[-1] + 1] if contiguous else buffer[codes]
        scores[:, a:a + TRANSPOSE_BLOCK] = (block if identity_rows else block[:, row_codes]).T

    # Blocks of columns are disjoint: two threads (numpy copies release the GIL).
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(transpose, range(0, col_codes.size, TRANSPOSE_BLOCK)))
    return BenchmarkMatrices(benchmark, variant, items=rows.drop("item_code"), models=[n for n, _ in cols],
                             scores=scores, n_replicates=None)


def _all_listed(codes: np.ndarray, size: int) -> bool:
    """Whether ``codes`` (shifted to start at 0) list every code of 0..size-1."""
    inside = codes[(codes >= 0) & (codes < size)]
    return np.unique(inside).size == size


def _check_listed(seen: np.ndarray, codes: np.ndarray, what: str) -> None:
    listed = np.zeros(seen.size, bool)
    ok = codes[(codes >= 0) & (codes < seen.size)]
    listed[ok] = True
    if (seen & ~listed).any():
        raise MatrixError(f"responses refer to {what} codes that the store does not list")
