"""Oracle tests: the profile-likelihood bound on a + b (issue #15's second speed-up) against the
former search and against brute force.

stats/hierarchical/profile.py's upper bound on the subject proxy needs, for every domain fit, the
profile log-likelihood l_p(w) = max over the mean of l at w = log(a + b) on a grid of 116
values, and the crossing of the profile deviance with z^2. The former search
(tests/stats/hierarchical/_hierarchical_profile_former.py, verbatim) maximised every grid point from the fit's
own mean by a safeguarded Newton stopping at 1e-7 and refined the crossing by 30 bisections;
the new one walks the grid from the maximum down (each maximiser starting the next), stops
Newton on a decrement of 1e-9, evaluates the likelihood through count statistics where they
are cheaper, and refines the crossing by Illinois regula falsi to 1e-9 (2e-11 before issue #40).

What must hold: (1) every profile log-likelihood is the exact maximum over the mean (brute
force: a bounded scalar search on scipy's betaln) to 1e-9, and never below the former one by
more than rounding, i.e. any change moves towards the exact maximiser; (2) nu_lower is, to
1e-9 in log(a + b), the exact crossing (brute-force root of the brute-force deviance), on its
outside (conservative) side, and no farther from it than the former bound; (3) every output
of the fits equals the former one to that tolerance, on random fits with fractional scores
(Beta fit on subject means), missing cells (padding), 1-item subjects, under-dispersed
domains and all-0 / all-1 fits (not profiled: both give the worst case). Issue #27: the profile
deviances of grid points surely beyond the fit's critical value are lower bounds above it (see
tests/stats/hierarchical/test_hierarchical_profile_far.py), so they are compared as such.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar
from scipy.special import betaln

import benchcert.stats.hierarchical as H
from benchcert.stats.hierarchical import fit as HF, likelihood as HL, limits as HLim, profile as HP, special as HS
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats._dist import norm

sys.path.insert(0, str(Path(__file__).parent))
import _hierarchical_profile_former as former  # noqa: E402


def _binary_rows(rng, n, k, m_max, *, single=False, missing=0.0):
    m = rng.integers(1 if single else 2, m_max + 1, (n, k)).astype(float)
    if single:
        m[:, : k // 2] = 1.0
    m[rng.random((n, k)) < missing] = 0.0
    mean = rng.uniform(0.05, 0.95, (n, 1))
    nu = 10 ** rng.uniform(-0.5, 3.0, (n, 1))
    p = rng.beta(mean * nu, (1 - mean) * nu, (n, k))
    y = rng.binomial(m.astype(int), p).astype(float)
    return y, m


def _cases(seed):
    rng = np.random.default_rng(seed)
    ys, ms = [], []
    for k, m_max, kw in [(4, 3, {}), (12, 10, {"missing": 0.2}), (6, 40, {"single": True}),
                         (3, 300, {}), (9, 25, {"missing": 0.3, "single": True})]:
        y, m = _binary_rows(rng, 10, k, m_max, **kw)
        pad = np.zeros((y.shape[0], 12 - k))
        ys.append(np.hstack([y, pad]))
        ms.append(np.hstack([m, pad]))
    y, m = np.vstack(ys), np.vstack(ms)
    m[0, :4], y[0, :4] = 5.0, 0.0  # all wrong: boundary, not profiled
    m[1, :4], y[1, :4] = 5.0, 5.0  # all right
    m[2, :6], y[2, :6] = 8.0, 4.0  # every subject half right: under-dispersed
    m[2, 6:] = 0.0
    return y, m


def _fit(y, m, monkeypatch, *, old):
    with monkeypatch.context() as mp:
        if old:
            mp.setattr(HF, "_upper_proxy", former.upper_proxy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            return H.fit_beta_binomial(y, m, upper_alpha=0.01)


def _brute_profile(y, m, mean_fit_loglik_const):
    """l_p(w) by brute force for one binary fit: a bounded search over t = logit(mean)."""
    mask = m > 0
    yy, ff = y[mask], (m - y)[mask]

    def ll(t, w):
        mu = 0.5 * (1.0 + np.tanh(0.5 * t))
        nu = np.exp(w)
        a, b = mu * nu, (1.0 - mu) * nu
        return float(np.sum(betaln(yy + a, ff + b) - betaln(a, b))) + mean_fit_loglik_const

    def lp(w):
        grid = np.linspace(-25, 25, 501)
        vals = [ll(t, w) for t in grid]
        i = int(np.argmax(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        res = minimize_scalar(lambda t: -ll(t, w), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-12, "maxiter": 500})
        return max(-res.fun, vals[i])

    return lp


def _assert_profiles_agree(new, old, upper_alpha):
    """Equal to 1e-6 where the deviance is within the fit's far threshold (issue #27: beyond it a grid
    point may hold a bound from one evaluation, tests/stats/hierarchical/test_hierarchical_profile_far.py), and a
    lower bound above the threshold elsewhere."""
    fin = np.isfinite(old)
    np.testing.assert_array_equal(np.isfinite(new), fin)
    far = float(norm.isf(upper_alpha)) ** 2 * (1.0 + 2.0 / HP._BUDGET_BINS) + 1e-9
    near = fin & (old <= far)
    np.testing.assert_allclose(new[near], old[near], rtol=1e-6, atol=1e-6)
    hi = fin & ~near
    assert np.all(new[hi] > far) and np.all(new[hi] <= old[hi] * (1 + 1e-6) + 1e-6)


def _const(y, m):
    from scipy.special import gammaln

    mask = m > 0
    return float(np.sum((gammaln(m + 1) - gammaln(y + 1) - gammaln(m - y + 1))[mask]))


@pytest.mark.parametrize("seed", [0, 1])
def test_profile_bound_matches_the_former_search_and_brute_force(seed, monkeypatch):
    y, m = _cases(seed)
    new = _fit(y, m, monkeypatch, old=False)
    old = _fit(y, m, monkeypatch, old=True)
    np.testing.assert_array_equal(new.status, old.status)
    assert {"ok", "boundary_mean", "underdispersed"} <= set(new.status)
    for f in ("a", "b", "nu", "mean", "s2", "loglik"):  # the fits themselves are untouched
        np.testing.assert_array_equal(getattr(new, f), getattr(old, f), err_msg=f)
    _assert_profiles_agree(new.profile, old.profile, 0.01)
    np.testing.assert_allclose(np.log(np.maximum(new.nu_lower, 1e-300)), np.log(np.maximum(old.nu_lower, 1e-300)),
                               rtol=0, atol=1e-7)
    np.testing.assert_allclose(new.s2_upper, old.s2_upper, rtol=1e-7)

    crit = float(norm.isf(0.01)) ** 2
    checked = 0
    for r in np.flatnonzero(np.isin(new.status, ["ok", "underdispersed"])):
        lp = _brute_profile(y[r], m[r], _const(y[r], m[r]))
        top = max(float(new.loglik[r]), lp(float(np.log(new.nu[r]))))
        w_new, w_old = float(np.log(new.nu_lower[r])), float(np.log(old.nu_lower[r]))
        if w_new <= HLim._LOG_NU_MIN + 1e-9:
            continue  # no crossing above a + b = 1e-4: both report the bottom of the grid
        # (2) the exact crossing, by brentq on the brute-force deviance
        f = lambda w: 2.0 * (top - lp(w)) - crit  # noqa: E731
        root = brentq(f, w_new - 1e-3, min(w_new + 0.3, float(np.log(new.nu[r]))), xtol=1e-13)
        # Rounding: log-likelihoods at a + b near the 1e6 cap (under-dispersed fits) are sums of
        # log B terms of size ~1e6, so the brute-force deviance itself is only good to ~1e-8 there.
        flat = new.status[r] == "underdispersed"
        # Otherwise the new bracket closes to _W_TOL, 1e-9 (the former bisection to 1.9e-10).
        tol_w, tol_dev = (5e-9, 2e-8) if flat else (HP._W_TOL + 1e-12, 1e-10)
        assert f(w_new) >= -tol_dev, (r, f(w_new))  # on the outside (conservative) side
        assert abs(w_new - root) <= tol_w, (r, w_new, root)
        assert abs(w_new - root) <= abs(w_old - root) + tol_w, (r, w_new, w_old, root)
        checked += 1
    assert checked >= 15


def test_grid_profile_is_the_exact_maximum_over_the_mean(monkeypatch):
    """(1): at every grid point below the fit, new l_p >= former l_p - 1e-11 (towards the exact
    maximiser) and |new l_p - brute force| <= 1e-9."""
    y, m = _cases(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit = H.fit_beta_binomial(y, m)
    rows = np.flatnonzero(fit.status == "ok")[::3]
    mask = m[rows] > 0
    lik = HL._BetaBinomialLik(np.where(mask, y[rows], 0.0), np.where(mask, m[rows], 1.0), mask)
    t_hat = np.log(fit.mean[rows] / (1 - fit.mean[rows]))
    w_hat = np.log(fit.nu[rows])
    new_lp = np.full((HP._W_GRID.size, rows.size), -np.inf)
    for sel, form in HP._profile_forms(lik):
        new_lp[:, sel] = HP._profile_grid(form, t_hat[sel], w_hat[sel])[0]
    n_forms = {type(f).__name__ for _, f in HP._profile_forms(lik)}
    assert n_forms == {"_CountProfile", "_SubjectProfile"}  # both evaluations are exercised
    step = HP._W_GRID[1] - HP._W_GRID[0]
    jj, ff = np.nonzero(HP._W_GRID[:, None] <= w_hat[None, :] + step)
    np.testing.assert_array_equal(np.isfinite(new_lp), np.isin(np.arange(new_lp.size).reshape(new_lp.shape),
                                                                 np.ravel_multi_index((jj, ff), new_lp.shape)))
    flik = former._former(lik)
    _, old_v = former._max_over_mean(former._subset(flik, ff), t_hat[ff], HP._W_GRID[jj])
    assert np.all(new_lp[jj, ff] >= old_v - 1e-11 * np.maximum(1.0, np.abs(old_v)))
    for i in range(0, jj.size, 7):
        r = rows[ff[i]]
        lp = _brute_profile(y[r], m[r], 0.0)
        assert abs(new_lp[jj[i], ff[i]] - lp(HP._W_GRID[jj[i]])) <= 1e-9 * max(1.0, abs(lp(HP._W_GRID[jj[i]]))), i


def test_beta_means_profile_matches_the_former_search(monkeypatch):
    """Fractional scores: the Beta fit on subject means (its profile through sufficient statistics)."""
    rng = np.random.default_rng(5)
    x = rng.beta(rng.uniform(0.5, 20, (40, 1)), rng.uniform(0.5, 20, (40, 1)), (40, 8))
    x[rng.random(x.shape) < 0.2] = np.nan
    x[0] = 0.4  # all equal: under-dispersed
    x[1, :] = np.nan
    x[1, 0] = 0.3  # one subject: worst case
    out = {}
    for old in (False, True):
        with monkeypatch.context() as mp:
            if old:
                mp.setattr(HF, "_upper_proxy", former.upper_proxy)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                mk = ~np.isnan(x)
                out[old] = HF._fit_means_rows(x, mk, (x.shape[0],), 2, upper_alpha=np.full(x.shape[0], 0.01))
    new, old = out[False], out[True]
    np.testing.assert_array_equal(new.status, old.status)
    _assert_profiles_agree(new.profile, old.profile, 0.01)
    np.testing.assert_allclose(new.s2_upper, old.s2_upper, rtol=1e-7)


def test_profile_of_a_fit_does_not_depend_on_its_batch():
    """Every fit is computed on its own: a fit alone, or in any batch, chunked or not, gives the
    same bits (what the per-model blocks of the Dask audit rely on)."""
    y, m = _cases(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        whole = H.fit_beta_binomial(y, m, upper_alpha=0.01)
        for r in (3, 17, 33):
            one = H.fit_beta_binomial(y[r], m[r], upper_alpha=0.01)
            assert one.nu_lower == whole.nu_lower[r]
            np.testing.assert_array_equal(one.profile, whole.profile[r])
        part = H.fit_beta_binomial(y[10:30:3], m[10:30:3], upper_alpha=0.01)
        np.testing.assert_array_equal(part.nu_lower, whole.nu_lower[10:30:3])
        np.testing.assert_array_equal(part.profile, whole.profile[10:30:3])


@pytest.mark.parametrize("d", [1, 4])
def test_joint_bound_knapsack_equals_the_former_one(d):
    """joint_subject_bound's knapsack reads each model's shifted budget row as one window of a
    padded copy; the former one indexed every bin: equal to the last bit (the same values are
    picked and added)."""
    rng = np.random.default_rng(d)
    mdl, gi = 23, HP._W_GRID.size - 1
    # unimodal deviance curves around a per-fit maximum, some beyond the budget, some fits worst-case
    centre = rng.integers(20, gi, (d, mdl, 1))
    prof = np.abs(np.arange(gi)[None, None, :] - centre) * rng.uniform(0.05, 3.0, (d, mdl, 1))
    prof[..., :5] = np.inf
    prof[rng.random((d, mdl)) < 0.15] = np.inf
    a2 = rng.uniform(0, 0.05, (d, mdl))
    a2[rng.random((d, mdl)) < 0.1] = 0.0
    new = H.joint_subject_bound(prof, a2, alpha=0.02)
    old = former.joint_subject_bound(prof, a2, alpha=0.02)
    np.testing.assert_array_equal(new, old)
    assert np.isfinite(new).all() and len(np.unique(new)) > mdl // 2


def test_rough_trigamma_is_within_its_stated_accuracy():
    """The profile search's Newton steps use trigamma to 2e-8 (reference: scipy's polygamma(1, x)),
    over the whole range of arguments a + j the search meets (a + b from 1e-4 to 1e6)."""
    from scipy.special import polygamma

    rng = np.random.default_rng(6)
    x = np.concatenate([10 ** rng.uniform(-10, 7, 100_000), np.arange(0.25, 60.25, 0.25)])
    rel = np.abs(HS._trigamma_rough(x) / polygamma(1, x) - 1.0)
    assert rel.max() < 2e-8
    np.testing.assert_array_equal(HS._trigamma_rough(x.reshape(-1, 4).T), HS._trigamma_rough(x).reshape(-1, 4).T)
