"""Analyses: one plain function per family, each over the whole benchmark matrix.

An analysis takes :class:`~benchcert.tasks.store.matrices.BenchmarkMatrices` and an
:class:`AuditConfig` and returns an :class:`AnalysisOutput`: its long tables (written as
``tables/<name>.parquet``), any per-model intervals (merged into summary.json and the
interval plot), report sections and warnings.  The audit flow runs every entry of
:data:`ANALYSES` as one Prefect task; a new family (hierarchical bounds, subsample
guarantees, comparisons, ...) plugs in by adding a module and one line to ANALYSES,
without touching the others.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.report import Section

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

    ``hierarchy`` names the levels analyses may treat as clusters: ("subject", "domain")
    (default), ("subject",) to ignore domains (one domain), or () for no clustering.
    ``subject_weights`` optionally gives user weights per subject (normalised to sum 1) for
    weighted scores beside pooled and macro.  ``baseline`` names a model that comparisons
    are made against (None = all pairs).
    """

    alpha: float = 0.05
    variant: str | None = None
    hierarchy: tuple[str, ...] = ("subject", "domain")
    subject_weights: dict[str, float] | None = None
    baseline: str | None = None
    db: str | None = None  # the store being audited: analyses may read recorded metadata (subset manifests)
    environments: dict | None = None  # parsed environments file (tasks/certify/service.py), for audit --environments
    all_pairs: bool = False  # comparisons: every pair even beyond comparisons.ALL_PAIRS_MAX_MODELS models

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1); got {self.alpha!r}")
        if self.hierarchy not in (("subject", "domain"), ("subject",), ()):
            raise ValueError(f"hierarchy must be subject,domain / subject / none; got {self.hierarchy!r}")
        if self.subject_weights is not None:
            bad = {k: v for k, v in self.subject_weights.items() if not v >= 0}
            if bad or not sum(self.subject_weights.values()) > 0:
                raise ValueError(f"subject_weights must be >= 0 and not all 0; got {bad or self.subject_weights}")


@dataclass(frozen=True)
class AnalysisOutput:
    name: str
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    intervals: pl.DataFrame | None = None
    sections: list[Section] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


Analysis = Callable[[BenchmarkMatrices, AuditConfig], AnalysisOutput]


#: Analyses every run needs (summary.json is built from them); a failure of any other one skips it.
REQUIRED = ("scores",)


class AnalysisSkipped(UserWarning):
    """An analysis could not run on this benchmark's structure and was left out of the run."""


def run_analysis(name: str, fn: Analysis, matrices: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    """Run one analysis, timing its work and keeping its warnings for the run summary.

    An analysis other than :data:`REQUIRED` that raises on this data (one model, one item,
    one subject, subjects of one item each, ...) is skipped: the run keeps the others and
    says which one was skipped and why, instead of failing as a whole.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(matrices, config)
        # Data whose structure an analysis cannot use raises ValueError (the stats validators) or a
        # numerical error; a KeyError, IndexError or TypeError is a bug and must fail the run, not
        # read as "skipped".
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            if name in REQUIRED:
                raise
            reason = (f"{name}: {AnalysisSkipped.__name__}: skipped, it cannot run on this benchmark's structure "
                      f"({len(matrices.models)} model(s), {matrices.n_items} item(s), {matrices.subjects.height} subject(s)): "
                      f"{type(exc).__name__}: {exc}")
            out = AnalysisOutput(name=name, warnings=[reason[:1000]])
    seconds = time.perf_counter() - start
    msgs = list(dict.fromkeys(f"{name}: {w.category.__name__}: {_named(w.message, matrices)}" for w in caught))
    return AnalysisOutput(name=out.name, tables=out.tables, intervals=out.intervals, sections=out.sections,
                          warnings=out.warnings + msgs, seconds=seconds)


#: How a named list of each kind of stats-layer index reads ("model(s) 'a', 'b'").
_NAMED_LABELS = {"model": "model(s)", "subject": "subject(s)", "domain": "domain(s)", "model pair": "model pair(s)"}
_LIMIT = 8  # names listed before ", ... (N in all)", as the stats layer lists indices

def _names_of(kind: str, m: BenchmarkMatrices) -> list[str]:
    if kind == "model":
        return list(m.models)
    subj = m.subjects.sort("subject_code")
    if kind == "subject":
        return subj["subject"].to_list()
    return subj.select("domain", "domain_code").unique().sort("domain_code")["domain"].to_list()


def _name_list(kind: str, indices, total: int, m: BenchmarkMatrices) -> str | None:
    """The first indices of one list as names ("model(s) 'a', 'b', ... (12 in all)"); None
    when the kind has no names or an index is not one of this benchmark's."""
    if kind not in _NAMED_LABELS:
        return None
    shown = list(indices)[:_LIMIT]
    try:
        if kind == "model pair":
            # (b, a): comparisons' model b against model a
            picked = [f"{m.models[int(b)]} vs {m.models[int(a)]}" for b, a in shown]
        else:
            names = _names_of(kind, m)
            picked = [names[int(i)] for i in shown]
    except (IndexError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    rest = f", ... ({total} in all)" if total > len(shown) else ""
    return f"{_NAMED_LABELS[kind]} {', '.join(repr(n) for n in picked)}{rest}"


def _named(message, m: BenchmarkMatrices) -> str:
    """The stats layer knows columns and codes, not names: a warning whose
    :class:`~benchcert.stats._common.Ref` fields list model columns, subject or domain codes or
    model pairs reaches the user with those names put into its template.  Text is never parsed:
    a message without refs is passed on as it is (issue #23: layers talk through fields, not
    wording)."""
    refs = getattr(message, "refs", ())
    if not refs:
        return str(message)
    parts = [_name_list(r.kind, r.indices, len(r.indices), m) or str(r) for r in refs]
    return message.template.format(*parts)


def _registry() -> dict[str, Analysis]:
    from benchcert.tasks.compare import analysis as comparisons
    from benchcert.tasks.audit import hierarchical
    from benchcert.tasks.audit import intervals
    from benchcert.tasks.perturbation import analysis as perturbation
    from benchcert.tasks.audit import scores
    from benchcert.tasks.subsample import analysis as subsample
    from benchcert.tasks.gof import analysis as calibration
    from benchcert.tasks.certify import analysis as environments
    from benchcert.tasks.judge import analysis as judge

    return {"scores": scores.analyze, "comparator_intervals": intervals.analyze, "hierarchical": hierarchical.analyze,
            "comparisons": comparisons.analyze, "subsample": subsample.analyze,
            "perturbation": perturbation.analyze, "environments": environments.analyze,
            "calibration": calibration.analyze, "judge": judge.analyze}


#: name -> analysis, in the order a run executes them.  Built on first use (PEP 562), so that
#: importing one analysis module, or this package for its dataclasses, does not import them all;
#: an audit imports them all before its clock starts (flows/runs.py).
ANALYSES: dict[str, Analysis]


def __getattr__(name: str):
    if name == "ANALYSES":
        registry = _registry()
        globals()["ANALYSES"] = registry
        return registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
