"""Per-subject counts of the fits without a gathered copy of the matrix (issue #27,
stats/hierarchical/domains.py _counts: stats/subject_counts.py's blocked pass, or the counts an
audit's analyses share, passed as ``fit_domains(counts=...)``). Oracle: the former count (gather
every row in subject order, then segment sums), kept here verbatim; equal to the last bit on
items in subject order or not, missing answers, fractional scores, subjects with no item, and
many small subjects (summed with np.add.reduceat)."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.segments import Grouping
from benchcert.stats.hierarchical import domains as HD


def _former_counts(s, codes, k):
    grouping = Grouping(codes, k)
    ss = grouping.gather(s)
    obs = ~np.isnan(ss)
    n = grouping.reduce_sorted(obs)
    filled = np.fmax(ss, 0.0, out=ss)
    total = grouping.reduce_sorted(filled)
    binary = np.all(~obs | (filled == 0.0) | (filled == 1.0), axis=0)
    return n.astype(np.int64), total, binary


def _matrix(seed, n_items, n_models, k, *, shuffled):
    rng = np.random.default_rng(seed)
    codes = np.sort(rng.integers(0, k, n_items))
    codes[codes == k // 2] = k // 2 + 1  # a subject with no item
    if shuffled:
        codes = rng.permutation(codes)
    s = (rng.random((n_items, n_models)) < 0.6).astype(float)
    s[:, 1] = rng.random(n_items)  # fractional scores: float sums in a fixed order
    s[:, 2] = np.round(rng.random(n_items), 1)
    s[rng.random(s.shape) < 0.1] = np.nan
    s[:, 3] = np.where(np.isnan(s[:, 3]), np.nan, 1.0)
    return s, codes


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("n_items,k", [(3000, 40), (600, 200)])  # per-subject blocks; many small subjects
def test_counts_by_subject_equal_the_gathered_counts(shuffled, n_items, k):
    s, codes = _matrix(n_items + k, n_items, 9, k, shuffled=shuffled)
    before = s.copy()
    new = HD._counts(s, codes, k)
    old = _former_counts(s, codes, k)
    np.testing.assert_array_equal(s, before)  # the caller's matrix is left alone
    for a, b, name in zip(new, old, ("n", "total", "binary")):
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert not new[2][1] and new[2][0] and new[2][3]
    assert (new[0][k // 2] == 0).all()


def test_fit_domains_from_shared_counts_is_the_same_fit():
    """fit_domains(counts=subject_counts(...)) = fit_domains(...) field for field; counts of other
    scores are refused."""
    import dataclasses
    import warnings

    from benchcert.stats.degenerate import DegenerateDataWarning
    from benchcert.stats.subject_counts import subject_counts

    s, codes = _matrix(5, 2000, 6, 30, shuffled=True)
    doms = np.arange(30) % 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        a = HD.fit_domains(s, codes, doms, proxy_alpha=0.025)
        b = HD.fit_domains(s, codes, doms, proxy_alpha=0.025, counts=subject_counts(s, codes, 30))
    for f in dataclasses.fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=f.name)
        else:
            assert va == vb, f.name
    with pytest.raises(ValueError, match="counts must be the SubjectCounts"):
        HD.fit_domains(s, codes, doms, counts=subject_counts(s[:, :3], codes, 30))
