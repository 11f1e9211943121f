"""Split-half without the masked scatter (issue #15): when every (subject, model) cell is a binary,
splittable one, the table's draws are the chunk's half-A counts as they come (stats/diagnostics.py
_split_whole). Oracle: the former computation (draws scattered into a zero array through the
all-true cell mask), kept here; the results must be equal to the last bit, over several chunks."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats import diagnostics as D


def _former_whole(table, k, mdl, b, rng):
    # the chunk's split sums are then formed from these counts as for any other chunk
    a_sum = np.zeros((k, mdl, b))
    a_sum[np.ones((k, mdl), dtype=bool)] = table.draw(b, rng)
    return a_sum


def _scores(seed, n_models):
    rng = np.random.default_rng(seed)
    subj = np.sort(rng.integers(0, 30, 600))
    subj[:4] = [0, 0, 1, 1]  # every subject has >= 2 items
    p = rng.beta(2, 3, (30, n_models))
    return (rng.random((600, n_models)) < p[subj]).astype(float), subj, np.arange(30) % 4


@pytest.mark.parametrize("n_models", [1, 7, 12])
def test_draws_as_they_come_give_the_former_split_half_bit_for_bit(n_models, monkeypatch):
    s, subj, doms = _scores(n_models, n_models)
    out = {}
    for name in ("former", "new"):
        with monkeypatch.context() as mp:
            calls = []
            inner = _former_whole if name == "former" else D._split_whole
            mp.setattr(D, "_split_whole", lambda *a: calls.append(1) or inner(*a))
            out[name] = D.split_half(s, subj, doms, n_splits=200, rng=np.random.default_rng(4))
            assert calls  # the all-binary, all-splittable path was taken
    for f in ("corr", "sd", "n_valid", "n_subjects", "status", "negative"):
        np.testing.assert_array_equal(getattr(out["new"], f), getattr(out["former"], f), err_msg=f)
    assert np.isfinite(out["new"].corr).all()


def test_counts_from_the_domain_fits_change_nothing():
    """split_half(fits=fit_domains(...)) reuses the fits' subject counts: the same result, to the bit,
    on 0/1, fractional and missing scores; fits of other scores are refused."""
    from benchcert.stats.hierarchical import fit_domains

    s, subj, doms = _scores(3, 6)
    s[::7, 2] = np.nan
    s[:, 4] = np.random.default_rng(0).random(s.shape[0])
    fits = fit_domains(s, subj, doms)
    a = D.split_half(s, subj, doms, n_splits=50, rng=np.random.default_rng(1))
    b = D.split_half(s, subj, doms, n_splits=50, rng=np.random.default_rng(1), fits=fits)
    for f in ("corr", "sd", "n_valid", "n_subjects", "status", "negative", "n"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    with pytest.raises(ValueError, match="fits must be the DomainFits"):
        D.split_half(s[:, :3], subj, doms, n_splits=5, rng=np.random.default_rng(1), fits=fits)
