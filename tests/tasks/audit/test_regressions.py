"""tasks/audit/regressions.py: the one rule for which models a run flags as regressed."""

from __future__ import annotations

from benchcert.tasks.audit.regressions import regressed_models


def test_a_fall_below_the_interval_or_a_regressed_verdict_flags_a_model():
    got = regressed_models(["b", "a"], [("c", "regressed"), ("d", "improved"), ("a", "regressed"),
                                        ("e", "inconclusive")])
    assert got == ["a", "b", "c"]


def test_nothing_moved_and_no_verdict_flags_nothing():
    assert regressed_models([], []) == []
