"""``benchcert plan`` (evaluation-cost questions; docs/methods.md section 5) and ``benchcert subsample``
(draw and record a random subset manifest of a benchmark).

Exit codes as in flows/cli/__init__.py: 0 success; 1 the data do not allow it (unknown or empty
benchmark); 2 usage error (n > N, n < 1, alpha or eps outside (0, 1), ...); 3 the store is
locked or unusable.

This module owns the ``plan`` command and every one of its questions (:func:`register`): its
own, and those whose parsing and rendering stay beside their feature's command, added through
that module's ``register_plan(plan_sub)`` (``plan perturbation`` in flows/cli/perturb.py,
``plan environments`` in flows/cli/certify.py, ``plan human-labels`` in flows/cli/judge.py, ``plan
samples`` in flows/cli/items.py).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

# EXIT_DATA, EXIT_STORE and EXIT_USAGE: the codes documented above, importable from here as from every command.
from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE  # noqa: F401
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option
from benchcert.flows.cli.errors import print_json as _print_json


def _common(sp, *, need_n_source: bool) -> None:
    sp.add_argument("--alpha", type=float, default=0.05, help="error probability, in (0, 1) (default 0.05)")
    sp.add_argument("--N", type=int, default=None, dest="N", metavar="N",
                    help="full benchmark size" + ("" if need_n_source else " (optional: adds finite-population "
                                                  "and exact answers)"))
    sp.add_argument("--db", type=Path, help="DuckDB store: take N from --benchmark's item count")
    sp.add_argument("--benchmark", help="benchmark in --db whose item count is N")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def register(sub) -> None:
    """Add ``benchcert plan`` with all its questions, and ``benchcert subsample``."""
    from benchcert.flows.cli import certify, items, judge, perturb

    p = sub.add_parser("plan", help="how many items a question needs, or what n items buy (evaluation cost)",
                       description="Answer evaluation-cost questions (methods: docs/methods.md, section 5): each answer names its method "
                                   "and gives the cost as a fraction n/N of a full run. N comes from --N or from "
                                   "a benchmark in the store (--db/--benchmark).")
    ps = p.add_subparsers(dest="plan_question", required=True, metavar="QUESTION")
    _register_questions(ps)
    perturb.register_plan(ps)
    certify.register_plan(ps)
    judge.register_plan(ps)
    items.register_plan(ps)
    _register_subsample(sub)


def _register_questions(ps) -> None:
    """The evaluation-cost questions of docs/methods.md section 5."""
    sp = command(ps, "subsample", cmd_plan_subsample,
                 help="half-widths a random subset of n items buys (Theorem 5.2, Barber, Serfling, exact worst case)")
    sp.add_argument("--n", type=int, required=True, dest="n", help="items to evaluate (1 <= n <= N)")
    _common(sp, need_n_source=True)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case")

    sp = command(ps, "estimate", cmd_plan_estimate, help="items for +/- eps on one model's score")
    sp.add_argument("--eps", type=float, required=True, help="target half-width, e.g. 0.02 for 2 points")
    _common(sp, need_n_source=False)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case (it takes ~1-3 s)")

    sp = command(ps, "models", cmd_plan_models, help="items for +/- eps on k models at once")
    sp.add_argument("--eps", type=float, required=True, help="target half-width")
    sp.add_argument("--k", type=int, required=True, help="number of models")
    _common(sp, need_n_source=False)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case")

    sp = command(ps, "compare", cmd_plan_compare,
                 help="items to tell apart two models whose accuracies differ by eps")
    sp.add_argument("--eps", type=float, required=True, help="accuracy gap to detect")
    sp.add_argument("--power", type=float, default=0.8, help="power for the normal power analysis (default 0.8)")
    sp.add_argument("--var-d", type=float, default=None, dest="var_d",
                    help="per-item variance of the paired difference (default: from the store with --db, the "
                         "largest over its model pairs or the pair --models; without --db, the worst case 1 - eps^2)")
    sp.add_argument("--models", type=lambda t: [x.strip() for x in t.split(",")], default=None, metavar="A,B",
                    help="with --db: take Var(D) from this pair of models")
    _common(sp, need_n_source=False)

    sp = command(ps, "zero-failure", cmd_plan_zero_failure,
                 help="items with no failure that certify a failure rate below eps")
    sp.add_argument("--eps", type=float, required=True, help="failure rate to rule out")
    _common(sp, need_n_source=False)


def _register_subsample(sub) -> None:
    sp = command(sub, "subsample", cmd_subsample,
                 help="draw and record a seeded random subset of a benchmark's items")
    benchmark_options(sp)
    sp.add_argument("--n", type=int, required=True, dest="n", help="items to draw (1 <= n <= N)")
    sp.add_argument("--seed", type=int, default=None, help="random seed (default: drawn at random and recorded)")
    sp.add_argument("--stratified", action="store_true",
                    help="proportional allocation across subjects (every subject gets at least one item)")
    sp.add_argument("--alpha", type=float, default=0.05, help="level of the guarantee printed (default 0.05)")
    sp.add_argument("--out", type=Path, metavar="FILE",
                    help="write the manifest: .csv = item_id,subject,domain rows; otherwise JSON with item_ids")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


# --------------------------------------------------------------------------------------
# commands: parse, call tasks/subsample/planning.py, render


def _source(args):
    from benchcert.tasks.subsample.planning import SizeSource

    return SizeSource(N=args.N, db=args.db, benchmark=args.benchmark, lock_timeout=args.lock_timeout)


def _show(result, prog: str, as_json: bool) -> int:
    if as_json:
        _print_json(result.to_dict())
        return EXIT_OK
    plan = result.plan
    head = f"{'method':<30} {'kind':<11} {'n':>9} {'cost':>8} {'half-width':>11}  formula"
    level = f"{100 * (1 - plan.alpha):g}%"
    inputs = ", ".join(f"{k} = {v}" for k, v in plan.inputs.items() if v is not None)
    print(f"{prog}: {plan.question} ({inputs}; N = {plan.N if plan.N else 'unknown'}; {level})")
    print(head)
    print("-" * len(head))
    for a in plan.answers:
        cost = "-" if a.cost_fraction is None else f"{100 * a.cost_fraction:.2f}%"
        hw = "-" if a.half_width is None else f"{100 * a.half_width:.2f} pp"
        flag = "" if a.feasible else "  (more than the benchmark holds)"
        print(f"{a.method:<30} {a.kind:<11} {a.n:>9,} {cost:>8} {hw:>11}  {a.formula}{flag}")
    for note in plan.notes:
        print(f"note: {note}")
    return EXIT_OK


def _answer(args, prog: str, service) -> int:
    """``service()``'s result rendered (its UserErrors reach main())."""
    return _show(service(), prog, args.json)


def cmd_plan_subsample(args) -> int:
    """For a uniformly random subset of n of the N items: the half-width of |subset score - full score| by
    Theorem 5.2, Barber (non-negative and signed), Serfling and the exact hypergeometric worst case, and the
    paired (R = 2) Theorem 5.2 for a gap between two models."""
    from benchcert.tasks.subsample.planning import plan_subsample

    return _answer(args, "benchcert plan subsample",
                   lambda: plan_subsample(args.n, _source(args), alpha=args.alpha, exact=not args.no_exact))


def cmd_plan_estimate(args) -> int:
    """Items needed so that one model's score is within +/- eps: Hoeffding log(2/alpha)/(2 eps^2); with N,
    Theorem 5.2, Serfling, Barber and the exact worst case."""
    from benchcert.tasks.subsample.planning import plan_estimate

    return _answer(args, "benchcert plan estimate",
                   lambda: plan_estimate(args.eps, _source(args), alpha=args.alpha, exact=not args.no_exact))


def cmd_plan_models(args) -> int:
    """Items needed so that k models' scores are all within +/- eps at once (union bound: log(2k/alpha)/(2
    eps^2); the finite-population and exact answers at alpha/k)."""
    from benchcert.tasks.subsample.planning import plan_models

    return _answer(args, "benchcert plan models",
                   lambda: plan_models(args.eps, args.k, _source(args), alpha=args.alpha, exact=not args.no_exact))


def cmd_plan_compare(args) -> int:
    """Items needed to tell apart two models whose accuracies differ by eps: the Hellinger lower bound 1/(8
    eps^2) (necessary), a paired Hoeffding test 2 log(1/alpha)/eps^2 (sufficient), Theorem 5.2 with R = 2
    given N, and a paired normal power analysis."""
    from benchcert.tasks.subsample.planning import plan_compare

    return _answer(args, "benchcert plan compare",
                   lambda: plan_compare(args.eps, _source(args), alpha=args.alpha, power=args.power,
                                        var_d=args.var_d, models=args.models))


def cmd_plan_zero_failure(args) -> int:
    """Items that, all passing, certify a failure rate below eps at level alpha: ln(1/alpha)/eps (1/eps, not
    1/eps^2), the exact binomial n and, given N, the exact hypergeometric n."""
    from benchcert.tasks.subsample.planning import plan_zero_failure

    return _answer(args, "benchcert plan zero-failure",
                   lambda: plan_zero_failure(args.eps, _source(args), alpha=args.alpha))


def cmd_subsample(args) -> int:
    """Draw a uniform (or subject-stratified) random subset of n item ids of a benchmark in the store, record
    it (tables subsets, subset_items) and print or write the manifest. Run a new checkpoint on exactly these
    items and ingest its logs: the audit then reports its estimated full-benchmark score with the Theorem 5.2
    guarantee and the exact post-hoc interval."""
    from benchcert.tasks.subsample.planning import draw_subset

    drawn = draw_subset(args.db, args.benchmark, args.n, seed=args.seed, stratified=args.stratified,
                        alpha=args.alpha, lock_timeout=args.lock_timeout)  # its UserErrors reach main()
    man, guarantee = drawn.manifest, drawn.guarantee
    if args.out is not None:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix.lower() == ".csv":
            with out.open("w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["item_id", "subject", "domain"])
                w.writerows(man.items.select("item_id", "subject", "domain").iter_rows())
        else:
            out.write_text(json.dumps({**man.to_dict(), "guarantee": guarantee}, indent=2) + "\n", encoding="utf-8")
    if args.json:
        _print_json({**man.to_dict(with_items=args.out is None), "guarantee": guarantee,
                     "out": None if args.out is None else str(args.out)})
        return EXIT_OK
    kind = "stratified by subject" if man.stratified else "uniform"
    print(f"subset {man.subset_id}: {man.n:,} of {man.N:,} items of {man.benchmark!r} ({kind}, seed {man.seed}), "
          f"{100 * man.n / man.N:.2f}% of a full run")
    if "theorem_5_2_half_width" in guarantee:
        line = (f"{100 * (1 - args.alpha):g}% guarantee on the full score: "
                f"+/- {100 * guarantee['theorem_5_2_half_width']:.2f} pp (Theorem 5.2)")
        if "exact_worst_case_half_width" in guarantee:
            line += f", +/- {100 * guarantee['exact_worst_case_half_width']:.2f} pp (exact worst case, binary scores)"
        print(line)
    print(f"manifest: {args.out}" if args.out is not None else
          "item ids: " + ", ".join(man.items["item_id"].head(10).to_list())
          + (" ..." if man.n > 10 else "") + " (use --out FILE or --json for all)")
    print("run the checkpoint on exactly these items, ingest its logs, then audit the benchmark")
    return EXIT_OK
