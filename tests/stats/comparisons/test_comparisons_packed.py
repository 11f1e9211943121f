"""Issue #27: the pairwise comparisons of a 0/1 matrix from its bit-packed columns, read a block of
models at a time (stats/comparisons/packed.py), equal ``pairwise_comparisons`` on the matrix to the
last bit: every field, every test, every warning, for every family and block size, and the column
statistics equal ``column_stats`` of the whole matrix (numpy sums a narrow block's columns in
another order than the matrix's: the blocks are summed so that they do not)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from benchcert.stats import comparisons as C


def _equal(a, b):
    np.testing.assert_equal(dataclasses.asdict(a), dataclasses.asdict(b))  # every field and test, NaN = NaN


def _blocks(s, width):
    k = s.shape[1]
    return ((lo, min(k, lo + width), np.array(s[:, lo:lo + width])) for lo in range(0, k, width))


def _caught(f):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = f()
    return out, [(x.category, str(x.message)) for x in w]


@pytest.mark.parametrize("k, n, n_subjects", [(110, 40, 5), (30, 500, 40), (90, 1500, 10), (70, 300, None),
                                              (7, 20000, 3)])
@pytest.mark.parametrize("width", [1, 7, 64, 1000])
def test_packed_comparisons_equal_the_matrix_ones(k, n, n_subjects, width):
    rng = np.random.default_rng(k + n + width)
    s = (rng.random((n, k)) < rng.random(k)).astype(float)
    s[rng.random((n, k)) < 0.15] = np.nan
    s[:, 2] = s[:, 3]  # zero standard errors: warnings
    subj = None if n_subjects is None else rng.integers(0, n_subjects, n)
    packed = C.pack_binary_scores(_blocks(s, width), n, k, subj)
    for mine, ref in zip(packed.colstats, C.column_stats(s)):
        np.testing.assert_array_equal(mine, ref, strict=True)
    some = np.column_stack(np.triu_indices(k, 1))[::5]
    for pairs, block_models in [(None, None), (some, None), (some[:1], None), (None, 5), (some, 4)]:
        ref, w_ref = _caught(lambda: C.pairwise_comparisons(s, subj, pairs=pairs, block_models=block_models))
        got, w_got = _caught(lambda: C.pairwise_comparisons_packed(packed, pairs=pairs, block_models=block_models))
        _equal(ref, got)
        assert w_got == w_ref
    a, b = some[:, 0], some[:, 1]
    np.testing.assert_array_equal(packed.shared_counts(a, b), (~np.isnan(s[:, a]) & ~np.isnan(s[:, b])).sum(axis=0))
