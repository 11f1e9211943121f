"""Oracle tests of the per-subject counts the analyses share (stats/subject_counts.py, issue #27) and of
what is now computed from them: every number equals the former computation over the matrix, to the
last bit, except lm_eval_group's within-subject sum of squares (closed form: 1e-12 relative)."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.segments import Grouping
from benchcert.stats.failure_rates import _kl_upper
from benchcert.stats.comparator_intervals import comparator_intervals, comparator_intervals_from_counts
from benchcert.stats.scores import benchmark_scores, benchmark_scores_from_counts
from benchcert.stats.subject_counts import subject_counts


def _matrix(rng, n_items, n_models, n_subjects, *, binary, missing=0.1, sort=True):
    codes = rng.integers(0, n_subjects, n_items)
    if sort:
        codes = np.sort(codes)
    s = (rng.random((n_items, n_models)) < 0.6).astype(float) if binary else rng.random((n_items, n_models))
    if not binary:
        s[rng.random(s.shape) < 0.2] = 1.0
        s[rng.random(s.shape) < 0.2] = 0.0
    s[rng.random(s.shape) < missing] = np.nan
    return s, codes


def _former(s, codes, k):
    """The former sums: the rows gathered in subject order, NaN-masked and summed per subject
    (segment_sums: a sum per block, or np.add.reduceat with many subjects)."""
    g = Grouping(codes, k)
    srt = g.gather(s)
    obs = ~np.isnan(srt)
    n = g.reduce_sorted(obs)
    total = g.reduce_sorted(np.where(obs, srt, 0.0))
    passed = g.reduce_sorted(obs & (srt >= 1.0))
    fractional = np.sum(obs & (srt > 0) & (srt < 1), axis=0)
    return n, total, passed, fractional


CASES = [
    # (n_items, n_models, n_subjects, binary, sort, block_bytes)
    (600, 7, 12, False, True, 1 << 20),       # a sum per subject
    (600, 7, 12, False, False, 1 << 20),      # rows not in subject order
    (2000, 5, 900, False, True, 1 << 20),     # many small subjects: reduceat
    (2000, 5, 900, False, False, 1 << 11),    # reduceat in small chunks
    (3000, 4, 3, False, True, 1 << 10),       # subjects longer than a block: continued sums
    (3000, 4, 1, True, True, 1 << 10),
    (500, 1, 4, False, True, 1 << 20),        # one model
    (3000, 1, 2, False, True, 1 << 10),       # one model, subjects longer than a block (pairwise column sums)
    (700, 9, 20, True, False, 1 << 9),
]


@pytest.mark.parametrize("n_items,n_models,n_subjects,binary,sort,block_bytes", CASES)
def test_counts_equal_the_former_sums(n_items, n_models, n_subjects, binary, sort, block_bytes):
    rng = np.random.default_rng(n_items + n_models + n_subjects)
    s, codes = _matrix(rng, n_items, n_models, n_subjects, binary=binary, sort=sort)
    k = n_subjects + 2  # codes without items give zero rows
    c = subject_counts(s, codes, k, block_bytes=block_bytes)
    n, total, passed, fractional = _former(s, codes, k)
    np.testing.assert_array_equal(c.n, n)
    assert np.array_equal(c.total, total)  # to the last bit, fractional scores included
    np.testing.assert_array_equal(c.passed, passed)
    np.testing.assert_array_equal(c.fractional, fractional)
    np.testing.assert_array_equal(c.binary, fractional == 0)
    np.testing.assert_array_equal(c.low, np.nanmin(s, axis=0))
    np.testing.assert_array_equal(c.high, np.nanmax(s, axis=0))
    assert c.in_unit_interval


def test_counts_see_scores_outside_the_unit_interval():
    s = np.array([[0.0, 1.0], [1.5, np.nan]])
    c = subject_counts(s, np.array([0, 0]))
    assert not c.in_unit_interval
    assert subject_counts(np.array([[0.0, np.nan]]), np.array([0])).in_unit_interval


@pytest.mark.parametrize("binary", [False, True])
def test_scores_from_counts_equal_benchmark_scores(binary):
    rng = np.random.default_rng(5)
    s, codes = _matrix(rng, 800, 6, 15, binary=binary, sort=False)
    s[codes == 3, 2] = np.nan  # a model that skipped a subject (warned by both)
    doms = np.arange(15) % 4
    with pytest.warns(RuntimeWarning):
        ref = benchmark_scores(s, codes, subject_domains=doms, n_subjects=15, n_domains=4)
    c = subject_counts(s, codes, 15)
    with pytest.warns(RuntimeWarning):
        got = benchmark_scores_from_counts(c.n, c.total, subject_domains=doms, n_domains=4)
    for field in ref.__dataclass_fields__:
        a, b = getattr(ref, field), getattr(got, field)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=True), field
        else:
            assert a == b, field


def test_comparator_intervals_from_counts():
    rng = np.random.default_rng(11)
    s, codes = _matrix(rng, 1500, 8, 30, binary=True, sort=False)
    s[:, 5] = 1.0  # a model with every answer right: zero-width intervals, warned by both
    c = subject_counts(s, codes)
    for weighting in ("pooled", "macro"):
        with pytest.warns(RuntimeWarning):
            ref = comparator_intervals(s, codes, weighting=weighting, alpha=0.1)
        with pytest.warns(RuntimeWarning):
            got = comparator_intervals_from_counts(c.n, c.total, weighting=weighting, alpha=0.1)
        assert ref.keys() == got.keys()
        for method in ref:
            for field in ref[method].__dataclass_fields__:
                a, b = getattr(ref[method], field), getattr(got[method], field)
                if method == "lm_eval_group" and field in ("lower", "upper", "half_width", "se"):
                    # the within-subject sum of squares in closed form, t (n - t) / n: rounding only
                    np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)
                elif isinstance(a, np.ndarray):
                    assert np.array_equal(a, b, equal_nan=True), (method, field)
                else:
                    assert a == b, (method, field)


def test_kl_upper_each_entry_stops_on_its_own():
    rng = np.random.default_rng(3)
    est = np.r_[0.0, 1.0, rng.random(300), 1e-9, 1 - 1e-9]
    J = rng.integers(1, 400, est.size)
    level = np.log(1 / 0.05)
    batch = _kl_upper(est, J, level, each=True)
    one = np.array([_kl_upper(np.array([e]), np.array([j]), level)[0] for e, j in zip(est, J)])
    assert np.array_equal(batch, one)
    # the default keeps the batch behaviour of the other callers
    assert np.array_equal(_kl_upper(est, J, level), _kl_upper(est, J, level, each=False))


def test_scores_free_paths_check_what_the_matrix_paths_check():
    """fit_domains(None, counts=) and split_half(None, counts=) refuse what the matrix paths refuse
    (the out-of-core audit, tasks/store/blocked.py, calls them without the matrix)."""
    from benchcert.stats.split_half import split_half
    from benchcert.stats.hierarchical import fit_domains

    rng = np.random.default_rng(3)
    codes = np.repeat(np.arange(6), 5)
    good = (rng.random((30, 4)) < 0.6).astype(float)
    bad = good.copy()
    bad[0, 1] = 2.0
    for s in (good, bad):
        counts = subject_counts(s, codes, 6)
        with pytest.raises(ValueError):
            fit_domains(s, codes, proxy_alpha=5.0) if s is good else fit_domains(s, codes)
        with pytest.raises(ValueError):
            fit_domains(None, codes, counts=counts, proxy_alpha=5.0) if s is good else fit_domains(None, codes,
                                                                                               counts=counts)
    assert not subject_counts(bad, codes, 6).binary[1]  # a score of 2 is not a 0/1 score
    with pytest.raises(ValueError):
        split_half(None, codes, n_splits=5, rng=np.random.default_rng(0), counts=subject_counts(bad, codes, 6))
    ok = split_half(None, codes, n_splits=5, rng=np.random.default_rng(0), counts=subject_counts(good, codes, 6))
    ref = split_half(good, codes, n_splits=5, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(ok.corr, ref.corr)
