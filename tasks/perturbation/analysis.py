"""Prompt-perturbation audit (composite-null paper): does a prompt variant matter beyond irrelevant rewordings?

Runs when the benchmark has at least three prompt variants and the matrices carry per-variant
replicate counts (:func:`benchcert.tasks.perturbation.service.with_variant_counts`); otherwise it returns
an empty output at once.  The design is :func:`benchcert.tasks.perturbation.service.default_design`
(leave-one-out: base ``""`` if present, else the first variant; each other variant tested against
all the rest) unless the audit's ``perturbation`` option (tasks/perturbation/option.py) names
a ``base``, ``null`` or ``test``; its ``method`` chooses the composite test (default calibrated).
Per item and tested variant: the composite decision (the widened-range test: valid at alpha with
no plug-in range, or an item status saying why it was not tested), the classical Fisher test
against the base, and per tested variant the share of items where the change matters (raw and
Benjamini-Hochberg across items) beside the classical share.
"""

from __future__ import annotations

from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.perturbation.option import PerturbationOption, parse_option
from benchcert.tasks.perturbation.service import DesignError, default_design, make_design, run_design
from benchcert.tasks.render.sections import perturbation as perturbation_sections

NAME = "perturbation"


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    counts = getattr(m, "variant_counts", None)
    if counts is None or counts.height == 0:
        return AnalysisOutput(name=NAME)
    variants = counts["variant"].unique().sort().to_list()
    option = parse_option(config.option(NAME, PerturbationOption()))
    try:
        design = (make_design(variants, base=option.base, null=list(option.null or ()), test=list(option.test or ()))
                  if option.has_design else default_design(variants))
        if not option.has_design and design is not None and m.variant in variants and design.base != m.variant:
            # The base is the variant the audit reads (one rule for every command: tasks/store/matrices.py).
            design = make_design(variants, base=m.variant, null=None, test=None)
    except DesignError as exc:
        return AnalysisOutput(name=NAME, warnings=[f"perturbation design not used: {exc}"])
    if design is None:
        return AnalysisOutput(name=NAME)
    audit = run_design(counts, design, alpha=config.alpha, method=option.method)
    return AnalysisOutput(
        name=NAME,
        tables={"perturbation_items": audit.items, "perturbation_variants": audit.variants},
        sections=perturbation_sections.sections(audit, m.benchmark),
        warnings=[f"perturbation: {n}" for n in audit.notes[1:]],
    )
