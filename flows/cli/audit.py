"""``benchcert audit``: run every analysis on one benchmark and write the run's artifacts.

Exit codes as in flows/cli/errors.py: 0 success; 1 the data or the run failed (unknown benchmark or
variant); 2 usage error; 3 the store is missing, locked or unusable.
"""

from __future__ import annotations

from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, alpha_arg, print_json, require_store, webhook_arg
from benchcert.flows.cli.options import command, run_mode_options, store_options
from benchcert.tasks.errors import UsageError


def summary_table(summary: dict) -> str:
    """The audit table of a summary.json document: the typed result's text
    (:func:`benchcert.tasks.render.text.audit_table`), which the Python API shows too."""
    from benchcert.tasks.audit.audit_result import AuditResult
    from benchcert.tasks.render.text import audit_table

    return audit_table(AuditResult.from_summary(summary))


def cmd_audit(args) -> int:
    """Run every analysis on one benchmark, write manifest.json, summary.json, tables/*.parquet and
    report.html under ARTIFACTS/<benchmark folder>/<run id>/, and record the run in the store."""
    from benchcert.tasks.hierarchical.settings import parse_hierarchy, read_subject_weights

    # Every refusal below is a UserError that main() reports in one line with its exit code.
    alpha_arg(args.alpha)
    try:
        hierarchy = parse_hierarchy(args.hierarchy)
        weights = read_subject_weights(args.weights) if args.weights else None
    except (ValueError, OSError) as exc:  # the settings' validators name the option's mistake
        raise UsageError(str(exc)) from None
    webhook_arg(args.webhook)
    require_store(args.db)
    environments = None
    if args.environments is not None:
        from benchcert.tasks.certify.service import spec_for_audit

        # a bad file is an EnvironmentsError (exit 2), a locked store a StoreError (exit 3)
        environments = spec_for_audit(args.environments, args.db, args.benchmark, args.lock_timeout)
    from benchcert.flows.scale_out import ScaleOut
    from benchcert.tasks.audit.request import AuditRequest

    request = AuditRequest(db=str(args.db), benchmark=args.benchmark, artifacts_root=str(args.artifacts),
                           alpha=args.alpha, variant=args.variant, lock_timeout=args.lock_timeout,
                           hierarchy=hierarchy, subject_weights=weights, baseline=args.baseline,
                           webhook_url=args.webhook, environments=environments, all_pairs=args.all_pairs,
                           out_of_core=args.out_of_core, options={"items": True} if args.items else {},
                           dask_block_models=args.dask_block_models if args.out_of_core else None)
    scale = ScaleOut(address=args.dask_address, workers=args.dask_workers, export=args.export,
                     block_models=args.dask_block_models)
    if scale.asked:
        # Scale-out runs as a Prefect flow run with a DaskTaskRunner (prefect-dask): Prefect mode.
        from benchcert.flows.prefect_flow import prefect_env

        prefect_env()
        from benchcert.flows.audit import audit_flow
        from benchcert.flows.scale_out import dask_audit

        try:
            # an export that cannot be written or an unknown benchmark raise their UserError (exit 1)
            flow_fn, request = dask_audit(scale, request, audit_flow)
        except ValueError as exc:  # flows/scale_out.py's checks of the scale-out options
            raise UsageError(str(exc)) from None
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
    sp = command(sub, "audit", cmd_audit, help="audit one benchmark and write the run's artifacts")
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
    sp.add_argument("--items", action="store_true",
                    help="add the item analysis (benchcert items: inert items, suspected broken keys, reliability, "
                         "resolution, a reduced item set): tables items*, summary field item_analysis, a report "
                         "section")
    run_mode_options(sp)
    add_dask_arguments(sp)
    # raise_under_debug: the audit runs as a flow; under --debug its error is let through whole.
    sp.set_defaults(raise_under_debug=True)


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
