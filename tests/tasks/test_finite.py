"""tasks/finite.py: the one reading of a recorded or computed number (summary.json, a look's record, the
comparisons' JSON rows, the item analysis): a finite real number as a float, anything else as None."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchcert.tasks.finite import finite_or_none


@pytest.mark.parametrize("value", [0, 3, -0.25, 1e-300, np.float64(0.5), np.float32(0.25), np.int64(7)])
def test_a_finite_real_number_is_its_float(value):
    out = finite_or_none(value)
    assert type(out) is float and out == float(value)


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf"),
                                   True, False, np.bool_(True), "0.5", [0.5], {"x": 1}])
def test_anything_else_is_none(value):
    assert finite_or_none(value) is None
