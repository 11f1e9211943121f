"""``benchcert gof``: are a model's option probabilities right?

Per model, on the benchmark's stored option probabilities (table ``option_probs``): the
black-box goodness-of-fit test (black-box classifier GoF paper, Algorithms 1-2) and the
calibration summaries (Brier score, log loss, ECE).  See tasks/gof/analysis.py.

Exit codes as in flows/cli/__init__.py: 0 success (whatever the verdict); 1 the data do not allow it
(unknown benchmark or model, no probabilities, no correct options); 2 usage error; 3 the store
is locked or unusable.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE


def _json_default(x):
    return str(x)


def _finite(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def cmd_gof(args) -> int:
    from benchcert.tasks.gof.analysis import evaluate_model, load_option_probs
    from benchcert.tasks.store.connection import StoreError, StoreLockedError, open_store

    prog = "benchcert gof"
    if not 0 < args.alpha < 1:
        print(f"{prog}: --alpha must be in (0, 1); got {args.alpha}", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.delta < 0.5:
        print(f"{prog}: --delta must be in [0, 0.5); got {args.delta}", file=sys.stderr)
        return EXIT_USAGE
    if args.null_draws and args.null_draws < math.ceil(1 / args.alpha - 1):
        print(f"{prog}: --null-draws must be 0 or at least {math.ceil(1 / args.alpha - 1)} at alpha {args.alpha:g}; "
              f"got {args.null_draws}", file=sys.stderr)
        return EXIT_USAGE
    if args.null_draws < 0:
        print(f"{prog}: --null-draws must be >= 0; got {args.null_draws}", file=sys.stderr)
        return EXIT_USAGE
    if args.crossfit_variance is not None and args.method != "crossfit":
        print(f"{prog}: --crossfit-variance applies to --method crossfit only; got --method {args.method}",
              file=sys.stderr)
        return EXIT_USAGE
    crossfit_variance = args.crossfit_variance or "adjusted"
    if args.folds < 2:
        print(f"{prog}: --folds must be at least 2; got {args.folds}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.db).is_file():
        print(f"{prog}: {args.db}: no such store; ingest something first", file=sys.stderr)
        return EXIT_STORE
    try:
        with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:
            known = {r[0] for r in con.execute("SELECT DISTINCT benchmark FROM models").fetchall()}
            frame, variant = load_option_probs(con, args.benchmark, variant=args.variant,
                                               models=args.model or None)
    except StoreLockedError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_STORE
    except StoreError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_STORE
    if args.benchmark not in known:
        print(f"{prog}: unknown benchmark {args.benchmark!r} (the store has: {', '.join(sorted(known)) or 'none'})",
              file=sys.stderr)
        return EXIT_DATA
    if frame.height == 0:
        what = f" for model(s) {', '.join(args.model)}" if args.model else ""
        print(f"{prog}: benchmark {args.benchmark!r} has no option probabilities{what}"
              + (f" in variant {variant!r}" if variant is not None else "")
              + "; they come from lm-evaluation-harness multiple-choice logs, inspect_ai logs with logprobs, "
                "or --map prob_<option>=COLUMN at ingest", file=sys.stderr)
        return EXIT_DATA
    missing = sorted(set(args.model or []) - set(frame["model"].to_list()))
    if missing:
        print(f"{prog}: no option probabilities for model(s) {', '.join(missing)} in {args.benchmark!r}",
              file=sys.stderr)
        return EXIT_DATA
    results = []
    import polars as pl

    for model in sorted(set(frame["model"].to_list())):
        row, _ = evaluate_model(frame.filter(pl.col("model") == model), alpha=args.alpha, method=args.method,
                                folds=args.folds, distinguisher=args.distinguisher, delta=args.delta,
                                seed=args.seed, null_draws=args.null_draws, crossfit_variance=crossfit_variance)
        results.append({
            "model": model, "n": row["n_items"], "n_unlabelled": row["n_unlabelled"], "n_options": row["n_options"],
            "method": args.method, "folds": args.folds if args.method == "crossfit" else None,
            "variance": row.get("gof_variance"),
            "distinguisher": args.distinguisher, "alpha": args.alpha, "delta": args.delta,
            "n_eval": row.get("gof_n_eval"), "statistic": row.get("gof_statistic"), "sigma": row.get("gof_sigma"),
            "delta_min": row.get("gof_delta_min"), "reject": row.get("gof_reject"),
            "p_value": row.get("gof_p_value"), "critical_value": row.get("gof_critical_value"),
            "null_draws": args.null_draws, "accuracy": row.get("accuracy"), "brier": row.get("brier"),
            "brier_interval": [row.get("brier_lower"), row.get("brier_upper")] if "brier" in row else None,
            "log_loss": row.get("log_loss"),
            "log_loss_interval": [row.get("log_loss_lower"), row.get("log_loss_upper")] if "log_loss" in row else None,
            "ece": row.get("ece"), "ece_if_calibrated": row.get("ece_null"), "ece_bins": row.get("n_bins"),
            "note": row.get("note")})
    results = [{k: (_finite(v) if not isinstance(v, list) else [_finite(x) for x in v]) for k, v in r.items()}
               for r in results]
    if not any(r["n"] for r in results):
        msg = "no item has a known correct option; the test needs the label of every item it uses"
        if args.json:
            print(json.dumps({"benchmark": args.benchmark, "variant": variant, "error": msg, "models": results},
                             indent=2, default=_json_default))
        else:
            print(f"{prog}: {msg}", file=sys.stderr)
        return EXIT_DATA
    if args.json:
        print(json.dumps({"benchmark": args.benchmark, "variant": variant, "seed": args.seed, "models": results},
                         indent=2, default=_json_default))
        return EXIT_OK
    level = f"{100 * (1 - args.alpha):g}%"
    variance = next((r["variance"] for r in results if r["variance"]), None)
    folds_text = f" ({args.folds} folds, variance {variance})" if args.method == "crossfit" and variance else ""
    print(f"benchmark {args.benchmark!r} (variant {variant!r}): goodness of fit of option probabilities, "
          f"{args.method}{folds_text}, "
          f"{args.distinguisher} distinguisher, H0: separation <= {args.delta:g}, alpha {args.alpha:g}"
          + (f", cut-off from {args.null_draws} null draws" if args.null_draws else ""))
    head = (f"{'model':<32} {'n':>6} {'acc':>6} {'T':>6} {'delta_min':>9} {'reject':>6} {'brier':>6} "
            f"{'logloss':>7} {'ECE':>6}")
    print(head)
    print("-" * len(head))

    def f(v, spec):
        return "-" if v is None else format(v, spec)

    for r in results:
        name = r["model"] if len(r["model"]) <= 32 else r["model"][:29] + "..."
        rej = "-" if r["reject"] is None else ("yes" if r["reject"] else "no")
        print(f"{name:<32} {r['n']:>6} {f(r['accuracy'], '6.3f')} {f(r['statistic'], '6.3f')} "
              f"{f(r['delta_min'], '9.3f')} {rej:>6} {f(r['brier'], '6.3f')} {f(r['log_loss'], '7.3f')} "
              f"{f(r['ece'], '6.3f')}")
    print(f"T = distinguisher AUC (0.5: the correct options look like draws from the model's probabilities); "
          f"delta_min = {level} lower bound on the separation; reject = misfit shown at level {args.alpha:g} "
          "(not rejecting is not proof of fit)")
    for r in results:
        if r["note"]:
            print(f"note: {r['model']}: {r['note']}")
    return EXIT_OK


def register(sub) -> None:
    from benchcert.stats.gof import CROSSFIT_VARIANCES, DISTINGUISHERS, MIN_FOLD_ITEMS, MIN_ITEMS

    sp = sub.add_parser(
        "gof", help="are a model's option probabilities right? (goodness-of-fit test, Brier, log loss, ECE)",
        description=(
            "For each model with stored option probabilities (lm-evaluation-harness multiple-choice logs, "
            "inspect_ai logprobs, or --map prob_<option>=COLUMN at ingest): the black-box goodness-of-fit test "
            "(can a classifier tell the correct options from options drawn from the model's own probabilities? "
            "delta_min is a lower confidence bound on that separation, 0 to 0.5) and the calibration summaries. "
            f"Needs at least {MIN_ITEMS} items with a known correct option (cross-fitting: {MIN_FOLD_ITEMS} per "
            "fold); with fewer it says so instead of giving a number."))
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", required=True)
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
    sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for another benchcert process using the store (default 600)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=cmd_gof)
