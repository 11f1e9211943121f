"""tasks/gof/service.py: ``benchcert gof``'s option checks and refusals are named errors."""

from __future__ import annotations

import dataclasses

import pytest

from benchcert.tasks.errors import MissingStoreError, UsageError
from benchcert.tasks.gof.service import GofOptions, check_options, run_gof


@pytest.mark.parametrize("change,message", [
    ({"alpha": 1.5}, "--alpha must be in"),
    ({"delta": 0.5}, "--delta must be in"),
    ({"null_draws": 5}, "at least 19 at alpha 0.05"),
    ({"null_draws": -1}, "--null-draws must be 0 or at least 19"),  # checked before the ">= 0" rule
    ({"crossfit_variance": "paper"}, "applies to --method crossfit only"),
    ({"method": "crossfit", "folds": 1}, "--folds must be at least 2"),
])
def test_options_out_of_range_are_usage_errors(change, message):
    with pytest.raises(UsageError, match=message) as got:
        check_options(dataclasses.replace(GofOptions(benchmark="b"), **change))
    assert got.value.exit_code == 2


def test_a_missing_store_is_a_store_error_after_the_option_checks(tmp_path):
    with pytest.raises(UsageError):
        run_gof(tmp_path / "none.duckdb", GofOptions(benchmark="b", alpha=2.0))
    with pytest.raises(MissingStoreError, match="no such store"):
        run_gof(tmp_path / "none.duckdb", GofOptions(benchmark="b"))
