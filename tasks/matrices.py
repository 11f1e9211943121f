"""Polars matrices for one benchmark: what every analysis consumes.

One query pulls the benchmark's responses (one variant, replicates averaged per item) out
of DuckDB through Arrow; everything else is derived from that long frame in memory, so
the store is read once per audit.  Rows are ordered by (domain, subject, item_id) and
models by name, so matrices, tables and golden files are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from benchcert.tasks.store import query_pl

LONG_SCHEMA = {"model": pl.String, "item_id": pl.String, "subject": pl.String, "domain": pl.String,
               "score": pl.Float64, "n_replicates": pl.UInt32}


class MatrixError(ValueError):
    """The benchmark cannot be audited as asked (unknown benchmark or variant, no data)."""


@dataclass(frozen=True)
class BenchmarkMatrices:
    """Responses of one benchmark and variant, as frames and as the arrays stats/ takes."""

    benchmark: str
    variant: str
    long: pl.DataFrame  # model, item_id, subject, domain, score (mean over replicates), n_replicates

    @cached_property
    def items(self) -> pl.DataFrame:
        """item_id, subject, domain for every item answered by at least one model."""
        return (self.long.select("item_id", "subject", "domain").unique()
                .sort("domain", "subject", "item_id"))

    @cached_property
    def models(self) -> list[str]:
        return sorted(self.long["model"].unique().to_list())

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

    @cached_property
    def scores(self) -> np.ndarray:
        """(n_items, n_models) float array; NaN where a model has no response to an item."""
        item_idx = self.items.select("item_id").with_row_index("row")
        model_idx = pl.DataFrame({"model": self.models}).with_row_index("col")
        cells = (self.long.select("model", "item_id", "score")
                 .join(item_idx, on="item_id").join(model_idx, on="model"))
        out = np.full((self.items.height, len(self.models)), np.nan)
        out[cells["row"].to_numpy(), cells["col"].to_numpy()] = cells["score"].to_numpy()
        return out

    @property
    def n_items(self) -> int:
        return self.items.height

    def items_by_models(self) -> pl.DataFrame:
        """Wide items x models frame (null where a model did not answer)."""
        wide = self.long.pivot(on="model", index="item_id", values="score", sort_columns=True)
        return (self.items.join(wide, on="item_id", how="left", maintain_order="left")
                .select("item_id", "subject", "domain", *self.models))

    def subjects_by_models(self) -> pl.DataFrame:
        """Long subjects x models: n answered, sum and mean of scores."""
        return (self.long.group_by("domain", "subject", "model")
                .agg(pl.len().cast(pl.Int64).alias("n"), pl.col("score").sum().alias("sum"))
                .with_columns((pl.col("sum") / pl.col("n")).alias("mean"))
                .sort("domain", "subject", "model"))

    def domains_by_models(self) -> pl.DataFrame:
        """Long domains x models: items answered, subjects, pooled and macro (mean of subject means)."""
        subj = self.subjects_by_models()
        return (subj.group_by("domain", "model")
                .agg(pl.col("n").sum().alias("n"), pl.len().cast(pl.Int64).alias("n_subjects"),
                     (pl.col("sum").sum() / pl.col("n").sum()).alias("pooled"),
                     pl.col("mean").mean().alias("macro"))
                .sort("domain", "model"))


def available_variants(con, benchmark: str) -> list[str]:
    rows = con.execute("SELECT DISTINCT variant FROM responses WHERE benchmark = ? ORDER BY 1", [benchmark]).fetchall()
    return [r[0] for r in rows]


def choose_variant(con, benchmark: str, variant: str | None) -> str:
    variants = available_variants(con, benchmark)
    if not variants:
        known = [r[0] for r in con.execute("SELECT DISTINCT benchmark FROM responses ORDER BY 1").fetchall()]
        raise MatrixError(f"benchmark {benchmark!r} has no responses in the store; benchmarks stored: {known}")
    if variant is not None:
        if variant not in variants:
            raise MatrixError(f"benchmark {benchmark!r} has no variant {variant!r}; variants: {variants}")
        return variant
    if len(variants) == 1:
        return variants[0]
    if "" in variants:
        return ""
    raise MatrixError(f"benchmark {benchmark!r} has several variants and no base (''); choose one with --variant: {variants}")


def load_matrices(con, benchmark: str, variant: str | None = None,
                  models: list[str] | None = None) -> BenchmarkMatrices:
    """Read one benchmark's responses (one variant, replicates averaged) into matrices.

    ``models`` restricts the read to those model ids (comparisons of a few models).
    """
    chosen = choose_variant(con, benchmark, variant)
    # The model filter is a list of bound parameters; with no filter the clause is always true.
    model_sql = f" AND r.model IN ({', '.join('?' for _ in models)})" if models else ""
    params = [benchmark, chosen, *(models or [])]
    max_rep = con.execute(f"SELECT max(replicate) FROM responses r WHERE r.benchmark = ? AND r.variant = ?{model_sql}",
                          params).fetchall()[0][0]
    if max_rep == 0:
        # One response per (model, item): skip the aggregation, by far the costliest step.
        long = query_pl(con, """
            SELECT r.model, r.item_id, i.subject, i.domain, r.score, 1::UINTEGER AS n_replicates
            FROM responses r JOIN items i ON i.benchmark = r.benchmark AND i.item_id = r.item_id
            WHERE r.benchmark = ? AND r.variant = ?""" + model_sql, params)
    else:
        long = query_pl(con, """
            SELECT r.model, r.item_id, i.subject, i.domain, avg(r.score) AS score,
                   count(*)::UINTEGER AS n_replicates
            FROM responses r JOIN items i ON i.benchmark = r.benchmark AND i.item_id = r.item_id
            WHERE r.benchmark = ? AND r.variant = ?""" + model_sql + """
            GROUP BY r.model, r.item_id, i.subject, i.domain""", params)
    long = long.cast(LONG_SCHEMA)  # row order is not part of the contract; derived frames sort
    return BenchmarkMatrices(benchmark=benchmark, variant=chosen, long=long)


def source_refs(con, benchmark: str) -> pl.DataFrame:
    """Sources that contributed rows to the benchmark (for the run manifest)."""
    return query_pl(con, """
        SELECT path, sha256, format, rows_added, strftime(ingested_at, '%Y-%m-%dT%H:%M:%SZ') AS ingested_at
        FROM sources WHERE source_id IN (SELECT DISTINCT source_id FROM responses WHERE benchmark = ?)
        ORDER BY source_id""", [benchmark])
