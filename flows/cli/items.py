"""``benchcert items``: what the benchmark itself can measure - inert items, suspected broken keys, its
reliability and resolution, its saturation and a reduced item set (tasks/items/service.py).

Exit codes as in flows/cli/errors.py: 0 success; 1 the data do not allow it (unknown benchmark or
variant, fewer than 3 models, a choices file that cannot be used); 2 usage error; 3 the store is
missing, locked or unusable.
"""

from __future__ import annotations

from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, print_json
from benchcert.flows.cli.options import benchmark_options, command, lock_timeout_option, store_options
from benchcert.tasks.errors import UsageError


def cmd_items(args) -> int:
    """Per item across the benchmark's models: difficulty (share correct), discrimination (corrected item-rest
    correlation; 2PL slope and difficulty with at least 20 models), inert items (every model scored alike) and
    their share of the calls, suspected broken keys (an exact permutation test across models per item,
    Benjamini-Hochberg over the items at --fdr). For the benchmark: reliability (KR-20 / Cronbach's alpha with
    Feldt's interval), the resolution of the paired test per score band (the smallest gap detected with 80%%
    power), saturation, and a reduced item set (inert items dropped, then a subject-stratified random subset
    whose every score and pairwise gap stays within --tolerance, simultaneously, at --alpha)."""
    from benchcert.tasks.items.choices import TEXT_FIELDS, parse_columns
    from benchcert.tasks.items.service import ItemsRequest, ItemsSettings, run_items

    try:
        columns = parse_columns(args.choice_columns)
        text_columns = parse_columns(args.text_columns, TEXT_FIELDS, "--text-columns")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if columns and not args.choices:
        raise UsageError("--choice-columns needs --choices FILE")
    if text_columns and not args.texts:
        raise UsageError("--text-columns needs --texts FILE")
    settings = ItemsSettings(alpha=args.alpha, fdr=args.fdr, tolerance=args.tolerance, seed=args.seed,
                             irt=not args.no_irt)
    request = ItemsRequest(db=str(args.db), benchmark=args.benchmark, variant=args.variant, settings=settings,
                           lock_timeout=args.lock_timeout, choices=str(args.choices) if args.choices else None,
                           choice_columns=tuple(columns.items()), texts=str(args.texts) if args.texts else None,
                           text_columns=tuple(text_columns.items()))
    result, variant = run_items(request)
    if args.out is not None:
        _write(result, args.out)
    if args.json:
        print_json({"benchmark": args.benchmark, "variant": variant, "overview": result.overview,
                    "reduced": result.reduced.row() if result.reduced is not None else None,
                    "resolution": result.bands.to_dicts(), "notes": list(result.notes),
                    "broken_key_items": result.items.filter("broken_key")["item_id"].to_list(),
                    "out": str(args.out) if args.out is not None else None}, strict=False)
        return EXIT_OK
    from benchcert.tasks.render.text import items_text

    print(f"benchmark {args.benchmark!r} (variant {variant!r})")
    print(items_text(result))
    if args.out is not None:
        print(f"tables: {args.out}")
    return EXIT_OK


def cmd_plan_samples(args) -> int:
    """From a benchmark whose models answered items several times (the canonical row's replicate): each
    model's variance components (between subjects, between items, within an item across samples), and the
    samples per item K and items n that minimise the variance of the mean score for --budget, an item
    evaluated K times costing --cost-item + K --cost-sample (Miller 2024, 'Adding error bars to evals'). A
    plan from a pilot, not a guarantee."""
    from benchcert.tasks.items.samples import SamplesPlanRequest, samples_plan

    doc = samples_plan(SamplesPlanRequest(
        db=str(args.db), benchmark=args.benchmark, budget=args.budget, model=args.model, variant=args.variant,
        cost_item=args.cost_item, cost_sample=args.cost_sample, alpha=args.alpha, these_items=args.these_items,
        seed=args.seed, lock_timeout=args.lock_timeout))
    if args.json:
        print_json(doc, strict=False)
        return EXIT_OK
    from benchcert.tasks.render.text import samples_plan_text

    print(samples_plan_text(doc))
    return EXIT_OK


def register_plan(ps) -> None:
    """``benchcert plan samples`` (registered by flows/cli/plan.py)."""
    sp = command(ps, "samples", cmd_plan_samples,
                 help="samples per item for a budget, from the measured run-to-run variance (repeated samples)")
    benchmark_options(sp, db_help="DuckDB store")
    sp.add_argument("--model", help="one model's components (default: every model with repeated samples)")
    sp.add_argument("--variant", default=None, help="prompt variant (default: the stored default, else the only one)")
    sp.add_argument("--budget", type=float, required=True, help="what may be spent, in the units of the costs")
    sp.add_argument("--cost-item", type=float, default=0.0,
                    help="cost of an item beyond its samples (e.g. a long shared prompt; default 0)")
    sp.add_argument("--cost-sample", type=float, default=1.0, help="cost of one sample (default 1: a call)")
    sp.add_argument("--these-items", action="store_true",
                    help="the estimand is these items' mean (finite-population factor), not a population of items")
    sp.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    sp.add_argument("--seed", type=int, default=0, help="seed of the components' bootstrap (default 0)")
    lock_timeout_option(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def _write(result, out: Path) -> None:
    from benchcert.tasks.items.output import write_tables

    try:
        write_tables(result, out)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the tables: {exc}") from None


def register(sub) -> None:
    from benchcert.tasks.items.defaults import DEFAULT_FDR, DEFAULT_TOLERANCE

    sp = command(sub, "items", cmd_items,
                 help="item analysis: inert items, suspected broken keys, resolution, a reduced item set")
    store_options(sp)
    sp.add_argument("--benchmark", required=True)
    sp.add_argument("--variant", default=None, help="prompt variant (default: the stored default, else the only one)")
    sp.add_argument("--alpha", type=float, default=0.05,
                    help="level of the intervals, the resolution's test and the reduced set's guarantee (default 0.05)")
    sp.add_argument("--fdr", type=float, default=DEFAULT_FDR,
                    help=f"false discovery rate of the broken-key flags (default {DEFAULT_FDR:g})")
    sp.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                    help=f"largest error of every score and pairwise gap on the reduced set (default {DEFAULT_TOLERANCE:g})")
    sp.add_argument("--seed", type=int, default=0, help="seed of the tie-breaks and the reduced set's draw (default 0)")
    sp.add_argument("--no-irt", action="store_true", help="skip the 2PL fit")
    sp.add_argument("--choices", type=Path, metavar="FILE",
                    help="CSV (or .csv.gz) of the options the models chose, one row per response: adds the share "
                         "of strong models agreeing on one non-key answer")
    sp.add_argument("--choice-columns", metavar="MAP",
                    help="the choices file's columns as FIELD=COLUMN pairs (model, item_id, choice, key; default "
                         "the field names), e.g. item_id=question_id,choice=pred,key=answer")
    sp.add_argument("--texts", type=Path, metavar="FILE",
                    help="CSV (or .csv.gz) of the items' texts, one row per item: adds the near-duplicate items "
                         "(Jaccard similarity of word 3-shingles >= 0.8; MinHash)")
    sp.add_argument("--text-columns", metavar="MAP",
                    help="the texts file's columns as FIELD=COLUMN pairs (item_id, text; default the field names)")
    sp.add_argument("--out", type=Path, metavar="DIR",
                    help="write the tables (items, items_resolution, items_neighbours, items_overview, "
                         "items_reduced, items_samples, items_near_duplicates as Parquet) and reduced_items.csv (the reduced set's item ids) to DIR")
