"""``benchcert suite``: name a suite of benchmarks (with weights) once, in the store.

    benchcert suite define NAME B1 B2 ... [--weights W1,W2,...] --db FILE   # store it (replaces NAME)
    benchcert suite list --db FILE [--json]
    benchcert suite show NAME --db FILE [--json]
    benchcert suite delete NAME --db FILE

A suite is what ``compare --suite NAME`` and ``notify-checkpoint --suite NAME`` judge a checkpoint
on (benchcert.tasks.compare.suite); a TOML file or ``--suite all`` can stand in for a stored one
(benchcert.tasks.compare.suite_def). Exit codes as in benchcert.flows.cli: 0 ok, 1 no such suite,
2 usage, 3 store locked or unusable.
"""

from __future__ import annotations

from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, print_json, require_store
from benchcert.flows.cli.options import lock_timeout_option
from benchcert.tasks.errors import UsageError


def _weights(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UsageError(f"--weights must be numbers separated by commas; got {text!r}") from exc


def register(sub) -> None:
    sp = sub.add_parser("suite", help="define, list and show suites of benchmarks (what compare --suite judges)",
                        description="A suite is a named list of benchmarks with optional weights, kept in the store. "
                                    "compare --suite NAME judges a checkpoint on all of them at once: whether it "
                                    "regressed anywhere (family-wise error controlled), which benchmarks improved or "
                                    "regressed, and the suite score (the weighted mean of the benchmarks' gaps).")
    ss = sp.add_subparsers(dest="suite_action", required=True, metavar="ACTION")
    d = ss.add_parser("define", help="store a suite (replaces a suite of that name)")
    d.add_argument("name")
    d.add_argument("benchmarks", nargs="+", metavar="BENCHMARK")
    d.add_argument("--weights", default=None, metavar="W1,W2,...",
                   help="one weight per benchmark, >= 0 (default 1 each); the suite score normalises them")
    show = ss.add_parser("show", help="a stored suite's benchmarks and weights")
    delete = ss.add_parser("delete", help="remove a stored suite")
    for named in (show, delete):
        named.add_argument("name")
    for p in (d, ss.add_parser("list", help="the stored suites"), show, delete):
        p.add_argument("--db", type=Path, required=True, help="DuckDB store file")
        lock_timeout_option(p)
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        p.set_defaults(func=cmd_suite)


def cmd_suite(args) -> int:
    from benchcert.tasks.compare import suite_def

    if args.suite_action == "define":
        weights = None if args.weights is None else _weights(args.weights)
        s = suite_def.define(args.db, args.name, args.benchmarks, weights, lock_timeout=args.lock_timeout)
        if args.json:
            print_json(s.as_dict())
        else:
            print(f"suite {s.name!r}: {len(s.benchmarks)} benchmark(s) stored in {args.db}")
        return EXIT_OK
    require_store(args.db)
    if args.suite_action == "list":
        rows = suite_def.list_all(args.db, lock_timeout=args.lock_timeout)
        if args.json:
            print_json(rows)
        else:
            print("\n".join(f"{r['suite']}: {r['n_benchmarks']} benchmark(s), defined {r['defined_at']}" for r in rows)
                  or "no suite defined (benchcert suite define NAME B1 B2 ...)")
        return EXIT_OK
    if args.suite_action == "delete":
        from benchcert.tasks.store.connection import open_store
        from benchcert.tasks.store.suites import delete_suite

        suite_def.show(args.db, args.name, lock_timeout=args.lock_timeout)  # SuiteError when there is none
        with open_store(args.db, write=True, lock_timeout=args.lock_timeout) as con:
            n = delete_suite(con, args.name)
        print(f"suite {args.name!r} removed ({n} benchmark(s))")
        return EXIT_OK
    s = suite_def.show(args.db, args.name, lock_timeout=args.lock_timeout)
    if args.json:
        print_json(s.as_dict())
        return EXIT_OK
    total = sum(s.weights)
    print(f"suite {s.name!r}: {len(s.benchmarks)} benchmark(s)")
    for b, w in zip(s.benchmarks, s.weights):
        print(f"  {b:<40} weight {w:g} ({100 * w / total:.1f}% of the suite score)")
    return EXIT_OK
