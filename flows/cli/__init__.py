"""The ``benchcert`` command line.

Exit codes: 0 success; 1 the data or a run failed (rejected or conflicting file, failed
audit, unknown benchmark, variant, model or run); 2 usage error; 3 the store is locked or
unusable; 4 a CI gate failed (``compare --fail-on``).  An error is one line on stderr;
``--debug`` (or ``BENCHCERT_DEBUG=1``) shows its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, EXIT_USAGE
from benchcert.flows.cli.errors import print_json as _print_json

#: The names of tasks/schemas.py's SCHEMAS (tests/flows/test_cli_hygiene.py checks): spelled out so that
#: building the parser does not import pydantic and the models (an ingest never needs them).
SCHEMA_NAMES = ("response-row", "manifest", "summary", "index")

#: Modules that add sub-commands: each defines ``register(subparsers)`` which adds its parsers
#: and sets ``func`` (a callable taking the parsed args and returning an exit code).
COMMAND_MODULES = ("benchcert.flows.cli.plan", "benchcert.flows.cli.compare", "benchcert.flows.cli.perturb",
                   "benchcert.flows.cli.serve", "benchcert.flows.cli.dashboard", "benchcert.flows.cli.certify",
                   "benchcert.flows.cli.default_variant", "benchcert.flows.cli.gof", "benchcert.flows.cli.export")


def _run_mode_options(sp) -> None:
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--prefect", dest="prefect", action="store_true", default=None,
                   help="run as a Prefect flow run (default when PREFECT_API_URL is set; without it Prefect "
                        "starts a temporary local API, which takes seconds)")
    g.add_argument("--in-process", dest="prefect", action="store_false",
                   help="run in this process even when a Prefect API is configured (default without one)")


def _expand(paths: list[str]) -> tuple[list[str], list[dict]]:
    """Sources to ingest, and a report for every file found in a directory that no adapter reads.

    A directory is walked and each file's format detected from its content (harness logs) or
    name (CSV/JSONL/Parquet); a HELM run directory inside it is one source.
    """
    from benchcert.tasks.ingest.adapters.detect import walk

    files, unknown = [], []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found, skipped = walk(path)
            files += found
            unknown += skipped
        else:
            files.append(p)
    return files, unknown


def _check_expressions(files: list[str], mapping) -> None:
    """A mapping expression that does not parse, or reads a column a table file lacks, is a usage
    error before anything is read (MappingError); plain column names are checked per file as before."""
    from benchcert.tasks.ingest.adapters import generic
    from benchcert.tasks.ingest.mapping import _is_identifier

    if all(_is_identifier(v) for v in mapping.columns.values()):
        return
    for f in files:
        path = Path(f)
        try:
            fmt = generic.detect_format(path, getattr(mapping, "format", None))
            if fmt not in ("csv", "jsonl", "parquet") or not path.is_file():
                continue
            available = generic.file_columns(path, fmt)
        except (generic.AdapterError, OSError, UnicodeDecodeError):
            continue  # the file's own report says what is wrong with it
        if available:
            from benchcert.tasks.ingest.mapping import ColumnMapping

            odd = ColumnMapping({k: v for k, v in mapping.columns.items() if not _is_identifier(v)})
            odd.expressions(available, str(path))


def cmd_ingest(args) -> int:
    from benchcert.tasks.ingest.adapters.native import NATIVE_FORMATS, NativeMapping
    from benchcert.tasks.ingest.service import OK_STATUSES, command_summary, summary_text
    from benchcert.tasks.ingest.mapping import MappingError, parse_mapping

    native_format = args.format if args.format in NATIVE_FORMATS else None
    try:
        mapping = parse_mapping(args.map, args.config, None if native_format else args.format)
    except MappingError as exc:
        print(f"benchcert ingest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.model is not None:
        if not args.model.strip():
            print("benchcert ingest: --model must not be empty", file=sys.stderr)
            return EXIT_USAGE
        if "model" in mapping.columns:
            print("benchcert ingest: give --model NAME or --map model=..., not both", file=sys.stderr)
            return EXIT_USAGE
    if native_format or args.metric or args.scorer or args.stat or args.model:
        mapping = NativeMapping(columns=mapping.columns, format=native_format or mapping.format,
                                model=args.model, metric=args.metric, scorer=args.scorer, stat=args.stat)
    from benchcert.flows.runs import choose_mode, run_ingest

    mode = choose_mode(args.prefect)
    files, unknown = _expand(args.paths)
    try:
        _check_expressions(files, mapping)
    except MappingError as exc:
        print(f"benchcert ingest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reports = []
    if args.atomic and unknown:  # a file no adapter reads fails the command before anything is stored
        from benchcert.tasks.ingest.service import NOT_TRIED

        reports = [{"path": f, "status": NOT_TRIED, "rows_added": 0,
                    "message": f"{f}: not tried: --atomic, and a file no adapter reads was given"} for f in files]
        files = []
    if files:
        from benchcert.flows.cli.progress import Progress

        with Progress(enabled=not args.json) as progress:
            reports = [r.as_dict() for r in run_ingest(mode, files, str(args.db), args.benchmark, mapping,
                                                       args.allow_rejects, args.lock_timeout, progress=progress,
                                                       atomic=args.atomic)]
    reports += unknown
    ok = all(r["status"] in OK_STATUSES for r in reports)
    locked = any(r["status"] in ("locked", "unusable") for r in reports)  # the store, not the data
    if args.json:
        _print_json({"db": str(args.db), "ok": ok, "run_mode": mode, "atomic": args.atomic, "files": reports,
                     "summary": command_summary(reports)})
    else:
        for r in reports:
            stream = sys.stdout if r["status"] in OK_STATUSES else sys.stderr
            print(f"[{r['status']}] {r['message']}", file=stream)
            for rej in r.get("rejects", [])[:10]:
                print(f"    line {rej['line']}, field {rej['field']}: {rej['reason']}", file=stream)
            if len(r.get("rejects", [])) > 10 or r.get("rows_rejected", 0) > 10:
                print(f"    ... ({r.get('rows_rejected')} bad rows in all; --json lists up to 50)", file=stream)
        print(summary_text(command_summary(reports), args.db))
    if locked:
        return EXIT_STORE
    return EXIT_OK if ok else EXIT_DATA


def _summary_table(summary: dict) -> str:
    """Per model: pooled and macro score, the macro score's hierarchical interval (the one the
    README leads with) and, beside it, the half-widths of the hierarchical and iid intervals."""
    level = f"{100 * (1 - summary['alpha']):g}%"
    head = (f"{'model':<36} {'items':>6} {'pooled':>7} {'macro':>7}  macro {level} hierarchical  "
            f"{'hier ±':>6} {'iid ±':>6}")
    lines = [head, "-" * len(head)]
    for m in sorted(summary["models"], key=lambda m: -m["macro"]["estimate"]):
        iv = {i["method"]: i for i in m["macro"]["intervals"]}
        hi, ii = iv.get("hierarchical"), iv.get("iid_clt")
        hi_s = f"[{100 * hi['lower']:5.1f}, {100 * hi['upper']:5.1f}]" if hi else "-"
        hw_s = f"{100 * hi['half_width']:.2f}" if hi else "-"
        ii_s = f"{100 * ii['half_width']:.2f}" if ii else "-"
        name = m["model"] if len(m["model"]) <= 36 else m["model"][:33] + "..."
        lines.append(f"{name:<36} {m['n_items']:>6} {100 * m['pooled']['estimate']:6.2f}% "
                     f"{100 * m['macro']['estimate']:6.2f}%  {hi_s:<25} {hw_s:>6} {ii_s:>6}")
    lines.append("(percentage points; hierarchical = exchangeable bound over items, subjects and domains, "
                 "iid = items treated as independent)")
    return "\n".join(lines)


def cmd_audit(args) -> int:
    from benchcert.tasks.audit.hierarchical import parse_hierarchy, read_subject_weights

    if not 0 < args.alpha < 1:
        print(f"benchcert audit: --alpha must be in (0, 1); got {args.alpha}", file=sys.stderr)
        return EXIT_USAGE
    try:
        hierarchy = parse_hierarchy(args.hierarchy)
        weights = read_subject_weights(args.weights) if args.weights else None
    except (ValueError, OSError) as exc:
        print(f"benchcert audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.webhook:
        from benchcert.tasks.audit.changes import WebhookError, check_webhook_url

        try:
            check_webhook_url(args.webhook)
        except WebhookError as exc:
            print(f"benchcert audit: --webhook: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if not Path(args.db).is_file():
        print(f"benchcert audit: {args.db}: no such store; ingest something first", file=sys.stderr)
        return EXIT_STORE
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
    from benchcert.tasks.audit.request import AuditRequest

    request = AuditRequest(db=str(args.db), benchmark=args.benchmark, artifacts_root=str(args.artifacts),
                           alpha=args.alpha, variant=args.variant, lock_timeout=args.lock_timeout,
                           hierarchy=hierarchy, subject_weights=weights, baseline=args.baseline,
                           webhook_url=args.webhook, environments=environments, all_pairs=args.all_pairs)
    if args.dask_address or args.dask_workers is not None or args.export or args.dask_block_models is not None:
        # Scale-out runs as a Prefect flow run with a DaskTaskRunner (prefect-dask): Prefect mode.
        from benchcert.flows.runs import prefect_env

        prefect_env()
        from benchcert.flows.audit import audit_flow
        from benchcert.flows.cli.export import dask_audit
        from benchcert.tasks.store.export import ExportError
        from benchcert.tasks.store.matrices import MatrixError

        try:
            flow_fn, scale_out = dask_audit(args, audit_flow)
        except ValueError as exc:
            print(f"benchcert audit: {exc}", file=sys.stderr)
            return EXIT_DATA if isinstance(exc, (ExportError, MatrixError)) else EXIT_USAGE
        out = flow_fn(request.model_copy(update=scale_out))  # (dask_audit checked the scale-out options)
    else:
        from benchcert.flows.runs import choose_mode, run_audit

        mode = choose_mode(args.prefect)
        # An unknown benchmark or variant (exit 1) or an unusable store (exit 3) is reported by main()
        # in one line, with the traceback under --debug.
        from benchcert.flows.cli.progress import Progress

        with Progress(enabled=not args.json) as progress:
            out = run_audit(mode, request, progress=progress)
    if args.json:
        _print_json(out)
        return EXIT_OK
    print(f"benchmark {out['benchmark']!r} (variant {out['variant']!r}): {out['n_models']} models, "
          f"{out['n_items']} items, {out['n_subjects']} subjects, {out['n_domains']} domains")
    print(_summary_table(out))
    for w in out["warnings"][:10]:
        print(f"warning: {w}")
    if len(out["warnings"]) > 10:
        print(f"... {len(out['warnings'])} warnings in all (see the report)")
    print(f"run {out['run_id']}")
    print(f"report: {Path(out['run_dir']) / 'report.html'}")
    return EXIT_OK


def cmd_runs(args) -> int:
    from benchcert.tasks.store.connection import StoreError, list_runs, open_store

    try:
        with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:
            runs = list_runs(con, args.benchmark)
    except StoreError as exc:
        print(f"benchcert runs: {exc}", file=sys.stderr)
        return EXIT_STORE
    if args.json:
        _print_json(runs.to_dicts())
        return EXIT_OK
    if runs.height == 0:
        print("no runs")
    for r in runs.iter_rows(named=True):
        print(f"{r['run_id']}  {r['benchmark']:<20} {r['status']:<9} {r['finished_at'] or '':<20} "
              f"{r['n_models'] or '':>4} models  {r['run_dir'] or r['error'] or ''}")
    return EXIT_OK


def cmd_show(args) -> int:
    from benchcert.tasks.audit import artifacts
    from benchcert.tasks.store.connection import StoreError, get_run, open_store

    run_dir, row = None, None
    if args.artifacts is not None:
        run_dir = artifacts.find_run(args.artifacts, args.run)
    elif args.db is not None:
        try:
            with open_store(args.db, write=False, lock_timeout=args.lock_timeout) as con:
                row = get_run(con, args.run)
        except StoreError as exc:
            print(f"benchcert show: {exc}", file=sys.stderr)
            return EXIT_STORE
        if row and row["run_dir"]:
            run_dir = Path(row["run_dir"])
    else:
        print("benchcert show: give --db FILE or --artifacts DIR", file=sys.stderr)
        return EXIT_USAGE
    if row is not None and row["status"] != "completed":
        if args.json:
            _print_json({"run": row})
        else:
            print(f"run {args.run}: {row['status']}: {row['error']}")
        return EXIT_DATA
    if run_dir is None or not (run_dir / "summary.json").is_file():
        print(f"benchcert show: run {args.run!r} not found", file=sys.stderr)
        return EXIT_DATA
    summary = artifacts.load_json(run_dir / "summary.json")
    manifest = artifacts.load_json(run_dir / "manifest.json")
    if args.json:
        _print_json({"run_dir": str(run_dir), "summary": summary, "manifest": manifest})
        return EXIT_OK
    print(f"run {summary['run_id']} of {summary['benchmark']!r}, finished {manifest['finished_at']}")
    print(_summary_table(summary))
    print(f"report: {run_dir / 'report.html'}")
    return EXIT_OK


def cmd_schema(args) -> int:
    from benchcert.tasks.schemas import SCHEMAS, json_schema

    names = list(SCHEMAS) if args.name == "all" else [args.name]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for n in names:
            (out / f"{n}.schema.json").write_text(json.dumps(json_schema(n), indent=2) + "\n", encoding="utf-8")
            print(out / f"{n}.schema.json")
    elif len(names) == 1:
        _print_json(json_schema(names[0]))
    else:
        _print_json({n: json_schema(n) for n in names})
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from benchcert import __version__

    from benchcert.flows.cli.errors import OneLineParser

    p = OneLineParser(prog="benchcert", description=(
        "What your benchmark results actually support: ingest item-level evaluation logs into a DuckDB store, "
        "audit a benchmark (scores with honest intervals), and publish run artifacts."))
    p.add_argument("--version", action="version", version=f"benchcert {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an error (allowed anywhere on the line; or BENCHCERT_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp, db_required=True):
        sp.add_argument("--db", type=Path, required=db_required, help="DuckDB store file")
        sp.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                        help="seconds to wait for another benchcert process using the store (default 600)")
        sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")

    sp = sub.add_parser("ingest", help="ingest log files (CSV, JSONL, Parquet, harness logs) into the store",
                        description="Ingest item-level log files: CSV, JSONL, Parquet (optionally .gz), and harness "
                                    "logs as they are: lm-evaluation-harness --log_samples files, inspect_ai .eval/.json "
                                    "logs, HELM run directories, MMLU-Pro model_outputs zips (detected from content). "
                                    "Each file is all-or-nothing: any bad row and nothing from that file is stored "
                                    "(exit 1) unless --allow-rejects. Re-ingesting a file adds nothing; a score that "
                                    "contradicts a stored one is refused. A refused file never stops the others; "
                                    "the command ends with the files stored and refused (--atomic: all or none).")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="log files or directories (walked recursively)")
    common(sp)
    sp.add_argument("--benchmark", help="benchmark name for every row (else map a benchmark column, or the "
                                        "harness log's own task)")
    sp.add_argument("--model", help="model name for every row, for logs whose names or contents do not carry it "
                                    "(a table without a model column, an MMLU-Pro result file, a harness log); "
                                    "overrides what the log says")
    sp.add_argument("--map", action="append", default=[], metavar="FIELD=COLUMN",
                    help="canonical field fed by a file column, e.g. --map item_id=question_id, or by a SQL "
                         "expression over the columns, e.g. --map score=\"preference - 1\", "
                         "--map item_id=\"exam || '/' || id\", --map benchmark=\"'alpaca_eval_2'\" (repeatable); "
                         "fields: benchmark model item_id subject domain score variant replicate; "
                         "prob_<option> (one column per option), or option and prob (one row per option), "
                         "and label (the correct option) for option probabilities, or confidence (in the "
                         "model's own answer, with a 0/1 score)")
    sp.add_argument("--config", type=Path, metavar="TOML", help="mapping file with a [map] table (flags win)")
    sp.add_argument("--format", choices=["csv", "jsonl", "parquet", "lm_eval", "inspect_ai", "helm", "mmlu_pro_raw"],
                    help="file format (default: harness logs from their content, tables from the name)")
    sp.add_argument("--metric", help="lm-evaluation-harness: metric used as the score (default acc, else exact_match)")
    sp.add_argument("--scorer", help="inspect_ai: scorer used as the score (default: the log's only scorer)")
    sp.add_argument("--stat", metavar="NAME[:SPLIT]",
                    help="HELM: per-instance stat used as the score (default exact_match on the test split)")
    sp.add_argument("--allow-rejects", action="store_true",
                    help="ingest the good rows and quarantine bad ones in the rejects table")
    sp.add_argument("--atomic", action="store_true",
                    help="all paths in one transaction: every file is stored, or none is (exit 1)")
    _run_mode_options(sp)
    sp.set_defaults(func=cmd_ingest)

    sp = sub.add_parser("audit", help="audit one benchmark and write the run's artifacts",
                        description="Run every analysis on one benchmark, write manifest.json, summary.json, "
                                    "tables/*.parquet and report.html under ARTIFACTS/<benchmark>/<run id>/, "
                                    "and record the run in the store.")
    common(sp)
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
    _run_mode_options(sp)
    from benchcert.flows.cli.export import add_dask_arguments

    add_dask_arguments(sp)
    sp.set_defaults(func=cmd_audit)

    sp = sub.add_parser("runs", help="list recorded audit runs")
    common(sp)
    sp.add_argument("--benchmark", help="only this benchmark")
    sp.set_defaults(func=cmd_runs)

    sp = sub.add_parser("show", help="show one run's summary")
    sp.add_argument("run", metavar="RUN", help="run id")
    common(sp, db_required=False)
    sp.add_argument("--artifacts", type=Path, metavar="DIR", help="find the run under this artifacts root")
    sp.set_defaults(func=cmd_show)

    sp = sub.add_parser("schema", help="print the JSON Schemas of the canonical row and the artifacts")
    sp.add_argument("name", nargs="?", default="all", choices=["all", *SCHEMA_NAMES])
    sp.add_argument("--out", type=Path, metavar="DIR", help="write <name>.schema.json files here instead")
    sp.set_defaults(func=cmd_schema)

    import importlib.util

    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; ``argv`` None means this process is the ``benchcert`` program."""
    as_program = argv is None
    if as_program:
        _arm_exit()
    try:
        code = _main(argv)
    except BaseException:
        if as_program:
            _before_exit(None)
        raise
    if as_program:
        _before_exit(code)
    return code


#: Set when the command has finished with this exit code: see _before_exit.
_exit_code: int | None = None


def _before_exit(code: int | None) -> None:
    """The command is done: spare the interpreter its teardown.

    At exit Python first joins the threads that are not daemons and runs the ``atexit``
    handlers (where Prefect sends the events still queued, e.g. the last task states, and logging
    flushes), then tears the interpreter down: module by module, every object it tracks (polars,
    DuckDB, NumPy and, in Prefect mode, some 2,000 modules and their pydantic models), only to
    free memory the process is about to give back anyway.  That teardown took 0.1-0.3 s after a
    Prefect-mode audit on a loaded 2-core machine (0.02-0.08 s in-process).  So when the command
    returned an exit code, the last ``atexit`` handler (:func:`_arm_exit`, registered before any
    other) flushes stdout and stderr and ends the process with that code: every thread join and
    every other handler has run by then.  ``gc.freeze()`` also keeps the collector from walking
    those objects in between.  Only when this process is the program, never when main() is called
    in-process, and not after an exception (SystemExit included), which exits as usual.
    """
    import gc

    global _exit_code
    gc.freeze()
    if isinstance(code, int) and not isinstance(code, bool):
        _exit_code = code


def _arm_exit() -> None:
    import atexit

    atexit.register(_exit_now)  # first registered, so it runs after every other handler


def _exit_now() -> None:
    if _exit_code is None:
        return
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: the code _main gives a broken pipe
            os._exit(141)
        except (OSError, ValueError):
            # The output could not be written (a full disk, a closed stream): the usual shutdown
            # reports it and exits non-zero, where ending here would say the command succeeded.
            return
    os._exit(_exit_code)


def _main(argv: list[str] | None) -> int:
    from benchcert.flows.cli import errors

    debug, argv = errors.debug_requested(list(sys.argv[1:] if argv is None else argv))
    errors.set_debug(debug)
    errors.quiet_prefect_console(debug)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"benchcert {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`benchcert runs ... | head`): stop quietly, as other Unix tools do;
        # stdout is pointed at devnull so the interpreter's final flush cannot raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        if debug:
            raise
        return errors.report(args.command, exc)

