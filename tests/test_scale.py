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


def _assert_same_comparison(dense, blocked, exact=True):
    import dataclasses

    check = np.testing.assert_array_equal if exact else (
        lambda a, b, err_msg: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=err_msg)
        if np.asarray(a).dtype.kind == "f" else np.testing.assert_array_equal(a, b, err_msg=err_msg))
    for f in dataclasses.fields(dense):
        a, b = getattr(dense, f.name), getattr(blocked, f.name)
        if f.name == "tests":
            assert a.keys() == b.keys()
            for name in a:
                for g in dataclasses.fields(a[name]):
                    check(getattr(a[name], g.name), getattr(b[name], g.name), err_msg=f"{name}.{g.name}")
        else:
            check(a, b, err_msg=f.name)


@pytest.mark.parametrize("seed, with_subjects, family", [(0, True, "all"), (1, False, "all"), (2, True, "baseline"),
                                                         (3, True, "pairs")])
def test_blocked_pairwise_equals_the_dense_computation_exactly(seed, with_subjects, family):
    # 0/1 scores (Gram sums are exact integers, so the numbers must agree to the last bit), missing
    # answers, unequal subjects; blocks of 1-5 models, i.e. many block pairs and pairs split
    # across blocks in both orders.
    import warnings

    from benchcert.stats.comparisons import pairwise_comparisons

    rng = np.random.default_rng(seed)
    k, n = 11, 240
    s = (rng.random((n, k)) < rng.uniform(0.2, 0.9, k)).astype(float)
    s[rng.random(s.shape) < 0.05] = np.nan
    s[:, 7] = s[:, 2]  # a pair with no discordant item (warned in both paths)
    subjects = rng.integers(0, 8, n) if with_subjects else None
    kw = {"all": {}, "baseline": {"baseline": 3},
          "pairs": {"pairs": rng.permutation(np.array([(i, j) for i in range(k) for j in range(k) if i != j]))[:40]}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = pairwise_comparisons(s, subjects, block_models=k, **kw[family])
        for bm in (1, 2, 5):
            _assert_same_comparison(dense, pairwise_comparisons(s, subjects, block_models=bm, **kw[family]))


def test_blocked_pairwise_with_fractional_scores_agrees_to_rounding():
    # Non-integer Gram sums depend on BLAS's summation order, which depends on the block's width.
    import warnings

    from benchcert.stats.comparisons import pairwise_comparisons

    rng = np.random.default_rng(7)
    s = np.round(rng.random((200, 9)), 2)
    subjects = rng.integers(0, 6, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _assert_same_comparison(pairwise_comparisons(s, subjects, block_models=9),
                                pairwise_comparisons(s, subjects, block_models=2), exact=False)
