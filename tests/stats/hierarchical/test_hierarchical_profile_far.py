"""The profile grid's far points (issue #27): a grid point below a point whose profile deviance is
surely above the fit's critical value is first bounded from one evaluation (the tangent of the
log-likelihood, concave in the mean at fixed a + b) and not maximised when that bound already
puts it above (stats/hierarchical/profile.py _profile_grid, _far_points).

What must hold: (1) every such bound is an upper bound on the exact profile log-likelihood
(the maximised one, without the shortcut), so the deviance kept is a lower bound, above the
threshold; (2) nu_lower, s2_upper, the fits and the joint bounds' half-widths equal the full
search's to the last bit (the points the bounds read are all maximised as before), on fits with
missing cells, 1-item subjects, under-dispersed and boundary domains and fractional scores;
(3) the profile deviances equal the full search's wherever either end of an interval is within
the threshold, and are lower bounds above it elsewhere.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import benchcert.stats.hierarchical as H
from benchcert.stats.hierarchical import fit as HF, likelihood as HL, profile as HP
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats._dist import norm


def _rows(seed, n=40, k=12):
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 60, (n, k)).astype(float)
    m[2:n // 2] = rng.integers(1, 8, (n // 2 - 2, k))  # few items per subject: the count form
    m[rng.random((n, k)) < 0.2] = 0.0
    m[:, 0] = np.maximum(m[:, 0], 2)
    m[:, 1] = np.maximum(m[:, 1], 2)
    mean = rng.uniform(0.05, 0.95, (n, 1))
    nu = 10 ** rng.uniform(-0.5, 3.5, (n, 1))
    y = rng.binomial(m.astype(int), rng.beta(mean * nu, (1 - mean) * nu, (n, k))).astype(float)
    m[0, :4], y[0, :4] = 5.0, 0.0  # all wrong: boundary, not profiled
    m[1, :6], y[1, :6] = 8.0, 4.0  # every subject half right: under-dispersed
    m[1, 6:], y[1, 6:] = 0.0, 0.0
    return y, m


def _no_shortcut(form, t_hat, w_hat, *, ll_hat=None, far=None):
    return _FULL(form, t_hat, w_hat)


_FULL = HP._profile_grid


def _fit(y, m, monkeypatch, *, full, alpha=0.01):
    with monkeypatch.context() as mp:
        if full:
            mp.setattr(HP, "_profile_grid", _no_shortcut)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            return H.fit_beta_binomial(y, m, upper_alpha=alpha)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_far_points_leave_the_bounds_unchanged_to_the_bit(seed, monkeypatch):
    y, m = _rows(seed)
    new, old = _fit(y, m, monkeypatch, full=False), _fit(y, m, monkeypatch, full=True)
    for f in ("a", "b", "nu", "mean", "s2", "loglik", "status", "nu_lower", "s2_upper"):
        np.testing.assert_array_equal(getattr(new, f), getattr(old, f), err_msg=f)
    far = float(norm.isf(0.01)) ** 2 * (1.0 + 2.0 / HP._BUDGET_BINS) + 1e-9
    near = old.profile <= far
    np.testing.assert_array_equal(new.profile[near], old.profile[near])
    hi = ~near & np.isfinite(old.profile)
    assert hi.sum() > 1000  # most of the grid is far from the maximum: the shortcut is exercised
    # (a point maximised after a bounded one starts elsewhere: the same maximum to rounding)
    assert np.all(new.profile[hi] > far) and np.all(new.profile[hi] <= old.profile[hi] * (1 + 1e-12) + 1e-12)
    assert (new.profile[hi] < old.profile[hi]).mean() > 0.5


def test_far_points_in_the_audit_path_give_the_same_intervals(monkeypatch):
    """fit_domains + hierarchical_bound (joint bound at the fits' proxy level) on a matrix with missing
    answers and a fractional-score model: every fit, bound and half-width to the last bit."""
    rng = np.random.default_rng(7)
    subj = np.repeat(np.arange(24), rng.integers(3, 40, 24))
    doms = np.arange(24) % 5
    p = rng.beta(2, 2, (24, 9))
    s = (rng.random((subj.size, 9)) < p[subj]).astype(float)
    s[rng.random(s.shape) < 0.1] = np.nan
    s[:, 8] = rng.random(subj.size)
    out = {}
    for full in (False, True):
        with monkeypatch.context() as mp:
            if full:
                mp.setattr(HP, "_profile_grid", _no_shortcut)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                fits = H.fit_domains(s, subj, doms, proxy_alpha=0.025)
                means = np.nan_to_num(fits.subject_means, nan=0.0)
                out[full] = fits, {w: H.hierarchical_bound(means, fits.n, doms, fits.s2_upper, weights=w, alpha=0.05,
                                                           proxy_alpha=0.025, profile=fits.profile)
                                   for w in ("macro", "pooled")}
    (f_new, b_new), (f_old, b_old) = out[False], out[True]
    for f in ("nu_lower", "s2_upper", "a", "b", "loglik"):
        np.testing.assert_array_equal(getattr(f_new, f), getattr(f_old, f), err_msg=f)
    for w in b_new:
        for f in ("half_width", "sigma2_subj", "lower", "upper"):
            np.testing.assert_array_equal(getattr(b_new[w], f), getattr(b_old[w], f), err_msg=(w, f))
    assert not np.array_equal(f_new.profile, f_old.profile)  # the shortcut was taken


def _fit_and_lik(y, m):
    """The beta-binomial fits of the rows, the rows that fitted, and their likelihood (subjects with
    no item masked)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit = H.fit_beta_binomial(y, m)
    rows = np.flatnonzero(fit.status == "ok")
    mask = m[rows] > 0
    return fit, rows, HL._BetaBinomialLik(np.where(mask, y[rows], 0.0), np.where(mask, m[rows], 1.0), mask)


def test_far_bound_is_above_the_exact_profile_likelihood():
    """(1) on the grid itself, with every form of the profile (counts, per subject, subject means)."""
    y, m = _rows(3, n=30)
    fit, rows, lik = _fit_and_lik(y, m)
    x = np.random.default_rng(4).beta(3.0, 2.0, (12, 7))
    mk = np.ones(x.shape, dtype=bool)
    means = HF._fit_means_rows(x, mk, (12,), 2)
    forms = [(f, fit.mean[rows][sel], fit.nu[rows][sel]) for sel, f in HP._profile_forms(lik)]
    blik = HL._BetaLik(x, mk)
    forms.append((HP._MeansProfile(blik.s1, blik.s2, blik.k), means.mean, means.nu))
    kinds = set()
    for form, mean, nu in forms:
        t_hat, w_hat = np.log(mean / (1 - mean)), np.log(nu)
        lp_full, _ = HP._profile_grid(form, t_hat, w_hat)
        ll_hat = np.max(lp_full, axis=0)  # the top of the exact profile
        far = np.full(t_hat.size, 9.0)
        lp, _ = HP._profile_grid(form, t_hat, w_hat, ll_hat=ll_hat, far=far)
        fin = np.isfinite(lp_full)
        np.testing.assert_array_equal(np.isfinite(lp), fin)
        moved = fin & (lp > lp_full + 1e-9 * (1.0 + np.abs(lp_full)))
        # a bound is never below the maximum (a point maximised from another start: to rounding)
        assert np.all(lp[fin] >= lp_full[fin] - 1e-12 * (1.0 + np.abs(lp_full[fin])))
        assert np.all(2.0 * (ll_hat[None, :] - lp)[moved] > 9.0)
        if moved.any():
            kinds.add(type(form).__name__)
    assert {"_CountProfile", "_SubjectProfile", "_MeansProfile"} <= kinds


@pytest.mark.parametrize("seed", [0, 1])
def test_range_bound_is_above_the_profile_over_its_whole_range(seed):
    """_CountProfile.range_bound and _SubjectProfile.range_bound (the same bound from counts per j or per
    subject) are >= the exact profile log-likelihood at every grid point of [nu_lo, nu_hi], and far
    below the maximum where a + b is small (the ranges the grid walk then bounds at once)."""
    y, m = _rows(seed, n=40)
    fit, rows, lik = _fit_and_lik(y, m)
    g = HP._W_GRID
    kinds = set()
    for sel, form in HP._profile_forms(lik):
        kinds.add(type(form).__name__)
        other = (HP._SubjectProfile if isinstance(form, HP._CountProfile) else HP._CountProfile).from_counts(
            lik.y[sel], lik.m[sel], lik.mask[sel])
        t_hat, w_hat = np.log(fit.mean[rows][sel] / (1 - fit.mean[rows][sel])), np.log(fit.nu[rows][sel])
        lp, _ = HP._profile_grid(form, t_hat, w_hat)
        top = np.max(lp, axis=0)
        for lo in range(0, g.size, HP._RANGE_POINTS):
            hi = min(lo + HP._RANGE_POINTS - 1, g.size - 1)
            ub = form.range_bound(np.exp(g[lo]), np.exp(g[hi]))
            np.testing.assert_allclose(other.range_bound(np.exp(g[lo]), np.exp(g[hi])), ub, rtol=1e-10, atol=1e-6)
            seg = lp[lo:hi + 1]
            assert np.all(np.where(np.isfinite(seg), ub[None, :] - seg, 1.0) > 0), lo
        assert np.median(2.0 * (top - form.range_bound(np.exp(g[0]), np.exp(g[7])))) > 30.0
    assert kinds == {"_CountProfile", "_SubjectProfile"}


@pytest.mark.parametrize("d", [2, 5])
def test_joint_bound_tries_only_useful_intervals_and_equals_the_former_one(d):
    """joint_subject_bound skips an interval costing no less than a lower interval (issue #27): the
    same bound to the last bit as the former knapsack over every affordable interval (kept in
    tests/stats/hierarchical/_hierarchical_profile_former.py), on deviance curves of any shape: unimodal, flat
    (many affordable intervals) and random."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import _hierarchical_profile_former as former

    rng = np.random.default_rng(10 + d)
    mdl, gi = 31, HP._W_GRID.size - 1
    centre = rng.integers(10, gi, (d, mdl, 1))
    unimodal = np.abs(np.arange(gi)[None, None, :] - centre) * rng.uniform(0.01, 1.0, (d, mdl, 1))
    rand = rng.uniform(0.0, 6.0, (d, mdl, gi))
    for prof in (unimodal, rand, np.minimum(unimodal, rand)):
        prof = prof.copy()
        prof[..., :3] = np.inf
        prof[rng.random((d, mdl)) < 0.1] = np.inf
        a2 = rng.uniform(0, 0.05, (d, mdl))
        a2[rng.random((d, mdl)) < 0.1] = 0.0
        for alpha in (0.02, 0.2):
            np.testing.assert_array_equal(H.joint_subject_bound(prof, a2, alpha=alpha),
                                          former.joint_subject_bound(prof, a2, alpha=alpha))


@pytest.mark.parametrize("per", [1, 2, 7])
def test_joint_bound_in_blocks_of_models_equals_the_whole(per, monkeypatch):
    """joint_subject_bound takes the models a block at a time (issue #40: its (D, M, G - 1) temporaries
    were 0.5 GB each at 50,000 models); blocks of any width, a last block of one model included, give
    the whole computation's bound to the last bit (ten domains: a one-model block's sum over domains
    would be a pairwise one, were the worst-case base summed per block)."""
    rng = np.random.default_rng(40 + per)
    d, mdl, gi = 10, 31, HP._W_GRID.size - 1
    prof = rng.uniform(0.0, 6.0, (d, mdl, gi))
    prof[..., :3] = np.inf
    prof[rng.random((d, mdl)) < 0.8] = np.inf  # mostly worst-case domains: a base summed over many
    a2 = rng.uniform(0, 0.05, (d, mdl)) * 10.0 ** rng.uniform(-4, 0, (d, mdl))
    whole = H.joint_subject_bound(prof, a2, alpha=0.05)
    monkeypatch.setattr(HP, "_KNAPSACK_CELLS", per * d * gi)
    np.testing.assert_array_equal(H.joint_subject_bound(prof, a2, alpha=0.05), whole)


@pytest.mark.parametrize("per", [1, 3, 17])
def test_fits_in_blocks_of_rows_equal_one_batch(per, monkeypatch):
    """The multi-start maximisation takes the fits a block at a time (issue #40: one batch of 500,000
    fits held about 5 GB of temporaries); blocks of any size give one batch's fits, bounds and
    profiles to the last bit: binary and fractional scores, missing cells, unequal domains."""
    from benchcert.stats.hierarchical import likelihood as HLK

    rng = np.random.default_rng(per)
    items, mdl = 240, 23
    subjects = rng.integers(0, 24, items)
    doms = np.arange(24) % 5
    for frac in (False, True):
        scores = (rng.random((items, mdl)) < rng.uniform(0.2, 0.9, (1, mdl))).astype(float)
        if frac:
            scores[:, ::3] = rng.random((items, (mdl + 2) // 3))
        scores[rng.random(scores.shape) < 0.05] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            whole = H.fit_domains(scores, subjects, doms, proxy_alpha=0.01)
            monkeypatch.setattr(HLK, "_START_CELLS", per * 5)
            blocked = H.fit_domains(scores, subjects, doms, proxy_alpha=0.01)
            monkeypatch.undo()
        for f in ("a", "b", "nu", "loglik", "nu_lower", "s2_upper", "profile", "converged"):
            np.testing.assert_array_equal(getattr(blocked, f), getattr(whole, f), err_msg=f)
