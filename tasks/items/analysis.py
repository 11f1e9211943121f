"""The audit's ``items`` analysis: what the benchmark itself can measure (tasks/items/service.py).

Tables: ``items`` (one row per item: difficulty, discrimination, 2PL slope and difficulty, inert,
the broken-key test and flag, membership of the reduced set), ``items_resolution`` (the paired
test's resolution per score band), ``items_neighbours`` (each pair of neighbours in the ranking),
``items_overview`` (one row; summary.json's ``item_analysis``) and ``items_reduced`` (one row).

It runs when the audit is asked for it (``benchcert audit --items``, option ``items``): at the
80M leaderboard scale it costs more than a tenth of the audit (docs/scale.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.errors import NotAnalysableError
from benchcert.tasks.store.matrices import BenchmarkMatrices

if TYPE_CHECKING:  # the numerics (scipy.stats) are imported only when the analysis runs
    from benchcert.tasks.items.service import ItemsSettings

#: Seed of the audit's tie-breaks and reduced-set draw: the same store gives the same report.
AUDIT_SEED = 20260338
SUMMARY_FIELDS = ("item_analysis",)


def parse_option(value) -> dict:
    """The ``items`` option: ``True`` (defaults) or a mapping of ``fdr``, ``tolerance``, ``irt``;
    ``False``/None: not run."""
    if value is None or value is False:
        return {}
    if value is True:
        return {"enabled": True}
    if not isinstance(value, dict):
        raise ValueError(f"items must be true or a mapping of fdr, tolerance, irt; got {value!r}")
    unknown = set(value) - {"fdr", "tolerance", "irt"}
    if unknown:
        raise ValueError(f"items: unknown setting(s) {sorted(unknown)}; known: fdr, tolerance, irt")
    out = {"enabled": True}
    for name in ("fdr", "tolerance"):
        if name in value:
            v = value[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ValueError(f"items {name} must be in (0, 1); got {v!r}")
            out[name] = float(v)
    if "irt" in value:
        if not isinstance(value["irt"], bool):
            raise ValueError(f"items irt must be true or false; got {value['irt']!r}")
        out["irt"] = value["irt"]
    return out


def settings_for(config: AuditConfig) -> ItemsSettings:
    from benchcert.tasks.items.service import ItemsSettings

    opt = config.option("items", {}) or {}
    kwargs = {k: opt[k] for k in ("fdr", "tolerance", "irt") if k in opt}
    return ItemsSettings(alpha=config.alpha, seed=AUDIT_SEED, hierarchy=config.hierarchy, **kwargs)


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    """The item analysis when the audit asks for it (option ``items``); nothing otherwise."""
    if not (config.option("items") or {}).get("enabled"):
        return AnalysisOutput(name="items")
    from benchcert.tasks.store.blocked import OutOfCoreError

    try:
        _ = m.scores
    except OutOfCoreError as exc:  # the item analysis needs every cell at once: skipped, the audit goes on
        raise NotAnalysableError(str(exc)) from None
    from benchcert.tasks.items.service import SHOWN, analyze_items
    from benchcert.tasks.render.sections import items as items_sections

    result = analyze_items(m, settings_for(config))
    tables = result.tables()
    section = items_sections.section(result.overview, result.items, result.bands, result.neighbours,
                                     tables.get("items_reduced"), shown=SHOWN)
    return AnalysisOutput(name="items", tables=tables, sections=[section], warnings=list(result.notes))


def summary_fields(tables: dict[str, pl.DataFrame]) -> dict:
    """summary.json's ``item_analysis``: the overview row (absent when the analysis did not run)."""
    if "items_overview" not in tables or not tables["items_overview"].height:
        return {}
    return {"item_analysis": tables["items_overview"].row(0, named=True)}
