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


def test_new_subjects_with_too_few_subjects_says_what_it_cannot_show(tmp_path):
    """With few subjects the subject-level bound cannot show a plausible gap at all: the row carries
    the best-case detectable gap and a note says so, instead of a bare wide interval (review)."""
    rng = np.random.default_rng(3)
    base = rng.random(700) < 0.5
    better = base | (rng.random(700) < 0.2)  # about 10 points better in every subject
    for n_subjects, floor in ((5, None), (14, 0.403)):
        (tmp_path / str(n_subjects)).mkdir()
        db = store_of_correct(tmp_path / str(n_subjects), "c", {"base": base, "cand": better}, n_subjects)
        result = compare_models(CompareRequest(db=db, benchmark="c", baseline="base", candidates=("cand",),
                                               question="new-subjects"))
        (row,) = result.comparisons
        assert row["verdict"] == "inconclusive" and row["best_case_detectable_gap"] == floor
        (note,) = [w for w in result.warnings if "new-subjects bound" in w]
        assert f"with {n_subjects} subject(s)" in note and "more subjects would" in note
        assert ("cannot show any gap" in note) == (floor is None)
