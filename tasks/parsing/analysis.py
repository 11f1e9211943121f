"""The audit's ``parsing`` analysis: answers that failed to parse, per model.

A response whose answer could not be read from the model's output (``parsed`` false: MMLU-Pro's
``pred: null``, an lm-evaluation-harness filter that matched nothing, inspect_ai's NOANSWER, a
mapped ``--map "parsed=pred IS NOT NULL"``) is scored wrong by the releases, so a model that
answers in a form the harness cannot read looks like a model that knows less.  Per model this
analysis reports

* how many of its responses are unparsed, and their share;
* its score with the unparsed responses counted wrong (0; the releases' convention and the
  audit's default score when the log scored them 0), with an interval;
* its score over the parsed responses only (items with at least one parsed response), with an
  interval;

and warns when more than :data:`WARN_SHARE` of a model's responses are unparsed.  It runs only
when some response of the audited variant carries a parse flag; otherwise it returns nothing.
A model none of whose responses carries one is left out of the table (its share is not known);
a response without a flag counts as parsed.

Intervals: the cluster-robust interval by subject (:func:`benchcert.stats.intervals.clustered_interval`,
pooled weights: every item counts equally) when the audit's hierarchy has subjects and the model's
items span at least two; otherwise Wilson for 0/1 item scores and the iid CLT interval with the
item scores' sample variance for fractional ones.  Replicates of an item are averaged first.

The score over parsed answers is a different estimand, not a corrected score: it is the mean
score on the items whose answer the harness could read.  Parse failures are rarely missing at
random (a model fails to format hard questions more often), so it is not what the model would
score if every answer parsed; it says how much of the gap is formatting, and is conditional on
which items parsed (the interval treats them as drawn like the others).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from benchcert.stats.intervals import clustered_interval, iid_interval, wilson_interval
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.frame_schema import polars_schema
from benchcert.tasks.render.sections import parsing as parsing_sections
from benchcert.tasks.schemas import ParseFailures
from benchcert.tasks.store.matrices import BenchmarkMatrices

#: Above this share of unparsed responses a model's audit carries a warning.
WARN_SHARE = 0.05

#: The table's columns: those of the artifact row it is validated against.
PARSE_FAILURES_SCHEMA = polars_schema(ParseFailures)


def _interval(scores: np.ndarray, subjects: np.ndarray, alpha: float, clustered: bool) -> tuple:
    """(estimate, lower, upper, method) of the mean of ``scores`` (None, None, None, None when empty)."""
    n = scores.size
    if n == 0:
        return None, None, None, None
    if clustered and np.unique(subjects).size >= 2:
        r = clustered_interval(scores, subjects, weights="pooled", alpha=alpha)
    elif np.all((scores == 0) | (scores == 1)):
        r = wilson_interval(float(scores.mean()), n, alpha=alpha)
    else:
        r = iid_interval(float(scores.mean()), n, alpha=alpha,
                         item_var=float(scores.var(ddof=1)) if n > 1 else float("nan"))
    return float(r.estimate), float(r.lower), float(r.upper), r.method


def model_row(model: str, items: pl.DataFrame, *, alpha: float, clustered: bool) -> dict:
    """One model's row of :data:`PARSE_FAILURES_SCHEMA` from its (item) rows of the store's read."""
    codes = items["subject"].rank("dense").cast(pl.Int64).to_numpy()
    wrong = items["score_wrong"].to_numpy()
    parsed_mask = items["score_parsed"].is_not_null().to_numpy()
    parsed = items["score_parsed"].to_numpy()[parsed_mask]
    n_resp, n_unparsed = int(items["n"].sum()), int(items["n_unparsed"].sum())
    share = n_unparsed / n_resp if n_resp else 0.0
    est_w, lo_w, hi_w, method = _interval(wrong, codes, alpha, clustered)
    est_p, lo_p, hi_p, method_p = _interval(parsed.astype(float), codes[parsed_mask], alpha, clustered)
    methods = list(dict.fromkeys(m for m in (method, method_p) if m))
    return {"model": model, "n_responses": n_resp, "n_flagged": int(items["n_flagged"].sum()),
            "n_unparsed": n_unparsed, "share_unparsed": share, "n_items": items.height,
            "score_unparsed_wrong": est_w, "unparsed_wrong_lower": lo_w, "unparsed_wrong_upper": hi_w,
            "n_items_parsed": int(parsed_mask.sum()), "score_parsed_only": est_p, "parsed_only_lower": lo_p,
            "parsed_only_upper": hi_p, "method": " / ".join(methods) or None, "alpha": alpha,
            "warn": share > WARN_SHARE}


#: Models whose scores a warning spells out; the others above the share are named with theirs.
_DETAILED = 3


def _detail(row: dict) -> str:
    def pct(est, lo, hi) -> str:
        return "no parsed answer" if est is None else f"{100 * est:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"

    return (f"{row['model']!r} {row['n_unparsed']:,} of {row['n_responses']:,} ({100 * row['share_unparsed']:.1f}%): "
            f"score {pct(row['score_unparsed_wrong'], row['unparsed_wrong_lower'], row['unparsed_wrong_upper'])} "
            f"counting them wrong, {pct(row['score_parsed_only'], row['parsed_only_lower'], row['parsed_only_upper'])} "
            "over its parsed answers")


def warning(rows: list[dict]) -> str | None:
    """The audit's one warning naming every model with more than :data:`WARN_SHARE` unparsed responses
    (most first; the first :data:`_DETAILED` with both scores), or None when there is none."""
    over = sorted((r for r in rows if r["warn"]), key=lambda r: -r["share_unparsed"])
    if not over:
        return None
    level = f"{100 * (1 - over[0]['alpha']):g}%"
    rest = over[_DETAILED:]
    named = ", ".join(f"{r['model']!r} {100 * r['share_unparsed']:.1f}%" for r in rest)
    more = f"; and {named}" if rest else ""
    return (f"parsing: {len(over)} model(s) have more than {100 * WARN_SHARE:g}% of their answers unparsed (the log "
            f"says the answer could not be read; scored wrong as the release does), so part of their gap to other "
            f"models may be answer formatting, not knowledge: {'; '.join(_detail(r) for r in over[:_DETAILED])} "
            f"({level} intervals){more}; table parse_failures")


def read_flags(m: BenchmarkMatrices, config: AuditConfig) -> pl.DataFrame:
    """The store's parse flags of the audited models and variant (tasks/store/parse_flags.py)."""
    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.parse_flags import load_parse_flags

    with open_store(config.db, write=False, lock_timeout=60.0) as con:
        return load_parse_flags(con, m.benchmark, m.variant, list(m.models))


def analyze(m: BenchmarkMatrices, config: AuditConfig, *, flags: pl.DataFrame | None = None) -> AnalysisOutput:
    """Nothing (no table, no section) when no response of the audited variant carries a parse flag."""
    if flags is None:
        flags = m.store_inputs.get("parse_flags")  # read with the matrices (tasks/audit/steps.py store_inputs)
    if flags is None:
        if not config.db:
            return AnalysisOutput(name="parsing")
        from benchcert.tasks.store.connection import StoreError

        try:
            flags = read_flags(m, config)
        except StoreError as exc:  # locked since the matrices were read: the run goes on without it, and says so
            return AnalysisOutput(name="parsing", warnings=[f"parsing: the parse flags could not be read ({exc})"])
    if flags.height == 0:
        return AnalysisOutput(name="parsing")
    clustered = "subject" in config.hierarchy
    by_model = flags.partition_by("model", as_dict=True, maintain_order=True)
    # A model none of whose responses carries a flag is not said to have 0% unparsed: it is left out.
    rows = [model_row(name, by_model[(name,)], alpha=config.alpha, clustered=clustered)
            for name in m.models if (name,) in by_model and by_model[(name,)]["n_flagged"].sum() > 0]
    table = pl.DataFrame(rows, schema=PARSE_FAILURES_SCHEMA)
    notes = [w] if (w := warning(rows)) else []
    return AnalysisOutput(name="parsing", tables={"parse_failures": table},
                          sections=[parsing_sections.section(table, notes, config.alpha, WARN_SHARE)],
                          warnings=notes)


#: summary.json's field this analysis fills (tasks/schemas.py Summary), from its table of that name.
SUMMARY_FIELDS = ("parse_failures",)


def summary_fields(tables: dict[str, pl.DataFrame]) -> dict:
    """summary.json's ``parse_failures``: the rows of that table, non-finite numbers as null (absent: no field)."""
    if "parse_failures" not in tables:
        return {}
    return {"parse_failures": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                for k, v in row.items()} for row in tables["parse_failures"].to_dicts()]}
