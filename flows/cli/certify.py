"""``benchcert plan environments`` (chi-square radius, budgets, a seeded sampling plan) and
``benchcert certify`` (scores per deployment environment with bounds that hold for all of them at
once), after the certifying-capabilities paper, section 3.

Exit codes as in flows/cli/__init__.py: 0 success; 1 the data do not allow it (unknown benchmark or plan,
no model answered the plan); 2 usage error (bad environments file, epsilon or delta outside
(0, 1)); 3 the store is locked or unusable.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option
from benchcert.flows.cli.errors import print_json as _print_json

#: The keys of tasks/certify/service.py's PROTOCOLS (spelled out: building the parser imports no numerics).
PROTOCOL_CHOICES = ("theorem", "naive", "stratified")


def register_plan(plan_sub) -> None:
    """Add ``environments`` to the sub-parsers of ``benchcert plan`` (flows/cli/plan.py calls it)."""
    sp = command(plan_sub, "environments", cmd_plan_environments,
                 help="certify many deployment environments at once: chi-square radius, budgets, a plan")
    sp.add_argument("--envs", type=Path, required=True, metavar="FILE", help="environments TOML file")
    benchmark_options(sp)
    sp.add_argument("--epsilon", type=float, required=True, help="half-width wanted on every environment's score")
    sp.add_argument("--delta", type=float, required=True, help="probability that any environment is further off")
    sp.add_argument("--protocol", choices=PROTOCOL_CHOICES, default="stratified",
                    help="which protocol's sample to draw: theorem (Theorem 3.4), naive (per environment, Remark "
                         "3.2) or stratified (default; all three budgets are reported)")
    sp.add_argument("--seed", type=int, default=None, help="random seed (default: drawn at random and recorded)")
    sp.add_argument("--out", type=Path, metavar="SUBSET",
                    help="write the plan: .csv = item_id,subject,domain,draws; otherwise JSON (plan, item ids, draws)")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def register(sub) -> None:
    sp = command(sub, "certify", cmd_certify,
                 help="each model's score per deployment environment, bounded for all environments at once")
    sp.add_argument("--envs", type=Path, required=True, metavar="FILE", help="environments TOML file")
    benchmark_options(sp)
    sp.add_argument("--subset", metavar="SUBSET",
                    help="plan id (env-...) or the JSON file written by plan environments --out")
    sp.add_argument("--delta", type=float, default=None,
                    help="1 - joint confidence (default: the plan's delta, else 0.05)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the only one, else '')")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def cmd_plan_environments(args) -> int:
    """For the environments in --envs (mixes of the benchmark's domains or subjects): the chi-square radius V
    with its optimal proposal and Example 4's upper bounds, the items each protocol needs for +/- epsilon on
    every environment at once with probability 1 - delta (Theorem 3.4's importance-weighted median of means,
    the per-environment protocol of Remark 3.2, an exact stratified design), and a seeded item sample drawn
    from the chosen protocol, recorded in the store for `benchcert certify --subset`."""
    from benchcert.tasks.certify.service import EnvironmentPlanRequest, plan_environments

    req = EnvironmentPlanRequest(envs=args.envs, db=args.db, benchmark=args.benchmark, epsilon=args.epsilon,
                                 delta=args.delta, protocol=args.protocol, seed=args.seed,
                                 lock_timeout=args.lock_timeout)
    plan = plan_environments(req)  # its UserErrors (a bad file: EnvironmentsError, exit 2) reach main()
    design, spec, seed, N, notes, head = plan.design, plan.spec, plan.seed, plan.N, plan.notes, plan.summary
    eps, delta = design.epsilon, design.delta
    out = {**plan.summary, "out": None if args.out is None else str(args.out), "notes": list(notes)}
    if args.out is not None:
        _write_manifest(Path(args.out), out, plan.draws)
    if args.json:
        _print_json({**out, "item_ids": None if args.out else plan.item_ids})
        return EXIT_OK
    r = design.radius
    print(f"{len(design.names)} environment(s) over {len(plan.atoms)} {spec.level}s of {args.benchmark!r} "
          f"({N:,} items), epsilon = {eps:g}, delta = {delta:g}")
    print(f"chi-square radius V = {r.value:.4f} (certified: {r.lower:.4f} <= V <= {r.value:.4f}); Example 4 upper "
          f"bounds: mixture {design.bounds.mixture_value:.4f}, uniform {design.bounds.uniform_value:.4f}, "
          f"Shtarkov {design.bounds.shtarkov_value:.4f}")
    print(f"{'protocol':<18} {'items':>12}  rule")
    for k, b in design.budgets.items():
        print(f"{k:<18} {b.n:>12,}  {b.formula}")
    if design.cover is not None:
        c = design.cover
        print(f"family {spec.family_name!r}: Theorem 3.8 TV cover of radius {c.radius:.4g} has {c.size:.4g} members "
              f"(Theorem 3.4 on it: {design.cover_budget.n:,} items); the vertices suffice here (scores are linear "
              "in the mix)")
    print("sampling distribution (" + args.protocol + "): "
          + ", ".join(f"{a} {p:.3f}" for a, p in out["sampling_distribution"].items()))
    for n in notes:
        print(f"note: {n}")
    print(f"plan {head['plan_id']}: {head['n_draws']:,} draws, {head['n_items']:,} distinct items (seed {seed})"
          + (f"; written to {args.out}" if args.out else ""))
    print(f"evaluate the model on these items, ingest its logs, then: benchcert certify --envs {args.envs} "
          f"--db {args.db} --benchmark {args.benchmark} --subset {head['plan_id']}")
    return EXIT_OK


def _write_manifest(out: Path, plan: dict, draws) -> None:
    import polars as pl

    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".csv":
        counts = draws.group_by("item_id", "subject", "domain").agg(pl.len().alias("draws")).sort("item_id")
        with out.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["item_id", "subject", "domain", "draws"])
            w.writerows(counts.iter_rows())
    else:
        body = {**plan, "item_ids": sorted(draws["item_id"].unique().to_list()),
                "draws": draws.select("item_id", "stratum").to_dicts()}
        out.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")


def cmd_certify(args) -> int:
    """Per model and environment: the score with bounds that hold simultaneously for every environment (and
    every mix of a [family]) with probability >= 1 - delta. With --subset, on a plan drawn by `benchcert plan
    environments` (its protocol's estimator); without it, on the full benchmark (per-domain exact intervals
    for new items from the same subjects, item-weighted, and beside them a new subject's expected score in
    each domain with its band: subjects as the sampling unit, each weighing the same whatever its size). Also,
    per model, one-sided upper bounds on the failure rate for the same questions (new items from the same
    subjects; a new subject's expected failure rate); being correct on every instance cannot be certified by
    black-box testing."""
    from benchcert.tasks.certify.service import CertifyRequest, certify
    from benchcert.tasks.render.text import certify_text

    req = CertifyRequest(envs=args.envs, db=args.db, benchmark=args.benchmark, subset=args.subset, delta=args.delta,
                         variant=args.variant, lock_timeout=args.lock_timeout)
    cert = certify(req)  # its UserErrors (an unknown plan: UnknownPlanError, exit 1) reach main()
    if args.json:
        _print_json(cert.to_dict())
        return EXIT_OK
    print(certify_text(cert, benchmark=args.benchmark))
    return EXIT_OK

