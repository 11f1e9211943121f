"""One benchmark's responses as matrices (:class:`BenchmarkMatrices`) and their construction from
integer codes (:func:`matrices_from_raw`): what every analysis consumes.

The store's reads that fill them are tasks/store/matrices.py and tasks/store/dense_read.py;
both build on this module, which reads nothing, so neither has to import the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

import numpy as np
import polars as pl

from benchcert.tasks.errors import NoDataError

LONG_SCHEMA = {"model": pl.String, "item_id": pl.String, "subject": pl.String, "domain": pl.String,
               "score": pl.Float64, "n_replicates": pl.UInt32}
ITEM_SCHEMA = {"item_id": pl.String, "subject": pl.String, "domain": pl.String}


class MatrixError(NoDataError):
    """The benchmark cannot be audited as asked (unknown benchmark or variant, no data; exit code 1)."""


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

    ``store_inputs``: what the audit's read took from the store beside the matrices for the
    analyses that declare it (contract.INPUTS: ``parse_flags``, ``option_probs``, ``subsets``),
    by input name; an analysis that finds its input absent reads the store itself.
    """

    #: (empty, and read-only, unless the audit's read sets a mapping of its own on the instance)
    store_inputs = MappingProxyType({})

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

    def packed_bits(self, subjects):
        """Each model's bit-packed answered and correct items
        (:class:`~benchcert.stats.comparisons.PackedScores`, subjects ``subjects``) when this matrix
        made them already while reading its scores (an out-of-core matrix does, in the pass that
        computes its :attr:`subject_counts`: tasks/store/blocked.py), else None (the comparisons pack
        them from :meth:`column_blocks`)."""
        return None

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
