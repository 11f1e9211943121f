"""stats/validation.py's check_unit_interval, the one check of a level, power or share in the unit
interval, and the public home of the degenerate-data warning (issue #34, point 7)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from benchcert.stats.validation import check_alpha, check_power, check_unit_interval


@pytest.mark.parametrize("value", [0.05, 0.5, np.float32(0.25), np.float64(0.999), 1e-300])
def test_a_real_number_inside_is_returned_as_a_float(value):
    out = check_unit_interval("alpha", value)
    assert type(out) is float and out == float(value)


@pytest.mark.parametrize("value,shown", [
    (0, "0"), (1, "1"), (1.5, "1.5"), (-0.1, "-0.1"), (float("nan"), "nan"), (float("inf"), "inf"),
    (np.float64(2.0), "2.0"),  # a numpy scalar is shown as the number it holds
    (True, "True"), (np.bool_(False), "False"), ("0.5", "'0.5'"), (None, "None"), ([0.5], "[0.5]"),
])
def test_anything_else_is_a_value_error_naming_the_parameter_and_the_value(value, shown):
    with pytest.raises(ValueError) as info:
        check_unit_interval("--epsilon", value)
    assert str(info.value) == f"--epsilon must be in (0, 1); got {shown}"


@pytest.mark.parametrize("closed,interval,inside,outside", [
    (False, "(0, 1)", [0.5], [0.0, 1.0]),
    ("neither", "(0, 1)", [0.5], [0.0, 1.0]),
    (True, "[0, 1]", [0.0, 0.5, 1.0], [-0.01, 1.01]),
    ("both", "[0, 1]", [0.0, 1.0], [1.5]),
    ("left", "[0, 1)", [0.0, 0.5], [1.0, -1e-9]),
    ("right", "(0, 1]", [1.0, 0.5], [0.0, 1.0000001]),
])
def test_closed_says_which_ends_belong(closed, interval, inside, outside):
    for v in inside:
        assert check_unit_interval("share", v, closed=closed) == v
    for v in outside:
        with pytest.raises(ValueError) as info:
            check_unit_interval("share", v, closed=closed)
        assert str(info.value).startswith(f"share must be in {interval}; got ")


def test_an_unknown_closed_is_refused():
    with pytest.raises(ValueError, match="closed must be"):
        check_unit_interval("alpha", 0.5, closed="open")


def test_alpha_and_power_are_the_unit_interval_check_under_their_names():
    assert check_alpha(0.05) == 0.05 and check_power(np.float32(0.5)) == 0.5
    with pytest.raises(ValueError, match=r"^alpha must be in \(0, 1\); got 1\.0$"):
        check_alpha(1.0)
    with pytest.raises(ValueError, match=r"^power must be in \(0, 1\); got True$"):
        check_power(True)


def test_a_degenerate_warning_pickles_with_its_fields():
    from benchcert.stats.degenerate import DegenerateDataWarning, Ref

    w = pickle.loads(pickle.dumps(DegenerateDataWarning("f: {} answered nothing", Ref("model", [3]))))
    assert type(w) is DegenerateDataWarning and w.refs == (Ref("model", (3,)),)
    assert str(w) == "f: model column(s) [3] answered nothing"
