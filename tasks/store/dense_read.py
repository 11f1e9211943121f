"""The store read at scan speed: one variant's scores streamed straight into the dense matrix.

The general read (:func:`benchcert.tasks.store.matrices.read_responses`) materialises every
cell as a row of codes (item, model, score, replicate count: 28 bytes per response, 2.2 GB at
80M responses) before scattering them into the matrix. Here, in the common case, the matrix is
allocated once and filled one block of models at a time: for each block DuckDB computes each
response's 32-bit position in a (model code, item code) buffer and hands over only (position,
score) in Arrow batches of 64K rows; each batch is scattered into the buffer, and a permuting
transpose writes the block's columns (rows in (domain, subject, item_id) order, columns in
model-name order) while DuckDB reads the next block into a second buffer. A process that reads
many cells does both with compiled loops (tasks/store/dense_kernels.py), others with numpy.
Memory: the matrix plus two blocks of at most ``BLOCK_BYTES``; no per-row Python.

The common case, checked by aggregate queries before the read (DuckDB answers them from its
column statistics where it can): one response per (item, model) (no replicates), no human
scores, and codes dense enough that a block's buffer is at most about twice its share of the
matrix. Anything else returns None and the caller takes the general path; both give the same
matrices (tests/tasks/store/test_dense_read.py).

``benchmarks/scale.py`` prints this read beside a DuckDB ``SELECT sum(score)`` over the same
rows (docs/scale.md).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.benchmark_matrices import ITEM_SCHEMA, BenchmarkMatrices, MatrixError

#: Rows per Arrow batch: 768 KB of (32-bit position, score), which stays in cache while it is
#: scattered (at 80M responses, batches of 2^20 rows made the read half as slow again).
BATCH_ROWS = 1 << 16
#: Bytes of one block of models read at a time (the read's memory beyond the matrix).
BLOCK_BYTES = 64 << 20
#: Models per group of numpy's transpose: a group's rows of the block stay in cache while the
#: matrix's rows are written.
TRANSPOSE_BLOCK = 64
#: The compiled transpose's tiles: TRANSPOSE_TILE rows (one cache line of a block's row) by
#: TRANSPOSE_GROUP columns (eight cache lines of a matrix row); measured best at 80M responses.
TRANSPOSE_GROUP = 64
TRANSPOSE_TILE = 8
#: The compiled loops (tasks/store/dense_kernels.py) save about 0.13 CPU s per 80M cells read and
#: cost about 0.5 s once per process to start (numba's import, its compiler, the cached loops).
#: A process starts them when a read brings the cells it has read to COMPILED_MIN_CELLS (a one-
#: shot audit of a smaller benchmark never pays the start); once started, every read of at least
#: COMPILED_WARM_MIN_CELLS uses them.
COMPILED_MIN_CELLS = 1 << 26
COMPILED_WARM_MIN_CELLS = 1 << 16
#: What this process has read, whether the compiled loops are started, and why they cannot be.
_process: dict = {"cells": 0, "compiled": False, "unavailable": None}


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
    census: tuple  # what _census found when the plan was made (check_unchanged)

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
    census = _census(con, where, params)
    n, max_rep, k0, k1, m0, m1, has_human = census
    if not n or max_rep or has_human:
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
                    col_codes=np.array([c for _, c in cols], dtype=np.int64), census=census)


def _census(con, where: str, params: list) -> tuple:
    """(responses, largest replicate, item code range, model code range, any human score) of the
    plan's rows. Two queries: DuckDB answers the first from its column statistics when it can,
    and count(human_score) beside it would make it scan the rows."""
    first = con.execute(f"SELECT count(*), max(replicate), min(item_key), max(item_key), min(model_id), "
                        f"max(model_id) {where}", params).fetchall()[0]
    human = con.execute(f"SELECT count(*) FROM (SELECT 1 {where} AND human_score IS NOT NULL LIMIT 1)",
                        params).fetchall()[0][0]
    return (*first, bool(human))


def store_stamp(con) -> tuple:
    """(responses, sources, last source id) of the whole store: every ingest that adds or updates
    responses records a source in the same transaction, so an unchanged stamp means unchanged
    responses. DuckDB answers it from metadata in about a millisecond at 80M responses, where
    :func:`check_unchanged` scans the variant's code columns when the store has several."""
    return con.execute("SELECT (SELECT count(*) FROM response_codes), count(*), max(source_id) FROM sources"
                       ).fetchall()[0]


def check_unchanged(con, plan: ReadPlan) -> None:
    """Raise MatrixError unless the store still holds the responses ``plan`` was made from (the
    same count, code ranges, no replicate and no human score): a read that reopens the store
    (the out-of-core matrices) would otherwise place a response ingested since - a new item's
    code past the plan's range - in another model's cell, or leave it out."""
    now = _census(con, plan.where, plan.params)
    if now != plan.census:
        raise MatrixError(f"the store changed while the benchmark was being read (responses, replicates, code "
                          f"ranges, human scores: {plan.census} then {now}); run the audit again")


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
    outside it) handing over (32-bit position in the block, score), scattered into a buffer of
    at most BLOCK_BYTES - model-major, since logs arrive model by model and the writes are then
    nearly sequential; its columns are item codes (numpy) or the matrix's rows (compiled) - and
    transposed into the block's columns of ``scores`` by two threads while DuckDB reads the next
    block into the other buffer.
    Memory: ``scores`` and two blocks. ``ranges``: the (first shifted code, number of codes) to
    read (default: every code).

    The scatter and transpose are numpy's (:class:`_NumpyLoops`) or, in a process that reads
    many cells (COMPILED_MIN_CELLS), compiled (:mod:`benchcert.tasks.store.dense_kernels`).
    """
    codes = plan.codes
    # The compiled transpose checks no bounds: every index it is given is checked here.
    if scores.dtype != np.float64 or scores.ndim != 2 or not scores.flags.c_contiguous or \
            scores.shape[0] != plan.n_rows or plan.row_codes.shape != (plan.n_rows,) or \
            col_of_code.shape != (codes.n_models,) or (col_of_code.size and col_of_code.max() >= scores.shape[1]):
        raise ValueError(f"scores: a C-ordered float64 matrix of the plan's {plan.n_rows} rows, and col_of_code one "
                         f"column of it (or -1) per model code, expected; got {scores.dtype} {scores.shape}, "
                         f"{plan.row_codes.shape[0]} row codes, col_of_code {col_of_code.shape}")
    ranges = [(0, codes.n_models)] if ranges is None else ranges
    if not ranges:
        return
    _process["cells"] += scores.size
    compiled = not _process.get("unavailable") and (
        scores.size >= COMPILED_WARM_MIN_CELLS if _process["compiled"] else _process["cells"] >= COMPILED_MIN_CELLS)
    loops = _NumpyLoops(plan)
    if compiled:
        try:
            loops = _CompiledLoops(plan)
        except (ImportError, RuntimeError, OSError) as exc:
            # numba cannot run or cache here (an unwritable cache folder raises at import): numpy's
            # loops give the same matrix, a little slower.
            _process["unavailable"], compiled = f"{type(exc).__name__}: {exc}", False
            logging.getLogger(__name__).warning("the store read's compiled loops are unavailable (%s); numpy's "
                                                "are used (set NUMBA_CACHE_DIR to a writable folder)",
                                                _process["unavailable"])
    # A block's buffer holds n_block rows of loops.row_len cells; its 32-bit positions run to
    # n_block * loops.stride.
    per_block = max(1, min(BLOCK_BYTES // (8 * max(1, loops.row_len)), (2**31 - 1) // loops.stride))
    blocks = _blocks(ranges, per_block)
    size = max(n for _, n in blocks) * loops.row_len
    buffers = [np.empty(size) for _ in range(min(2, len(blocks)))]
    pending: list[list] = [[] for _ in buffers]  # the transposes still reading each buffer
    with ThreadPoolExecutor(2) as pool:
        try:
            for b, (c, n_block) in enumerate(blocks):
                for f in pending[b % 2]:
                    f.result()
                flat = buffers[b % 2][:n_block * loops.row_len]
                if not plan.complete:
                    flat.fill(np.nan)
                # Inline: a batch's scatter is a fraction of DuckDB's work on it, and DuckDB's
                # threads fill the next batch meanwhile.
                for batch in _block_reader(con, plan, c, n_block, loops.stride):
                    if not loops.scatter(flat, arrow_numbers(batch.column(0)), arrow_numbers(batch.column(1))):
                        raise MatrixError(f"a stored response's codes fall outside the benchmark's code ranges "
                                          f"{plan.codes}")
                cols = col_of_code[c:c + n_block]
                kept = np.flatnonzero(cols >= 0)
                targets = cols[kept]
                block = flat.reshape(n_block, loops.row_len)
                # Two halves of the block's columns: disjoint columns of ``scores``.
                half = kept.size // 2
                pending[b % 2] = [pool.submit(loops.transpose, scores, block, kept[s], targets[s])
                                  for s in (slice(0, half), slice(half, None))]
            for fs in pending:
                for f in fs:
                    f.result()
        finally:
            # An error of the read is raised, not hidden by a transpose's; none runs on after it.
            wait([f for fs in pending for f in fs])
    _process["compiled"] |= compiled


class _NumpyLoops:
    """The scatter and transpose of :func:`fill` in numpy (no compiler to start)."""

    #: Past this many runs of consecutive positions in a batch, one fancy-index assignment.
    MAX_RUNS = 64

    def __init__(self, plan: ReadPlan):
        # The block buffer's rows are models, its columns item codes; the transpose permutes them
        # into the matrix's row order.
        self.stride = self.row_len = plan.codes.n_items
        self.rows = plan.row_codes
        self.identity_rows = plan.row_codes.size == plan.codes.n_items and \
            bool((plan.row_codes == np.arange(plan.codes.n_items)).all())

    def scatter(self, flat: np.ndarray, pos: np.ndarray, score: np.ndarray) -> bool:
        """``flat[pos] = score``; False (nothing written) when a position falls outside ``flat``.
        Runs of consecutive positions (a model's items in code order, as logs list them) are
        copied as slices."""
        if not pos.size:
            return True
        breaks = np.flatnonzero(np.diff(pos) != 1) + 1
        if breaks.size >= self.MAX_RUNS:
            if pos.min() < 0 or pos.max() >= flat.size:  # numpy would wrap a negative position
                return False
            flat[pos] = score
            return True
        starts = np.r_[0, breaks]
        ends = np.r_[breaks, pos.size]
        firsts = pos[starts].astype(np.int64)
        if firsts.min() < 0 or (firsts + (ends - starts)).max() > flat.size:
            return False
        for a, e, q in zip(starts.tolist(), ends.tolist(), firsts.tolist()):
            flat[q:q + e - a] = score[a:e]
        return True

    def transpose(self, scores: np.ndarray, block: np.ndarray, kept: np.ndarray, targets: np.ndarray) -> None:
        """``scores[r, targets[j]] = block[kept[j], rows[r]]``, TRANSPOSE_BLOCK columns at a time
        (a group's rows of ``block`` stay in cache while the matrix's rows are written)."""
        for a in range(0, kept.size, TRANSPOSE_BLOCK):
            local, target = kept[a:a + TRANSPOSE_BLOCK], targets[a:a + TRANSPOSE_BLOCK]
            # kept is increasing: first and last tell whether it is a run
            part = block[local[0]:local[-1] + 1] if local[-1] - local[0] == local.size - 1 else block[local]
            if not self.identity_rows:
                part = part[:, self.rows]
            if target[-1] - target[0] == target.size - 1 and (np.diff(target) == 1).all():
                scores[:, target[0]:target[-1] + 1] = part.T
            else:
                scores[:, target] = part.T


class _CompiledLoops:
    """The scatter and transpose of :func:`fill` compiled by numba (tasks/store/dense_kernels.py)."""

    def __init__(self, plan: ReadPlan):
        from benchcert.tasks.store import dense_kernels

        self.kernels = dense_kernels
        n_items = plan.codes.n_items
        # The scatter puts each response in its matrix row at once (the block buffer's columns are
        # the matrix's rows), so the transpose reads rows in order even where the item codes are
        # not in (domain, subject, item_id) order, as in most real stores: a position's item code
        # is its low ``shift`` bits.
        self.shift = max(1, (n_items - 1).bit_length())
        self.stride, self.row_len = 1 << self.shift, plan.n_rows
        codes = np.asarray(plan.row_codes, dtype=np.int64)
        # numba checks no bounds: the rows' codes index row_of.
        if codes.size and (codes.min() < 0 or codes.max() >= n_items):
            raise MatrixError(f"the plan's row codes fall outside its item codes {plan.codes}")
        self.row_of = np.full(n_items, -1, np.int64)
        self.row_of[codes] = np.arange(codes.size)
        self.rows = np.arange(plan.n_rows, dtype=np.int64)

    def scatter(self, flat: np.ndarray, pos: np.ndarray, score: np.ndarray) -> bool:
        return self.kernels.scatter_rows(flat, pos, score, self.row_of, self.shift, self.row_len) == -1

    def transpose(self, scores: np.ndarray, block: np.ndarray, kept: np.ndarray, targets: np.ndarray) -> None:
        self.kernels.transpose(scores, block, self.rows, kept, targets, TRANSPOSE_GROUP, TRANSPOSE_TILE)


def _blocks(ranges: list[tuple[int, int]], per_block: int) -> list[tuple[int, int]]:
    """``ranges`` cut into blocks of at most ``per_block`` codes, of even sizes (a range of
    per_block + 1 codes is two blocks of half, not one full block and one of a single code)."""
    out = []
    for c, n in ranges:
        k = -(-n // per_block)
        size = -(-n // k) if k else 0
        out += [(c + a, min(size, n - a)) for a in range(0, n, size or 1)]
    return out


#: NumPy dtypes of the Arrow number types a block's batches hold (pyarrow's type names).
_ARROW_NUMBERS = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
                  "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32,
                  "double": np.float64}


def arrow_numbers(column) -> np.ndarray:
    """A pyarrow array of numbers as a NumPy array: a read-only view of its data buffer when it has
    no nulls, else pyarrow's own conversion.

    Why not ``column.to_numpy()``: pyarrow 26's imports pandas on its first call (1-2 s of a
    command's start on a busy machine, beside a 0.5 s read; ``benchcert compare`` read through
    here), and gives the same view.
    """
    dtype = _ARROW_NUMBERS.get(str(column.type))
    if dtype is None or column.null_count:
        return column.to_numpy(zero_copy_only=False)
    return np.frombuffer(column.buffers()[1], dtype=dtype, count=len(column),
                         offset=column.offset * np.dtype(dtype).itemsize)


def _block_reader(con, plan: ReadPlan, c: int, n_block: int, stride: int):
    """Arrow batches of (position, score) of the models with shifted codes c .. c + n_block - 1,
    the position (model code - c) * stride + shifted item code. It is 32-bit (fill keeps
    n_block * stride below 2^31), and DuckDB filters the rows before it computes it."""
    codes = plan.codes
    first = codes.m0 + c
    params = [first, stride, codes.k0, *plan.params]
    sql = f"SELECT ((model_id - ?) * ? + (item_key - ?))::INTEGER AS pos, score {plan.where}"
    if c > 0 or n_block < codes.n_models:
        sql += " AND model_id BETWEEN ? AND ?"
        params += [first, first + n_block - 1]
    return con.sql(sql, params=params).to_arrow_reader(BATCH_ROWS)


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
