"""``benchcert runs`` (the audit runs recorded in the store) and ``benchcert show`` (one run's summary).

Exit codes as in flows/cli/errors.py: 0 success; 1 the run failed or is not found; 2 usage
error; 3 the store is locked or unusable.
"""

from __future__ import annotations

from pathlib import Path

from benchcert.flows.cli.audit import summary_table
# EXIT_STORE: importable from here as from every command (tests/flows/test_cli_hygiene.py).
from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, print_json  # noqa: F401
from benchcert.flows.cli.options import store_options
from benchcert.tasks.errors import NoDataError, UsageError


def cmd_runs(args) -> int:
    from benchcert.tasks.store.connection import list_runs, open_store

    with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:  # StoreError: exit 3
        runs = list_runs(con, args.benchmark)
    if args.json:
        print_json(runs.to_dicts())
        return EXIT_OK
    if runs.height == 0:
        print("no runs")
    for r in runs.iter_rows(named=True):
        print(f"{r['run_id']}  {r['benchmark']:<20} {r['status']:<9} {r['finished_at'] or '':<20} "
              f"{r['n_models'] or '':>4} models  {r['run_dir'] or r['error'] or ''}")
    return EXIT_OK


def cmd_show(args) -> int:
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.store.connection import get_run, open_store

    run_dir, row = None, None
    if args.artifacts is not None:
        run_dir = artifacts.find_run(args.artifacts, args.run)
    elif args.db is not None:
        with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:  # StoreError: exit 3
            row = get_run(con, args.run)
        if row and row["run_dir"]:
            run_dir = Path(row["run_dir"])
    else:
        raise UsageError("give --db FILE or --artifacts DIR")
    if row is not None and row["status"] != "completed":
        # The answer, not an error: the run's record on stdout, and exit 1 as the run failed.
        if args.json:
            print_json({"run": row})
        else:
            print(f"run {args.run}: {row['status']}: {row['error']}")
        return EXIT_DATA
    if run_dir is None or not (run_dir / "summary.json").is_file():
        raise NoDataError(f"run {args.run!r} not found")
    summary = artifacts.load_json(run_dir / "summary.json")
    manifest = artifacts.load_json(run_dir / "manifest.json")
    if args.json:
        print_json({"run_dir": str(run_dir), "summary": summary, "manifest": manifest})
        return EXIT_OK
    print(f"run {summary['run_id']} of {summary['benchmark']!r}, finished {manifest['finished_at']}")
    print(summary_table(summary))
    print(f"report: {run_dir / 'report.html'}")
    return EXIT_OK


def register(sub) -> None:
    sp = sub.add_parser("runs", help="list recorded audit runs")
    store_options(sp)
    sp.add_argument("--benchmark", help="only this benchmark")
    sp.set_defaults(func=cmd_runs)

    sp = sub.add_parser("show", help="show one run's summary")
    sp.add_argument("run", metavar="RUN", help="run id")
    store_options(sp, db_required=False)
    sp.add_argument("--artifacts", type=Path, metavar="DIR", help="find the run under this artifacts root")
    sp.set_defaults(func=cmd_show)
