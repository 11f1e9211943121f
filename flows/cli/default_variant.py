"""``benchcert default-variant``: set once which prompt variant a benchmark's commands use.

    benchcert default-variant --db FILE --benchmark NAME            # show it and the variants
    benchcert default-variant --db FILE --benchmark NAME VARIANT    # set it ('' = the unnamed variant)
    benchcert default-variant --db FILE --benchmark NAME --clear    # back to the built-in rule

Every command that reads one variant (audit, compare, perturb's base, the nightly and checkpoint
deployments) chooses it by one rule (tasks/store/matrices.py, ``choose_variant``): the variant given
on the command line, else this stored default, else the only variant, else ``""``, else it
refuses and says how to choose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE


def cmd_default_variant(args) -> int:
    from benchcert.tasks.store.matrices import available_variants
    from benchcert.tasks.store.connection import get_default_variant, open_store, set_default_variant

    prog = "benchcert default-variant"
    if args.variant is not None and args.clear:
        print(f"{prog}: give a VARIANT or --clear, not both", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.db).is_file():
        print(f"{prog}: {args.db}: no such store; ingest something first", file=sys.stderr)
        return EXIT_STORE
    writing = args.variant is not None or args.clear
    with open_store(args.db, write=writing, lock_timeout=args.lock_timeout) as con:
        variants = available_variants(con, args.benchmark)
        if not variants:
            known = [r[0] for r in con.execute("SELECT DISTINCT benchmark FROM models ORDER BY 1").fetchall()]
            print(f"{prog}: benchmark {args.benchmark!r} has no responses in the store; benchmarks stored: {known}",
                  file=sys.stderr)
            return EXIT_DATA
        if args.variant is not None and args.variant not in variants:
            print(f"{prog}: benchmark {args.benchmark!r} has no variant {args.variant!r}; variants: {variants}",
                  file=sys.stderr)
            return EXIT_DATA
        if writing:
            set_default_variant(con, args.benchmark, None if args.clear else args.variant)
        default = get_default_variant(con, args.benchmark)
    if args.json:
        print(json.dumps({"benchmark": args.benchmark, "default_variant": default, "variants": variants}))
    elif default is None:
        print(f"benchmark {args.benchmark!r}: no default variant set (variants: {variants})")
    else:
        print(f"benchmark {args.benchmark!r}: default variant {default!r} (variants: {variants})")
    return EXIT_OK


def register(sub) -> None:
    sp = sub.add_parser(
        "default-variant", aliases=["set-default-variant"],
        help="show or set the prompt variant a benchmark's commands use when none is given",
        description="Store a benchmark's default variant in the store. Commands that read one variant (audit, "
                    "compare, perturb's base, the deployments) use: the variant given on the command line, else "
                    "this default, else the only variant, else the unnamed variant '', else they refuse.")
    sp.add_argument("variant", nargs="?", metavar="VARIANT", help="the variant to make the default ('' = unnamed)")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", required=True)
    sp.add_argument("--clear", action="store_true", help="remove the stored default")
    sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for another benchcert process using the store (default 600)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=cmd_default_variant)
