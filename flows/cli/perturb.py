"""``benchcert perturb`` (audit logs with prompt variants) and ``benchcert plan perturbation``
(design a study: choose eps, m, r under a budget; composite-null paper, Algorithm C).

Exit codes as in flows/cli/errors.py: 0 success; 1 the data do not allow it (unknown benchmark or
variant, no valid design); 2 usage error; 3 the store is locked or unusable.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, alpha_arg, print_json, require_store
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option
from benchcert.tasks.errors import UsageError


def _variants(text: str | None) -> list[str] | None:
    # A comma list; "" names the unnamed base variant, as in the canonical row.
    return None if text is None else [v.strip() for v in text.split(",")]


def _count(text: str) -> int:
    """A positive count, accepting 1e7-style input."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < 1 or not v.is_integer():
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(v)


# --------------------------------------------------------------------------------------
# benchcert perturb


_METHOD_NAMES = {"calibrated": "calibrated widened-range test",
                 "widened": "widened-range test with Hoeffding margins, assumption-light",
                 "plugin_exact": "plug-in exact calibration, assumption-dependent",
                 "plugin_union": "plug-in union bound, assumption-dependent"}


def cmd_perturb(args) -> int:
    """Per item and tested variant: the composite-null test (does the tested variant's response rate lie
    outside the null variants' range, widened for their sampling and binomial noise? valid at alpha without
    estimating the null range; items where no outcome could reject are reported as 'no power', never as 0%)
    beside the classical Fisher test against the base (energy-distance permutation test for fractional
    scores); per tested variant the share of items where the change matters, raw and after Benjamini-Hochberg
    across items. Without --null/--test every other variant is tested against all the rest. The base is
    --base, else the benchmark's default variant (benchcert default-variant), else the only one, else '', else
    the command refuses."""
    from benchcert.tasks.perturbation.service import audit_stored
    from benchcert.tasks.render.text import perturbation_text

    alpha_arg(args.alpha)
    require_store(args.db)
    # a locked store (StoreError), an unknown benchmark (MatrixError) or a design that does not fit
    # it (DesignError) reaches main() as raised
    audit = audit_stored(args.db, args.benchmark, base=args.base, null=_variants(args.null),
                         test=_variants(args.test), alpha=args.alpha, method=args.method,
                         models=_variants(args.model), lock_timeout=args.lock_timeout)
    from benchcert.tasks.perturbation.planning import plans_for_audit

    # where items have no power: the replicates (and null variants) that would give the default test power
    plans = {(p.model, p.variant): p for p in plans_for_audit(audit, detect=args.detect, only_no_power=True)}
    if args.json:
        print_json({"benchmark": args.benchmark, "alpha": audit.alpha, "method": audit.method,
                     "assumptions": list(audit.assumptions), "design": audit.design.as_dict(),
                     "variants": audit.variants.to_dicts(), "items": audit.items.to_dicts(),
                     "plans": [p.as_dict() for p in plans.values()], "notes": list(audit.notes)})
        return EXIT_OK
    print(perturbation_text(audit, plans, benchmark=args.benchmark, method_name=_METHOD_NAMES[audit.method],
                            top_items=args.items))
    return EXIT_OK


# --------------------------------------------------------------------------------------
# benchcert plan perturbation


def cmd_plan_perturbation(args) -> int:
    """Algorithm C of the composite-null paper with Theorems 2 and 4 (not the misprinted pseudo-code): the
    threshold eps, the number m of null variants and the replicates r per variant that maximise the
    average-power bound while keeping the size bound at alpha, within a budget of model calls. Exit 1 when no
    design is valid (the output then names the smallest budget that gives one)."""
    from benchcert.tasks.perturbation.planning import pilot_range, plan_perturbation

    alpha_arg(args.alpha)
    if args.db is not None:
        return _plan_from_store(args)
    if args.budget is None:
        raise UsageError("give --budget (or --db and --benchmark to plan from the store)")
    pilot = None
    pilot_m, pilot_r = args.pilot_m, args.pilot_r
    if args.pilot_rates is not None:
        if args.a_hat is not None or args.b_hat is not None:
            raise UsageError("give --pilot-rates or --a-hat/--b-hat, not both")
        try:
            rates = [float(x) for x in args.pilot_rates.split(",")]
        except ValueError as exc:  # not numbers
            raise UsageError(f"--pilot-rates: {exc}") from None
        pilot = pilot_range(rates)  # rates stats' validators refuse: a UsageError naming --pilot-rates
        a_hat, b_hat = pilot["a_hat"], pilot["b_hat"]
        pilot_m = len(rates)
        if pilot_r == 0:
            raise UsageError("--pilot-rates needs --pilot-r (replicates per pilot variant)")
    else:
        if args.a_hat is None or args.b_hat is None:
            raise UsageError("give --a-hat and --b-hat (or --pilot-rates with --pilot-r)")
        a_hat, b_hat = args.a_hat, args.b_hat
    plan = plan_perturbation(a_hat, b_hat, args.budget, pilot=pilot, alpha=args.alpha, pilot_m=pilot_m,
                             pilot_r=pilot_r, eps_step=args.eps_step, eps_max_rule=args.eps_max_rule,
                             method=args.method)  # options stats' validators refuse: a UsageError
    design, out = plan.design, plan.as_dict()
    # No valid design is an answer (printed, with the smallest budget that gives one): exit 1.
    if args.json:
        print_json(out)
        return EXIT_OK if design.valid else EXIT_DATA
    print(f"null range [{design.a_hat:g}, {design.b_hat:g}] (width {design.width:g}), budget {design.budget:,} "
          f"(pilot {design.pilot_cost:,}), alpha {design.alpha:g}, {design.method}")
    print(f"eps_max = {design.eps_max:g}: {design.eps_max_rule}")
    if design.valid:
        print(f"design: eps = {design.eps:g}, m = {design.m} null variants, r = {design.r:,} replicates each "
              f"(m r = {design.m * design.r:,})")
        print(_bounds_text(design))
        if design.exact_size is not None:
            print(f"exact size = {design.exact_size:.4f}; exact average power = {design.exact_power:.4f}")
        if design.exact_size is None:
            print(f"{design.n_valid} of {design.n_candidates} thresholds on the grid admit a valid design")
        else:
            print(f"{design.n_valid} of the thresholds evaluated ({design.n_candidates} on the grid) admit a "
                  "valid design")
    else:
        more = (f"the smallest budget that gives one is {design.min_budget:,}" if design.min_budget
                else "no budget gives one on this grid")
        print(f"no valid (eps, m, r) under this budget; {more}")
    for n in design.notes:
        print(f"note: {n}")
    for w in out["warnings"]:
        print(f"warning: {w}")
    return EXIT_OK if design.valid else EXIT_DATA


def _bounds_text(design) -> str:
    """Theorem 2's size bound with the true relation to alpha, Theorem 4's power bound only where it says something."""
    held = design.size_bound <= design.alpha
    size = (f"size bound (Theorem 2) = {design.size_bound:.4f} {'<=' if held else '>'} {design.alpha:g}"
            + ("" if held else " (the exact size below is what keeps the level)"))
    if design.power_bound is None or not design.power_bound > 0:
        return size + "; average-power bound (Theorem 4) is not positive here: it says nothing"
    return size + f"; average-power bound (Theorem 4) = {design.power_bound:.4f}"


def _plan_from_store(args) -> int:
    from benchcert.tasks.perturbation.planning import plans_for_audit
    from benchcert.tasks.perturbation.service import audit_stored

    if not args.benchmark:
        raise UsageError("--db needs --benchmark")
    alpha_arg(args.detect, "--detect")
    alpha_arg(args.alpha)
    audit = audit_stored(args.db, args.benchmark, base=args.base, null=_variants(args.null),
                         test=_variants(args.test), alpha=args.alpha, models=_variants(args.model))
    plans = plans_for_audit(audit, detect=args.detect)
    if args.json:
        print_json({"benchmark": args.benchmark, "plans": [p.as_dict() for p in plans]})
        return EXIT_OK
    print(f"benchmark {args.benchmark!r}: replicates per variant for power 0.8 against a change of {args.detect:g} "
          f"beyond each item's null range (the calibrated test perturb runs, alpha {args.alpha:g}; the power is "
          "averaged over the items' own spread between null variants)")
    for p in plans:
        print(f"{p.model} {p.variant!r}: {p.sentence()}")
    return EXIT_OK


def register_plan(plan_sub) -> None:
    """Add ``perturbation`` to the sub-parsers of ``benchcert plan`` (flows/cli/plan.py calls it)."""
    sp = command(plan_sub, "perturbation", cmd_plan_perturbation,
                 help="choose eps, m and r for a prompt-perturbation test under a budget (Algorithm C)")
    sp.add_argument("--a-hat", type=float, help="lower end of the null range (estimated)")
    sp.add_argument("--b-hat", type=float, help="upper end of the null range (estimated)")
    sp.add_argument("--pilot-rates", metavar="P1,P2,...",
                    help="instead of --a-hat/--b-hat: pilot null variants' response rates (Algorithm B, "
                         "bias-corrected); sets --pilot-m to their number")
    sp.add_argument("--budget", type=_count, help="total model calls nu, pilot included (1e7 ok)")
    sp.add_argument("--db", type=Path, help="plan from a store instead: the null variants' observed rates are the "
                    "pilot; answers the replicates per variant (and null variants) that give the default test of "
                    "benchcert perturb power 0.8 over the items' own spread between null variants, the cost in calls, "
                    "and the current design's power")
    sp.add_argument("--benchmark", help="with --db: the benchmark")
    sp.add_argument("--model", metavar="M[,M...]", help="with --db: only these models")
    sp.add_argument("--base", help="with --db: base variant (as in benchcert perturb)")
    sp.add_argument("--null", metavar="V1,V2,...", help="with --db: null variants (as in benchcert perturb)")
    sp.add_argument("--test", metavar="V[,V...]", help="with --db: tested variants (as in benchcert perturb)")
    sp.add_argument("--detect", type=float, default=0.1, metavar="D",
                    help="with --db: the change beyond the null range to detect (default 0.1)")
    sp.add_argument("--alpha", type=float, default=0.05, help="level (default 0.05)")
    sp.add_argument("--pilot-m", type=int, default=0, help="pilot null variants m~ (default 0)")
    sp.add_argument("--pilot-r", type=int, default=0, help="pilot replicates per variant r~ (default 0)")
    sp.add_argument("--eps-step", type=float, default=0.001, help="grid step for eps (default 0.001)")
    sp.add_argument("--eps-max-rule", choices=["auto", "algorithm_c", "width"], default="auto",
                    help="auto (default): min(a, b-a, 1-b) unless that is 0, then b-a")
    sp.add_argument("--method", choices=["union", "exact"], default="union",
                    help="union (default): the paper's bounds; exact: exact size/power under Assumption 2 (slower)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def register(sub) -> None:
    sp = command(sub, "perturb", cmd_perturb,
                 help="does a prompt variant matter beyond semantically irrelevant rewordings?")
    benchmark_options(sp)
    sp.add_argument("--base", help="base variant (the prompt as written; '' is the unnamed variant)")
    sp.add_argument("--null", metavar="V1,V2,...", help="null variants: rewordings that should not matter")
    sp.add_argument("--test", metavar="V[,V...]", help="variants to test (default: every non-base variant)")
    sp.add_argument("--model", metavar="M[,M...]", help="only these models")
    sp.add_argument("--alpha", type=float, default=0.05, help="level per item and BH FDR level (default 0.05)")
    sp.add_argument("--method", choices=["calibrated", "widened", "plugin_exact", "plugin_union"],
                    default="calibrated",
                    help="calibrated (default): the widened-range test with its noise margin calibrated exactly "
                         "over the composite null (null variants with unequal replicate counts fall back to "
                         "widened); widened: the assumption-light test with Hoeffding margins (valid, far less "
                         "power); plugin_exact / plugin_union: the "
                         "paper's plug-in calibrations, which assume the estimated null range is the true one and "
                         "do not hold their level with few null variants (for comparison only)")
    sp.add_argument("--items", type=int, default=0, metavar="N", help="also list the N most significant items")
    sp.add_argument("--detect", type=float, default=0.1, metavar="D",
                    help="under every 'no power' line, the replicates per variant (and null variants) that give the "
                         "default test power 0.8 against a change of D beyond the null range, as benchcert plan "
                         "perturbation --db answers (default 0.1)")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
