"""Polars matrices for one benchmark: what every analysis consumes.

One query pulls the benchmark's responses (one variant, replicates averaged per item) out
of DuckDB through Arrow as integer-coded cells beside two small dimension tables (items,
models); everything else is derived in memory from a dense (items x models) score matrix,
so the store is read once per audit.  Rows are ordered by (domain, subject, item_id) and
models by name, so matrices, tables and golden files are deterministic.

Why codes and not a long frame of strings: on a 10-million-response benchmark (100 models
x 100,000 items) a long frame with four String columns, and the string joins, pivots and
group-bys over it, took the audit to a 3.3 GiB peak; read as codes the audit peaks under
1 GiB and every derived table comes from the matrix (benchmarks/ingest_audit.py measures
it).  The long frame is still available (:attr:`BenchmarkMatrices.long`), built on demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.store.connection import query_pl

LONG_SCHEMA = {"model": pl.String, "item_id": pl.String, "subject": pl.String, "domain": pl.String,
               "score": pl.Float64, "n_replicates": pl.UInt32}
ITEM_SCHEMA = {"item_id": pl.String, "subject": pl.String, "domain": pl.String}


class MatrixError(ValueError):
    """The benchmark cannot be audited as asked (unknown benchmark or variant, no data)."""


@dataclass(frozen=True)
class RawResponses:
    """What the store hands over for one benchmark and variant: codes, not strings.

    ``items`` (item_code, item_id, subject, domain) and ``models`` (model_code, model) give
    each code once; ``cells`` (item_code, model_code, score, n_replicates) holds one row per
    answered (item, model) with the mean score over replicates.  Codes are any distinct
    integers (the store's own keys or row numbers); :func:`matrices_from_raw` maps them to
    matrix rows and columns.
    """

    items: pl.DataFrame
    models: pl.DataFrame
    cells: pl.DataFrame
    #: (item_code, model_code, human_score) of the answered cells with a human score (mean over the
    #: replicates that carry one), or None when the benchmark and variant hold no human score.
    human: pl.DataFrame | None = None


class BenchmarkMatrices:
    """Responses of one benchmark and variant, as the arrays stats/ takes and as frames.

    Built from a long frame (``BenchmarkMatrices(benchmark, variant, long)``, columns of
    :data:`LONG_SCHEMA`) or, by :func:`load_matrices`, from codes without one.  What it
    holds is the dense score matrix (NaN where a model has no response), the replicate
    count of every cell, the items in row order and the models in column order; every
    table is derived from those.
    """

    def __init__(self, benchmark: str, variant: str, long: pl.DataFrame | None = None, *,
                 items: pl.DataFrame | None = None, models: list[str] | None = None,
                 scores: np.ndarray | None = None, n_replicates: np.ndarray | None = None,
                 human: np.ndarray | None = None):
        self.benchmark = benchmark
        self.variant = variant
        if long is not None:
            if items is not None or models is not None or scores is not None or n_replicates is not None:
                raise ValueError("give either long or items/models/scores/n_replicates, not both")
            items, models, scores, n_replicates = _encode_long(long)
            self.__dict__["long"] = long  # the caller's frame is the long frame: no rebuild
        elif items is None or models is None or scores is None:
            raise ValueError("give a long frame or all of items, models and scores (and n_replicates, unless "
                             "every answered cell holds one response)")
        if scores.shape != (items.height, len(models)) or (n_replicates is not None
                                                           and n_replicates.shape != scores.shape):
            raise ValueError(f"scores {scores.shape} and n_replicates "
                             f"{None if n_replicates is None else n_replicates.shape} must be "
                             f"(n_items, n_models) = ({items.height}, {len(models)})")
        self.items = items.select(list(ITEM_SCHEMA))  # item_id, subject, domain of each matrix row
        self.models = list(models)
        self._scores = scores
        self._n_replicates = n_replicates
        if human is not None and human.shape != scores.shape:
            raise ValueError(f"human {human.shape} must be shaped like scores {scores.shape}")
        self._human = human

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(benchmark={self.benchmark!r}, variant={self.variant!r}, "
                f"n_items={self.n_items}, n_models={len(self.models)})")

    @property
    def scores(self) -> np.ndarray:
        """(n_items, n_models) float array; NaN where a model has no response to an item."""
        return self._scores

    @property
    def human(self) -> np.ndarray | None:
        """(n_items, n_models) human scores beside the judge's ``scores`` (NaN where a response has
        none), or None when the benchmark carries no human score at all (the usual case)."""
        return self._human

    @property
    def n_replicates(self) -> np.ndarray:
        """(n_items, n_models) replicates averaged into each score; 0 where there is no response.

        Built on first use when every answered cell holds one response (the store read's common
        case): only the perturbation analysis asks for it, and at 80M cells it is 320 MB.
        """
        if self._n_replicates is None:
            self._n_replicates = (~np.isnan(self._scores)).astype(np.uint32)
        return self._n_replicates

    @cached_property
    def long(self) -> pl.DataFrame:
        """model, item_id, subject, domain, score (mean over replicates), n_replicates per response.

        Built on demand (one row per answered cell, in row then column order): the audit's
        analyses work on the matrix and never ask for it.
        """
        rows, cols = np.nonzero(~np.isnan(self._scores))
        rows_s = pl.Series(rows, dtype=pl.UInt32)
        items = self.items
        return pl.DataFrame({
            "model": pl.Series(self.models, dtype=pl.String).gather(pl.Series(cols, dtype=pl.UInt32)),
            "item_id": items["item_id"].gather(rows_s),
            "subject": items["subject"].gather(rows_s),
            "domain": items["domain"].gather(rows_s),
            "score": self._scores[rows, cols],
            "n_replicates": self.n_replicates[rows, cols],
        }, schema=LONG_SCHEMA)

    @cached_property
    def subjects(self) -> pl.DataFrame:
        """subject, domain, subject code (row order = code), domain code."""
        subj = self.items.select("subject", "domain").unique().sort("domain", "subject")
        doms = subj["domain"].unique(maintain_order=True)
        return subj.with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("subject_code"),
            pl.col("domain").replace_strict(doms, list(range(len(doms))), return_dtype=pl.Int64).alias("domain_code"))

    @property
    def domains(self) -> list[str]:
        return self.subjects["domain"].unique(maintain_order=True).to_list()

    @cached_property
    def item_subject(self) -> np.ndarray:
        """Subject code of each matrix row (item)."""
        codes = self.items.join(self.subjects.select("subject", "domain", "subject_code"),
                                on=["subject", "domain"], how="left", maintain_order="left")
        return codes["subject_code"].to_numpy()

    @cached_property
    def subject_domain(self) -> np.ndarray:
        return self.subjects["domain_code"].to_numpy()

    @property
    def n_items(self) -> int:
        return self.items.height

    def items_by_models(self) -> pl.DataFrame:
        """Wide items x models frame (null where a model did not answer)."""
        return self.items.with_columns(
            pl.Series(name, self._scores[:, j], dtype=pl.Float64, nan_to_null=True)
            for j, name in enumerate(self.models))

    def columns(self, cols) -> np.ndarray:
        """Scores of the models ``cols`` (column indices, in that order): a new (n_items, len(cols))
        array. The analyses that need a few models' items ask for them here rather than indexing
        :attr:`scores`, so that an out-of-core matrix (tasks/store/blocked.py) can read just those."""
        return self.scores[:, np.asarray(cols, dtype=np.intp)]

    def column_blocks(self, block_models: int):
        """(lo, hi, scores of models lo..hi-1) for consecutive blocks of at most ``block_models``
        models, in column order; in memory each block is a view of :attr:`scores`."""
        n_models = len(self.models)
        for lo in range(0, n_models, max(1, int(block_models))):
            hi = min(n_models, lo + max(1, int(block_models)))
            yield lo, hi, self.scores[:, lo:hi]

    @cached_property
    def subject_counts(self):
        """Answered items, score sums and items scored 1 per (subject code, model), and each model's
        fractional scores (:class:`~benchcert.stats.subject_counts.SubjectCounts`): computed once,
        in blocks of rows, for every analysis that starts from them (scores, comparator intervals,
        failure bounds, subsample, comparisons)."""
        from benchcert.stats.subject_counts import subject_counts

        return subject_counts(self._scores, self.item_subject, self.subjects.height)

    def subjects_by_models(self) -> pl.DataFrame:
        """Long subjects x models: n answered, sum and mean of scores."""
        subj = self.subjects
        counts = self.subject_counts
        n, total = counts.n, counts.total
        s_idx, m_idx = np.nonzero(n)  # (subject, model) pairs with a response, in subject then model order
        return pl.DataFrame({
            "domain": subj["domain"].gather(pl.Series(s_idx, dtype=pl.UInt32)),
            "subject": subj["subject"].gather(pl.Series(s_idx, dtype=pl.UInt32)),
            "model": pl.Series(self.models, dtype=pl.String).gather(pl.Series(m_idx, dtype=pl.UInt32)),
            "n": n[s_idx, m_idx],
            "sum": total[s_idx, m_idx],
        }, schema={"domain": pl.String, "subject": pl.String, "model": pl.String, "n": pl.Int64,
                   "sum": pl.Float64}).with_columns((pl.col("sum") / pl.col("n")).alias("mean"))

    def domains_by_models(self) -> pl.DataFrame:
        """Long domains x models: items answered, subjects, pooled and macro (mean of subject means)."""
        subj = self.subjects_by_models()
        return (subj.group_by("domain", "model")
                .agg(pl.col("n").sum().alias("n"), pl.len().cast(pl.Int64).alias("n_subjects"),
                     (pl.col("sum").sum() / pl.col("n").sum()).alias("pooled"),
                     pl.col("mean").mean().alias("macro"))
                .sort("domain", "model"))


def _encode_long(long: pl.DataFrame) -> tuple[pl.DataFrame, list[str], np.ndarray, np.ndarray]:
    """Items, models, score and replicate matrices of a long frame (for frames built in memory)."""
    items = (long.select(pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()).unique()
             .sort("domain", "subject", "item_id"))
    models = sorted(long["model"].unique().to_list())
    nrep = pl.col("n_replicates") if "n_replicates" in long.columns else pl.lit(1)
    cells = (long.select(pl.col("model").cast(pl.String), *(pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()),
                         pl.col("score").cast(pl.Float64), nrep.cast(pl.UInt32).alias("n_replicates"))
             .join(items.with_row_index("row"), on=list(ITEM_SCHEMA), how="left")
             .join(pl.DataFrame({"model": models}, schema={"model": pl.String}).with_row_index("col"),
                   on="model", how="left"))
    scores, nrep_m = _dense(cells["row"].to_numpy(), cells["col"].to_numpy(), cells["score"].to_numpy(),
                            cells["n_replicates"].to_numpy(), (items.height, len(models)))
    return items, models, scores, nrep_m


def _dense(rows: np.ndarray, cols: np.ndarray, score: np.ndarray, nrep: np.ndarray,
           shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Score (NaN = no response) and replicate-count matrices from one entry per answered cell
    (None for the counts when every cell holds one response: derived on use)."""
    # One flat int64 index instead of a (rows, cols) pair: numpy would widen both to intp, twice.
    flat = np.asarray(rows, dtype=np.int64) * shape[1]
    flat += cols
    scores = np.full(shape, np.nan)
    np.put(scores, flat, score)
    if nrep.size and (nrep == 1).all() and not np.isnan(score).any():
        # One response per cell (the store read's common case): the counts are where the scores
        # are, derived on first use (BenchmarkMatrices.n_replicates) instead of a second scatter.
        return scores, None
    n_replicates = np.zeros(shape, np.uint32)
    np.put(n_replicates, flat, nrep)
    return scores, n_replicates


def _positions(codes: np.ndarray, keys: np.ndarray, what: str) -> np.ndarray:
    """Index in ``keys`` (distinct integers) of every entry of ``codes`` (int32: a matrix has < 2^31 rows)."""
    keys = np.asarray(keys, dtype=np.int64)
    if codes.size == 0:
        return np.zeros(0, np.int32)
    if keys.size == 0:
        raise MatrixError(f"responses refer to {what} codes that the store does not list")
    lo, top = min(int(codes.min()), int(keys.min())), max(int(codes.max()), int(keys.max()))
    if lo >= 0 and top < 4 * (codes.size + keys.size) + (1 << 20):
        # Dense codes (row numbers, table keys): one lookup table, no search.
        table = np.full(top + 1, -1, np.int32)
        table[keys] = np.arange(keys.size, dtype=np.int32)
        pos = table[codes]
    else:
        order = np.argsort(keys, kind="stable")
        at = np.clip(np.searchsorted(keys[order], codes), 0, keys.size - 1)
        pos = np.where(keys[order][at] == codes, order[at], -1).astype(np.int32)
    if (pos < 0).any():
        raise MatrixError(f"responses refer to {what} codes that the store does not list")
    return pos


def matrices_from_raw(benchmark: str, variant: str, raw: RawResponses, *,
                      keep_items: bool = False) -> BenchmarkMatrices:
    """Matrices from coded responses: rows = answered items sorted by (domain, subject, item_id),
    columns = answering models sorted by name.

    ``keep_items``: every item of ``raw.items`` is a row, answered or not (the rows of a block of
    models read apart from the others, tasks/audit/distributed.py: the rows of the whole matrix).
    """
    cells = raw.cells
    item_pos = _positions(cells["item_code"].to_numpy(), raw.items["item_code"].to_numpy(), "item")
    model_pos = _positions(cells["model_code"].to_numpy(), raw.models["model_code"].to_numpy(), "model")
    # Only items and models with at least one response are part of the matrix.
    item_seen = np.bincount(item_pos, minlength=raw.items.height) > 0
    if keep_items:
        item_seen[:] = True
    model_seen = np.bincount(model_pos, minlength=raw.models.height) > 0
    items = (raw.items.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("pos"),
                              *(pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()))
             .filter(pl.Series(item_seen)).sort("domain", "subject", "item_id"))
    row_of = np.full(raw.items.height, -1, np.int32)
    row_of[items["pos"].to_numpy()] = np.arange(items.height, dtype=np.int32)
    names = raw.models["model"].cast(pl.String).to_list()
    seen_models = sorted((names[i], i) for i in np.flatnonzero(model_seen))
    col_of = np.full(raw.models.height, -1, np.int32)
    col_of[[i for _, i in seen_models]] = np.arange(len(seen_models), dtype=np.int32)
    shape = (items.height, len(seen_models))
    scores, n_replicates = _dense(row_of[item_pos], col_of[model_pos], cells["score"].to_numpy(),
                                  cells["n_replicates"].to_numpy(), shape)
    human = None
    if raw.human is not None and raw.human.height:  # every human score sits on an answered cell
        h_item = _positions(raw.human["item_code"].to_numpy(), raw.items["item_code"].to_numpy(), "item")
        h_model = _positions(raw.human["model_code"].to_numpy(), raw.models["model_code"].to_numpy(), "model")
        human = np.full(shape, np.nan)
        human[row_of[h_item], col_of[h_model]] = raw.human["human_score"].to_numpy()
    return BenchmarkMatrices(benchmark, variant, items=items.drop("pos"), models=[n for n, _ in seen_models],
                             scores=scores, n_replicates=n_replicates, human=human)


def models_with_responses(con, benchmark: str, variant: str) -> list[str]:
    """Names of the benchmark's models that have responses in ``variant``, sorted."""
    rows = con.execute("""
        SELECT m.model FROM models m
        WHERE m.benchmark = ? AND EXISTS (
            SELECT 1 FROM response_codes r JOIN variants v ON v.variant_id = r.variant_id
            WHERE r.model_id = m.model_id AND v.variant = ?)
        ORDER BY 1""", [benchmark, variant]).fetchall()
    return [r[0] for r in rows]


def answered_item_keys(con, variant: str) -> tuple[int, ...]:
    """Codes (``item_key``) of the items some model answered in ``variant``: the rows of the whole
    matrix.  No benchmark filter: meant for a connection that holds one benchmark (an export's)."""
    rows = con.execute("""SELECT DISTINCT r.item_key FROM response_codes r
                          JOIN variants v ON v.variant_id = r.variant_id WHERE v.variant = ?""",
                       [variant]).fetchall()
    return tuple(r[0] for r in rows)


def response_count(con, benchmark: str, model: str) -> int:
    """How many responses (rows of response_codes, every variant) ``model`` has for ``benchmark``."""
    return int(con.execute("SELECT count(*) FROM response_codes WHERE model_id IN "
                           "(SELECT model_id FROM models WHERE benchmark = ? AND model = ?)",
                           [benchmark, model]).fetchall()[0][0])


def stored_benchmarks(con) -> list[str]:
    """The benchmarks with a model in the store, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT benchmark FROM models ORDER BY 1").fetchall()]


def available_variants(con, benchmark: str) -> list[str]:
    # A variant is in the dictionary only while some stored response uses it.
    rows = con.execute("SELECT variant FROM variants WHERE benchmark = ? ORDER BY 1", [benchmark]).fetchall()
    return [r[0] for r in rows]


def choose_variant(con, benchmark: str, variant: str | None, *, flag: str = "--variant") -> str:
    """The variant a command uses: one rule for audit, compare, perturb and the deployments.

    1. the variant given (``flag``), which must exist;
    2. else the benchmark's stored default (``benchcert default-variant``), which must still exist;
    3. else the only variant; else the unnamed base variant ``""``;
    4. else refuse, naming the variants and both ways to choose one.
    """
    from benchcert.tasks.store.connection import get_default_variant

    variants = available_variants(con, benchmark)
    if not variants:
        raise MatrixError(f"benchmark {benchmark!r} has no responses in the store; benchmarks stored: "
                          f"{stored_benchmarks(con)}")
    if variant is not None:
        if variant not in variants:
            raise MatrixError(f"benchmark {benchmark!r} has no variant {variant!r}; variants: {variants}")
        return variant
    default = get_default_variant(con, benchmark)
    if default is not None:
        if default not in variants:
            raise MatrixError(f"benchmark {benchmark!r}: its default variant {default!r} has no responses any more; "
                              f"variants: {variants}; set another with benchcert default-variant")
        return default
    if len(variants) == 1:
        return variants[0]
    if "" in variants:
        return ""
    shown = variants if len(variants) <= 12 else [*variants[:12], "..."]
    raise MatrixError(f"benchmark {benchmark!r} has several variants and no base (''): choose one with {flag} V, "
                      f"or set its default once with: benchcert default-variant --db DB --benchmark {benchmark} V "
                      f"(variants: {shown})")


@dataclass(frozen=True)
class DefaultVariant:
    """A benchmark's stored default variant (None: not set) and its variants."""

    benchmark: str
    default: str | None
    variants: list[str]

    def to_dict(self) -> dict:
        return {"benchmark": self.benchmark, "default_variant": self.default, "variants": self.variants}


def default_variant(db, benchmark: str, *, variant: str | None = None, clear: bool = False,
                    lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> DefaultVariant:
    """``benchcert default-variant``'s service: set ``variant`` (or ``clear``) as the benchmark's
    default, which :func:`choose_variant` reads, and return what is stored.

    Raises UsageError (both a variant and ``clear``), NoDataError (a benchmark without responses,
    a variant it does not have), MissingStoreError or StoreError.
    """
    from benchcert.tasks.errors import NoDataError, UsageError
    from benchcert.tasks.store.connection import (get_default_variant, open_store, require_store,
                                                  set_default_variant)

    if variant is not None and clear:
        raise UsageError("give a VARIANT or --clear, not both")
    require_store(db)
    writing = variant is not None or clear
    with open_store(db, write=writing, lock_timeout=lock_timeout) as con:
        variants = available_variants(con, benchmark)
        if not variants:
            raise NoDataError(f"benchmark {benchmark!r} has no responses in the store; benchmarks stored: "
                              f"{stored_benchmarks(con)}")
        if variant is not None and variant not in variants:
            raise NoDataError(f"benchmark {benchmark!r} has no variant {variant!r}; variants: {variants}")
        if writing:
            set_default_variant(con, benchmark, None if clear else variant)
        return DefaultVariant(benchmark=benchmark, default=get_default_variant(con, benchmark), variants=variants)


def read_responses(con, benchmark: str, variant: str, models: list[str] | None = None) -> RawResponses:
    """The store read behind :func:`load_matrices`: one variant's responses as codes.

    The cells come straight from the store's coded table (``response_codes``: the store's
    own model and item codes, see tasks/store/connection.py) and strings cross from DuckDB only in the
    two small dimension tables, so a 10-million-response benchmark moves about 150 MB
    through Arrow, where the same rows with four String columns took the read to a 1.6 GiB
    peak (benchmarks/ingest_audit.py).
    """
    # The model filter is a list of bound parameters; with no filter the clause is always true.
    model_sql = f" AND m.model IN ({', '.join('?' for _ in models)})" if models else ""
    params = [benchmark, variant, *(models or [])]
    coded = f"""FROM response_codes r JOIN models m ON m.model_id = r.model_id
                JOIN variants v ON v.variant_id = r.variant_id
                WHERE m.benchmark = ? AND v.variant = ?{model_sql}"""
    max_rep = con.execute(f"SELECT max(r.replicate) {coded}", params).fetchall()[0][0]
    if not max_rep:
        # One response per (model, item): skip the aggregation, by far the costliest step.
        cells = query_pl(con, f"""SELECT r.item_key AS item_code, r.model_id AS model_code, r.score,
                                         1::UINTEGER AS n_replicates {coded}""", params)
    else:
        cells = query_pl(con, f"""SELECT r.item_key AS item_code, r.model_id AS model_code, avg(r.score) AS score,
                                         count(*)::UINTEGER AS n_replicates {coded}
                                  GROUP BY r.item_key, r.model_id""", params)
    items = query_pl(con, "SELECT item_key AS item_code, item_id, subject, domain FROM items WHERE benchmark = ?",
                     [benchmark])
    model_frame = query_pl(con, "SELECT model_id AS model_code, model FROM models WHERE benchmark = ?", [benchmark])
    # Human scores (judge-scored benchmarks, tasks/judge/) are read only when some response has one.
    human = query_pl(con, f"""SELECT r.item_key AS item_code, r.model_id AS model_code, avg(r.human_score) AS human_score
                              {coded} AND r.human_score IS NOT NULL GROUP BY r.item_key, r.model_id""", params)
    return RawResponses(items=items, models=model_frame, cells=cells, human=human if human.height else None)


def load_matrices(con, benchmark: str, variant: str | None = None,
                  models: list[str] | None = None) -> BenchmarkMatrices:
    """Read one benchmark's responses (one variant, replicates averaged) into matrices.

    ``models`` restricts the read to those model ids (comparisons of a few models). The common
    case (one response per cell, no human scores, dense codes) is streamed straight into the
    matrix (:func:`read_dense`); every other case goes through :func:`read_responses`. Both give
    the same matrices (tests/tasks/store/test_dense_read.py).
    """
    from benchcert.tasks.store.dense_read import read_dense  # it builds on this module's classes

    chosen = choose_variant(con, benchmark, variant)
    dense = read_dense(con, benchmark, chosen, models)
    if dense is not None:
        return dense
    return matrices_from_raw(benchmark, chosen, read_responses(con, benchmark, chosen, models))


def source_refs(con, benchmark: str) -> pl.DataFrame:
    """Sources that contributed rows to the benchmark (for the run manifest)."""
    return query_pl(con, """
        SELECT path, sha256, format, rows_added, strftime(ingested_at, '%Y-%m-%dT%H:%M:%SZ') AS ingested_at
        FROM sources WHERE source_id IN (
            SELECT DISTINCT source_id FROM response_codes
            WHERE model_id IN (SELECT model_id FROM models WHERE benchmark = ?))
        ORDER BY source_id""", [benchmark])
