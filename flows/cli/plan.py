"""``benchcert plan`` (evaluation-cost questions; docs/methods.md section 5) and ``benchcert subsample``
(draw and record a random subset manifest of a benchmark).

Exit codes as in flows/cli/__init__.py: 0 success; 1 the data do not allow it (unknown or empty
benchmark); 2 usage error (n > N, n < 1, alpha or eps outside (0, 1), ...); 3 the store is
locked or unusable.

This module owns the ``plan`` command and every one of its questions (:func:`register`): its
own, and those whose parsing and rendering stay beside their feature's command, added through
that module's ``register_plan(plan_sub)`` (``plan perturbation`` in flows/cli/perturb.py,
``plan environments`` in flows/cli/certify.py).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE, show_traceback
from benchcert.flows.cli.errors import print_json as _print_json


class _StoreProblem(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _common(sp, *, need_n_source: bool) -> None:
    sp.add_argument("--alpha", type=float, default=0.05, help="error probability, in (0, 1) (default 0.05)")
    sp.add_argument("--N", type=int, default=None, dest="N", metavar="N",
                    help="full benchmark size" + ("" if need_n_source else " (optional: adds finite-population "
                                                  "and exact answers)"))
    sp.add_argument("--db", type=Path, help="DuckDB store: take N from --benchmark's item count")
    sp.add_argument("--benchmark", help="benchmark in --db whose item count is N")
    sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for another benchcert process using the store (default 600)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def register(sub) -> None:
    """Add ``benchcert plan`` with all its questions, and ``benchcert subsample``."""
    from benchcert.flows.cli import certify, perturb

    p = sub.add_parser("plan", help="how many items a question needs, or what n items buy (evaluation cost)",
                       description="Answer evaluation-cost questions (methods: docs/methods.md, section 5): each answer names its method "
                                   "and gives the cost as a fraction n/N of a full run. N comes from --N or from "
                                   "a benchmark in the store (--db/--benchmark).")
    ps = p.add_subparsers(dest="plan_question", required=True, metavar="QUESTION")
    _register_questions(ps)
    perturb.register_plan(ps)
    certify.register_plan(ps)
    _register_subsample(sub)


def _register_questions(ps) -> None:
    """The evaluation-cost questions of docs/methods.md section 5."""
    sp = ps.add_parser("subsample", help="half-widths a random subset of n items buys (Theorem 5.2, Barber, "
                                         "Serfling, exact worst case)",
                       description="For a uniformly random subset of n of the N items: the half-width of "
                                   "|subset score - full score| by Theorem 5.2, Barber (non-negative and signed), "
                                   "Serfling and the exact hypergeometric worst case, and the paired (R = 2) "
                                   "Theorem 5.2 for a gap between two models.")
    sp.add_argument("--n", type=int, required=True, dest="n", help="items to evaluate (1 <= n <= N)")
    _common(sp, need_n_source=True)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case")
    sp.set_defaults(func=cmd_plan_subsample)

    sp = ps.add_parser("estimate", help="items for +/- eps on one model's score",
                       description="Items needed so that one model's score is within +/- eps: Hoeffding "
                                   "log(2/alpha)/(2 eps^2); with N, Theorem 5.2, Serfling, Barber and the exact "
                                   "worst case.")
    sp.add_argument("--eps", type=float, required=True, help="target half-width, e.g. 0.02 for 2 points")
    _common(sp, need_n_source=False)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case (it takes ~1-3 s)")
    sp.set_defaults(func=cmd_plan_estimate)

    sp = ps.add_parser("models", help="items for +/- eps on k models at once",
                       description="Items needed so that k models' scores are all within +/- eps at once "
                                   "(union bound: log(2k/alpha)/(2 eps^2); the finite-population and exact "
                                   "answers at alpha/k).")
    sp.add_argument("--eps", type=float, required=True, help="target half-width")
    sp.add_argument("--k", type=int, required=True, help="number of models")
    _common(sp, need_n_source=False)
    sp.add_argument("--no-exact", action="store_true", help="skip the exact worst case")
    sp.set_defaults(func=cmd_plan_models)

    sp = ps.add_parser("compare", help="items to tell apart two models whose accuracies differ by eps",
                       description="Items needed to tell apart two models whose accuracies differ by eps: the "
                                   "Hellinger lower bound 1/(8 eps^2) (necessary), a paired Hoeffding test "
                                   "2 log(1/alpha)/eps^2 (sufficient), Theorem 5.2 with R = 2 given N, and a "
                                   "paired normal power analysis.")
    sp.add_argument("--eps", type=float, required=True, help="accuracy gap to detect")
    sp.add_argument("--power", type=float, default=0.8, help="power for the normal power analysis (default 0.8)")
    sp.add_argument("--var-d", type=float, default=None, dest="var_d",
                    help="per-item variance of the paired difference (default: from the store with --db, the "
                         "largest over its model pairs or the pair --models; without --db, the worst case 1 - eps^2)")
    sp.add_argument("--models", type=lambda t: [x.strip() for x in t.split(",")], default=None, metavar="A,B",
                    help="with --db: take Var(D) from this pair of models")
    _common(sp, need_n_source=False)
    sp.set_defaults(func=cmd_plan_compare)

    sp = ps.add_parser("zero-failure", help="items with no failure that certify a failure rate below eps",
                       description="Items that, all passing, certify a failure rate below eps at level alpha: "
                                   "ln(1/alpha)/eps (1/eps, not 1/eps^2), the exact binomial n and, given N, the "
                                   "exact hypergeometric n.")
    sp.add_argument("--eps", type=float, required=True, help="failure rate to rule out")
    _common(sp, need_n_source=False)
    sp.set_defaults(func=cmd_plan_zero_failure)


def _register_subsample(sub) -> None:
    sp = sub.add_parser("subsample", help="draw and record a seeded random subset of a benchmark's items",
                        description="Draw a uniform (or subject-stratified) random subset of n item ids of a "
                                    "benchmark in the store, record it (tables subsets, subset_items) and print or "
                                    "write the manifest. Run a new checkpoint on exactly these items and ingest its "
                                    "logs: the audit then reports its estimated full-benchmark score with the "
                                    "Theorem 5.2 guarantee and the exact post-hoc interval.")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", required=True)
    sp.add_argument("--n", type=int, required=True, dest="n", help="items to draw (1 <= n <= N)")
    sp.add_argument("--seed", type=int, default=None, help="random seed (default: drawn at random and recorded)")
    sp.add_argument("--stratified", action="store_true",
                    help="proportional allocation across subjects (every subject gets at least one item)")
    sp.add_argument("--alpha", type=float, default=0.05, help="level of the guarantee printed (default 0.05)")
    sp.add_argument("--out", type=Path, metavar="FILE",
                    help="write the manifest: .csv = item_id,subject,domain rows; otherwise JSON with item_ids")
    sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for another benchcert process using the store (default 600)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.set_defaults(func=cmd_subsample)


# --------------------------------------------------------------------------------------
# helpers


def _store_N(db: Path, benchmark: str, lock_timeout: float) -> int:
    from benchcert.tasks.store.connection import StoreError, StoreLockedError, open_store

    if not Path(db).is_file():
        raise _StoreProblem(f"{db}: no such store; ingest something first", EXIT_STORE)
    try:
        with open_store(db, write=False, lock_timeout=lock_timeout) as con:
            N = con.execute("SELECT count(DISTINCT item_id) FROM items WHERE benchmark = ?",
                            [benchmark]).fetchall()[0][0]
            known = [r[0] for r in con.execute("SELECT DISTINCT benchmark FROM items ORDER BY 1").fetchall()]
    except StoreLockedError as exc:
        raise _StoreProblem(str(exc), EXIT_STORE) from None
    except StoreError as exc:
        raise _StoreProblem(str(exc), EXIT_STORE) from None
    if not N:
        raise _StoreProblem(f"benchmark {benchmark!r} has no items in {db} (empty or unknown); benchmarks stored: "
                            f"{known}", EXIT_DATA)
    return int(N)


def _resolve_N(args, prog: str, *, required: bool) -> tuple[int | None, dict]:
    """N from --N or from the store; (None, ...) when neither was given and N is optional."""
    if args.db is not None or args.benchmark is not None:
        if args.db is None or args.benchmark is None:
            raise _StoreProblem(f"{prog}: --db and --benchmark go together", EXIT_USAGE)
        if args.N is not None:
            raise _StoreProblem(f"{prog}: give either --N or --db/--benchmark, not both", EXIT_USAGE)
        N = _store_N(args.db, args.benchmark, args.lock_timeout)
        return N, {"db": str(args.db), "benchmark": args.benchmark}
    if args.N is None:
        if required:
            raise _StoreProblem(f"{prog}: give the benchmark size with --N or --db FILE --benchmark NAME",
                                EXIT_USAGE)
        return None, {}
    if args.N < 1:
        raise _StoreProblem(f"{prog}: --N must be >= 1 (the benchmark's item count); got {args.N}", EXIT_USAGE)
    return args.N, {"N_from": "--N"}


def _show(plan, prog: str, source: dict, as_json: bool) -> int:
    if as_json:
        _print_json({**plan.to_dict(), "source": source})
        return EXIT_OK
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


def _run(args, prog: str, build, *, need_N: bool, extra_source: dict | None = None) -> int:
    try:
        if not 0 < args.alpha < 1:
            raise _StoreProblem(f"{prog}: --alpha must be in (0, 1); got {args.alpha}", EXIT_USAGE)
        N, source = _resolve_N(args, prog, required=need_N)
        try:
            plan = build(N)
        except ValueError as exc:
            raise _StoreProblem(f"{prog}: {exc}", EXIT_USAGE) from None
    except _StoreProblem as exc:
        show_traceback()
        msg = str(exc)
        print(msg if msg.startswith(prog) else f"{prog}: {msg}", file=sys.stderr)
        return exc.code
    if extra_source:
        source = {**source, "var_d_from_store": dict(extra_source)}
    return _show(plan, prog, source, args.json)


# --------------------------------------------------------------------------------------
# commands


def worst_case_cached(db, n: int, N: int, alpha: float) -> tuple[float, int]:
    """h*(n, N, alpha) and its worst count K, kept beside the store ``db`` once computed
    (tasks/subsample/hstar_cache.py: the same file and values the audit's subsample step uses)."""
    from benchcert.stats.subsample import worst_case_halfwidth
    from benchcert.tasks.subsample import hstar_cache

    def compute(missing):
        out = {}
        for m in missing:
            w = worst_case_halfwidth(m, N, alpha=alpha)
            out[m] = (float(w.half_width), int(w.worst_K))
        return out

    values, _ = hstar_cache.worst_cases([int(n)], int(N), float(alpha), db, compute)
    return values[int(n)]


def _budget_plan(n: int, N: int, alpha: float, exact: bool, db=None):
    """stats.planning.plan_budget, with h* from the cache beside ``db`` when a store is given."""
    from benchcert.stats import planning

    cached = None if db is None else (lambda n, N, alpha: worst_case_cached(db, n, N, alpha))
    return planning.plan_budget(n, N, alpha=alpha, exact=exact, worst_case=cached)


def cmd_plan_subsample(args) -> int:
    return _run(args, "benchcert plan subsample",
                lambda N: _budget_plan(args.n, N, args.alpha, not args.no_exact, args.db), need_N=True)


def cmd_plan_estimate(args) -> int:
    from benchcert.stats.planning import plan_one_model

    return _run(args, "benchcert plan estimate",
                lambda N: plan_one_model(args.eps, alpha=args.alpha, N=N, exact=not args.no_exact), need_N=False)


def cmd_plan_models(args) -> int:
    from benchcert.stats.planning import plan_k_models

    return _run(args, "benchcert plan models",
                lambda N: plan_k_models(args.eps, args.k, alpha=args.alpha, N=N, exact=not args.no_exact),
                need_N=False)


def stored_var_d(db, benchmark: str, models: list[str] | None, lock_timeout: float) -> dict:
    """Per-item variance of the paired difference D = x_B - x_A stored for ``benchmark``.

    For the pair ``models`` when given, else the largest over every pair of the benchmark's
    models (so the plan holds for any of them), on the items both answered, ddof = 1.
    """
    import itertools

    import numpy as np

    from benchcert.tasks.store.matrices import MatrixError, load_matrices
    from benchcert.tasks.store.connection import StoreError, open_store

    try:
        with open_store(db, write=False, lock_timeout=lock_timeout) as con:
            m = load_matrices(con, benchmark)
    except StoreError as exc:
        raise _StoreProblem(str(exc), EXIT_STORE) from None
    except MatrixError as exc:
        raise _StoreProblem(str(exc), EXIT_DATA) from None
    col = {name: j for j, name in enumerate(m.models)}
    if models is not None:
        unknown = [x for x in models if x not in col]
        if len(models) != 2 or unknown:
            raise _StoreProblem(f"--models must name two models of {benchmark!r}"
                                + (f"; unknown: {unknown}" if unknown else f"; got {models}"), EXIT_USAGE)
        pairs = [tuple(models)]
    else:
        pairs = list(itertools.combinations(m.models, 2))
    if not pairs:
        raise _StoreProblem(f"benchmark {benchmark!r} has {len(m.models)} model(s); a paired variance needs two "
                            "(or give --var-d)", EXIT_DATA)
    S = m.scores
    best = None
    for a, b in pairs:
        d = S[:, col[b]] - S[:, col[a]]
        d = d[~np.isnan(d)]
        if d.size < 2:
            continue
        v = float(np.var(d, ddof=1))
        if best is None or v > best["var_d"]:
            best = {"var_d": v, "pair": [a, b], "n_shared": int(d.size)}
    if best is None:
        raise _StoreProblem(f"no pair of models of {benchmark!r} shares two answered items; give --var-d", EXIT_DATA)
    best["rule"] = "the pair given" if models is not None else f"the largest of {len(pairs)} model pair(s)"
    best["variant"] = m.variant
    return best


def cmd_plan_compare(args) -> int:
    from benchcert.stats.planning import plan_two_models

    prog = "benchcert plan compare"
    stored: dict = {}

    def build(N):
        var_d = args.var_d
        if var_d is None and args.db is not None:
            # The stored data say how variable the paired difference is; the worst case 1 - eps^2
            # is only for when nothing is known.
            stored.update(stored_var_d(args.db, args.benchmark, args.models, args.lock_timeout))
            var_d = stored["var_d"]
        plan = plan_two_models(args.eps, alpha=args.alpha, power=args.power, var_d=var_d, N=N)
        if stored:
            note = (f"Var(D) = {stored['var_d']:.6g} from the store: {stored['rule']} "
                    f"({stored['pair'][0]!r} vs {stored['pair'][1]!r}, {stored['n_shared']} shared items)")
            plan = dataclasses.replace(plan, notes=(*plan.notes, note))
        return plan

    if args.models is not None and args.db is None:
        print(f"{prog}: --models needs --db and --benchmark", file=sys.stderr)
        return EXIT_USAGE
    code = _run(args, prog, build, need_N=False, extra_source=stored)
    return code


def cmd_plan_zero_failure(args) -> int:
    from benchcert.stats.planning import plan_zero_failure

    return _run(args, "benchcert plan zero-failure",
                lambda N: plan_zero_failure(args.eps, alpha=args.alpha, N=N), need_N=False)


def cmd_subsample(args) -> int:
    from benchcert.stats.subsample import posthoc_interval, theorem_5_2_halfwidth
    from benchcert.tasks.store.connection import StoreError, StoreLockedError
    from benchcert.tasks.subsample.subsets import SubsetError, create_subset

    prog = "benchcert subsample"
    if not 0 < args.alpha < 1:
        print(f"{prog}: --alpha must be in (0, 1); got {args.alpha}", file=sys.stderr)
        return EXIT_USAGE
    if args.n < 1:
        print(f"{prog}: --n must be >= 1 (a subset needs at least one item); got {args.n}", file=sys.stderr)
        return EXIT_USAGE
    if args.seed is not None and not 0 <= args.seed < 2 ** 63:
        print(f"{prog}: --seed must be in [0, 2^63); got {args.seed}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.db).is_file():
        print(f"{prog}: {args.db}: no such store; ingest something first", file=sys.stderr)
        return EXIT_STORE
    try:
        man = create_subset(args.db, args.benchmark, args.n, seed=args.seed, stratified=args.stratified,
                            lock_timeout=args.lock_timeout)
    except StoreLockedError as exc:
        show_traceback()
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_STORE
    except StoreError as exc:
        show_traceback()
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_STORE
    except SubsetError as exc:
        show_traceback()
        msg = str(exc)
        # n outside [1, N] (or too few items for the strata) is a usage error; no items is the data's.
        code = EXIT_DATA if "no items" in msg else EXIT_USAGE
        print(f"{prog}: {msg}", file=sys.stderr)
        return code
    guarantee = {"alpha": args.alpha}
    if man.n < man.N:
        guarantee["theorem_5_2_half_width"] = float(theorem_5_2_halfwidth(man.n, man.N, alpha=args.alpha).half_width)
        if not man.stratified:
            guarantee["exact_worst_case_half_width"] = worst_case_cached(args.db, man.n, man.N, args.alpha)[0]
            mid = posthoc_interval(man.n // 2, man.n, man.N, alpha=args.alpha)
            guarantee["posthoc_half_width_at_50pct"] = float(mid.half_width)
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
