"""The analyses' registry and the one way an analysis is run.

Each entry is an :class:`~benchcert.tasks.audit.contract.AnalysisSpec`: the analysis' function
``analyze(matrices, config) -> AnalysisOutput`` and what it declares (its options, the
summary.json fields it fills, its inputs beyond the score matrix, its blocked form).  The audit
runs every entry, in order, as one step; a new analysis is one :func:`register` call (or one
entry of :func:`_registry` for those shipped with benchcert), without touching the orchestrator.
The analyses import the leaf :mod:`benchcert.tasks.audit.contract`, never this module, so the
registry and the analyses do not import each other.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Mapping
from typing import Any

import polars as pl

from benchcert.tasks.audit.contract import Analysis, AnalysisOutput, AnalysisSpec, AuditConfig, BlockedForm
from benchcert.tasks.errors import NotAnalysableError
from benchcert.tasks.store.matrices import BenchmarkMatrices

#: Analyses every run needs (summary.json is built from them); a failure of any other one skips it.
REQUIRED = ("scores",)


class AnalysisSkipped(UserWarning):
    """An analysis could not run on this benchmark's structure and was left out of the run."""


def run_analysis(name: str, fn: Analysis, matrices: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    """Run one analysis, timing its work and keeping its warnings for the run summary.

    An analysis other than :data:`REQUIRED` that raises
    :class:`~benchcert.tasks.errors.NotAnalysableError` (it knows it cannot analyse these data:
    an environments file weighing a domain the audited variant lacks, ...) is skipped: the run
    keeps the others and says which one was skipped and why, instead of failing as a whole.
    Anything else it raises - a ValueError or ArithmeticError included - is a bug and fails the run.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(matrices, config)
        # Only the analysis knows when data cannot be analysed, and says so by name; an error it
        # did not name (a stats validator's ValueError, a KeyError) is a bug, not "skipped".
        except NotAnalysableError as exc:
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


def _registry() -> dict[str, AnalysisSpec]:
    from benchcert.tasks.audit import intervals, scores
    from benchcert.tasks.certify import analysis as environments
    from benchcert.tasks.compare import analysis as comparisons
    from benchcert.tasks.gof import analysis as calibration
    from benchcert.tasks.hierarchical import analysis as hierarchical
    from benchcert.tasks.items import analysis as items
    from benchcert.tasks.judge import analysis as judge
    from benchcert.tasks.parsing import analysis as parsing
    from benchcert.tasks.perturbation import analysis as perturbation
    from benchcert.tasks.perturbation.option import parse_option
    from benchcert.tasks.subsample import analysis as subsample

    specs = [
        AnalysisSpec("scores", scores.analyze),
        AnalysisSpec("parsing", parsing.analyze, inputs=("parse_flags",), summary_fields=parsing.SUMMARY_FIELDS,
                     summary=parsing.summary_fields),
        AnalysisSpec("comparator_intervals", intervals.analyze),
        AnalysisSpec("hierarchical", hierarchical.analyze,
                     blocked=BlockedForm(model_block=hierarchical.model_block, whole=hierarchical.split_part,
                                         assemble=hierarchical.assemble)),
        AnalysisSpec("comparisons", comparisons.analyze, blocked=BlockedForm(pairs=True)),
        AnalysisSpec("subsample", subsample.analyze, inputs=("subsets",)),
        AnalysisSpec("perturbation", perturbation.analyze, options={"perturbation": parse_option},
                     inputs=("variant_counts",)),
        AnalysisSpec("environments", environments.analyze),
        AnalysisSpec("calibration", calibration.analyze, inputs=("option_probs",)),
        AnalysisSpec("judge", judge.analyze, inputs=("human_scores",), summary_fields=judge.SUMMARY_FIELDS,
                     summary=judge.summary_fields),
        AnalysisSpec("items", items.analyze, options={"items": items.parse_option},
                     summary_fields=items.SUMMARY_FIELDS, summary=items.summary_fields),
    ]
    return {spec.name: spec for spec in specs}


#: name -> registry entry, in the order a run executes them.  Built on first use (PEP 562), so that
#: importing one analysis module, or this module for :func:`run_analysis`, does not import them all;
#: an audit imports them all before its clock starts (flows/bodies.py).
SPECS: dict[str, AnalysisSpec]
#: name -> analysis function, in run order (a view of :data:`SPECS` for callers that only run them).
ANALYSES: dict[str, Analysis]


def _specs() -> dict[str, AnalysisSpec]:
    if "SPECS" not in globals():
        registry = _registry()
        globals()["SPECS"] = registry
        globals()["ANALYSES"] = {name: spec.analyze for name, spec in registry.items()}
    return globals()["SPECS"]


def _sync() -> None:
    # ANALYSES is updated in place, so a caller holding it sees a registration
    analyses = globals()["ANALYSES"]
    analyses.clear()
    analyses.update({name: spec.analyze for name, spec in _specs().items()})


def register(spec: AnalysisSpec) -> AnalysisSpec:
    """Add ``spec`` to the registry, run after the analyses already there.

    Raises
    ------
    ValueError
        An analysis of that name, or an option another analysis declares, is registered already.
    """
    registry = _specs()
    if spec.name in registry:
        raise ValueError(f"an analysis named {spec.name!r} is registered already")
    taken = {o for s in registry.values() for o in s.options} & set(spec.options)
    if taken:
        raise ValueError(f"option(s) {sorted(taken)} of analysis {spec.name!r} are declared by another analysis")
    registry[spec.name] = spec
    _sync()
    return spec


def unregister(name: str) -> AnalysisSpec:
    """Remove analysis ``name`` from the registry (a plug-in's or a test's); returns its entry."""
    registry = _specs()
    if name in REQUIRED:
        raise ValueError(f"analysis {name!r} is required by every run")
    spec = registry.pop(name)
    _sync()
    return spec


def parse_options(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The analyses' options of a request, each parsed by the analysis that declares it.

    Raises
    ------
    ValueError
        An option no registered analysis declares, or a value its parser refuses.
    """
    if not raw:
        return {}
    parsers = {name: parse for spec in _specs().values() for name, parse in spec.options.items()}
    unknown = sorted(set(raw) - set(parsers))
    if unknown:
        raise ValueError(f"unknown analysis option(s) {unknown}; the analyses declare: {sorted(parsers) or 'none'}")
    return {name: parsers[name](value) for name, value in raw.items()}


def needs(inputs: str) -> bool:
    """Does any registered analysis declare input ``inputs`` (a key of contract.INPUTS)?"""
    return any(inputs in spec.inputs for spec in _specs().values())


def summary_fields(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """summary.json's fields the analyses declare, from the run's tables (an analysis' absent fields: none)."""
    out: dict[str, Any] = {}
    for spec in _specs().values():
        if spec.summary is not None:
            out.update(spec.summary(tables))
    return out


def summary_model() -> type:
    """summary.json's model: tasks/schemas.py's ``Summary``, plus a field (any JSON value, null when
    absent) for each summary field a registered analysis declares that ``Summary`` does not have."""
    from benchcert.tasks.schemas import Summary

    extra = tuple(dict.fromkeys(f for spec in _specs().values() for f in spec.summary_fields
                                if f not in Summary.model_fields))
    return _extended_summary(extra) if extra else Summary


@functools.lru_cache(maxsize=8)
def _extended_summary(fields: tuple[str, ...]) -> type:
    import pydantic

    from benchcert.tasks.schemas import Summary

    return pydantic.create_model("Summary", __base__=Summary, **{f: (Any, None) for f in fields})


def __getattr__(name: str):
    if name in ("SPECS", "ANALYSES"):
        _specs()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
