"""The 2PL fit (stats/irt.py): it recovers simulated slopes and difficulties, gives a swapped key a
negative slope, leaves out inert and thinly answered items, and refuses fractional scores."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.irt import MIN_MODELS, fit_2pl
from item_sim import two_pl


def test_recovers_slopes_and_difficulties_with_many_models():
    rng = np.random.default_rng(11)
    x, swapped, a, b, theta = two_pl(rng, n_models=400, n_items=150, n_swapped=5)
    fit = fit_2pl(x)
    assert fit.converged
    ok = fit.fitted & ~swapped
    assert np.corrcoef(fit.a[ok], a[ok])[0, 1] > 0.85
    assert np.corrcoef(fit.b[ok], b[ok])[0, 1] > 0.95
    assert (fit.a[swapped] < 0).all()
    assert np.corrcoef(fit.theta, theta)[0, 1] > 0.95


def test_leaves_out_inert_and_thin_items_and_handles_missing():
    rng = np.random.default_rng(12)
    x, *_ = two_pl(rng, n_models=60, n_items=80, n_swapped=0, missing=0.1)
    x[0] = 1.0
    x[1, MIN_MODELS - 2:] = np.nan
    fit = fit_2pl(x)
    assert not fit.fitted[0] and not fit.fitted[1] and np.isnan(fit.a[:2]).all()
    assert np.isfinite(fit.a[fit.fitted]).all()


def test_refuses_fractional_scores():
    with pytest.raises(ValueError, match="0/1"):
        fit_2pl(np.full((5, 30), 0.5))
