"""The compiled trigamma kernels (stats/hierarchical/compiled.py, issue #40) give the numpy
forms' bits, so a fit's results do not depend on which form a process runs.

A kernel that reordered or fused one operation would differ in the last bit on some of the
hundreds of thousands of values below (every lift length 0..floor, the series' whole range,
subnormal, huge and special values), and the fits compared at the end would then differ too.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from benchcert.stats.hierarchical import fit as HF, special as HS

kernels = pytest.importorskip("benchcert.stats.hierarchical.compiled")


def _values():
    rng = np.random.default_rng(40)
    return np.concatenate([
        rng.uniform(1e-6, 12.0, 100_000),  # every length of the lift by the recurrence
        rng.uniform(5.0, 200.0, 100_000),  # the counts Y_k + a of a fit
        10.0 ** rng.uniform(-300, 300, 20_000),
        np.arange(0.0, 64.0), np.arange(0.0, 64.0) + 1e-12, np.nextafter(np.arange(1.0, 13.0), 0.0),
        [-3.5, -1.0, 5e-324, 1e-300, 1e300, np.inf, np.nan],
    ])


@pytest.fixture
def numpy_forms(monkeypatch):
    """special's numpy forms, whatever an earlier test of this process loaded."""
    monkeypatch.setitem(HS._kernels, "module", None)


@pytest.mark.parametrize("name, numpy_form", [("trigamma", "_trigamma"), ("trigamma_rough", "_trigamma_rough")])
def test_kernel_gives_the_numpy_forms_bits(numpy_forms, name, numpy_form):
    x = _values()
    with np.errstate(all="ignore"):
        expected = getattr(HS, numpy_form)(x)
        got = getattr(kernels, name)(x)
        got_2d = getattr(kernels, name)(x[:219_000].reshape(-1, 3).T)  # non-contiguous
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_2d, expected[:219_000].reshape(-1, 3).T)


def test_prepare_compiled_waits_for_enough_cells(monkeypatch):
    """Without numba running, the fitting calls start the kernels once their cells add up to
    _COMPILED_MIN_CELLS; with it, to _COMPILED_WARM_CELLS."""
    for running, least in ((False, HS._COMPILED_MIN_CELLS), (True, HS._COMPILED_WARM_CELLS)):
        monkeypatch.setitem(HS._kernels, "module", None)
        monkeypatch.setitem(HS._kernels, "unavailable", None)
        monkeypatch.setitem(HS._kernels, "cells", 0)
        monkeypatch.setattr(HS, "sys", types.SimpleNamespace(modules={"numba": None} if running else {}))
        assert not HS.prepare_compiled(least // 2)
        assert not HS.prepare_compiled(least // 2 - 1)
        assert HS._kernels["module"] is None
        assert HS.prepare_compiled(1)  # the calls' cells add up
        assert HS._kernels["module"] is kernels
    x = np.linspace(0.01, 50.0, 1001)
    np.testing.assert_array_equal(HS._trigamma(x), kernels.trigamma(x))


def test_fits_and_bounds_are_the_same_bits_compiled_or_not(monkeypatch):
    rng = np.random.default_rng(7)
    m = rng.integers(0, 40, (300, 12)).astype(float)
    m[:5] = 0.0  # fallbacks
    y = rng.binomial(m.astype(int), rng.beta(2.0, 3.0, (300, 1))).astype(float)
    y[10] = m[10]  # all correct
    means = np.where(m > 0, (y + 0.3) / (m + 1.0), np.nan)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bb = HF.fit_beta_binomial(y, m, upper_alpha=0.01)
            bm = HF._fit_means_rows(means, ~np.isnan(means), (300,), 2, upper_alpha=np.full(300, 0.01))
        return bb, bm

    monkeypatch.setitem(HS._kernels, "module", None)
    monkeypatch.setitem(HS._kernels, "unavailable", "forced off for this test")
    plain = run()
    monkeypatch.setitem(HS._kernels, "module", kernels)
    compiled = run()
    for p, c in zip(plain, compiled):
        for field in ("a", "b", "nu", "mean", "loglik", "nu_lower", "s2_upper", "profile"):
            np.testing.assert_array_equal(getattr(c, field), getattr(p, field), err_msg=field)


def test_knapsack_gives_the_numpy_loops_bits(monkeypatch):
    """joint_subject_bound with the compiled knapsack (one model at a time) against the numpy loop over
    domains and grid intervals, on profiles with worst-case domains, unanswered domains, unaffordable
    and free intervals, over several blocks of models."""
    from benchcert.stats.hierarchical import profile as HP

    rng = np.random.default_rng(11)
    d, mdl, gi = 6, 900, HP._W_GRID.size - 1
    w_hat = rng.uniform(-2.0, 8.0, (d, mdl, 1))
    prof = np.maximum(0.0, 3.0 * (HP._W_GRID[None, None, :-1] - w_hat) ** 2 * rng.uniform(0.2, 3.0, (d, mdl, 1)))
    prof[rng.random((d, mdl, gi)) < 0.05] = np.inf
    prof[0, :40] = np.inf  # worst-case domains
    a2 = rng.uniform(0.0, 0.3, (d, mdl))
    a2[1, 40:80] = 0.0  # unanswered
    monkeypatch.setattr(HP, "_KNAPSACK_CELLS", d * gi * 250)  # four blocks
    monkeypatch.setitem(HS._kernels, "module", None)
    plain = HP.joint_subject_bound(prof, a2, alpha=0.01)
    monkeypatch.setitem(HS._kernels, "module", kernels)
    compiled = HP.joint_subject_bound(prof, a2, alpha=0.01)
    np.testing.assert_array_equal(compiled, plain)
    assert np.ptp(plain) > 0.1  # the bounds differ between models: the test reads every model's own


@pytest.mark.parametrize("k", [1, 2, 20, 70])
def test_subject_profile_kernels_give_the_numpy_forms_bits(monkeypatch, k):
    """_SubjectProfile's value, const and mean slope by the one-pass kernel (scipy's own gammaln and psi,
    the rows added in order) against its numpy forms: counts of 0 to 500, a and b from 1e-6 to 1e6,
    one subject (a single row) and more columns than _colsum's loop threshold."""
    from benchcert.stats.hierarchical import profile as HP

    rng = np.random.default_rng(k)
    f_cols = 150
    m = rng.integers(0, 500, (f_cols, k)).astype(float)
    y = np.floor(m * rng.random((f_cols, k)))
    form = HP._SubjectProfile.from_counts(y, m, m > 0)
    a = 10.0 ** rng.uniform(-6, 6, f_cols)
    b = 10.0 ** rng.uniform(-6, 6, f_cols)
    monkeypatch.setitem(HS._kernels, "module", None)
    plain = (form.value(a, b), form.const(a + b), form.mean_slope(a, b))
    monkeypatch.setitem(HS._kernels, "module", kernels)
    compiled = (form.value(a, b), form.const(a + b), form.mean_slope(a, b))
    for p, c in zip(plain, compiled):
        np.testing.assert_array_equal(c, p)


@pytest.mark.parametrize("k", [1, 5, 8, 20, 129])
def test_beta_binomial_likelihood_kernels_give_the_numpy_forms_bits(monkeypatch, k):
    """_BetaBinomialLik's log-likelihood and derivatives by the one-pass kernels (numpy's pairwise row
    sums reproduced) against its numpy forms: padded rows, a + b on both sides of _GAMMALN_NU_MAX,
    rows of fewer than 8, 8 to 128 and more than 128 subjects."""
    from benchcert.stats.hierarchical import likelihood as HL

    rng = np.random.default_rng(100 + k)
    n = 400
    m = rng.integers(0, 300, (n, k)).astype(float)
    y = np.floor(m * rng.random((n, k)))
    mask = rng.random((n, k)) < 0.85
    mask[:, 0] = True
    a = 10.0 ** rng.uniform(-4, 4, n)
    b = 10.0 ** rng.uniform(-4, 4, n)
    for lik in (HL._BetaBinomialLik(y, m, mask), HL._BetaBinomialLik(y, m, np.ones_like(mask))):
        monkeypatch.setitem(HS._kernels, "module", None)
        plain = (lik.loglik(a, b), *lik.derivs(a, b))
        monkeypatch.setitem(HS._kernels, "module", kernels)
        compiled = (lik.loglik(a, b), *lik.derivs(a, b))
        for p, c in zip(plain, compiled):
            np.testing.assert_array_equal(c, p)
