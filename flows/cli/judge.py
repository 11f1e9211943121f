"""Judge-scored benchmarks on the command line: ``plan human-labels``, ``compare --scale human``
and the audit's human-scale block.

Parsing and rendering only; the rules are in benchcert.tasks.judge.service.  Exit codes as in
benchcert.flows.cli: 0 ok, 1 data problem (no human scores, unknown model), 2 usage, 3 store
locked or unusable, 4 the CI gate failed (``compare --scale human --fail-on regressed``).
"""

from __future__ import annotations

import sys

from benchcert.flows.cli.errors import EXIT_GATE, EXIT_OK, alpha_arg, print_json
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option
from benchcert.tasks.compare.rows import deciding_interval


def human_scale_block(summary: dict) -> str:
    """The audit's human-scale lines (empty when the benchmark has no human scores)."""
    rows = summary.get("human_scale")
    if not rows:
        return ""
    level = f"{100 * (1 - summary['alpha']):g}%"
    head = (f"{'human scale (PPI++)':<36} {'human':>6} {'judged':>6} {'score':>7}  {level + ' interval':<16} "
            f"{'lambda':>6} {'judge':>7}")
    lines = [head, "-" * len(head)]
    short = []
    for r in rows:
        name = r["model"] if len(r["model"]) <= 36 else r["model"][:33] + "..."
        if r["estimate"] is None:
            short.append(f"{r['model']!r}: {r['n_human']} human label(s); {r['labels_needed']} more needed "
                         "for a human-scale score")
            continue
        iv = f"[{100 * r['lower']:5.1f}, {100 * r['upper']:5.1f}]"
        lines.append(f"{name:<36} {r['n_human']:>6} {r['n_judge']:>6} {100 * r['estimate']:6.2f}%  {iv:<16} "
                     f"{r['lam']:6.2f} {100 * r['judge_only_estimate']:6.2f}%")
    lines += short
    lines.append("(human = items with a human label, judged = items the judge scored; judge = the judge's plain "
                 "mean; assumes the labelled items are a uniform random sample of the judged ones)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- compare --scale human


def cmd_compare_human(args, request) -> int:
    """``compare --scale human`` (flows/cli/compare.py builds the request and calls this)."""
    from benchcert.tasks.judge.service import compare_human

    result = compare_human(request)  # its UserErrors (VerdictError, MatrixError, StoreError) reach main()
    decision = result.gate
    if args.json:
        out = result.as_dict()
        if decision is not None:
            out["gate"] = {**decision.as_dict(), "exit_code": EXIT_OK if decision.passed else EXIT_GATE}
        print_json(out, strict=True)
    else:
        _show_gap(result)
    if decision is None:
        return EXIT_OK
    print(decision.reason, file=sys.stderr)
    return EXIT_OK if decision.passed else EXIT_GATE


def _pp(x) -> str:
    return "-" if x is None else f"{100 * x:6.2f}"


def _show_gap(result) -> None:
    level = f"{100 * (1 - result.alpha):g}%"
    print(f"{result.benchmark!r}: candidate vs baseline {result.baseline!r} on the human scale; gap = candidate - "
          f"baseline, {level} interval {result.method}" + ("; with several candidates each interval is Bonferroni "
                                                          "simultaneous and decides the verdict"
                                                          if result.several else ""))
    print(f"question: {result.question}")
    print(f"estimand: {result.estimand}")
    head = (f"{'candidate':<32} {'gap pp':>7}  {level + ' interval':<18} {'lambda':>6} {'judge pp':>8} "
            f"{'labelled':>8} {'judged':>7}  verdict")
    print(head)
    print("-" * len(head))
    for row in result.comparisons:
        name = row["candidate"] if len(row["candidate"]) <= 32 else row["candidate"][:29] + "..."
        iv = deciding_interval(row)
        shown = "-" if iv.lower is None else f"[{_pp(iv.lower)}, {_pp(iv.upper)}]"
        lam = "-" if row["lam"] is None else f"{row['lam']:6.2f}"
        print(f"{name:<32} {_pp(row['gap']):>7}  {shown:<18} {lam:>6} {_pp(row['judge_only_gap']):>8} "
              f"{row['n_human']:8d} {row['n_judge']:7d}  {row['verdict']}")
    print(f"assumption: {result.assumptions[0]}")
    for n in result.warnings:
        print(f"warning: {n}", file=sys.stderr)


# --------------------------------------------------------------------------- plan human-labels


def register_plan(plan_sub) -> None:
    """Add ``human-labels`` to the sub-parsers of ``benchcert plan`` (flows/cli/plan.py calls it)."""
    sp = command(plan_sub, "human-labels", cmd_plan_human_labels,
                 help="human labels needed for a +/- eps human-scale score of a judge-scored benchmark")
    benchmark_options(sp)
    sp.add_argument("--epsilon", type=float, required=True, metavar="E", help="half-width wanted, in (0, 1)")
    sp.add_argument("--model", default=None, metavar="M", help="only this model (default: every model)")
    sp.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    sp.add_argument("--assurance", type=float, default=None, metavar="A",
                    help="plan so that this share of (pilot, label set) pairs (e.g. 0.8) reach the half-width, "
                         "counting the pilot's own error (bootstrap-t); measured at 0.8: 84.0%% [80.5, 87.1] to "
                         "87.4%% [84.2, 90.2] of fresh pairs in three settings (default: the typical outcome, which "
                         "half of the label sets or fewer reach: 29-57%% measured)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the only one, else '')")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def cmd_plan_human_labels(args) -> int:
    """From the responses scored by both the judge and a human so far (a random pilot): how many human labels
    give a +/- EPS interval of each model's human-scale score with the judge's scores (PPI++, tuned lambda,
    the t quantile of the interval the audit reports), against labelling by hand without the judge. A plan,
    not a guarantee: it trusts the pilot's judge-human covariance (``--assurance``: the pilot's error
    counted)."""
    from benchcert.flows.cli.errors import require_store
    from benchcert.tasks.judge.service import plan_labels

    alpha_arg(args.alpha)
    require_store(args.db)
    answer = plan_labels(args.db, args.benchmark, epsilon=args.epsilon, alpha=args.alpha, model=args.model,
                         variant=args.variant, lock_timeout=args.lock_timeout,
                         assurance=args.assurance)  # its UserErrors reach main()
    if args.json:
        print_json(answer.as_dict(), strict=True)
        return EXIT_OK
    level = f"{100 * (1 - answer.alpha):g}%"
    print(f"{answer.benchmark!r}: human labels for a {level} human-scale interval of +/- {100 * answer.epsilon:g} pp"
          + ("" if answer.assurance is None else
             f", reached by {100 * answer.assurance:g}% of (pilot, label set) pairs (the pilot's error counted)"))
    head = f"{'model':<36} {'judged':>7} {'pilot':>6} {'with judge':>10} {'by hand':>8}"
    print(head)
    print("-" * len(head))
    for name, p in answer.plans:
        shown = name if len(name) <= 36 else name[:33] + "..."
        ppi = "all" if p.n_ppi is None else str(p.n_ppi)
        hand = "all" if p.n_human_only is None else str(p.n_human_only)
        print(f"{shown:<36} {p.n_items:>7} {p.pilot_n:>6} {ppi:>10} {hand:>8}")
    print("(with judge: labels needed with the judge's scores on every item, PPI++; by hand: labels alone; "
          "'all' = even labelling every judged item does not reach it)")
    if answer.plans:
        print(f"assumption: {answer.plans[0][1].assumptions[0]}")
    for s in answer.skipped:
        print(f"skipped: {s}", file=sys.stderr)
    for w in answer.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return EXIT_OK
