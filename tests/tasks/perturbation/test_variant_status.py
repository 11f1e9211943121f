"""tasks/perturbation/service.py variant_status_columns: the one rule for what a variant's share can say."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.perturbation.service import VARIANT_STATUSES, variant_status_columns


def test_every_status_has_its_case():
    counts = pl.DataFrame({  # tested, no power, no alternative, untested
        "n_tested": [3, 0, 0, 0], "n_no_power": [1, 2, 0, 0], "n_no_alternative": [1, 1, 4, 0],
        "classical_tested": [2, 0, 0, 0], "n_classical_no_power": [0, 5, 0, 0]})
    got = counts.with_columns(variant_status_columns())
    assert got["composite_status"].to_list() == list(VARIANT_STATUSES)
    assert got["classical_status"].to_list() == ["tested", "no power", "untested", "untested"]
