"""Oracle test: the fast hierarchical fits (issue #15) against the former implementation.

The speed-up of stats/hierarchical/ (issue #15: the 4,000 x 20,000 audit) changed how the
beta-binomial likelihood is evaluated, not what is computed: the profile search uses
mean-only derivatives (the terms in a + b cancel) and log B as three log-gammas, trigamma's
recurrence runs on the small entries only, padding masks are skipped when there is no
padding, and the profile grid runs in chunks of fits. The reference below is the likelihood
as it was before (commit ccf26d7 of this project: scipy's betaln, the full five derivatives,
the former trigamma, one chunk); both run through the same optimiser, so every fit, bound,
profile and half-width must agree to floating-point noise, on random matrices with every
degenerate kind of domain. (The profile search was rewritten again afterwards and no longer
calls the likelihood class: here both sides run the new one, and
tests/stats/hierarchical/test_stats_hierarchical_profile_oracle.py compares it with its former version and with
brute force.)
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import betaln, psi

import benchcert.stats.hierarchical as H
from benchcert.stats.hierarchical import fit as HF, likelihood as HL, profile as HP, special as HS
from benchcert.stats.degenerate import DegenerateDataWarning


def _former_trigamma(x):
    z = np.array(x, dtype=float, copy=True)
    acc = np.zeros_like(z)
    for _ in range(10):
        small = z < 10.0
        if not small.any():
            break
        acc += np.where(small, 1.0 / (z * z), 0.0)
        z += small
    r = 1.0 / z
    r2 = r * r
    series = r + 0.5 * r2 + r * r2 * (1.0 / 6 + r2 * (-1.0 / 30 + r2 * (1.0 / 42 + r2 * (-1.0 / 30 + r2 * 5.0 / 66))))
    return acc + series


class _FormerLik(HL._BetaBinomialLik):
    """The beta-binomial likelihood before issue #15's speed-up (verbatim arithmetic)."""

    def loglik(self, a, b):
        a2, b2 = a[:, None], b[:, None]
        terms = betaln(self.y + a2, self.f + b2)
        return np.sum(np.where(self.mask, terms, 0.0), axis=1) - self.k * betaln(a, b)

    profile_loglik = loglik

    def derivs(self, a, b):
        a2, b2 = a[:, None], b[:, None]
        nu = a + b
        mask = self.mask
        ya, fb, mn = self.y + a2, self.f + b2, self.m + nu[:, None]
        psi_mn = psi(mn)
        la = np.sum(np.where(mask, psi(ya) - psi_mn, 0.0), axis=1) - self.k * (psi(a) - psi(nu))
        lb = np.sum(np.where(mask, psi(fb) - psi_mn, 0.0), axis=1) - self.k * (psi(b) - psi(nu))
        t_mn = _former_trigamma(mn)
        t_nu = _former_trigamma(nu)
        lab = -np.sum(np.where(mask, t_mn, 0.0), axis=1) + self.k * t_nu
        laa = np.sum(np.where(mask, _former_trigamma(ya), 0.0), axis=1) - self.k * _former_trigamma(a) + lab
        lbb = np.sum(np.where(mask, _former_trigamma(fb), 0.0), axis=1) - self.k * _former_trigamma(b) + lab
        return la, lb, laa, lbb, lab

    def mean_derivs(self, a, b):
        la, lb, laa, lbb, lab = self.derivs(a, b)
        return la - lb, laa - 2.0 * lab + lbb


def _matrix(seed):
    """Binary models (and one fractional) over domains of every kind: 1 subject, all wrong,
    all right, single-item subjects, identical subject accuracies (under-dispersed), few and
    many subjects, unequal subject sizes (padding), and unanswered items (NaN)."""
    rng = np.random.default_rng(seed)
    n_models = 14
    # (subjects, items per subject or None for random sizes, kind)
    spec = [(1, 6, "beta"), (4, 5, "zero"), (3, 4, "one"), (5, 1, "beta"), (4, 8, "flat"),
            (2, 3, "beta"), (9, None, "beta"), (15, 12, "beta")]
    scores, subjects, doms = [], [], []
    k = 0
    for d, (ns, size, kind) in enumerate(spec):
        mean = rng.uniform(0.2, 0.8)
        nu = rng.choice([0.5, 5.0, 60.0])
        for _ in range(ns):
            m = int(size if size is not None else rng.integers(2, 25))
            if kind == "zero":
                x = np.zeros((m, n_models))
            elif kind == "one":
                x = np.ones((m, n_models))
            elif kind == "flat":  # every subject exactly half right
                x = np.tile((np.arange(m) % 2)[:, None], (1, n_models)).astype(float)
            else:
                p = rng.beta(mean * nu, (1 - mean) * nu, n_models)
                x = (rng.random((m, n_models)) < p).astype(float)
            scores.append(x)
            subjects += [k] * m
            doms.append(d)
            k += 1
    s = np.vstack(scores)
    s[rng.random(s.shape) < 0.05] = np.nan
    s[0, :] = np.where(np.isnan(s[0, :]), 1.0, s[0, :])  # every model answers something
    s[:, -1] = np.where(np.isnan(s[:, -1]), np.nan, rng.random(s.shape[0]))  # fractional model
    return s, np.array(subjects), np.array(doms)


def _run(s, subj, doms, monkeypatch, former):
    with monkeypatch.context() as mp:
        if former:
            # each module that looks the name up (the fits build it; the likelihoods' helpers test for it)
            mp.setattr(HF, "_BetaBinomialLik", _FormerLik)
            mp.setattr(HL, "_BetaBinomialLik", _FormerLik)
            mp.setattr(HL, "_trigamma", _former_trigamma)
            mp.setattr(HP, "_PROFILE_CELLS", 1 << 60)
        else:
            mp.setattr(HP, "_PROFILE_CELLS", 3000)  # several chunks even at this size
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            fits = H.fit_domains(s, subj, doms, proxy_alpha=0.025)
            hws = {}
            for w in ("macro", "pooled", np.linspace(1.0, 2.0, doms.size)):
                iv = H.hierarchical_interval(s, subj, doms, weights=w, fits=fits)
                hws[w if isinstance(w, str) else "user"] = iv.half_width
    return fits, hws


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_fits_match_the_former_implementation(seed, monkeypatch):
    s, subj, doms = _matrix(seed)
    new, hw_new = _run(s, subj, doms, monkeypatch, former=False)
    old, hw_old = _run(s, subj, doms, monkeypatch, former=True)
    assert HL._BetaBinomialLik is not _FormerLik and HF._BetaBinomialLik is not _FormerLik
    statuses = set(np.unique(new.status))
    assert {"ok", "one_subject", "boundary_mean", "single_items", "underdispersed"} <= statuses
    np.testing.assert_array_equal(new.status, old.status)
    # The maximum-likelihood fits run the same arithmetic but for log B(Y + a, m - Y + b) in the
    # log-likelihood where a + b <= 1e3: three log-gammas against scipy's betaln (issue #40),
    # ~1e-13 per term. The maxima agree to 1e-11 (largest over seeds 0-2: 4.6e-13), the
    # maximisers, where the optimiser stops on a maximum flat in a + b, to 1e-6 relative
    # (largest: 1.2e-7 in a + b = 160). The bounds below keep their tolerances (the half-widths
    # are unchanged to the last bit on these seeds).
    for f in ("a", "b", "nu", "mean", "s2", "loglik"):
        np.testing.assert_allclose(getattr(new, f), getattr(old, f), rtol=0 if f == "loglik" else 1e-6,
                                   atol=1e-11 if f == "loglik" else 0, err_msg=f)
    # nu_lower is where the profile deviance crosses z^2 (bisection to 2e-10 in log(a + b)); the
    # log-likelihoods differ by ~1e-12, which a flat profile (under-dispersed domain) turns into
    # ~1e-9 in the crossing (seed 0: 1.3e-9), still noise.
    for f in ("nu_lower", "s2_upper"):
        np.testing.assert_allclose(getattr(new, f), getattr(old, f), rtol=1e-8, atol=0, err_msg=f)
    # Profile deviances: differences of log-likelihoods that reach ~1e7 at large a + b (log B of
    # arguments ~5e5), where either evaluation rounds at ~1e-9; atol 1e-7 is still 1e-5 of one
    # bin (z^2 / 400 ~ 0.01) of the joint bound's knapsack.
    np.testing.assert_array_equal(np.isfinite(new.profile), np.isfinite(old.profile))
    fin = np.isfinite(old.profile)
    np.testing.assert_allclose(new.profile[fin], old.profile[fin], rtol=1e-9, atol=1e-7)
    for w in hw_old:
        np.testing.assert_allclose(hw_new[w], hw_old[w], rtol=1e-9, atol=0, err_msg=w)


def test_fast_trigamma_is_the_former_one_bit_for_bit():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(1e-6, 200, 20000), 10 ** rng.uniform(-6, 7, 2000), np.arange(1.0, 42.0)])
    np.testing.assert_array_equal(HS._trigamma(x), _former_trigamma(x))
    np.testing.assert_array_equal(HS._trigamma(x.reshape(-1, 3)), _former_trigamma(x.reshape(-1, 3)))
