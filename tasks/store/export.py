"""A partitioned Parquet export of the store, and a read-only view of it that the loaders use.

DuckDB allows one writing process per database file, so work spread over other processes
or machines (Dask workers) never opens the store. ``benchcert export --parquet DIR`` writes
the tables an audit reads, hive-partitioned by benchmark::

    DIR/export.json                        what was exported, from which store, when
    DIR/<table>/benchmark=<name>/*.parquet  models, variants, items, response_codes, sources
                                           (and subsets, subset_items once a subset was recorded,
                                           option_probs once option probabilities were ingested)

(``<name>`` percent-encoded as DuckDB writes hive partitions, so a benchmark name cannot
leave its folder.) :func:`open_export` gives an in-memory DuckDB connection in which those
tables, restricted to one benchmark, are views over the Parquet files, so the same loaders
(:func:`~benchcert.tasks.store.matrices.load_matrices`, ``source_refs``, variant counts) read the
export exactly as they read the store, and produce the same matrices.

The export is written under a hidden name beside ``DIR`` and renamed into place, so a
reader sees a complete export or none; an existing ``DIR`` is replaced only if it is an
earlier export (it holds ``export.json``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb

from benchcert.tasks.store import connection as store
from benchcert.tasks.store import schema
from benchcert.tasks.errors import DataError
from benchcert.tasks.store.matrices import stored_benchmarks

#: Tables exported, each with the query giving its rows and a ``benchmark`` column.
EXPORT_QUERIES = {
    "models": "SELECT * FROM models",
    "variants": "SELECT * FROM variants",
    "items": "SELECT * FROM items",
    "response_codes": "SELECT r.*, m.benchmark FROM response_codes r JOIN models m ON m.model_id = r.model_id",
    # A source feeds one benchmark (sources.benchmark), or several: one row per benchmark it fed.
    "sources": """SELECT s.* EXCLUDE (benchmark), f.benchmark FROM sources s JOIN (
                      SELECT DISTINCT r.source_id, m.benchmark FROM response_codes r
                      JOIN models m ON m.model_id = r.model_id) f ON f.source_id = s.source_id""",
}
#: Tables that exist only once something wrote them, by the tables each needs: recorded subsets
#: (tasks/subsample/subsets.py) and option probabilities (tasks/store/option_probs.py, the audit's
#: calibration analysis: a worker that cannot read them would leave its tables out).
OPTIONAL_QUERIES = {
    "subsets": (("subsets", "subset_items"), "SELECT * FROM subsets"),
    "subset_items": (("subsets", "subset_items"),
                     "SELECT si.*, s.benchmark FROM subset_items si JOIN subsets s ON s.subset_id = si.subset_id"),
    "option_probs": (("option_probs",), "SELECT * FROM option_probs"),
}
MANIFEST = "export.json"
EXPORT_VERSION = 1


class ExportError(DataError):
    """The export cannot be written or read as asked (not an export, unknown benchmark; exit code 1)."""


@dataclass(frozen=True)
class ExportReport:
    out: Path
    benchmarks: list[str]
    rows: dict[str, int]
    bytes: int
    seconds: float

    def as_dict(self) -> dict:
        return {"out": str(self.out), "benchmarks": self.benchmarks, "rows": self.rows, "bytes": self.bytes,
                "seconds": round(self.seconds, 3)}


def export_parquet(db: str | os.PathLike, out: str | os.PathLike, *, benchmarks: list[str] | None = None,
                   lock_timeout: float = store.DEFAULT_LOCK_TIMEOUT) -> ExportReport:
    """Write the store's audit tables (all benchmarks, or ``benchmarks``) as Parquet under ``out``."""
    start = time.perf_counter()
    out = Path(out)
    if out.exists() and not (out.is_dir() and (out / MANIFEST).is_file()):
        raise ExportError(f"{out} exists and is not a benchcert export (no {MANIFEST}); choose another folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    rows: dict[str, int] = {}
    try:
        with store.open_store(db, write=False, lock_timeout=lock_timeout) as con:
            stored = stored_benchmarks(con)
            chosen = stored if benchmarks is None else list(dict.fromkeys(benchmarks))
            unknown = [b for b in chosen if b not in stored]
            if unknown:
                raise ExportError(f"benchmark(s) {unknown} have no responses in {db}; stored: {stored}")
            queries = {**EXPORT_QUERIES, **{t: q for t, (needs, q) in OPTIONAL_QUERIES.items()
                                            if schema.has_tables(con, *needs)}}
            for table, query in queries.items():
                sql = f"SELECT * FROM ({query}) WHERE benchmark IN (SELECT unnest(?::VARCHAR[]))"
                rel = con.sql(sql, params=[chosen])
                rows[table] = int(con.execute(f"SELECT count(*) FROM ({sql})", [chosen]).fetchall()[0][0])
                (tmp / table).mkdir()
                if rows[table]:
                    rel.write_parquet(str(tmp / table), partition_by=["benchmark"], overwrite=True)
        (tmp / MANIFEST).write_text(json.dumps({
            "export_version": EXPORT_VERSION, "export_id": uuid.uuid4().hex, "store": str(Path(db).resolve()),
            "exported_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "benchmarks": chosen, "rows": rows, "tables": list(rows)}, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return ExportReport(out=out, benchmarks=chosen, rows=rows, bytes=size, seconds=time.perf_counter() - start)


def export_manifest(export_dir: str | os.PathLike) -> dict:
    path = Path(export_dir) / MANIFEST
    if not path.is_file():
        raise ExportError(f"{export_dir} is not a benchcert export (no {MANIFEST}); write one with "
                          "`benchcert export --parquet DIR`")
    return json.loads(path.read_text(encoding="utf-8"))


def open_export(export_dir: str | os.PathLike, benchmark: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose tables are the export's rows of ``benchmark``.

    Views are built with DuckDB's relation API (the benchmark is an expression constant, not
    SQL text); each reads only its benchmark's partition. The caller closes the connection.
    """
    manifest = export_manifest(export_dir)
    if benchmark not in manifest["benchmarks"]:
        raise ExportError(f"benchmark {benchmark!r} is not in the export {export_dir}; exported: "
                          f"{manifest['benchmarks']}")
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")  # as the store's connections: never on stdout
        for table in manifest.get("tables", list(EXPORT_QUERIES)):
            files = sorted((Path(export_dir) / table).glob("benchmark=*/*.parquet"))
            if files:
                rel = con.read_parquet([str(f) for f in files], hive_partitioning=True)
                rel = rel.filter(duckdb.ColumnExpression("benchmark") == duckdb.ConstantExpression(benchmark))
                rel.create_view(table)
            elif table in EXPORT_QUERIES:  # no rows exported: an empty table of the store's columns
                _empty_table(con, table)
            # an optional table without rows stays absent, as in a store that never wrote it
    except Exception:
        con.close()
        raise
    return con


def _empty_table(con, table: str) -> None:
    if table not in schema.TABLES:
        raise ExportError(f"unknown export table {table!r}")
    con.execute(schema.table_ddl(table))
