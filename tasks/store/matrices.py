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

import polars as pl

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.store.connection import query_pl

# The matrices themselves live apart from the reads (dense_read.py builds them too); their names are
# used here and stay importable from this module, as every caller has always imported them.
from benchcert.tasks.store.benchmark_matrices import (ITEM_SCHEMA, LONG_SCHEMA, BenchmarkMatrices,  # noqa: F401
                                                      MatrixError, RawResponses, matrices_from_raw)


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
    from benchcert.tasks.store.dense_read import read_dense  # (its numba kernels: imported when read)

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
