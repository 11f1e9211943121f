"""`benchcert export --parquet DIR`: the store's audit tables as hive-partitioned Parquet.

Work on other processes or machines (Dask workers: ``benchcert audit --dask-workers N``, see
flows/scale_out.py) reads this export, never the DuckDB file, which allows one writing process at a time.
"""

from __future__ import annotations

from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, print_json, require_store
from benchcert.flows.cli.options import command


def cmd_export(args) -> int:
    """Write models, variants, items, response_codes and sources as Parquet under
    DIR/<table>/benchmark=<name>/ (hive partitions) with DIR/export.json. Dask workers read this export
    instead of the DuckDB file. An existing DIR is replaced atomically if it is an earlier export."""
    from benchcert.tasks.store.export import export_parquet

    require_store(args.db)
    # an export that cannot be written (ExportError) or a locked store (StoreError) reaches main()
    report = export_parquet(args.db, args.parquet, benchmarks=args.benchmark or None,
                            lock_timeout=args.lock_timeout)
    if args.json:
        print_json(report.as_dict())
    else:
        print(f"exported {len(report.benchmarks)} benchmark(s), {report.rows['response_codes']:,} responses, "
              f"{report.bytes / 2**20:.1f} MiB to {report.out} in {report.seconds:.1f} s")
    return EXIT_OK


def register(sub) -> None:
    from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

    sp = command(sub, "export", cmd_export,
                 help="export the store's audit tables as Parquet, partitioned by benchmark")
    sp.add_argument("--parquet", type=Path, required=True, metavar="DIR", help="output folder")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", action="append", metavar="NAME",
                    help="export only this benchmark (repeatable; default: all)")
    sp.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="S")
    sp.add_argument("--json", action="store_true")
