"""The store read at scan speed: one variant's scores streamed straight into the dense matrix.

The general read (:func:`benchcert.tasks.store.matrices.read_responses`) materialises every
cell as a row of codes (item, model, score, replicate count: 28 bytes per response, 2.2 GB at
80M responses) before scattering them into the matrix. Here, in the common case, the matrix is
allocated once and filled one block of models at a time: for each block DuckDB computes each
response's position in a small (model code, item code) buffer and hands over only (position,
score) in Arrow batches of a million rows; numpy scatters each batch into the buffer, and a
permuting transpose writes the block's columns (rows in (domain, subject, item_id) order,
columns in model-name order). Memory: the matrix plus one block of at most ``BLOCK_BYTES``; no
per-row Python.

The common case, checked by one aggregate query before the read: one response per (item,
model) (no replicates), no human scores, and codes dense enough that a block's buffer is at
most about twice its share of the matrix. Anything else returns None and the caller takes the general path;
both give the same matrices (tests/tasks/store/test_dense_read.py).

``benchmarks/scale.py`` prints this read beside a DuckDB ``SELECT sum(score)`` over the same
rows (docs/scale.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.matrices import ITEM_SCHEMA, BenchmarkMatrices, MatrixError

#: Rows per Arrow batch: 16 MB of (position, score) per batch.
BATCH_ROWS = 1 << 20
#: Bytes of one block of models read at a time (the read's memory beyond the matrix).
BLOCK_BYTES = 64 << 20
#: Models per group of the transpose: a group's rows of the block stay in cache while the
#: matrix's rows are written.
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
    plan = plan_read(con, benchmark, variant, models)
    if plan is None:
        return None
    scores = plan.empty(plan.n_rows, plan.n_cols)
    col_of_code = np.full(plan.codes.n_models, -1, np.int64)
    col_of_code[plan.col_codes] = np.arange(plan.n_cols)
    fill(con, plan, scores, col_of_code)
    return BenchmarkMatrices(benchmark, variant, items=plan.rows, models=plan.models, scores=scores,
                             n_replicates=None)


@dataclass(frozen=True)
class ReadPlan:
    """What the streamed read of one benchmark and variant needs: the query's filter, the code
    ranges, and the matrix layout (rows: answered items in (domain, subject, item_id) order,
    columns: answering models in name order, with their shifted codes)."""

    where: str
    params: list
    codes: "_Codes"
    complete: bool  # one response in every cell: no NaN fill needed
    rows: pl.DataFrame  # ITEM_SCHEMA columns of the matrix rows
    row_codes: np.ndarray  # shifted item code of each row
    models: list[str]
    col_codes: np.ndarray  # shifted model code of each column

    @property
    def n_rows(self) -> int:
        return self.rows.height

    @property
    def n_cols(self) -> int:
        return len(self.models)

    def empty(self, n_rows: int, n_cols: int) -> np.ndarray:
        return np.empty((n_rows, n_cols)) if self.complete else np.full((n_rows, n_cols), np.nan)


def plan_read(con, benchmark: str, variant: str, models: list[str] | None = None) -> ReadPlan | None:
    """The layout of the streamed read (:func:`read_dense`), or None when the general read must do it."""
    ids = con.execute("SELECT variant_id FROM variants WHERE benchmark = ? AND variant = ?",
                      [benchmark, variant]).fetchall()
    if len(ids) != 1:
        return None
    flt, flt_params = _model_filter(models)
    where = f"FROM response_codes WHERE variant_id = ?{flt}"
    params = [ids[0][0], *([benchmark, *flt_params] if models else [])]
    n, max_rep, n_human, k0, k1, m0, m1 = con.execute(
        f"SELECT count(*), max(replicate), count(human_score), min(item_key), max(item_key), min(model_id), "
        f"max(model_id) {where}", params).fetchall()[0]
    if not n or max_rep or n_human:
        return None
    items = query_pl(con, "SELECT item_key AS item_code, item_id, subject, domain FROM items WHERE benchmark = ?",
                     [benchmark])
    model_frame = query_pl(con, "SELECT model_id AS model_code, model FROM models WHERE benchmark = ?", [benchmark])
    codes = _Codes(k0, m0, k1 - k0 + 1, m1 - m0 + 1)
    # Dense codes only: a block's buffer is indexed by code, so sparse codes would waste its memory.
    if codes.n_items > 2 * items.height + 1024 or codes.n_models > 2 * model_frame.height + 1024:
        return None
    item_codes = items["item_code"].to_numpy().astype(np.int64) - k0
    model_codes = model_frame["model_code"].to_numpy().astype(np.int64) - m0
    complete = n == codes.n_items * codes.n_models and _all_listed(item_codes, codes.n_items) and \
        _all_listed(model_codes, codes.n_models)
    if complete:
        # As many responses as cells, one per cell, every code listed: every cell is answered.
        item_seen, model_seen = np.ones(codes.n_items, bool), np.ones(codes.n_models, bool)
    else:
        item_seen = _seen(con, f"SELECT DISTINCT item_key - ? {where}", [k0, *params], codes.n_items)
        model_seen = _seen(con, f"SELECT DISTINCT model_id - ? {where}", [m0, *params], codes.n_models)
        _check_listed(item_seen, item_codes, "item")
        _check_listed(model_seen, model_codes, "model")
    rows, cols = _layout(items, model_frame, item_codes, model_codes, item_seen, model_seen)
    return ReadPlan(where=where, params=params, codes=codes, complete=complete, rows=rows.drop("item_code"),
                    row_codes=rows["item_code"].to_numpy(), models=[name for name, _ in cols],
                    col_codes=np.array([c for _, c in cols], dtype=np.int64))


@dataclass(frozen=True)
class _Codes:
    """The benchmark's code ranges: item codes k0 .. k0 + n_items - 1, model codes m0 .. m0 + n_models - 1."""

    k0: int
    m0: int
    n_items: int
    n_models: int


def _seen(con, sql: str, params: list, size: int) -> np.ndarray:
    seen = np.zeros(size, bool)
    seen[con.sql(sql, params=params).fetchnumpy().popitem()[1].astype(np.int64)] = True
    return seen


def _layout(items: pl.DataFrame, model_frame: pl.DataFrame, item_codes: np.ndarray, model_codes: np.ndarray,
            item_seen: np.ndarray, model_seen: np.ndarray) -> tuple[pl.DataFrame, list[tuple[str, int]]]:
    """Answered items in (domain, subject, item_id) order (with their shifted codes) and answering
    models in name order (name, shifted code)."""
    listed = (item_codes >= 0) & (item_codes < item_seen.size)
    answered = listed.copy()
    answered[listed] = item_seen[item_codes[listed]]
    rows = (items.with_columns(pl.Series("item_code", item_codes))
            .select("item_code", *(pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()))
            .filter(pl.Series(answered)).sort("domain", "subject", "item_id"))
    names = model_frame["model"].cast(pl.String).to_list()
    in_range = np.flatnonzero((model_codes >= 0) & (model_codes < model_seen.size))
    cols = sorted((names[i], int(model_codes[i])) for i in in_range if model_seen[model_codes[i]])
    return rows, cols


def fill(con, plan: ReadPlan, scores: np.ndarray, col_of_code: np.ndarray,
         ranges: list[tuple[int, int]] | None = None) -> None:
    """Write the responses of the models whose (shifted) code maps to a column of ``scores``
    (``col_of_code``, -1: not wanted) into ``scores``, one block of model codes at a time.

    Each block is one query (``model_id`` in the block's range: DuckDB skips the row groups
    outside it), scattered into a (model code, item code) buffer of at most BLOCK_BYTES -
    model-major, since logs arrive model by model and the writes are then nearly sequential -
    and transposed into the block's columns of ``scores``. Memory: ``scores`` and one block.
    ``ranges``: the (first shifted code, number of codes) to read (default: every code).
    """
    codes, row_codes, complete = plan.codes, plan.row_codes, plan.complete
    per_block = max(1, BLOCK_BYTES // (8 * codes.n_items))
    if ranges is None:
        ranges = [(c, min(per_block, codes.n_models - c)) for c in range(0, codes.n_models, per_block)]
    else:
        ranges = [(c + a, min(per_block, n - a)) for c, n in ranges for a in range(0, n, per_block)]
    identity_rows = row_codes.size == codes.n_items and bool((row_codes == np.arange(codes.n_items)).all())
    sql = (f"SELECT (model_id - ?)::BIGINT * ? + (item_key - ?) AS pos, score {plan.where} "
           f"AND model_id BETWEEN ? AND ?")
    params = plan.params
    # One buffer for every block: a fresh one per block would be paged in again each time.
    buffer = np.empty((max(n for _, n in ranges) if ranges else 0, codes.n_items))
    with ThreadPoolExecutor(2) as pool:
        for c, n_block in ranges:
            block = buffer[:n_block]
            if not complete:
                block.fill(np.nan)
            flat = block.reshape(-1)
            first = codes.m0 + c
            reader = con.sql(sql, params=[first, codes.n_items, codes.k0, *params, first, first + n_block - 1]
                             ).to_arrow_reader(BATCH_ROWS)

            def put(batch, flat=flat) -> None:
                flat[batch.column(0).to_numpy()] = batch.column(1).to_numpy()

            # Scatter one batch while DuckDB produces the next (both release the GIL).
            pending = None
            for batch in reader:
                if pending is not None:
                    pending.result()
                pending = pool.submit(put, batch)
            if pending is not None:
                pending.result()
            cols = col_of_code[c:c + n_block]
            kept = np.flatnonzero(cols >= 0)

            def transpose(a: int, block=block, cols=cols, kept=kept) -> None:
                local = kept[a:a + TRANSPOSE_BLOCK]
                target = cols[local]
                part = block[local] if identity_rows else block[local][:, row_codes]
                if target.size and target[-1] - target[0] == target.size - 1 and (np.diff(target) == 1).all():
                    scores[:, target[0]:target[-1] + 1] = part.T
                else:
                    scores[:, target] = part.T

            # Groups of columns are disjoint: two threads (numpy copies release the GIL).
            list(pool.map(transpose, range(0, kept.size, TRANSPOSE_BLOCK)))


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
