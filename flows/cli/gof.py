"""``benchcert gof``: are a model's option probabilities right?

Per model, on the benchmark's stored option probabilities (table ``option_probs``): the
black-box goodness-of-fit test (black-box classifier GoF paper, Algorithms 1-2) and the
calibration summaries (Brier score, log loss, ECE).  See tasks/gof/analysis.py.

Exit codes as in flows/cli/__init__.py: 0 success (whatever the verdict); 1 the data do not allow it
(unknown benchmark or model, no probabilities, no correct options); 2 usage error; 3 the store
is locked or unusable.
"""

from __future__ import annotations


from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, print_json
from benchcert.flows.cli.options import benchmark_options, lock_timeout_option
from benchcert.tasks.errors import NoDataError


def cmd_gof(args) -> int:
    from benchcert.tasks.gof.service import GofOptions, run_gof

    opts = GofOptions(benchmark=args.benchmark, models=tuple(args.model or ()), variant=args.variant,
                      method=args.method, folds=args.folds, crossfit_variance=args.crossfit_variance,
                      distinguisher=args.distinguisher, delta=args.delta, alpha=args.alpha,
                      null_draws=args.null_draws, seed=args.seed, lock_timeout=args.lock_timeout)
    result = run_gof(args.db, opts)  # its UserErrors reach main()
    if args.json:
        print_json(result.to_dict())
        # The --json body names what failed ("error", no correct options); the exit code says so.
        return EXIT_OK if result.error is None else EXIT_DATA
    if result.error is not None:
        raise NoDataError(result.error)
    _print_table(result)
    return EXIT_OK


def _print_table(result) -> None:
    opts, rows = result.options, result.models
    level = f"{100 * (1 - opts.alpha):g}%"
    variance = next((r["variance"] for r in rows if r["variance"]), None)
    folds_text = f" ({opts.folds} folds, variance {variance})" if opts.method == "crossfit" and variance else ""
    print(f"benchmark {opts.benchmark!r} (variant {result.variant!r}): goodness of fit of option probabilities, "
          f"{opts.method}{folds_text}, "
          f"{opts.distinguisher} distinguisher, H0: separation <= {opts.delta:g}, alpha {opts.alpha:g}"
          + (f", cut-off from {opts.null_draws} null draws" if opts.null_draws else ""))
    head = (f"{'model':<32} {'n':>6} {'acc':>6} {'T':>6} {'delta_min':>9} {'reject':>6} {'brier':>6} "
            f"{'logloss':>7} {'ECE':>6}")
    print(head)
    print("-" * len(head))

    def f(v, spec):
        return "-" if v is None else format(v, spec)

    for r in rows:
        name = r["model"] if len(r["model"]) <= 32 else r["model"][:29] + "..."
        rej = "-" if r["reject"] is None else ("yes" if r["reject"] else "no")
        print(f"{name:<32} {r['n']:>6} {f(r['accuracy'], '6.3f')} {f(r['statistic'], '6.3f')} "
              f"{f(r['delta_min'], '9.3f')} {rej:>6} {f(r['brier'], '6.3f')} {f(r['log_loss'], '7.3f')} "
              f"{f(r['ece'], '6.3f')}")
    print(f"T = distinguisher AUC (0.5: the correct options look like draws from the model's probabilities); "
          f"delta_min = {level} lower bound on the separation; reject = misfit shown at level {opts.alpha:g} "
          "(not rejecting is not proof of fit)")
    for r in rows:
        if r["note"]:
            print(f"note: {r['model']}: {r['note']}")


def register(sub) -> None:
    from benchcert.stats.gof_settings import CROSSFIT_VARIANCES, DISTINGUISHERS, MIN_FOLD_ITEMS, MIN_ITEMS

    sp = sub.add_parser(
        "gof", help="are a model's option probabilities right? (goodness-of-fit test, Brier, log loss, ECE)",
        description=(
            "For each model with stored option probabilities (lm-evaluation-harness multiple-choice logs, "
            "inspect_ai logprobs, or --map prob_<option>=COLUMN at ingest): the black-box goodness-of-fit test "
            "(can a classifier tell the correct options from options drawn from the model's own probabilities? "
            "delta_min is a lower confidence bound on that separation, 0 to 0.5) and the calibration summaries. "
            f"Needs at least {MIN_ITEMS} items with a known correct option (cross-fitting: {MIN_FOLD_ITEMS} per "
            "fold); with fewer it says so instead of giving a number."))
    benchmark_options(sp)
    sp.add_argument("--model", action="append", metavar="M", help="only this model (repeatable; default: all)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the only one, else the base '')")
    sp.add_argument("--method", choices=["split", "crossfit"], default="split",
                    help="split (Algorithm 1, default: held its level in every simulation) or crossfit "
                         "(Algorithm 2, more power; variance 2 x the paper's (14), which held its level where "
                         "(14) alone did not)")
    sp.add_argument("--folds", type=int, default=5, help="cross-fitting folds (default 5)")
    sp.add_argument("--crossfit-variance", choices=list(CROSSFIT_VARIANCES), default=None,
                    help="variance of the cross-fit statistic: adjusted (default: 2 x the paper's (14), which held "
                         "its level at the exact null) or paper ((14) as published, which rejected 0.09-0.13 of "
                         "correct models at alpha 0.05; the result says so). --method crossfit only")
    sp.add_argument("--distinguisher", choices=list(DISTINGUISHERS), default="logistic",
                    help="classifier fitted per option to tell the samples apart (default logistic)")
    sp.add_argument("--delta", type=float, default=0.0, help="tolerance of H0: separation <= delta (default 0)")
    sp.add_argument("--alpha", type=float, default=0.05, help="level (default 0.05)")
    sp.add_argument("--null-draws", type=int, default=0, metavar="B",
                    help="calibrate the cut-off on B data sets with labels redrawn from the model's probabilities "
                         "(exact at delta 0 for either method; B+1 times the work; at least 1/alpha - 1, e.g. 99). "
                         "Default 0: the paper's normal cut-off")
    sp.add_argument("--seed", type=int, default=0, help="seed of the random draws (default 0)")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=cmd_gof)
