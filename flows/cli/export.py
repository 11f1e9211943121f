"""`benchcert export --parquet DIR`: the store's audit tables as hive-partitioned Parquet.

Work on other processes or machines (Dask workers: ``benchcert audit --dask-workers N``)
reads this export, never the DuckDB file, which allows one writing process at a time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, exit_code, print_json, require_store
from benchcert.tasks.errors import MissingStoreError


def cmd_export(args) -> int:
    from benchcert.tasks.store.export import ExportError, export_parquet
    from benchcert.tasks.store.connection import StoreError

    try:
        require_store(args.db)
        report = export_parquet(args.db, args.parquet, benchmarks=args.benchmark or None,
                                lock_timeout=args.lock_timeout)
    except (MissingStoreError, ExportError, StoreError) as exc:
        print(f"benchcert export: {exc}", file=sys.stderr)
        return exit_code(exc)
    if args.json:
        print_json(report.as_dict())
    else:
        print(f"exported {len(report.benchmarks)} benchmark(s), {report.rows['response_codes']:,} responses, "
              f"{report.bytes / 2**20:.1f} MiB to {report.out} in {report.seconds:.1f} s")
    return EXIT_OK


def register(sub) -> None:
    from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT

    sp = sub.add_parser("export", help="export the store's audit tables as Parquet, partitioned by benchmark",
                        description="Write models, variants, items, response_codes and sources as Parquet under "
                                    "DIR/<table>/benchmark=<name>/ (hive partitions) with DIR/export.json. Dask "
                                    "workers read this export instead of the DuckDB file. An existing DIR is "
                                    "replaced atomically if it is an earlier export.")
    sp.add_argument("--parquet", type=Path, required=True, metavar="DIR", help="output folder")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", action="append", metavar="NAME",
                    help="export only this benchmark (repeatable; default: all)")
    sp.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="S")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_export)


def add_dask_arguments(sp) -> None:
    """The audit's scale-out options (benchcert audit)."""
    sp.add_argument("--all-pairs", action="store_true",
                    help="compare every pair of models even beyond 150 models (default there: each model against "
                         "the next in the ranking and every pair among the top 20)")
    g = sp.add_argument_group("scale-out on Dask (default: one process)")
    g.add_argument("--dask-address", metavar="URL",
                   help="run the analyses on the Dask cluster whose scheduler is at URL (tcp://HOST:PORT); its "
                        "workers must be able to read the export folder")
    g.add_argument("--dask-workers", type=int, metavar="N",
                   help="run the analyses on a local Dask cluster of N worker processes started for this audit")
    g.add_argument("--export", type=Path, metavar="DIR",
                   help="where the store is exported for the workers (default ARTIFACTS/.export)")
    g.add_argument("--dask-block-models", type=int, metavar="N",
                   help="models per block of the per-model and pairwise work sent to the workers (hierarchical "
                        "fits, paired comparisons; default 500)")


def dask_audit(args, audit_flow):
    """The audit flow and its extra keyword arguments: unchanged without Dask options; else the store's
    benchmark is exported to Parquet and the flow gets a DaskTaskRunner. ValueError on bad options."""
    address, workers = getattr(args, "dask_address", None), getattr(args, "dask_workers", None)
    block = getattr(args, "dask_block_models", None)
    if not address and workers is None:
        if getattr(args, "export", None) or block is not None:
            raise ValueError("--export and --dask-block-models are for the Dask workers; give --dask-address or "
                             "--dask-workers with them")
        return audit_flow, {}
    from benchcert.tasks.audit.distributed import dask_task_runner, model_blocks
    from benchcert.tasks.store.export import export_parquet

    runner = dask_task_runner(address=address, workers=workers)  # validates the options before any work
    if block is not None:
        model_blocks(1, block)  # validates it (ValueError: an integer >= 2)
    export = args.export or (Path(args.artifacts) / ".export")
    export_parquet(args.db, export, benchmarks=[args.benchmark], lock_timeout=args.lock_timeout)
    return audit_flow.with_options(task_runner=runner), {"export_dir": str(export), "dask_block_models": block}
