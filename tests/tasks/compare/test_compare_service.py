"""tasks/compare/service.py: the compare command's service, the one home of the verdict rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchcert.tasks.compare.gate import GateOptions
from benchcert.tasks.compare.service import (CompareRequest, ComparisonResult, check_request, compare_models,
                                             interval_verdicts)
from benchcert.tasks.errors import UsageError

from store_support import store_of_correct


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    rng = np.random.default_rng(7)
    base = rng.random(600) < 0.6
    models = {"base": base, "worse": base & (rng.random(600) >= 0.3), "same": rng.random(600) < 0.6}
    return store_of_correct(tmp_path_factory.mktemp("service"), "c", models, 40)


def test_interval_verdicts_read_the_interval():
    got = interval_verdicts([0.01, -0.2, -0.1, np.nan], [0.2, -0.01, 0.1, np.nan])
    assert list(got) == ["improved", "regressed", "inconclusive", "inconclusive"]


def test_every_candidate_against_the_baseline_is_a_frozen_result(db):
    result = compare_models(CompareRequest(db=db, benchmark="c", baseline="base"))
    assert isinstance(result, ComparisonResult) and result.gate is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.alpha = 0.1  # type: ignore[misc]
    rows = {r["candidate"]: r for r in result.comparisons}
    assert set(rows) == {"worse", "same"} and result.several and result.as_dict()["adjustment"] == "bonferroni"
    # With several candidates the simultaneous interval decides, by the one rule.
    for r in rows.values():
        iv = r["simultaneous_interval"]
        assert r["verdict"] == interval_verdicts([iv["lower"]], [iv["upper"]])[0]
    assert rows["worse"]["verdict"] == "regressed"


def test_one_candidate_uses_its_primary_interval_and_the_gate_decides(db):
    result = compare_models(CompareRequest(db=db, benchmark="c", baseline="base", candidates=("worse",),
                                           gate=GateOptions(fail_on="regressed")))
    (row,) = result.comparisons
    assert row["simultaneous_interval"] is None
    assert row["verdict"] == interval_verdicts([row["interval"]["lower"]], [row["interval"]["upper"]])[0]
    assert result.gate is not None and not result.gate.passed and result.gate.failed[0]["candidate"] == "worse"


@pytest.mark.parametrize("request_, message", [
    (dict(baseline="base", candidates=("base",)), "also a candidate"),
    (dict(baseline="base", candidates=("same", "same")), "named twice"),
    (dict(baseline="base", candidates=("same",), gate=GateOptions(margin=0.1)), "--margin needs --require"),
    (dict(baseline="base", candidates=("same",), hierarchy="items"), "hierarchy must be one of"),
])
def test_a_request_naming_nothing_to_compare_is_a_usage_error(db, request_, message):
    with pytest.raises(UsageError, match=message) as e:
        check_request(CompareRequest(db=db, benchmark="c", **request_))
    assert e.value.exit_code == 2
