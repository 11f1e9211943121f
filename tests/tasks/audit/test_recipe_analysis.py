"""docs/architecture.md's recipe for a new analysis, followed from outside the package (issue #34).

The recipe: a function ``analyze(matrices, config) -> AnalysisOutput`` importing only
tasks/audit/contract.py, and one registry entry (an ``AnalysisSpec`` passed to
``tasks/audit/analyses.register``) declaring its option, the summary field it fills and its
inputs.  Nothing else is edited: the audit runs it, validates its option, writes its table and
puts its field into summary.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pydantic
import pytest

from benchcert.tasks.audit import analyses
from benchcert.tasks.audit.contract import AnalysisOutput, AnalysisSpec, AuditConfig
from benchcert.tasks.ingest.service import ingest_file

from conftest import SMALL_CSV

NAME = "toy_items"


def _parse_scale(value) -> int:
    """The toy's option: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"toy_scale must be a positive integer; got {value!r}")
    return value


def analyze(matrices, config: AuditConfig) -> AnalysisOutput:
    """Answered items per model, times the option's scale."""
    answered = (matrices.scores == matrices.scores).sum(axis=0)  # not NaN: answered
    scale = config.option("toy_scale", 1)
    table = pl.DataFrame({"model": matrices.models, "n_items": [int(n) * scale for n in answered]})
    return AnalysisOutput(name=NAME, tables={NAME: table}, warnings=[f"{NAME}: scale {scale}"])


def _summary(tables: dict[str, pl.DataFrame]) -> dict:
    return {"toy_total": int(tables[NAME]["n_items"].sum())} if NAME in tables else {}


SPEC = AnalysisSpec(NAME, analyze, options={"toy_scale": _parse_scale}, summary_fields=("toy_total",),
                    summary=_summary)


@pytest.fixture
def registered():
    analyses.register(SPEC)
    try:
        yield SPEC
    finally:
        analyses.unregister(NAME)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, small_mapping):
    db = tmp_path_factory.mktemp("recipe") / "store.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="small", mapping=small_mapping).status == "ingested"
    return db


@pytest.fixture(scope="module")
def small_mapping():
    from conftest import SMALL_MAP

    from benchcert.tasks.ingest.mapping import parse_mapping

    return parse_mapping(SMALL_MAP)


def _audit(db, root, **options) -> dict:
    from benchcert.flows.bodies import audit_body
    from benchcert.tasks.audit.request import AuditRequest
    from benchcert.tasks.audit.steps import plain_steps

    return audit_body(plain_steps(), AuditRequest(db=str(db), benchmark="small", artifacts_root=str(root),
                                                  options=options))


def test_a_registered_analysis_runs_in_the_audit_and_its_table_and_field_are_written(registered, small_store,
                                                                                      tmp_path):
    result = _audit(small_store, tmp_path / "artifacts", toy_scale=3)
    run_dir = Path(result["run_dir"])
    assert run_dir.parent.parent == tmp_path / "artifacts" and run_dir.is_dir()
    summary = json.loads((run_dir / "summary.json").read_text())
    table = pl.read_parquet(run_dir / "tables" / f"{NAME}.parquet")
    assert summary["analyses"][-1] == NAME and f"{NAME}: scale 3" in summary["warnings"]
    assert summary["toy_total"] == int(table["n_items"].sum()) > 0
    assert table["n_items"].to_list() == [3 * m["n_items"] for m in summary["models"]]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert NAME in manifest["config"]["analyses"] and manifest["config"]["options"] == {"toy_scale": 3}
    assert f"analysis:{NAME}" in manifest["timings_s"]
    # the typed result reads the run as before: a declared field it does not know is left aside
    from benchcert.tasks.audit.audit_result import AuditResult

    assert AuditResult.from_summary(summary).n_models == summary["n_models"]


def test_its_option_is_checked_when_the_request_is_made(registered):
    from benchcert.tasks.audit.request import AuditRequest

    with pytest.raises(pydantic.ValidationError, match="toy_scale must be a positive integer"):
        AuditRequest(db="s.duckdb", benchmark="small", options={"toy_scale": 0})


def test_unregistered_it_is_gone_and_the_summary_model_is_the_published_one(small_store, tmp_path):
    from benchcert.tasks.schemas import Summary

    assert NAME not in analyses.ANALYSES and analyses.summary_model() is Summary
    result = _audit(small_store, tmp_path / "artifacts")
    assert NAME not in result["analyses"] and "toy_total" not in result


def test_a_second_analysis_of_the_same_name_or_option_is_refused(registered):
    with pytest.raises(ValueError, match="registered already"):
        analyses.register(SPEC)
    with pytest.raises(ValueError, match="declared by another analysis"):
        analyses.register(AnalysisSpec("toy_other", analyze, options={"toy_scale": _parse_scale}))
