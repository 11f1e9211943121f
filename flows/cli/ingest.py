"""``benchcert ingest``: log files (tables and harness logs) into the store.

Parses the options into a mapping, expands the paths into sources (tasks/ingest/sources.py),
runs the ingest (flows/runs.py: in this process or as a Prefect flow run) and prints a line per
file. Exit codes as in flows/cli/errors.py: 0 every file stored (or already there), 1 a file was
refused, 2 a bad mapping or option, 3 the store is locked or unusable.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, EXIT_STORE, print_json
from benchcert.flows.cli.options import run_mode_options, store_options


def cmd_ingest(args) -> int:
    from benchcert.flows.ingest_command import IngestOptions, build_mapping, ingest_paths
    from benchcert.flows.runs import choose_mode
    from benchcert.tasks.ingest.service import OK_STATUSES, command_summary, summary_text

    options = IngestOptions(map=tuple(args.map or ()), config=args.config, format=args.format, model=args.model,
                            metric=args.metric, scorer=args.scorer, stat=args.stat, records=args.records,
                            replace_human_labels=args.replace_human_labels)
    mapping = build_mapping(options)  # a bad mapping or limit variable: a UsageError (exit 2) for main()
    mode = choose_mode(args.prefect)
    from benchcert.flows.cli.progress import Progress

    with Progress(enabled=not args.json) as progress:
        reports = ingest_paths(args.paths, str(args.db), args.benchmark, mapping, mode=mode,
                               allow_rejects=args.allow_rejects, lock_timeout=args.lock_timeout,
                               atomic=args.atomic, progress=progress)
    ok = all(r["status"] in OK_STATUSES for r in reports)
    locked = any(r["status"] in ("locked", "unusable") for r in reports)  # the store, not the data
    if args.json:
        print_json({"db": str(args.db), "ok": ok, "run_mode": mode, "atomic": args.atomic, "files": reports,
                    "summary": command_summary(reports)})
    else:
        _print_reports(reports, OK_STATUSES)
        print(summary_text(command_summary(reports), args.db))
    # The lines above are the report of each file; the code sums them up (not an error raised).
    if locked:
        return EXIT_STORE
    return EXIT_OK if ok else EXIT_DATA


def _print_reports(reports: list[dict], ok_statuses) -> None:
    """One line per file (stdout when stored, stderr when not) and its first bad rows."""
    for r in reports:
        stream = sys.stdout if r["status"] in ok_statuses else sys.stderr
        print(f"[{r['status']}] {r['message']}", file=stream)
        for rej in r.get("rejects", [])[:10]:
            print(f"    line {rej['line']}, field {rej['field']}: {rej['reason']}", file=stream)
        if len(r.get("rejects", [])) > 10 or r.get("rows_rejected", 0) > 10:
            print(f"    ... ({r.get('rows_rejected')} bad rows in all; --json lists up to 50)", file=stream)


def register(sub) -> None:
    from benchcert.tasks.ingest.adapters import registry  # light: the formats' names, no adapter imported

    sp = sub.add_parser("ingest", help="ingest log files (CSV, JSONL, Parquet, harness logs) into the store",
                        description="Ingest item-level log files: CSV, JSONL, Parquet (optionally .gz), and harness "
                                    "logs as they are: lm-evaluation-harness --log_samples files, inspect_ai .eval/.json "
                                    "logs, HELM run directories, MMLU-Pro model_outputs zips (detected from content). "
                                    "Each file is all-or-nothing: any bad row and nothing from that file is stored "
                                    "(exit 1) unless --allow-rejects. Re-ingesting a file adds nothing; a score that "
                                    "contradicts a stored one is refused. A refused file never stops the others; "
                                    "the command ends with the files stored and refused (--atomic: all or none).")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="log files or directories (walked recursively)")
    store_options(sp)
    sp.add_argument("--benchmark", help="benchmark name for every row (else map a benchmark column, or the "
                                        "harness log's own task)")
    sp.add_argument("--model", help="model name for every row, for logs whose names or contents do not carry it "
                                    "(a table without a model column, an MMLU-Pro result file, a harness log); "
                                    "overrides what the log says; refused on input naming several models, or on a "
                                    "folder whose tables without a model column lie in several sub-folders")
    sp.add_argument("--map", action="append", default=[], metavar="FIELD=COLUMN",
                    help="canonical field fed by a file column, e.g. --map item_id=question_id, or by a SQL "
                         "expression over the columns, e.g. --map score=\"preference - 1\", "
                         "--map item_id=\"exam || '/' || id\", --map benchmark=\"'alpaca_eval_2'\" (repeatable); "
                         "fields: benchmark model item_id subject domain score variant replicate human_score parsed "
                         "(e.g. --map \"parsed=pred IS NOT NULL\": whether the answer could be read); "
                         "prob_<option> (one column per option), or option and prob (one row per option), "
                         "and label (the correct option) for option probabilities, or confidence (in the "
                         "model's own answer, with a 0/1 score)")
    sp.add_argument("--config", type=Path, metavar="TOML", help="mapping file with a [map] table (flags win)")
    sp.add_argument("--format", choices=registry.format_names(),
                    help="file format (default: harness logs and JSON records from their content, tables from "
                         "the name); json = a JSON list of records, or an object with one list-of-records field")
    sp.add_argument("--records", metavar="FIELD",
                    help="a JSON object's field holding the records (when it holds several lists of records)")
    sp.add_argument("--metric", help="lm-evaluation-harness: metric used as the score (default acc, else exact_match); "
                                     "promptfoo: pass (default), score or a named assertion metric; OpenAI evals: "
                                     "match (default) or a metrics key; lighteval: a field of the metric column "
                                     "(default: the only one)")
    sp.add_argument("--scorer", help="inspect_ai: scorer used as the score (default: the log's only scorer)")
    sp.add_argument("--stat", metavar="NAME[:SPLIT]",
                    help="HELM: per-instance stat used as the score (default exact_match on the test split)")
    sp.add_argument("--allow-rejects", action="store_true",
                    help="ingest the good rows and quarantine bad ones in the rejects table")
    sp.add_argument("--replace-human-labels", action="store_true",
                    help="a human score contradicting a stored one replaces it, the old value kept in the store's "
                         "human_label_changes table (default: the file is refused, naming both sources)")
    sp.add_argument("--atomic", action="store_true",
                    help="all paths in one transaction: every file is stored, or none is (exit 1)")
    run_mode_options(sp)
    sp.set_defaults(func=cmd_ingest)
