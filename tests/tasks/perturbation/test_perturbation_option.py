"""The audit's perturbation option (issue #34): a real, validated setting the perturbation analysis
declares on its registry entry, read by the analysis (before, the analysis read
``getattr(config, "perturbation")``, a field AuditConfig did not have, so an audit always ran the
default calibrated test)."""

from __future__ import annotations

import pydantic
import pytest

from benchcert.stats.perturbation import TEST_METHODS
from benchcert.tasks.audit.analyses import SPECS, run_analysis
from benchcert.tasks.audit.request import AuditRequest
from benchcert.tasks.perturbation.analysis import analyze
from benchcert.tasks.perturbation.option import METHODS, PerturbationOption, parse_option
from benchcert.tasks.perturbation.service import with_variant_counts
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import load_matrices

from conftest import GRICE, GRICE_CSV, ingest_native


@pytest.fixture(scope="module")
def grice(tmp_path_factory):
    db = ingest_native(tmp_path_factory.mktemp("option") / "store.duckdb", GRICE_CSV)
    with open_store(db, write=False) as con:
        return db, with_variant_counts(con, load_matrices(con, GRICE, "0"))


def _request(db, **options) -> AuditRequest:
    return AuditRequest(db=str(db), benchmark=GRICE, variant="0", options=options)


def test_the_perturbation_analysis_declares_its_option():
    assert set(SPECS["perturbation"].options) == {"perturbation"}
    assert "variant_counts" in SPECS["perturbation"].inputs
    assert METHODS == TEST_METHODS  # the option's list is the stats layer's


@pytest.mark.parametrize("method", ["widened", "plugin_exact"])
def test_the_method_an_audit_asks_for_is_the_method_it_runs(grice, method):
    db, m = grice
    config = _request(db, perturbation={"method": method}).audit_config()
    assert config.option("perturbation") == PerturbationOption(method=method)
    out = run_analysis("perturbation", analyze, m, config)
    assert set(out.tables["perturbation_variants"]["method"].to_list()) == {method}
    default = run_analysis("perturbation", analyze, m, _request(db).audit_config())
    assert set(default.tables["perturbation_variants"]["method"].to_list()) == {"calibrated"}


def test_a_design_in_the_option_is_the_design_used(grice):
    db, m = grice
    design = {"base": "0", "null": ["schema", "answ_schema", "grice"], "test": ["chomsky"], "method": "widened"}
    out = run_analysis("perturbation", analyze, m, _request(db, perturbation=design).audit_config())
    v = out.tables["perturbation_variants"]
    assert v["variant"].to_list() == ["chomsky"] and v["base"].to_list() == ["0"]
    assert _request(db, perturbation=design).run_config()["options"] == {"perturbation": design}


@pytest.mark.parametrize("bad, says", [
    ({"method": "fisher"}, "perturbation method must be one of"),
    ({"methd": "widened"}, "unknown perturbation option key"),
    ({"test": "chomsky"}, "must be a list of variant names"),
    ("widened", "a mapping of method, base, null, test"),
])
def test_a_bad_option_is_refused_when_the_request_is_made(bad, says):
    with pytest.raises(pydantic.ValidationError, match=says):
        AuditRequest(db="s.duckdb", benchmark="b", options={"perturbation": bad})


def test_an_option_no_analysis_declares_is_refused():
    with pytest.raises(pydantic.ValidationError, match="unknown analysis option"):
        AuditRequest(db="s.duckdb", benchmark="b", options={"perturbaton": {"method": "widened"}})


def test_a_request_without_options_records_none():
    assert "options" not in AuditRequest(db="s.duckdb", benchmark="b").run_config()
    assert parse_option(PerturbationOption()) == PerturbationOption()
