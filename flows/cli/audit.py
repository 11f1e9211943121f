"""``benchcert audit``: run every analysis on one benchmark and write the run's artifacts.

Exit codes as in flows/cli/errors.py: 0 success; 1 the data or the run failed (unknown benchmark or
variant); 2 usage error; 3 the store is missing, locked or unusable.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchcert.flows.cli.errors import (EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE, alpha_arg, print_json,
                                        require_store, user_error, webhook_arg)
from benchcert.flows.cli.options import run_mode_options, store_options
from benchcert.tasks.errors import UsageError, UserError


def _headline(score: dict) -> dict | None:
    """A score's headline interval; runs from before schema 1.2 headlined the hierarchical one."""
    if score.get("headline"):
        return score["headline"]
    iv = {i["method"]: i for i in score["intervals"]}.get("hierarchical")
    return None if iv is None else {**iv, "question": "new_subjects", "beside": None, "note": None}


def _rank(m: dict) -> str:
    if m.get("rank") is None:
        return "-"
    groups = ",".join(str(g) for g in m.get("tied_groups") or [])
    return f"{m['rank']} [{m['rank_lower']}-{m['rank_upper']}]" + (f" g{groups}" if groups else "")


def summary_table(summary: dict) -> str:
    """Per model: items without a score, pooled and macro score, the macro score's headline interval
    (the question it answers in the header), its half-width and, beside it, the new-subjects half-width
    (when the headline is the same-subjects interval) or the iid one, and the rank with its simultaneous
    interval and tied groups."""
    from benchcert.tasks.audit.headline import QUESTIONS, wide_note

    level = f"{100 * (1 - summary['alpha']):g}%"
    models = sorted(summary["models"], key=lambda m: -m["macro"]["estimate"])
    heads = [_headline(m["macro"]) for m in models]
    question = next((h["question"] for h in heads if h), "new_subjects")
    same = question == "same_subjects"
    title = f"macro {level}, {QUESTIONS[question]}"
    second = "new subj ±" if same else "iid ±"
    width = max(len(title), 15)
    head = (f"{'model':<36} {'items':>6} {'no score':>8} {'pooled':>7} {'macro':>7}  {title:<{width}} {'±':>6} "
            f"{second:>10}  rank [{level}] tied")
    lines = [head, "-" * len(head)]
    for m, hd in zip(models, heads):
        ii = {i["method"]: i for i in m["macro"]["intervals"]}.get("iid_clt")
        hd_s = f"[{100 * hd['lower']:5.1f}, {100 * hd['upper']:5.1f}]" if hd else "-"
        hw_s = f"{100 * hd['half_width']:.2f}" if hd else "-"
        other = (hd or {}).get("beside") if same else ii
        other_s = f"{100 * other['half_width']:.2f}" if other else "-"
        unscored = m.get("n_unscored")
        name = m["model"] if len(m["model"]) <= 36 else m["model"][:33] + "..."
        lines.append(f"{name:<36} {m['n_items']:>6} {'-' if unscored is None else unscored:>8} "
                     f"{100 * m['pooled']['estimate']:6.2f}% {100 * m['macro']['estimate']:6.2f}%  {hd_s:<{width}} "
                     f"{hw_s:>6} {other_s:>10}  {_rank(m)}")
    lines.append("(percentage points) " + {
        "new_subjects": "new subjects = hierarchical bound: how good is the model on new subjects drawn like these "
                        "(items, subjects and domains exchangeable); iid = items treated as independent",
        "items": "items independent = hierarchical bound with hierarchy 'none' (item-level only); iid = items "
                 "treated as independent",
        "same_subjects": "these subjects = same-subjects interval: how good is the model on this benchmark's "
                         "subjects, items sampled within them; new subj = the new-subjects (hierarchical) bound"}[
        question])
    if same:
        tight = min((h for h in heads if h and h.get("beside")), key=lambda h: h["beside"]["half_width"], default=None)
        if tight is not None:
            n_subj = next(m["n_subjects"] for m, h in zip(models, heads) if h is tight)
            lines.append(f"headline: these subjects, because {wide_note(n_subj, tight['beside']['half_width'])}")
    if any(m.get("rank") is not None for m in models):
        lines.append(f"rank: by pooled score, with its simultaneous {level} interval over every model; tied: the groups "
                     "of models the comparisons cannot tell apart (table tied_groups)")
    if any(m.get("n_unscored") for m in models):
        lines.append("no score: benchmark items this model has no score for, left out of its scores (not counted "
                     "wrong; summary.json unscored_convention)")
    return "\n".join(lines)


def cmd_audit(args) -> int:
    from benchcert.tasks.audit.hierarchical import parse_hierarchy, read_subject_weights

    try:
        alpha_arg(args.alpha)
    except UsageError as exc:
        return user_error("benchcert audit", exc)
    try:
        hierarchy = parse_hierarchy(args.hierarchy)
        weights = read_subject_weights(args.weights) if args.weights else None
    except (ValueError, OSError) as exc:
        print(f"benchcert audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        webhook_arg(args.webhook)
    except UsageError as exc:
        return user_error("benchcert audit", exc)
    try:
        require_store(args.db)
    except UserError as exc:
        return user_error("benchcert audit", exc)
    environments = None
    if args.environments is not None:
        from benchcert.tasks.certify.service import EnvironmentsError, spec_for_audit
        from benchcert.tasks.store.connection import StoreError

        try:
            environments = spec_for_audit(args.environments, args.db, args.benchmark, args.lock_timeout)
        except EnvironmentsError as exc:
            print(f"benchcert audit: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except StoreError as exc:
            print(f"benchcert audit: {exc}", file=sys.stderr)
            return EXIT_STORE
    from benchcert.flows.scale_out import ScaleOut
    from benchcert.tasks.audit.request import AuditRequest

    request = AuditRequest(db=str(args.db), benchmark=args.benchmark, artifacts_root=str(args.artifacts),
                           alpha=args.alpha, variant=args.variant, lock_timeout=args.lock_timeout,
                           hierarchy=hierarchy, subject_weights=weights, baseline=args.baseline,
                           webhook_url=args.webhook, environments=environments, all_pairs=args.all_pairs,
                           out_of_core=args.out_of_core,
                           dask_block_models=args.dask_block_models if args.out_of_core else None)
    scale = ScaleOut(address=args.dask_address, workers=args.dask_workers, export=args.export,
                     block_models=args.dask_block_models)
    if scale.asked:
        # Scale-out runs as a Prefect flow run with a DaskTaskRunner (prefect-dask): Prefect mode.
        from benchcert.flows.runs import prefect_env

        prefect_env()
        from benchcert.flows.audit import audit_flow
        from benchcert.flows.scale_out import dask_audit
        from benchcert.tasks.store.export import ExportError
        from benchcert.tasks.store.matrices import MatrixError

        try:
            flow_fn, request = dask_audit(scale, request, audit_flow)
        except ValueError as exc:
            print(f"benchcert audit: {exc}", file=sys.stderr)
            return EXIT_DATA if isinstance(exc, (ExportError, MatrixError)) else EXIT_USAGE
        out = flow_fn(request)  # (dask_audit checked the scale-out options)
    else:
        from benchcert.flows.runs import choose_mode, run_audit

        mode = choose_mode(args.prefect)
        # An unknown benchmark or variant (exit 1) or an unusable store (exit 3) is reported by main()
        # in one line, with the traceback under --debug.
        from benchcert.flows.cli.progress import Progress

        with Progress(enabled=not args.json) as progress:
            out = run_audit(mode, request, progress=progress)
    if args.json:
        print_json(out)
        return EXIT_OK
    print(f"benchmark {out['benchmark']!r} (variant {out['variant']!r}): {out['n_models']} models, "
          f"{out['n_items']} items, {out['n_subjects']} subjects, {out['n_domains']} domains")
    print(summary_table(out))
    from benchcert.flows.cli.judge import human_scale_block

    if block := human_scale_block(out):
        print(block)
    for w in out["warnings"][:10]:
        print(f"warning: {w}")
    if len(out["warnings"]) > 10:
        print(f"... {len(out['warnings'])} warnings in all (see the report)")
    print(f"run {out['run_id']}")
    print(f"report: {Path(out['run_dir']) / 'report.html'}")
    return EXIT_OK


def register(sub) -> None:
    sp = sub.add_parser("audit", help="audit one benchmark and write the run's artifacts",
                        description="Run every analysis on one benchmark, write manifest.json, summary.json, "
                                    "tables/*.parquet and report.html under ARTIFACTS/<benchmark folder>/<run id>/, "
                                    "and record the run in the store.")
    store_options(sp)
    sp.add_argument("--benchmark", required=True)
    sp.add_argument("--artifacts", type=Path, default=Path("artifacts"), metavar="DIR",
                    help="artifacts root (default ./artifacts)")
    sp.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    sp.add_argument("--variant", default=None,
                    help="prompt variant to audit (default: the benchmark's stored default, else the only one, else "
                         "the base variant ''; see benchcert default-variant)")
    sp.add_argument("--baseline", metavar="MODEL",
                    help="compare every model against this one (default: all pairs)")
    sp.add_argument("--webhook", metavar="URL", help="POST a JSON notice here when the run finds regressions")
    sp.add_argument("--hierarchy", default="subject,domain", metavar="LEVELS",
                    help="levels treated as exchangeable clusters: subject,domain (default), subject, or none "
                         "(also subject=subject,domain=domain; remap other log columns at ingest with --map)")
    sp.add_argument("--weights", type=Path, metavar="FILE",
                    help="subject weights (TOML [subject_weights] table, JSON object or CSV subject,weight): "
                         "adds a 'weighted' score beside pooled and macro")
    sp.add_argument("--environments", type=Path, metavar="FILE",
                    help="deployment environments TOML (see benchcert plan environments): adds table "
                         "environment_risks and a report section with each model's score per environment")
    run_mode_options(sp)
    add_dask_arguments(sp)
    sp.set_defaults(func=cmd_audit)


def add_dask_arguments(sp) -> None:
    """The audit's scale-out options (benchcert audit)."""
    sp.add_argument("--all-pairs", action="store_true",
                    help="compare every pair of models even beyond 150 models (default there: each model against "
                         "the next in the ranking and every pair among the top 20)")
    sp.add_argument("--out-of-core", action="store_true",
                    help="do not hold the score matrix: read it from the store by blocks of models (--dask-block-models, "
                         "default 500) when an analysis asks; memory is the per-subject counts and one block, not "
                         "models x items (0/1 scores; on Dask the flow reads the store this way; docs/scale.md)")
    g = sp.add_argument_group("scale-out on Dask (default: one process)")
    g.add_argument("--dask-address", metavar="URL",
                   help="run the analyses on the Dask cluster whose scheduler is at URL (tcp://HOST:PORT); its "
                        "workers must be able to read the export folder")
    g.add_argument("--dask-workers", type=int, metavar="N",
                   help="run the analyses on a local Dask cluster of N worker processes started for this audit")
    g.add_argument("--export", type=Path, metavar="DIR",
                   help="where the store is exported for the workers (default ARTIFACTS/.export)")
    g.add_argument("--dask-block-models", type=int, metavar="N",
                   help="models per block of the per-model and pairwise work sent to the workers (hierarchical "
                        "fits, paired comparisons), or read at a time with --out-of-core; default 500")
