"""``benchcert compare``: is one model better than another on a benchmark?

    benchcert compare A B --db FILE --benchmark NAME [--json]          # B against A
    benchcert compare --baseline M --db FILE --benchmark NAME [--json] # every model against M
    benchcert compare --baseline M C1 C2 ... --db FILE --benchmark NAME  # these against M
    benchcert compare A B --db FILE --suite NAME|FILE.toml|all [--record]  # B against A on a suite
    benchcert compare --series 'org/model@step-*' --baseline M --db FILE --suite NAME [--out FILE]

Paired comparisons on the items both models answered (items only one answered are excluded
and counted): gap, intervals, raw and (for several candidates) Bonferroni/Holm/BH-adjusted p-values and the
Bonferroni simultaneous interval that decides the family verdict,
verdict improved / regressed / inconclusive, and the minimum detectable effect; an inconclusive row
says how many more items would resolve it (benchcert.tasks.compare.more_items). ``--suite``: one
row per benchmark and the suite's answers (benchcert.tasks.compare.suite). ``--record``
stores a two-model comparison as a look of the checkpoint-verdict question
(benchcert.tasks.compare.verdicts), whose headline verdict stays valid however often it is asked.

Reads the store directly; no Prefect flow is started.
Exit codes as in benchcert.flows.cli: 0 ok, 1 data problem (unknown benchmark or model, no
shared item), 2 usage, 3 store locked or unusable, 4 the CI gate failed (``--fail-on``,
``--require``; see benchcert.tasks.compare.gate and docs/ci-gate.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_GATE, EXIT_OK, alpha_arg, print_json, require_store
from benchcert.flows.cli.options import command, lock_timeout_option
from benchcert.tasks.compare.gate import FAIL_ON, GateOptions
from benchcert.tasks.compare.service import HIERARCHIES, QUESTION_CHOICES
from benchcert.tasks.errors import UsageError


def register(sub) -> None:
    sp = command(sub, "compare", cmd_compare,
                 help="paired comparison of models on one benchmark (gap, intervals, p-values, verdict, MDE)")
    sp.add_argument("models", nargs="*", metavar="MODEL",
                    help="A B (B is compared against A), or with --baseline the candidates (default: all others)")
    sp.add_argument("--baseline", metavar="M", help="compare every candidate against this model")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--benchmark", default=None, help="the benchmark (or --suite)")
    sp.add_argument("--suite", default=None, metavar="NAME",
                    help="judge one candidate on every benchmark of a suite: a suite stored with `benchcert suite "
                         "define`, a TOML file (name, benchmarks, weights), or 'all' (every benchmark both models "
                         "have). Prints one row per benchmark and the suite's answers: regressed on some benchmark "
                         "(family-wise error <= alpha/2, Holm), which benchmarks improved or regressed (family-wise "
                         "error <= alpha), and the suite score (weighted mean of the benchmarks' gaps) with its "
                         "interval and verdict")
    sp.add_argument("--series", default=None, metavar="PATTERN",
                    help="with --suite and --baseline: every model matching PATTERN (shell-style, e.g. "
                         "'org/model@step-*') in step order, each judged on the suite; prints the series (JSON, "
                         "docs/artifacts.md) or writes it with --out")
    sp.add_argument("--out", type=Path, default=None, metavar="FILE", help="with --series: write the series JSON here")
    sp.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    sp.add_argument("--power", type=float, default=0.8, help="power for the minimum detectable effect (default 0.8)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the only one, else '')")
    sp.add_argument("--hierarchy", choices=list(HIERARCHIES), default="subject,domain", metavar="LEVELS",
                    help="subject structure: subject,domain (default) or subject - subjects are the strata of "
                         "--question items and the units of new-subjects; none - no subjects (paired CLT, items only)")
    sp.add_argument("--question", choices=QUESTION_CHOICES, default="items",
                    help="items (default): is the candidate better on this benchmark's items (the item-weighted "
                         "gap; subjects fixed strata); new-subjects: does the gap generalise to new subjects (the "
                         "subject-weighted gap: every subject counts once)")
    sp.add_argument("--assume", choices=("none", "symmetric"), default="none",
                    help="with --record --question new-subjects: symmetric - subject gaps symmetric about their mean "
                         "(a more powerful anytime-valid test; wrong when the gap moves with subject size); none "
                         "(default) - nothing assumed of their shape; fixed at the question's first look")
    sp.add_argument("--record", action="store_true",
                    help="record a two-model comparison as the next look of its checkpoint-verdict question "
                         "(the --question asked, fixed at its first look; its estimand named in the output)")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.add_argument("--fail-on", choices=FAIL_ON, default=None, dest="fail_on",
                    help=f"CI gate: exit {EXIT_GATE} (and print the reason) when a candidate regressed against "
                         "the baseline (significantly worse); a candidate the data cannot tell apart passes")
    sp.add_argument("--require", choices=("non-inferior", "equivalent", "suite-non-inferior"), default=None,
                    help=f"CI release gate: exit {EXIT_GATE} unless the data show each candidate is non-inferior "
                         "(the interval's lower end of candidate - baseline is above -D) or equivalent (the whole "
                         "interval inside (-D, D)); needs --margin D; never passes a regressed candidate; under "
                         "--record the anytime-valid interval decides. With --suite: non-inferior/equivalent on "
                         "EVERY benchmark (an intersection-union test, no correction needed), or suite-non-inferior "
                         "on the suite score")
    sp.add_argument("--margin", type=float, default=None, metavar="D",
                    help="with --require: the margin D in accuracy units (e.g. 0.01 = 1 point)")
    sp.add_argument("--scale", choices=("judge", "human"), default="judge",
                    help="judge (default): the scores as stored; human: a judge-scored benchmark's gap on the human "
                         "scale, the PPI++ interval from the judge's scores and the items labelled by people for "
                         "both models (same verdict words and --fail-on regressed; see docs/analyses.md)")


def _request(args):
    """The service's request from the options; a UserError (UsageError, MissingStoreError) when they make none."""
    from benchcert.tasks.compare.service import CompareRequest

    alpha_arg(args.alpha)
    alpha_arg(args.power, "--power")
    if args.baseline is None and len(args.models) != 2:
        raise UsageError(f"give two models (A B) or --baseline M; got {len(args.models)} model(s)")
    if args.record and (args.baseline is not None and len(args.models) != 1 or args.baseline is None
                        and len(args.models) != 2):
        raise UsageError("--record needs exactly one baseline and one candidate (A B, or --baseline M C)")
    if args.assume != "none" and not (args.record and args.question == "new-subjects"):
        raise UsageError("--assume symmetric applies to the recorded new-subjects verdict: add --record "
                         "--question new-subjects")
    require_store(args.db)
    baseline = args.baseline if args.baseline is not None else args.models[0]
    candidates = args.models if args.baseline is not None else args.models[1:]
    return CompareRequest(db=args.db, benchmark=args.benchmark, baseline=baseline, candidates=tuple(candidates),
                          alpha=args.alpha, power=args.power, variant=args.variant, hierarchy=args.hierarchy,
                          lock_timeout=args.lock_timeout, gate=GateOptions(args.fail_on, args.margin, args.require),
                          question=args.question, assume=args.assume)


def cmd_compare(args) -> int:
    """Compare model B against model A (or every candidate against --baseline) on the items both answered.
    Gap = candidate - baseline; verdict 'improved' means the candidate is significantly better. With several
    candidates the verdict is the Bonferroni simultaneous interval's (improved or regressed only when that
    interval excludes 0, so no verdict contradicts its interval); Holm- and BH-adjusted p-values are reported
    for reference. --question items (default): is the candidate better on this benchmark's items - the
    item-weighted gap the leaderboard shows, subjects as fixed strata; --question new-subjects: does the gap
    generalise to new subjects - the subject-weighted gap, every subject counting once. Every verdict is about
    the gap printed beside it; the output names the question and the estimand."""
    from benchcert.tasks.compare.service import compare_models, record_look

    if args.series is not None and args.suite is None:
        raise UsageError("--series needs --suite NAME (the suite each checkpoint is judged on)")
    if args.suite is not None:
        return _suite(args)
    if args.benchmark is None:
        raise UsageError("give --benchmark NAME (or --suite NAME)")
    if args.require == "suite-non-inferior":
        raise UsageError("--require suite-non-inferior needs --suite NAME (the suite score it asks about)")
    request = _request(args)
    if args.scale == "human":
        if args.record:
            raise UsageError("--record answers the judge-scale checkpoint question; drop --scale human")
        from benchcert.flows.cli.judge import cmd_compare_human

        return cmd_compare_human(args, request)
    # a locked store, an unknown benchmark or model, no shared item: UserErrors that reach main()
    result = record_look(request) if args.record else compare_models(request)
    if args.record:
        return _show_look(args, result)
    return _show(args, result)


def _gate_json(decision) -> dict:
    return {**decision.as_dict(), "exit_code": EXIT_OK if decision.passed else EXIT_GATE}


def _finish(decision) -> int:
    """Print the gate's one-line reason (stderr) and return the command's exit code."""
    if decision is None:
        return EXIT_OK
    print(decision.reason, file=sys.stderr)
    return EXIT_OK if decision.passed else EXIT_GATE


def _show(args, result, table=None) -> int:
    """Print a comparison (``table``: its text form, default the per-benchmark table) or its ``--json``."""
    if args.json:
        out = result.as_dict()
        if result.gate is not None:
            out["gate"] = _gate_json(result.gate)
        print_json(out, strict=True)
        return _finish(result.gate)
    from benchcert.tasks.render.text import comparison_table

    print((table or comparison_table)(result))
    for n in result.warnings:
        print(f"warning: {n}", file=sys.stderr)
    return _finish(result.gate)


def _show_look(args, look) -> int:
    from benchcert.tasks.compare.recorded import deciding_interval

    v, decision = look.verdict, look.gate
    lower, upper, key, name = deciding_interval(v.as_dict())  # the interval shown with the verdict, everywhere
    if args.json:
        print_json({**v.as_dict(), "deciding_interval": {"lower": lower, "upper": upper, "kind": key, "name": name},
                    **({"gate": _gate_json(decision)} if decision else {})}, strict=True)
        return _finish(decision)
    print(f"{v.benchmark!r}: {v.candidate!r} vs {v.baseline!r}, look {v.look}: {v.verdict}"
          + (f" (decided at look {v.decided_at_look}, {v.decided_by})" if v.decided_at_look else ""))
    if lower is not None:
        print(f"  interval that decides: [{100 * lower:.2f}, {100 * upper:.2f}] pp ({name})")
    exact = "" if v.p_exact is None else f"{v.exact_test} p = {v.p_exact:.3g}, "
    subj = "" if v.n_subjects is None else f" in {v.n_subjects} subjects"
    # The fixed-sample numbers are at alpha (what one look alone would say); the verdict's own tests
    # are at alpha * first_look_share (first look) and the anytime interval: say so, so that an
    # interval excluding 0 beside 'inconclusive' reads as what it is.
    print(f"  this look, fixed-sample (not the verdict's test): gap {100 * v.gap:.2f} pp, {100 * (1 - v.alpha):g}% "
          f"interval [{100 * v.lower:.2f}, {100 * v.upper:.2f}] ({v.method}), p = {v.p_value:.3g}, {exact}"
          f"MDE {100 * v.mde:.2f} pp; {v.n_shared} shared items{subj}, {v.n_excluded} excluded")
    if v.first_method in ("plugin_betting_all_alpha", "symmetric_selfnormalised"):
        print(f"  the verdict is one anytime-valid test ({v.first_method}) with all of alpha = {v.alpha:g}, at every "
              "look (no separate first look)")
    else:
        print(f"  the verdict decides at the first look by p <= {v.alpha * v.first_look_share:g} (alpha x first-look "
              f"share; first look p = {v.first_p_value:.3g}, {v.first_method or 'a test of an earlier version'}), "
              "after it by the anytime-valid test")
    cs = ("" if v.cs_lower is None else f", anytime interval [{100 * v.cs_lower:.2f}, {100 * v.cs_upper:.2f}] pp")
    unit = (f"{v.n_sequential_units} subject(s) in the sequential test (one mean each, at its first look)"
            if v.sequential_unit == "subject" else f"{v.n_sequential_units} in the sequential test"
            + (f" ({v.n_sequential - v.n_sequential_units} of the {v.n_sequential} shared so far not bet on: "
               "waiting for their batch, or in a batch not bet on)" if v.n_sequential > v.n_sequential_units else ""))
    print(f"  over all looks: anytime p = {v.anytime_p:.3g}{cs}; {v.n_new} new item(s), {unit}")
    print(f"  question: {v.question} (--question {v.question_key})")
    print(f"  estimand (gap, intervals and tests): {v.estimand}")
    for w in v.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return _finish(decision)


def _suite(args) -> int:
    """``compare --suite``: one baseline, one candidate, every benchmark of the suite."""
    from benchcert.tasks.compare.suite import SuiteRequest, compare_suite
    from benchcert.tasks.compare.suite_def import resolve

    alpha_arg(args.alpha)
    alpha_arg(args.power, "--power")
    if args.benchmark is not None:
        raise UsageError("give --benchmark or --suite, not both")
    if args.scale != "judge":
        raise UsageError("--suite answers on the judge scale; drop --scale human")
    if args.series is not None:
        return _series(args)
    if args.baseline is None and len(args.models) != 2 or args.baseline is not None and len(args.models) != 1:
        raise UsageError("--suite compares one candidate against one baseline (A B, or --baseline M C)")
    require_store(args.db)
    baseline = args.baseline if args.baseline is not None else args.models[0]
    candidate = args.models[-1]
    suite = resolve(args.db, args.suite, [baseline, candidate], lock_timeout=args.lock_timeout)
    result = compare_suite(SuiteRequest(
        db=args.db, suite=suite, baseline=baseline, candidate=candidate, alpha=args.alpha, power=args.power,
        variant=args.variant, hierarchy=args.hierarchy, lock_timeout=args.lock_timeout,
        gate=GateOptions(args.fail_on, args.margin, args.require), question=args.question, record=args.record))
    from benchcert.tasks.render.text import suite_table

    return _show(args, result, suite_table)


def _series(args) -> int:
    """``compare --series PATTERN --baseline B --suite NAME``: the checkpoints in step order."""
    import json

    from benchcert.tasks.compare.series import suite_series
    from benchcert.tasks.compare.suite import SuiteRequest
    from benchcert.tasks.compare.suite_def import resolve

    if args.baseline is None or args.models:
        raise UsageError("--series takes --baseline B and no positional model (the pattern names the checkpoints)")
    if args.fail_on or args.require:
        raise UsageError("--series reports; gate one checkpoint with --suite and --fail-on/--require")
    require_store(args.db)
    suite = resolve(args.db, args.suite, [args.baseline], lock_timeout=args.lock_timeout)
    doc = suite_series(SuiteRequest(db=args.db, suite=suite, baseline=args.baseline, candidate="", alpha=args.alpha,
                                    power=args.power, variant=args.variant, hierarchy=args.hierarchy,
                                    lock_timeout=args.lock_timeout, question=args.question, record=args.record),
                       args.series)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    if args.json or args.out is None:
        print_json(doc, strict=True)
    for c in doc["checkpoints"] if not args.json and args.out is not None else ():
        s = c["score"]
        print(f"step {c['step']}: {c['model']}: regressed somewhere: {'YES' if c['regressed_somewhere'] else 'no'}; "
              + ("" if s is None else f"suite score {100 * s['gap']:+.2f} pp [{100 * s['lower']:.2f}, "
                 f"{100 * s['upper']:.2f}] {s['verdict']}"))
    return EXIT_OK
