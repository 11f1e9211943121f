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

from benchcert.flows.cli.errors import EXIT_OK
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option


def cmd_default_variant(args) -> int:
    """Store a benchmark's default variant in the store. Commands that read one variant (audit, compare,
    perturb's base, the deployments) use: the variant given on the command line, else this default, else the
    only variant, else the unnamed variant '', else they refuse."""
    from benchcert.tasks.store.matrices import default_variant

    got = default_variant(args.db, args.benchmark, variant=args.variant, clear=args.clear,
                          lock_timeout=args.lock_timeout)  # its UserErrors reach main()
    if args.json:
        print(json.dumps(got.to_dict()))
    elif got.default is None:
        print(f"benchmark {got.benchmark!r}: no default variant set (variants: {got.variants})")
    else:
        print(f"benchmark {got.benchmark!r}: default variant {got.default!r} (variants: {got.variants})")
    return EXIT_OK


def register(sub) -> None:
    sp = command(sub, "default-variant", cmd_default_variant, aliases=["set-default-variant"],
                 help="show or set the prompt variant a benchmark's commands use when none is given")
    sp.add_argument("variant", nargs="?", metavar="VARIANT", help="the variant to make the default ('' = unnamed)")
    benchmark_options(sp)
    sp.add_argument("--clear", action="store_true", help="remove the stored default")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
