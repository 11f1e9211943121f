"""``benchcert compare``: is one model better than another on a benchmark?

    benchcert compare A B --db FILE --benchmark NAME [--json]          # B against A
    benchcert compare --baseline M --db FILE --benchmark NAME [--json] # every model against M
    benchcert compare --baseline M C1 C2 ... --db FILE --benchmark NAME  # these against M

Paired comparisons on the items both models answered (items only one answered are excluded
and counted): gap, intervals, raw and (for several candidates) Bonferroni/Holm/BH-adjusted p-values and the
Bonferroni simultaneous interval that decides the family verdict,
verdict improved / regressed / inconclusive, and the minimum detectable effect. ``--record``
stores a two-model comparison as a look of the checkpoint-verdict question
(benchcert.tasks.compare.verdicts), whose headline verdict stays valid however often it is asked.

Reads the store directly; no Prefect flow is started.
Exit codes as in benchcert.flows.cli: 0 ok, 1 data problem (unknown benchmark or model, no
shared item), 2 usage, 3 store locked or unusable, 4 the CI gate failed (``--fail-on``, see
benchcert.tasks.compare.gate and docs/ci-gate.md).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from benchcert.tasks.compare import gate

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_STORE, EXIT_USAGE, print_json, show_traceback
HIERARCHIES = {"subject,domain": ("subject", "domain"), "subject": ("subject",), "none": ()}


def register(sub) -> None:
    sp = sub.add_parser(
        "compare", help="paired comparison of models on one benchmark (gap, intervals, p-values, verdict, MDE)",
        description="Compare model B against model A (or every candidate against --baseline) on the items both "
                    "answered. Gap = candidate - baseline; verdict 'improved' means the candidate is significantly "
                    "better. With several candidates the verdict is the Bonferroni simultaneous interval's (improved "
                    "or regressed only when that interval excludes 0, so no verdict contradicts its interval); "
                    "Holm- and BH-adjusted p-values are reported for reference. With 30 or more subjects the primary interval is clustered by subject (does the gap "
                    "generalise to new subjects); with fewer it treats subjects as fixed strata (is the candidate "
                    "better on this benchmark's items); --hierarchy none: paired CLT. The output names the question.")
    sp.add_argument("models", nargs="*", metavar="MODEL",
                    help="A B (B is compared against A), or with --baseline the candidates (default: all others)")
    sp.add_argument("--baseline", metavar="M", help="compare every candidate against this model")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", required=True)
    sp.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    sp.add_argument("--power", type=float, default=0.8, help="power for the minimum detectable effect (default 0.8)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the only one, else '')")
    sp.add_argument("--hierarchy", choices=list(HIERARCHIES), default="subject,domain", metavar="LEVELS",
                    help="clustering for the primary interval: subject,domain (default; clusters by subject), "
                         "subject, or none")
    sp.add_argument("--record", action="store_true",
                    help="record a two-model comparison as the next look of its checkpoint-verdict question "
                         "(its own estimand, named in the output: the subject-weighted gap with 30 or more "
                         "subjects, else the item-weighted gap)")
    sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for another benchcert process using the store (default 600)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    gate.add_arguments(sp)
    sp.set_defaults(func=cmd_compare)


def _err(msg: str) -> None:
    show_traceback()  # --debug: the traceback of an error being reported, if any
    print(f"benchcert compare: {msg}", file=sys.stderr)


def _num(x):
    """JSON-safe float (NaN and infinities become null)."""
    x = float(x)
    return x if x == x and abs(x) != float("inf") else None


def cmd_compare(args) -> int:
    if not 0 < args.alpha < 1:
        _err(f"--alpha must be in (0, 1); got {args.alpha}")
        return EXIT_USAGE
    if not 0 < args.power < 1:
        _err(f"--power must be in (0, 1); got {args.power}")
        return EXIT_USAGE
    if args.baseline is None and len(args.models) != 2:
        _err(f"give two models (A B) or --baseline M; got {len(args.models)} model(s)")
        return EXIT_USAGE
    if args.record and (args.baseline is not None and len(args.models) != 1 or args.baseline is None
                        and len(args.models) != 2):
        _err("--record needs exactly one baseline and one candidate (A B, or --baseline M C)")
        return EXIT_USAGE
    if not Path(args.db).is_file():
        _err(f"{args.db}: no such store; ingest something first")
        return EXIT_STORE
    baseline = args.baseline if args.baseline is not None else args.models[0]
    candidates = args.models if args.baseline is not None else args.models[1:]
    problem = gate.check_arguments(args)
    if problem:
        _err(problem)
        return EXIT_USAGE
    if baseline in candidates:
        _err(f"the baseline {baseline!r} is also a candidate")
        return EXIT_USAGE
    if len(set(candidates)) != len(candidates):
        _err(f"a candidate is named twice: {candidates}")
        return EXIT_USAGE

    from benchcert.tasks.store.matrices import MatrixError
    from benchcert.tasks.store.connection import StoreError, StoreLockedError
    from benchcert.tasks.compare.verdicts import VerdictError

    try:
        if args.record:
            return _record(args, baseline, candidates[0])
        return _compare(args, baseline, candidates)
    except StoreLockedError as exc:
        _err(str(exc))
        return EXIT_STORE
    except StoreError as exc:
        _err(str(exc))
        return EXIT_STORE
    except (MatrixError, VerdictError) as exc:
        _err(str(exc))
        return EXIT_DATA


def _compare(args, baseline: str, candidates: list[str]) -> int:
    import numpy as np

    from benchcert.stats.comparisons import adjust_pvalues, pairwise_comparisons, simultaneous_intervals
    from benchcert.stats.subject_means import ITEM_WEIGHTED
    from benchcert.tasks.store.matrices import models_with_responses
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.compare.verdicts import VerdictError, load_models

    with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:
        if candidates:
            m = load_models(con, args.benchmark, [baseline, *candidates], args.variant)
        else:
            m0 = load_models(con, args.benchmark, [baseline], args.variant)
            known = models_with_responses(con, args.benchmark, m0.variant)
            candidates = [x for x in known if x != baseline]
            if not candidates:
                raise VerdictError(f"benchmark {args.benchmark!r} has no model besides {baseline!r}")
            m = load_models(con, args.benchmark, [baseline, *candidates], args.variant)
    scores = m.scores
    col = {name: i for i, name in enumerate(m.models)}
    obs = ~np.isnan(scores)
    no_shared = [c for c in candidates if not (obs[:, col[c]] & obs[:, col[baseline]]).any()]
    if no_shared:
        raise VerdictError(f"{no_shared} share no answered item with {baseline!r}; nothing to compare")
    pairs = np.array([[col[baseline], col[c]] for c in candidates])
    subjects = m.item_subject if "subject" in HIERARCHIES[args.hierarchy] and m.subjects.height >= 2 else None
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r = pairwise_comparisons(scores, subjects, pairs=pairs, alpha=args.alpha, power=args.power)
    notes = list(dict.fromkeys(str(w.message) for w in rec))
    if "subject" in HIERARCHIES[args.hierarchy] and subjects is None:
        notes.insert(0, "a single subject: nothing to cluster over, so intervals are paired CLT")
    many = len(candidates) > 1
    holm = adjust_pvalues(r.p_value, alpha=args.alpha, method="holm")
    bonf = adjust_pvalues(r.p_value, alpha=args.alpha, method="bonferroni")
    bh = adjust_pvalues(r.p_value, alpha=args.alpha, method="bh")
    sim = simultaneous_intervals(r.estimate, r.se, alpha=args.alpha, df=r.tests[r.method].df)
    if r.method == "stratified_items":
        notes.append(f"{np.unique(subjects).size} subjects (fewer than 30): the verdict answers 'is the candidate "
                     "better on this benchmark's items' (subjects as fixed strata); whether the gap generalises to "
                     "new subjects (p_values.clustered_subject) cannot be answered reliably with so few subjects")
    exact = "mcnemar_exact" if "mcnemar_exact" in r.tests else "sign_test"
    rows = []
    for j, cand in enumerate(candidates):
        verdict = str(r.verdict[j])
        if many:
            # The family's verdict is its simultaneous interval's: Holm's step-down can reject a pair
            # whose Bonferroni interval still covers 0, and a verdict must not contradict the interval
            # shown beside it (the audit's comparisons decide the same way).
            verdict = ("improved" if sim.lower[j] > 0 else "regressed" if sim.upper[j] < 0 else "inconclusive")
        rows.append({
            "candidate": cand, "baseline": baseline, "verdict": verdict,
            "gap": _num(r.estimate[j]), "score_candidate": _num(r.mean_b[j]), "score_baseline": _num(r.mean_a[j]),
            "interval": {"method": r.method, "lower": _num(r.lower[j]), "upper": _num(r.upper[j]), "se": _num(r.se[j])},
            "intervals": {name: {"lower": _num(t.lower[j]), "upper": _num(t.upper[j])}
                          for name, t in r.tests.items()
                          if name in ("paired_clt", "clustered_subject", "stratified_items", "hoeffding")},
            "simultaneous_interval": ({"method": "bonferroni", "lower": _num(sim.lower[j]), "upper": _num(sim.upper[j])}
                                      if many else None),
            "p_value": _num(r.p_value[j]),
            "p_values": {name: _num(t.p_value[j]) for name, t in r.tests.items()},
            "p_adjusted": ({"bonferroni": _num(bonf.p_adjusted[j]), "holm": _num(holm.p_adjusted[j]),
                            "bh": _num(bh.p_adjusted[j])} if many else None),
            "exact_test": exact, "mde": _num(r.mde[j]), "power": args.power,
            "n_shared": int(r.n[j]), "n_only_candidate": int(r.n_only_b[j]), "n_only_baseline": int(r.n_only_a[j]),
            "n_excluded": int(r.n_excluded[j]),
        })
    out = {"benchmark": args.benchmark, "variant": m.variant, "baseline": baseline, "alpha": args.alpha,
           "method": r.method, "question": r.question, "estimand": ITEM_WEIGHTED, "family_size": len(candidates),
           "adjustment": "bonferroni" if many else None, "comparisons": rows, "warnings": notes,
           "assumptions": list(r.assumptions)}
    decision = gate.decide(args, rows, args.alpha)  # --fail-on: the CI gate (tasks/compare/gate.py)
    if decision is not None:
        out["gate"] = decision
    if args.json:
        print_json(out, strict=True)
        return gate.finish(decision)
    level = f"{100 * (1 - args.alpha):g}%"
    print(f"{args.benchmark!r}: candidate vs baseline {baseline!r}; gap = candidate - baseline on shared items, "
          f"{level} interval {r.method}" + ("; with several candidates the interval shown is the Bonferroni "
                                            "simultaneous one and decides the verdict" if many else ""))
    print(f"question: {r.question}")
    # --record's checkpoint verdict answers the subjects question about the subject-weighted gap: say
    # which one this is, so the two outputs are not read as one number.
    print(f"estimand: {ITEM_WEIGHTED}")
    head = (f"{'candidate':<32} {'gap pp':>7}  {level + ' interval':<18} {'p':>9} "
            + (f"{'p bonf':>9} " if many else "") + f"{'p exact':>9} {'MDE pp':>7} {'shared':>7} {'excl':>5}  verdict")
    print(head)
    print("-" * len(head))
    for row in rows:
        name = row["candidate"] if len(row["candidate"]) <= 32 else row["candidate"][:29] + "..."
        shown = row["simultaneous_interval"] or row["interval"]
        iv = f"[{100 * shown['lower']:6.2f}, {100 * shown['upper']:6.2f}]"
        line = (f"{name:<32} {100 * row['gap']:7.2f}  {iv:<18} {row['p_value']:9.3g} "
                + (f"{row['p_adjusted']['bonferroni']:9.3g} " if many else "")
                + f"{row['p_values'][exact]:9.3g} {100 * row['mde']:7.2f} {row['n_shared']:7d} "
                  f"{row['n_excluded']:5d}  {row['verdict']}")
        print(line)
    for n in notes:
        print(f"warning: {n}", file=sys.stderr)
    return gate.finish(decision)


def _record(args, baseline: str, candidate: str) -> int:
    from benchcert.tasks.compare.verdicts import checkpoint_verdict

    v = checkpoint_verdict(args.db, args.benchmark, baseline, candidate, alpha=args.alpha, variant=args.variant,
                           hierarchy=HIERARCHIES[args.hierarchy], power=args.power, record=True,
                           lock_timeout=args.lock_timeout)
    # The gate reads the anytime-valid verdict and, where there is one, the anytime interval.
    anytime = v.cs_lower is not None
    decision = gate.decide(args, [{"candidate": candidate, "baseline": baseline, "verdict": v.verdict, "gap": v.gap,
                                   "interval": {"lower": v.cs_lower if anytime else v.lower,
                                                "upper": v.cs_upper if anytime else v.upper,
                                                "method": "anytime" if anytime else v.method}}], args.alpha)
    if args.json:
        print_json({**v.as_dict(), **({"gate": decision} if decision else {})}, strict=True)
        return gate.finish(decision)
    print(f"{args.benchmark!r}: {candidate!r} vs {baseline!r}, look {v.look}: {v.verdict}"
          + (f" (decided at look {v.decided_at_look}, {v.decided_by})" if v.decided_at_look else ""))
    exact = "" if v.p_exact is None else f"{v.exact_test} p = {v.p_exact:.3g}, "
    subj = "" if v.n_subjects is None else f" in {v.n_subjects} subjects"
    # The fixed-sample numbers are at alpha (what one look alone would say); the verdict's own tests
    # are at alpha * first_look_share (first look) and the anytime interval: say so, so that an
    # interval excluding 0 beside 'inconclusive' reads as what it is.
    print(f"  this look, fixed-sample (not the verdict's test): gap {100 * v.gap:.2f} pp, {100 * (1 - v.alpha):g}% "
          f"interval [{100 * v.lower:.2f}, {100 * v.upper:.2f}] ({v.method}), p = {v.p_value:.3g}, {exact}"
          f"MDE {100 * v.mde:.2f} pp; {v.n_shared} shared items{subj}, {v.n_excluded} excluded")
    print(f"  the verdict decides at the first look by p <= {v.alpha * v.first_look_share:g} (alpha x first-look "
          f"share; first look p = {v.first_p_value:.3g}), after it by the anytime-valid test")
    cs = ("" if v.cs_lower is None else f", anytime interval [{100 * v.cs_lower:.2f}, {100 * v.cs_upper:.2f}] pp")
    unit = (f"{v.n_sequential_units} subject(s) in the sequential test (one mean each, at its first look)"
            if v.sequential_unit == "subject" else f"{v.n_sequential} in the sequential test")
    print(f"  over all looks: anytime p = {v.anytime_p:.3g}{cs}; {v.n_new} new item(s), {unit}")
    print(f"  question: {v.question}")
    print(f"  estimand (gap, intervals and tests): {v.estimand}")
    for w in v.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return gate.finish(decision)


if __name__ == "__main__":  # pragma: no cover - for ad-hoc use without the main CLI
    p = argparse.ArgumentParser(prog="benchcert")
    register(p.add_subparsers(dest="command", required=True))
    a = p.parse_args()
    sys.exit(a.func(a))
