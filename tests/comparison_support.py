"""The oracle of the tests that compute the paired comparisons two ways (dense and by blocks of
models, in one process and through a block runner): every field of every test the same."""

from __future__ import annotations

import dataclasses

import numpy as np


def assert_same_comparison(dense, other, exact=True) -> None:
    """Every field of two :class:`~benchcert.stats.comparisons.PairedComparison`, and of each of
    their tests, equal: to the last bit, or (``exact`` False) floats to 1e-12 relative."""
    check = np.testing.assert_array_equal if exact else (
        lambda a, b, err_msg: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=err_msg)
        if np.asarray(a).dtype.kind == "f" else np.testing.assert_array_equal(a, b, err_msg=err_msg))
    for f in dataclasses.fields(dense):
        a, b = getattr(dense, f.name), getattr(other, f.name)
        if f.name == "tests":
            assert a.keys() == b.keys()
            for name in a:
                for g in dataclasses.fields(a[name]):
                    check(getattr(a[name], g.name), getattr(b[name], g.name), err_msg=f"{name}.{g.name}")
        else:
            check(a, b, err_msg=f.name)
