"""Scale: the fast paths equal the plain ones they replace (oracles), and memory stays bounded.

Oracles: ``segment_sums`` against ``np.add.reduceat`` (exact on integers, booleans and 0/1
scores; to rounding on other floats, since the two add a block's rows in different orders).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats._common import segment_sums


@pytest.mark.parametrize("seed", range(4))
def test_segment_sums_equal_reduceat(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(1, 3000))
        shape = (n,) + tuple(int(v) for v in rng.integers(1, 20, rng.integers(0, 3)))
        kind = rng.integers(0, 3)
        x = rng.random(shape)
        x = x < 0.5 if kind == 0 else (np.round(x) if kind == 1 else x * 10.0 ** rng.integers(-8, 9))
        k = int(rng.integers(1, n + 1))
        starts = np.r_[0, np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))] if k > 1 else np.array([0])
        dt = np.int64 if x.dtype == bool else None
        got, ref = segment_sums(x, starts, dt), np.add.reduceat(x, starts, axis=0, dtype=dt)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        if kind < 2:
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)
