"""The hierarchical analysis' comparator intervals (the paper's Table 3 layout) come from one pass
over the matrix for both scores (issue #15): comparator_intervals_both must give, field for field
and to the last bit, what two comparator_intervals calls give, warnings included, on 0/1,
fractional and missing scores, one-item subjects and a model that skipped a subject."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from benchcert.stats.comparator_intervals import comparator_intervals, comparator_intervals_both, comparator_intervals_counts


def _matrix(seed, fractional):
    rng = np.random.default_rng(seed)
    subj = np.sort(rng.integers(0, 12, 300))
    subj[:1] = 12  # a one-item subject
    p = rng.beta(2, 2, (13, 9))
    s = (rng.random((300, 9)) < p[subj]).astype(float)
    if fractional:
        s[:, 2] = rng.random(300)
    s[rng.random(s.shape) < 0.1] = np.nan
    s[subj == 4, 5] = np.nan
    s[:, 7] = 1.0  # every item right: zero-width iid interval (warned)
    return s, subj


@pytest.mark.parametrize("seed,fractional", [(0, False), (1, True)])
def test_both_scores_from_one_pass_equal_two_calls(seed, fractional):
    s, subj = _matrix(seed, fractional)
    with warnings.catch_warnings(record=True) as w_two:
        warnings.simplefilter("always")
        two = {w: comparator_intervals(s, subj, weighting=w, alpha=0.1) for w in ("macro", "pooled")}
    with warnings.catch_warnings(record=True) as w_one:
        warnings.simplefilter("always")
        one = comparator_intervals_both(s, subj, alpha=0.1)
    assert [str(w.message) for w in w_one] == [str(w.message) for w in w_two] and w_two
    assert list(one) == ["macro", "pooled"]
    for weighting in two:
        assert one[weighting].keys() == two[weighting].keys()
        for method, r in two[weighting].items():
            for f in dataclasses.fields(r):
                a, b = getattr(one[weighting][method], f.name), getattr(r, f.name)
                if isinstance(b, np.ndarray):
                    np.testing.assert_array_equal(a, b, err_msg=f"{weighting} {method} {f.name}")
                else:
                    assert a == b, (weighting, method, f.name)


@pytest.mark.parametrize("seed", [2, 3])
def test_counts_give_the_matrix_intervals_bit_for_bit(seed):
    """comparator_intervals_counts (per-subject counts of 0/1 scores, as fit_domains keeps them) gives
    iid_clt, wilson and clustered_subject of both scores exactly as comparator_intervals_both does
    from the matrix, missing cells and a skipped subject included."""
    from benchcert.stats.hierarchical import fit_domains

    s, subj = _matrix(seed, fractional=False)
    fits = fit_domains(s, subj)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = comparator_intervals_both(s, subj, alpha=0.1)
        got = comparator_intervals_counts(fits.n, fits.total, alpha=0.1)
    for weighting in ("macro", "pooled"):
        assert set(got[weighting]) == {"iid_clt", "wilson", "clustered_subject"}
        for method, r in got[weighting].items():
            for f in dataclasses.fields(r):
                a, b = getattr(r, f.name), getattr(ref[weighting][method], f.name)
                if isinstance(b, np.ndarray):
                    np.testing.assert_array_equal(a, b, err_msg=f"{weighting} {method} {f.name}")
                else:
                    assert a == b, (weighting, method, f.name)
    with pytest.raises(ValueError, match="whole numbers"):
        comparator_intervals_counts(fits.n, fits.total + 0.5)
