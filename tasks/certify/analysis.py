"""Deployment environments and what black-box testing can certify (certifying-capabilities paper, section 3).

Every audit reports, per model, one-sided upper confidence bounds on its failure rate (table
``failure_rate_bounds``) for new items from the same subjects (``upper``, question
``same_subjects``, on the item-weighted ``failure_rate``) and for a new subject's expected failure
rate (``upper_new_subjects``, on the subject-weighted ``failure_rate_new_subjects``; see
:func:`benchcert.stats.certify.failure_rate_upper` and ``failure_rate_upper_new_subjects``)
and says that being correct on every instance cannot be certified by black-box testing
(Theorem 3.10). With ``audit --environments FILE`` it adds table ``environment_risks``: each
model's score in every environment (and the worst mix of a family) with a band that holds for
all environments at once with probability >= 1 - alpha, and a plot of each model's profile.

The band is :func:`benchcert.stats.certify.stratified_means` with ``finite_population=False``,
per-atom exact intervals at alpha/K combined linearly (so it covers every mix at once), for the
question in column ``question``: at domain level, new items from the same subjects (items
independent given their subject); ``score_new_subjects``/``lower_new_subjects``/
``upper_new_subjects`` answer "new subjects of each domain" (subjects as the sampling unit, each
weighing the same, so that score is subject-weighted). At subject level the items of a subject
are assumed independent. The score itself is the benchmark's exact mean under the environment.
"""

from __future__ import annotations


import numpy as np
import polars as pl

from benchcert.stats.failure_counts import failure_rate_bounds
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.sections import certify as certify_sections

RISK_SCHEMA = {"model": pl.String, "environment": pl.String, "score": pl.Float64, "lower": pl.Float64,
               "upper": pl.Float64, "half_width": pl.Float64, "risk": pl.Float64, "method": pl.String,
               "alpha": pl.Float64, "family_vertex": pl.Boolean, "worst_of_family": pl.Boolean, "note": pl.String,
               "question": pl.String, "score_new_subjects": pl.Float64, "lower_new_subjects": pl.Float64,
               "upper_new_subjects": pl.Float64}
FAILURE_SCHEMA = {"model": pl.String, "items": pl.Int64, "failures": pl.Int64, "failure_rate": pl.Float64,
                  "upper": pl.Float64, "alpha": pl.Float64, "method": pl.String, "question": pl.String,
                  "failure_rate_new_subjects": pl.Float64, "upper_new_subjects": pl.Float64,
                  "effective_subjects": pl.Float64}


def failure_table(m: BenchmarkMatrices, alpha: float) -> pl.DataFrame:
    """Per model: ``upper`` for new items from the same subjects (question ``same_subjects``; the exact
    bound made valid for subjects of different difficulty; item-weighted) and ``upper_new_subjects``
    for a new subject's expected failure rate (subjects as the sampling unit, each weighing the
    same; ``failure_rate_new_subjects`` is the subject-weighted rate, ``effective_subjects`` the
    number of subjects): the band's two questions,
    the numbers :func:`~benchcert.tasks.certify.service.failure_bound` (the one the certificates report)
    gives on each model's column, computed for every model at once from the per-subject counts."""
    # From the per-subject counts the analyses share (one pass over the matrix for all of them),
    # every model at once: the same numbers as failure_bound on each model's column
    # (tests/tasks/certify/test_failure_table_counts.py keeps that path as the oracle).
    counts = m.subject_counts
    b = failure_rate_bounds(counts.n, counts.n - counts.passed, alpha=alpha)
    keep = np.flatnonzero(b.answered)
    return pl.DataFrame({
        "model": [m.models[j] for j in keep], "items": b.n[keep], "failures": b.failures[keep],
        "failure_rate": b.estimate[keep], "upper": b.upper[keep], "alpha": alpha, "method": b.method,
        "question": b.question, "failure_rate_new_subjects": b.estimate_new_subjects[keep],
        "upper_new_subjects": b.upper_new_subjects[keep], "effective_subjects": b.effective_subjects[keep],
    }, schema=FAILURE_SCHEMA)


def risk_table(m: BenchmarkMatrices, spec_dict: dict, alpha: float) -> tuple[pl.DataFrame, list[str]]:
    from benchcert.tasks.certify.service import EnvironmentsError, EnvironmentSpec, certify_scores
    from benchcert.tasks.errors import NotAnalysableError

    spec = EnvironmentSpec.from_dict(spec_dict)
    try:
        rows, _, notes = certify_scores(spec, m.items, m.models, m.scores, delta=alpha)
    except EnvironmentsError as exc:
        # The command checked the file against all the benchmark's items; the variant audited may
        # lack a domain or subject it weighs: this analysis cannot run here, the others can.
        raise NotAnalysableError(str(exc)) from exc
    out = [{k: r[k] for k in RISK_SCHEMA if k not in ("risk", "alpha")} | {"risk": 1.0 - r["score"], "alpha": alpha}
           for r in rows]
    return pl.DataFrame(out, schema=RISK_SCHEMA), notes


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    alpha = config.alpha
    failures = failure_table(m, alpha)
    spec_dict = getattr(config, "environments", None)
    tables = {"failure_rate_bounds": failures}
    risks, notes = None, []
    if spec_dict:
        risks, notes = risk_table(m, spec_dict, alpha)
        tables["environment_risks"] = risks
    return AnalysisOutput(name="environments", tables=tables,
                          sections=[certify_sections.section(risks, failures, alpha, spec_dict, notes)],
                          warnings=[f"environments: {n}" for n in notes])
