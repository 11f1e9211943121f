"""Pydantic models for the canonical response row and the run-artifact contract.

These models *are* the contract: ``benchcert schema`` exports them as JSON Schema, the
artifact writer validates every manifest/summary/index through them before writing, and
readers (dashboards, scripts) can validate against the exported schemas.  Any change that
breaks a reader bumps :data:`benchcert.SCHEMA_VERSION`.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from benchcert import SCHEMA_VERSION

#: Subject/domain given to rows whose log carries no such field: one subject, one domain.
DEFAULT_SUBJECT = "all"
DEFAULT_DOMAIN = "all"

#: Canonical fields a column mapping may name, in canonical order.
CANONICAL_FIELDS = ("benchmark", "model", "item_id", "subject", "domain", "score", "variant", "replicate",
                    "human_score", "parsed")
REQUIRED_FIELDS = ("benchmark", "model", "item_id", "score")
KEY_FIELDS = ("benchmark", "model", "item_id", "variant", "replicate")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResponseRow(_Frozen):
    """One model's scored response to one benchmark item (the canonical row).

    Primary key: (benchmark, model, item_id, variant, replicate).  The bulk ingest path
    applies exactly these rules column-wise (see ``tasks/ingest/validate.py``); a property test
    checks that both agree row by row.
    """

    benchmark: str = Field(min_length=1, description='Benchmark name, e.g. "mmlu_pro".')
    model: str = Field(min_length=1, description='Model id; a checkpoint is a model id ("org/model@step-12000").')
    item_id: str = Field(min_length=1, description="Stable item id within the benchmark.")
    subject: str = Field(DEFAULT_SUBJECT, min_length=1, description="Subject (cluster) of the item.")
    domain: str = Field(DEFAULT_DOMAIN, min_length=1, description="Domain (group of subjects) of the item.")
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description="Score in [0, 1]; binary correct = 1.")
    human_score: float | None = Field(
        None, ge=0.0, le=1.0, allow_inf_nan=False,
        description="Optional human score in [0, 1] of the same response, when ``score`` is a model judge's "
                    "(a human-labelled subset; see the judge analysis). A row needs ``score`` even then: a "
                    "response no judge scored is refused.")
    parsed: bool | None = Field(
        None, description="Whether the model's answer could be read from its output: false when answer extraction "
                          "failed (MMLU-Pro's pred null, an lm-evaluation-harness filter that matched nothing, an "
                          "inspect_ai scorer's 'no answer'), true when it was read, null when the log does not say. "
                          "The score of an unparsed response is the log's (usually 0, wrong); the audit reports the "
                          "share unparsed and the score over parsed answers beside it.")
    variant: str = Field("", description='Prompt variant / perturbation id ("" when none).')
    replicate: int = Field(0, ge=0, le=2**53, description="Repeated-sample index (0 when none, at most 2^53).")
    label: str | None = Field(None, description="Optional gold label.")
    option_probs: list[float] | None = Field(None, description="Optional predicted option probabilities.")
    embedding: list[float] | None = Field(None, description="Optional response embedding.")
    source: str | None = Field(None, description="Source file the row came from.")
    line: int | None = Field(None, ge=1, description="Line (or row) of the source file.")

    @field_validator("benchmark", "model", "item_id", "subject", "domain")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @field_validator("benchmark", "model", "variant")
    @classmethod
    def _printable(cls, v: str) -> str:  # a name is typed on the command line (issue #26)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in v):
            raise ValueError("contains a control character")
        return v


class Interval(_Frozen):
    method: str = Field(description='Interval method, e.g. "iid_clt", "wilson", "clustered_subject".')
    lower: float
    upper: float
    half_width: float
    alpha: float = Field(gt=0, lt=1)


class Headline(_Frozen):
    """The one interval a score is headlined with, and the question it answers (tasks/audit/headline.py)."""

    method: str = Field(description='"hierarchical" (new subjects) or "same_subjects" (this benchmark\'s subjects).')
    question: Literal["new_subjects", "same_subjects", "items"] = Field(
        description="new_subjects: new subjects drawn like these; same_subjects: this benchmark's subjects, items "
                    "sampled within them; items: items independent (hierarchy 'none').")
    lower: float
    upper: float
    half_width: float
    beside: Interval | None = Field(None, description="The new-subjects interval, when the headline is the "
                                                      "same-subjects one because the former is too wide.")
    note: str | None = Field(None, description="Why the new-subjects interval is wide (one sentence), or null.")


class ScoreSummary(_Frozen):
    estimate: float
    intervals: list[Interval]
    headline: Headline | None = Field(None, description="The headline interval (schema 1.2; null in older runs).")


class ModelSummary(_Frozen):
    model: str
    n_items: int = Field(ge=0, description="Items this model answered (in the audited variant).")
    coverage: float = Field(ge=0, le=1, description="n_items / items in the benchmark.")
    n_subjects: int = Field(ge=0)
    pooled: ScoreSummary = Field(description="Mean over all answered items.")
    macro: ScoreSummary = Field(description="Mean over subjects of subject accuracy.")
    subject_sd: float | None = Field(None, description="SD (ddof=1) of subject accuracies; null with < 2 subjects.")
    subject_min: float | None = None
    subject_max: float | None = None
    n_unscored: int | None = Field(None, ge=0, description="Benchmark items with no score for this model (left out "
                                                          "of its scores; see Summary.unscored_convention).")
    rank: int | None = Field(None, description="Rank by pooled score (1 = best), from the comparisons analysis.")
    rank_lower: int | None = Field(None, description="Simultaneous rank interval, lower end (Bonferroni).")
    rank_upper: int | None = None
    tied_groups: list[int] = Field(default_factory=list,
                                   description="Groups of models the comparisons cannot tell apart that hold it.")


class Verdict(_Frozen):
    kind: str
    model: str
    baseline: str | None = None
    verdict: Literal["improved", "regressed", "inconclusive"] | str
    detail: dict = Field(default_factory=dict)


class ScoreMove(_Frozen):
    model: str
    metric: str
    method: str = Field(description="Interval of the previous run that the new estimate left.")
    previous: float
    current: float
    previous_lower: float
    previous_upper: float
    direction: Literal["up", "down"]


class RunChanges(_Frozen):
    """What changed since the previous completed run of the same benchmark."""

    previous_run_id: str | None
    new_models: list[str] = Field(default_factory=list)
    removed_models: list[str] = Field(default_factory=list)
    moves: list[ScoreMove] = Field(default_factory=list, description="Scores that left the previous interval.")
    regressions: list[str] = Field(default_factory=list,
                                   description="Models whose score fell below the previous interval, or with a "
                                               "'regressed' verdict.")


class HumanScale(_Frozen):
    """One model's human-scale score (judge-scored benchmarks; tasks/judge/analysis.py)."""

    model: str
    n_human: int = Field(ge=0, description="Items of this model with a human score (and the judge's).")
    n_judge: int = Field(ge=0, description="Items of this model the judge scored (the labelled ones included).")
    labels_needed: int = Field(ge=0, description="More human labels needed for a score (0 when there is one).")
    estimate: float | None = Field(None, description="Human-scale mean score (PPI++); null below the label minimum.")
    lower: float | None = None
    upper: float | None = None
    alpha: float | None = None
    lam: float | None = Field(None, description="PPI++ tuning parameter (0 = human labels alone, 1 = plain PPI).")
    method: str | None = None
    human_only_lower: float | None = Field(None, description="Interval from the human labels alone.")
    human_only_upper: float | None = None
    judge_only_estimate: float | None = Field(None, description="The judge's plain mean over every judged item.")
    subset_p_value: float | None = Field(None, description="Welch test: labelled items' judge scores vs the rest's.")
    subset_suspicious: bool | None = Field(None, description="subset_p_value < alpha: the labels look not random.")


class JudgeAgreementSummary(_Frozen):
    """Judge-human agreement of one model (or "(all models)", pooled) on the items scored by both."""

    model: str
    n: int = Field(ge=0)
    bias: float = Field(description="Mean judge - human score.")
    bias_lower: float
    bias_upper: float
    exact_agreement: float
    kappa: float | None = Field(None, description="Cohen's kappa (weighted: see kappa_weights); null if continuous.")
    kappa_weights: str | None = None
    spearman: float | None = None
    levels: list[float] | None = Field(None, description="Score levels of the confusion table (discrete scores).")
    confusion: list[list[int]] | None = Field(None, description="Counts, rows human level, columns judge level.")
    alpha: float
    method: str


class ParseFailures(_Frozen):
    """One model's answers that failed to parse (tasks/parsing/analysis.py), when the log says which did."""

    model: str
    n_responses: int = Field(ge=0, description="Responses of this model in the audited variant (replicates included).")
    n_flagged: int = Field(ge=0, description="Responses whose log says whether the answer was parsed.")
    n_unparsed: int = Field(ge=0, description="Responses whose answer could not be read from the output.")
    share_unparsed: float = Field(ge=0, le=1, description="n_unparsed / n_responses.")
    n_items: int = Field(ge=0)
    score_unparsed_wrong: float | None = Field(
        None, description="Mean item score with the unparsed responses counted wrong (0), as the releases do.")
    unparsed_wrong_lower: float | None = None
    unparsed_wrong_upper: float | None = None
    n_items_parsed: int = Field(ge=0, description="Items with at least one parsed response.")
    score_parsed_only: float | None = Field(
        None, description="Mean score over the parsed responses only (another estimand: not what the model would "
                          "score if every answer parsed); null when none parsed.")
    parsed_only_lower: float | None = None
    parsed_only_upper: float | None = None
    method: str | None = Field(None, description="The intervals' method (clustered_subject, wilson or iid_clt).")
    alpha: float = Field(gt=0, lt=1)
    warn: bool = Field(description="More than 5% of the responses are unparsed (the audit warns).")


class ItemAnalysis(_Frozen):
    """The item analysis' overview (``audit --items``; tasks/items/service.py, docs/analyses.md)."""

    n_items: int
    n_models: int
    n_inert: int = Field(description="Items every model that answered scored alike.")
    n_inert_all_correct: int
    n_inert_all_wrong: int
    inert_call_share: float | None = Field(None, description="Share of the responses spent on inert items.")
    n_tested_broken_key: int = Field(description="0/1 items the broken-key test ran on (the BH family).")
    n_broken_key: int = Field(description="Items flagged as suspected broken keys at false discovery rate fdr.")
    fdr: float
    broken_key_method: str
    n_negative_discrimination: int
    n_could_be_flagged: int = Field(description="Items whose smallest attainable p-value could pass BH alone.")
    candidate_p: float
    n_candidates: int = Field(description="Items with an unadjusted broken-key p-value <= candidate_p (not flags).")
    strong_agree_non_key_flagged: float | None = None
    strong_agree_non_key_other: float | None = None
    strong_agree_non_key_candidates: float | None = None
    strong_agree_non_key_not_candidates: float | None = None
    reliability: float | None = Field(None, description="KR-20 / Cronbach's alpha across models.")
    reliability_lower: float | None = None
    reliability_upper: float | None = None
    reliability_items: int
    sem: float | None = Field(None, description="Standard error of measurement of a mean score (not the resolution).")
    alpha: float
    power: float
    resolution_median: float | None = Field(None, description="Median over neighbour pairs of the smallest gap the "
                                                               "paired test detects with the stated power.")
    n_neighbours_resolved: int
    top_score: float
    headroom: float
    n_top: int
    separating_items_top: int
    all_missed_items_top: int
    irt_fitted: int
    reduced_n: int | None = Field(None, description="Items of the reduced set.")
    reduced_calls_saved_share: float | None = None
    tolerance: float
    n_near_duplicate_pairs: int | None = Field(None, description="Near-duplicate pairs (null: no item text).")
    n_near_duplicate_items: int | None = None
    near_duplicate_jaccard: float | None = None


class Summary(_Frozen):
    """summary.json: the headline of one audit run, per model."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    benchmark: str
    created_at: str
    alpha: float = Field(gt=0, lt=1)
    variant: str
    n_items: int
    n_models: int
    n_subjects: int
    n_domains: int
    models: list[ModelSummary]
    analyses: list[str]
    warnings: list[str] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    changes: RunChanges | None = Field(None, description="Differences from the previous run (null for the first).")
    human_scale: list[HumanScale] | None = Field(
        None, description="Human-scale score per model (judge-scored benchmarks with human labels; else null).")
    judge_agreement: list[JudgeAgreementSummary] | None = Field(
        None, description="Judge-human agreement per model and pooled (null without human labels).")
    headline_rule: str | None = Field(None, description="The rule that chose each score's headline interval.")
    item_analysis: ItemAnalysis | None = Field(None, description="The item analysis' overview (audit --items; "
                                                                 "else null).")
    unscored_convention: str | None = Field(None, description="How items with no prediction or no score count.")
    parse_failures: list[ParseFailures] | None = Field(
        None, description="Per model, answers that failed to parse and the score with and without them (schema "
                          "1.3; null when no response of the audited variant carries a parse flag).")

    @field_validator("models")
    @classmethod
    def _finite(cls, models: list[ModelSummary]) -> list[ModelSummary]:
        for m in models:
            for s in (m.pooled, m.macro):
                vals = [s.estimate] + [x for iv in s.intervals for x in (iv.lower, iv.upper, iv.half_width)]
                if s.headline is not None:
                    vals += [s.headline.lower, s.headline.upper, s.headline.half_width]
                if not all(math.isfinite(v) for v in vals):
                    raise ValueError(f"non-finite score or interval for model {m.model!r}")
        return models


class SourceRef(_Frozen):
    path: str
    sha256: str
    format: str
    rows_added: int
    ingested_at: str


class TableRef(_Frozen):
    name: str
    file: str = Field(description="Path relative to the run directory, e.g. tables/scores.parquet.")
    rows: int
    columns: list[str]


class Manifest(_Frozen):
    """manifest.json: what ran, on what, with which settings, and what it wrote."""

    schema_version: str = SCHEMA_VERSION
    benchcert_version: str
    run_id: str
    flow_run_id: str | None
    run_mode: Literal["in_process", "prefect"] | None = Field(
        default=None, description="in_process: run in the benchcert process (no Prefect API configured); "
                                  "prefect: a Prefect flow run (flow_run_id names it).")
    benchmark: str
    status: Literal["completed"]
    started_at: str
    finished_at: str
    config: dict
    sources: list[SourceRef]
    tables: list[TableRef]
    files: list[str] = Field(description="Every file of the run directory, relative paths.")
    timings_s: dict[str, float] = Field(description="Work seconds per task, and the whole flow's wall time.")


class IndexEntry(_Frozen):
    benchmark: str
    dir: str = Field(description="Folder of this benchmark under the artifacts root.")
    latest_run_id: str
    latest_finished_at: str
    runs: list[str] = Field(description="All completed run ids, oldest first.")


class Index(_Frozen):
    """index.json at the artifacts root: the latest run per benchmark."""

    schema_version: str = SCHEMA_VERSION
    updated_at: str
    benchmarks: list[IndexEntry]


SCHEMAS: dict[str, type[BaseModel]] = {
    "response-row": ResponseRow,
    "manifest": Manifest,
    "summary": Summary,
    "index": Index,
}


def json_schema(name: str) -> dict:
    """JSON Schema of one contract model, with its version recorded."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r}; choose from {sorted(SCHEMAS)}")
    schema = SCHEMAS[name].model_json_schema()
    schema["$id"] = f"benchcert/{name}/{SCHEMA_VERSION}"
    schema["x-schema-version"] = SCHEMA_VERSION
    return schema
