"""What an analysis and the audit agree on: its settings, its output, its registry entry.

A leaf of the audit: the analyses (tasks/<feature>/analysis.py) import this module and the
registry (tasks/audit/analyses.py) imports the analyses, so nothing here may import either,
or the two would import each other again (issue #34 point 3).

An analysis is a function ``analyze(matrices, config) -> AnalysisOutput``; its
:class:`AnalysisSpec` declares what else the audit must know about it: the options it reads
(validated when the request is made), the summary.json fields it fills, the inputs it needs
beyond the score matrix, and its blocked form when the matrix is split by models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from benchcert.tasks.hierarchy import DEFAULT_HIERARCHY, check_hierarchy
from benchcert.tasks.render.report import Section
from benchcert.tasks.store.matrices import BenchmarkMatrices

#: Columns of the per-model interval frame every analysis may return.
INTERVAL_SCHEMA = {
    "model": pl.String,
    "metric": pl.String,      # "pooled" | "macro" | an analysis-specific score name
    "method": pl.String,      # e.g. "iid_clt", "wilson", "clustered_subject"
    "estimate": pl.Float64,
    "lower": pl.Float64,
    "upper": pl.Float64,
    "half_width": pl.Float64,
    "alpha": pl.Float64,
}



@dataclass(frozen=True)
class AuditConfig:
    """Settings every analysis may read.

    Attributes
    ----------
    alpha : float
        1 - confidence level, in (0, 1).
    variant : str or None
        The prompt variant audited (None: the store's default).
    hierarchy : tuple of str
        The levels analyses may treat as clusters: ("subject", "domain") (default),
        ("subject",) to ignore domains (one domain), or () for no clustering.
    subject_weights : dict or None
        User weights per subject (normalised to sum 1) for weighted scores beside pooled and macro.
    baseline : str or None
        A model that comparisons are made against (None = all pairs).
    db : str or None
        The store being audited: analyses may read recorded metadata (subset manifests).
    environments : dict or None
        The parsed environments file (tasks/certify/service.py), for ``audit --environments``.
    all_pairs : bool
        Comparisons: every pair even beyond ``comparisons.ALL_PAIRS_MAX_MODELS`` models.
    options : mapping
        The analyses' own options by name (e.g. ``"perturbation"``), each already validated by
        the parser its analysis declares (:attr:`AnalysisSpec.options`); read with :meth:`option`.
    """

    alpha: float = 0.05
    variant: str | None = None
    hierarchy: tuple[str, ...] = DEFAULT_HIERARCHY
    subject_weights: dict[str, float] | None = None
    baseline: str | None = None
    db: str | None = None
    environments: dict | None = None
    all_pairs: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1); got {self.alpha!r}")
        check_hierarchy(self.hierarchy)
        if self.subject_weights is not None:
            bad = {k: v for k, v in self.subject_weights.items() if not v >= 0}
            if bad or not sum(self.subject_weights.values()) > 0:
                raise ValueError(f"subject_weights must be >= 0 and not all 0; got {bad or self.subject_weights}")

    def option(self, name: str, default: Any = None) -> Any:
        """The validated value of analysis option ``name``, or ``default`` when the audit was not given it."""
        return self.options.get(name, default)


@dataclass(frozen=True)
class AnalysisOutput:
    """What one analysis returns: its long tables (each written as ``tables/<name>.parquet``), its
    per-model intervals (:data:`INTERVAL_SCHEMA`), report sections, warnings, and its seconds."""

    name: str
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    intervals: pl.DataFrame | None = None
    sections: list[Section] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


Analysis = Callable[[BenchmarkMatrices, AuditConfig], AnalysisOutput]


@dataclass(frozen=True)
class BlockedForm:
    """How an analysis runs when the models are split into blocks (out of core, Dask workers).

    Attributes
    ----------
    model_block : callable or None
        ``(block_matrices, config) -> part``: the per-model work of one block of models.
    whole : callable or None
        ``(matrices, config) -> part``: the work that needs every model at once (one random
        stream, a family-wide adjustment), run where the flow holds the matrix.
    assemble : callable or None
        ``(matrices, config, block_parts, whole_part) -> AnalysisOutput``.
    pairs : bool
        The analysis runs where the flow holds the matrix and sends its pairs of model blocks
        out through :func:`benchcert.stats.comparisons.pair_block_runner`.
    """

    model_block: Callable | None = None
    whole: Callable | None = None
    assemble: Callable | None = None
    pairs: bool = False


#: The inputs an analysis may declare beyond the score matrix, and what the audit does for each.
INPUTS = {
    "variant_counts": "per-variant replicate counts (BenchmarkMatrices.variant_counts), read with the matrices "
                      "only when a registered analysis declares them",
    "subsets": "recorded subset manifests (store table subsets), read with the matrices "
               "(BenchmarkMatrices.store_inputs), or passed as subsets= when the analysis runs on a Dask worker, "
               "which reads them from the export",
    "human_scores": "human scores beside the judge's (BenchmarkMatrices.human), read with the matrices",
    "option_probs": "option probabilities (store table option_probs), read with the matrices "
                    "(BenchmarkMatrices.store_inputs), else by the analysis itself or from the export on a Dask "
                    "worker",
    "parse_flags": "whether each response's answer could be read (response_codes.parsed), read with the matrices "
                   "(BenchmarkMatrices.store_inputs), else by the analysis itself or from the export on a Dask "
                   "worker",
}


@dataclass(frozen=True)
class AnalysisSpec:
    """One registry entry: an analysis and what the audit must know about it.

    Attributes
    ----------
    name : str
        Its name in summary.json's ``analyses``, the timings and the warnings.
    analyze : callable
        ``analyze(matrices, config) -> AnalysisOutput``.
    options : mapping of str to callable
        Option name -> parser: the parser turns what a request gives (JSON-like) into the value
        the analysis reads through :meth:`AuditConfig.option`, raising ``ValueError`` on a bad one.
    summary_fields : tuple of str
        summary.json fields this analysis fills (:attr:`summary`).
    summary : callable or None
        ``(tables) -> dict`` of those fields, from the run's tables (absent: no field).
    inputs : tuple of str
        What it reads beyond the score matrix (keys of :data:`INPUTS`).
    blocked : BlockedForm or None
        Its form when the models are split into blocks; None: it runs on the whole matrix.
    """

    name: str
    analyze: Analysis
    options: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    summary_fields: tuple[str, ...] = ()
    summary: Callable[[dict[str, pl.DataFrame]], dict] | None = None
    inputs: tuple[str, ...] = ()
    blocked: BlockedForm | None = None

    def __post_init__(self):
        unknown = [i for i in self.inputs if i not in INPUTS]
        if unknown:
            raise ValueError(f"analysis {self.name!r}: unknown inputs {unknown}; known: {sorted(INPUTS)}")
        if bool(self.summary_fields) != (self.summary is not None):
            raise ValueError(f"analysis {self.name!r}: summary_fields and summary go together")
