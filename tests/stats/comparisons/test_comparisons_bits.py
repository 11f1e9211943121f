"""Issue #27: a few pairs of 0/1 columns are summed as popcounts of bit-packed masks
(stats/comparisons/gram.py ``_pair_sums_bits``); every per-subject statistic equals the float
column-by-column path's (``_pair_sums_direct``, still the path of fractional scores) to the last bit,
and the blocked binary-column check equals the former whole-matrix one."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.segments import Grouping
from benchcert.stats.comparisons import gram


def _binary_columns_former(s):
    """gram._binary_columns before issue #27, verbatim."""
    return np.all(np.isnan(s) | (s == 0) | (s == 1), axis=0)


@pytest.mark.parametrize("seed, subjects, block", [(0, "sorted", 1 << 21), (1, "shuffled", 1 << 21),
                                                    (2, None, 1 << 21), (3, "sorted", 64 * 8),
                                                    (4, "shuffled", 64 * 4), (5, "few", 64 * 6)])
def test_bit_sums_equal_the_float_pair_sums(seed, subjects, block, monkeypatch):
    rng = np.random.default_rng(seed)
    k, n = 14, 1337  # subjects of sizes that are not multiples of 8 or 64
    s = (rng.random((n, k)) < rng.uniform(0.1, 0.95, k)).astype(float)
    s[rng.random(s.shape) < 0.07] = np.nan
    s[:, 4] = np.nan
    s[::3, 4] = 1.0  # answered a third
    codes = {"sorted": np.sort(rng.integers(0, 23, n)), "shuffled": rng.integers(0, 23, n),
             "few": np.sort(rng.integers(0, 2, n)), None: None}[subjects]
    pa = np.array([0, 5, 11, 7, 4, 2, 13, 3, 4])
    pb = np.array([1, 2, 3, 8, 9, 12, 0, 4, 10])
    c = 1 if codes is None else Grouping(codes).starts.size
    monkeypatch.setattr(gram, "BITS_BLOCK_CELLS", block)  # blocks of 64-row multiples within a subject
    bits, direct = gram._Sums.empty(c, pa.size), gram._Sums.empty(c, pa.size)
    gram._pair_sums_bits(s, codes, pa, pb, bits)
    gram._pair_sums_direct(s, codes, pa, pb, np.ones(pa.size, bool), direct)
    for name in ("n_c", "s_c", "q_c", "n_pos", "n_neg", "sum_a", "sum_b"):
        a, b = getattr(direct, name), getattr(bits, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("seed", range(3))
def test_blocked_binary_columns_equal_the_former_check(seed):
    rng = np.random.default_rng(seed)
    s = (rng.random((5000, 300)) < 0.5).astype(float)
    s[rng.random(s.shape) < 0.1] = np.nan
    s[rng.integers(0, 5000, 20), rng.integers(0, 300, 20)] = 0.5
    from benchcert.stats.comparisons.engine import column_sums  # the 0/1 flags the comparisons use

    np.testing.assert_array_equal(column_sums(s)[2], _binary_columns_former(s))


def _column_first_pass_former(x2):
    """engine.column_stats' first pass before issue #27 (answered and sum per column), verbatim."""
    k = x2.shape[1]
    rows = max(1, (1 << 21) // max(k, 1))
    n = np.zeros(k, dtype=np.int64)
    total = np.zeros(k)
    for lo in range(0, x2.shape[0], rows):
        block = x2[lo:lo + rows]
        obs = ~np.isnan(block)
        n += obs.sum(axis=0)
        total += np.where(obs, block, 0.0).sum(axis=0)
    return n, total


@pytest.mark.parametrize("shape", [(30000, 90), (700, 5)])
def test_column_stats_from_column_sums_equal_the_former(shape):
    """The one-pass column_sums (answered, sums, 0/1) are the numbers of column_stats' former first pass,
    bit for bit; column_stats gives the same from them as from the matrix, numpy's mean and variance."""
    from benchcert.stats.comparisons.engine import column_stats, column_sums

    rng = np.random.default_rng(shape[1])
    s = rng.random(shape)  # fractional: the block order of the sums matters
    s[rng.random(shape) < 0.1] = np.nan
    s[:, 1] = np.round(s[:, 1])
    n, total, binary = column_sums(s)
    for a, b in zip((n, total), _column_first_pass_former(s)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    ref = column_stats(s)
    for a, b in zip(column_stats(s, sums=(n, total)), ref):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    np.testing.assert_allclose(ref[1], np.nanmean(s, axis=0), rtol=1e-12)
    np.testing.assert_allclose(ref[2], np.nanvar(s, axis=0, ddof=1), rtol=1e-10)
    np.testing.assert_array_equal(binary, _binary_columns_former(s))
    np.testing.assert_array_equal(n, (~np.isnan(s)).sum(axis=0))
