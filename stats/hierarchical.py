"""Hierarchical exchangeable uncertainty for benchmark scores (exchangeable-bounds paper, sections 4 and 6).

The exchangeable bounded-difference paper (sections 4 and 6) bounds the deviation of a
benchmark score from its mean when items are exchangeable within subjects and subjects
within domains:

* :func:`exchangeable_bound` - Theorem 4.2, the general bounded-difference bound with a
  mixture proxy, sigma2_eff = sum c_i^2 / 4 + sigma2_mix;
* :func:`fit_beta_binomial` / :func:`fit_beta_means` - the beta-binomial maximum-likelihood
  fit of one domain's subject counts (section 6.2), batched over many domains and models;
* :func:`marchal_arbel_proxy` - the closed-form sub-Gaussian proxy 1 / (4 (a + b + 1)) of a
  Beta(a, b) variable (section 6.2, Eq. 3-4);
* :func:`fit_domains` - every (domain, model) fit of a score matrix at once;
* :func:`hierarchical_bound` - Corollary 6.1 for any subject weights (macro, pooled or
  user-given), with its three variance components;
* :func:`hierarchical_interval` - fits and Corollary 6.1 in one call, by default with an
  upper confidence bound on each domain's subject proxy (valid with few subjects per domain).

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, gammaln, psi

from ._common import (
    Grouping,
    Ref,
    _short,
    all_missing_columns,
    check_alpha,
    check_codes,
    check_scores,
    warn_degenerate,
)

__all__ = [
    "ExchangeableBound",
    "exchangeable_bound",
    "marchal_arbel_proxy",
    "BetaFit",
    "fit_beta_binomial",
    "fit_beta_means",
    "DomainFits",
    "fit_domains",
    "HierarchicalBound",
    "hierarchical_bound",
    "HierarchicalInterval",
    "hierarchical_interval",
    "joint_subject_bound",
]

#: Precision a + b at which an under-dispersed domain's fit is stopped (its MLE is at
#: infinity). The proxy there is 1/(4 (1e6 + 1)) = 2.5e-7: subject accuracies that agree to
#: within a twentieth of a percentage point, i.e. no detectable subject spread.
NU_MAX = 1e6
#: Smallest precision searched. A Beta with a + b -> 0 tends to a two-point law on {0, 1},
#: whose proxy 1/(4 (a + b + 1)) tends to the worst case 1/4.
NU_MIN = 1e-4
#: Worst-case sub-Gaussian proxy of any [0, 1]-valued variable (Hoeffding's lemma).
WORST_CASE_S2 = 0.25

_LOG_NU_MIN, _LOG_NU_MAX = math.log(NU_MIN), math.log(NU_MAX)
_LOGIT_MAX = 25.0  # |logit mean| cap: means within ~1e-11 of 0 or 1


# ======================================================================================
# Theorem 4.2


_THM42_ASSUMPTIONS = (
    "X_1, X_2, ... infinitely exchangeable: i.i.d. given a directing measure Theta "
    "(de Finetti), which a finite benchmark cannot prove",
    "f has bounded differences c_i: changing X_i alone moves f by at most c_i",
    "U_f = E[f | Theta] - E f is sigma2_mix-sub-Gaussian (Definition 4.1); sigma2_mix is "
    "supplied by the caller and the bound is only as valid as that proxy",
    "the interval is about E f, the mean over the directing measure, not E[f | Theta]",
)


@dataclass(frozen=True)
class ExchangeableBound:
    """Theorem 4.2 of the exchangeable bounded-difference paper.

    Attributes
    ----------
    estimate, lower, upper : float or ndarray
        f(X) and f(X) -/+ half_width (not clipped: f's range is not known here).
    half_width : float or ndarray
        sqrt(2 sigma2_eff log(2/alpha)).
    sigma2_item : float
        sum c_i^2 / 4, the conditional (McDiarmid) proxy.
    sigma2_mix : float or ndarray
        The mixture proxy supplied.
    sigma2_eff : float or ndarray
        sigma2_item + sigma2_mix.
    alpha : float
    n : int
        Number of coordinates (bounded-difference constants).
    method : str
        ``"theorem_4_2"``.
    assumptions : tuple of str
    """

    estimate: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    half_width: np.ndarray | float
    sigma2_item: float
    sigma2_mix: np.ndarray | float
    sigma2_eff: np.ndarray | float
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]

    def tail(self, t) -> np.ndarray | float:
        """Theorem 4.2's bound on P(|f - E f| >= t): min(1, 2 exp(-t^2 / (2 sigma2_eff)))."""
        t = np.asarray(t, dtype=float)
        with np.errstate(divide="ignore"):
            out = np.minimum(1.0, 2.0 * np.exp(-(t**2) / (2.0 * np.asarray(self.sigma2_eff))))
        out = np.where(t <= 0, 1.0, out)
        return float(out) if out.ndim == 0 else out


def _half_width(sigma2_eff, alpha: float):
    return np.sqrt(2.0 * np.asarray(sigma2_eff, dtype=float) * math.log(2.0 / alpha))


def _out(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


def _exchangeable_bound_iv(estimate, c, sigma2_mix, alpha):
    alpha = check_alpha(alpha)
    try:
        est = np.asarray(estimate, dtype=float)
        cc = np.asarray(c, dtype=float)
        mix = np.asarray(sigma2_mix, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"estimate, c and sigma2_mix must be numeric; got {exc}") from exc
    if not np.all(np.isfinite(est)):
        raise ValueError(f"estimate must be finite; got {est[~np.isfinite(est)].flat[0]!r}")
    if cc.ndim != 1 or cc.size == 0:
        raise ValueError(f"c must be a non-empty 1-D array of bounded-difference constants; got shape {cc.shape}")
    if not np.all(np.isfinite(cc) & (cc >= 0)):
        raise ValueError(f"c must be finite and >= 0; got {cc[~(np.isfinite(cc) & (cc >= 0))][0]!r}")
    if not np.all(np.isfinite(mix) & (mix >= 0)):
        raise ValueError(f"sigma2_mix must be finite and >= 0; got {sigma2_mix!r}")
    try:
        np.broadcast_shapes(est.shape, mix.shape)
    except ValueError as exc:
        raise ValueError(f"sigma2_mix (shape {mix.shape}) must broadcast against estimate "
                         f"(shape {est.shape})") from exc
    return est, cc, mix, alpha


def exchangeable_bound(estimate, c, *, sigma2_mix, alpha=0.05) -> ExchangeableBound:
    r"""Theorem 4.2: bounded differences for an infinitely exchangeable sequence.

    Parameters
    ----------
    estimate : array_like
        Observed value(s) f(X) of the statistic (any shape; e.g. one per replication).
    c : array_like, shape (n,)
        Bounded-difference constants c_i of f.
    sigma2_mix : float or array_like, keyword-only
        Sub-Gaussian proxy of the directing-measure fluctuation
        :math:`U_f = E[f\mid\Theta] - E f` (Definition 4.1); broadcasts against ``estimate``.
    alpha : float, keyword-only
        Miscoverage level in (0, 1).

    Returns
    -------
    ExchangeableBound
        ``estimate -/+ half_width`` covers E f with probability >= 1 - alpha.

    Notes
    -----
    Theorem 4.2 (exchangeable bounded-difference paper, section 4): if
    :math:`(X_i)` is infinitely exchangeable with directing measure Theta, f has
    bounded differences :math:`c_1..c_n` and :math:`U_f` is
    :math:`\sigma^2_{mix}`-sub-Gaussian, then

    .. math::

        P\{|f - Ef| \ge t\} \le 2\exp\Big(-\frac{t^2}{2\sigma^2_{eff}}\Big),\qquad
        \sigma^2_{eff} = \tfrac14\sum_i c_i^2 + \sigma^2_{mix}.

    Setting the right side to alpha gives :math:`h = \sqrt{2\sigma^2_{eff}\log(2/\alpha)}`.
    With :math:`\sigma^2_{mix} = 0` this is McDiarmid's inequality, the "naive independence"
    curve of the paper's Figure 1, which does not hold under exchangeability (the tests
    show it undercovering). Example 4.3 shows :math:`\sigma^2_{eff}` is the right Gaussian
    scale: there :math:`\sqrt n(\bar X_n - 1/2) \Rightarrow N(0, 5/16)` and
    :math:`\sigma^2_{eff} = 5/(16 n)`.

    A zero proxy (all c_i = 0 and sigma2_mix = 0) gives a zero-width interval, with a
    :class:`DegenerateDataWarning`.
    """
    est, cc, mix, alpha = _exchangeable_bound_iv(estimate, c, sigma2_mix, alpha)
    s_item = float(np.sum(cc**2) / 4.0)
    s_eff = s_item + mix
    hw = _half_width(s_eff, alpha)
    if np.any(s_eff == 0):
        warn_degenerate("exchangeable_bound: sigma2_eff = 0 (all c_i = 0 and sigma2_mix = 0): "
                        "zero-width interval; f is constant under the stated assumptions")
    hw_b = np.broadcast_to(hw, np.broadcast_shapes(est.shape, hw.shape))
    return ExchangeableBound(
        estimate=_out(est), lower=_out(est - hw_b), upper=_out(est + hw_b), half_width=_out(hw_b),
        sigma2_item=s_item, sigma2_mix=_out(mix), sigma2_eff=_out(s_eff), alpha=alpha,
        n=int(cc.size), method="theorem_4_2", assumptions=_THM42_ASSUMPTIONS,
    )


# ======================================================================================
# Marchal-Arbel proxy


def _marchal_arbel_proxy_iv(a, b):
    try:
        aa, bb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a and b must be numeric; got {exc}") from exc
    for name, v in (("a", aa), ("b", bb)):
        bad = ~(np.isfinite(v) & (v > 0))
        if bad.any():
            raise ValueError(f"{name} must be finite and > 0; got {v[bad].flat[0]!r}")
    return aa, bb


def marchal_arbel_proxy(a, b):
    r"""Sub-Gaussian proxy of a centred Beta(a, b) variable: :math:`1/(4(a+b+1))`.

    Parameters
    ----------
    a, b : float or array_like
        Beta shape parameters, > 0 (broadcast together).

    Returns
    -------
    float or ndarray

    Notes
    -----
    Marchal and Arbel (2017, "On the sub-Gaussianity of the Beta and Dirichlet
    distributions", Theorem 2.1) show :math:`E e^{\lambda(P - EP)} \le
    \exp(\lambda^2/(8(a+b+1)))`, the paper's Eq. (3); section 6.2 plugs in the fitted
    (a, b) (Eq. 4). The proxy is never below the Beta variance
    :math:`ab/((a+b)^2(a+b+1))` and equals it only when a = b (the Beta is strictly
    sub-Gaussian only when symmetric). As a + b -> 0 it tends to 1/4, the proxy of any
    [0, 1]-valued variable.
    """
    aa, bb = _marchal_arbel_proxy_iv(a, b)
    return _out(0.25 / (aa + bb + 1.0))


# ======================================================================================
# Beta-binomial and Beta maximum likelihood, batched


_BB_ASSUMPTIONS = (
    "subject accuracies p_k in the domain are i.i.d. Beta(a, b) (exchangeable subjects; "
    "paper section 6.2 working model)",
    "item responses in subject k are i.i.d. Bernoulli(p_k) given p_k",
    "maximum likelihood over a, b > 0 (optimised in log-space from several starts); "
    "a + b is searched in [1e-4, 1e6]",
    "s2 = 1/(4 (a + b + 1)) is the Marchal-Arbel proxy at the fitted values: a plug-in, "
    "whose estimation error the interval does not include (paper section 6.2, 7.6)",
)

_BETA_MEANS_ASSUMPTIONS = (
    "scores are not binary, so a Beta(a, b) is fitted by maximum likelihood to the subject "
    "mean scores themselves (paper section 6.2, for non-binary scores): the item noise inside each mean inflates their "
    "spread, so the fitted a + b is too small and the proxy errs conservative",
    "subject means at exactly 0 or 1 are squeezed to (x (K - 1) + 1/2) / K (Smithson and "
    "Verkuilen 2006) so that the Beta likelihood is finite",
    "s2 = 1/(4 (a + b + 1)) is the Marchal-Arbel proxy at the fitted values (a plug-in)",
)

#: status -> (degenerate?, explanation). "ok" and "lower_bound" keep the fitted proxy.
_STATUS = {
    "ok": (False, "maximum-likelihood fit in the interior"),
    "no_subjects": (True, "no answered subject in this domain; worst-case proxy 1/4 (unused)"),
    "one_subject": (True, "one subject: the subject spread is not identifiable; worst-case proxy 1/4"),
    "boundary_mean": (True, "every subject scored all 0 or all 1: the precision a + b is not "
                            "identifiable; worst-case proxy 1/4"),
    "single_items": (True, "no subject has two or more answered items: the precision a + b is not "
                           "identifiable; worst-case proxy 1/4"),
    "underdispersed": (True, f"subjects vary no more than binomial noise allows (under-dispersed): "
                             f"the MLE of a + b is infinite; fit reported at the bound a + b = {NU_MAX:g} "
                             "(the default interval's subject term uses the profile-likelihood upper bound, "
                             "not this fit)"),
    "lower_bound": (True, f"extreme over-dispersion: a + b reached its lower bound {NU_MIN:g}; "
                          "proxy is essentially the worst case 1/4"),
}


@dataclass(frozen=True)
class BetaFit:
    """Maximum-likelihood Beta fits (one per row of the input), with the Marchal-Arbel proxy.

    Attributes
    ----------
    a, b : ndarray or float
        Fitted Beta shapes. For a worst-case fallback (non-identifiable fit) a = b = 0: the
        limit a + b -> 0 in which 1/(4 (a + b + 1)) is the worst case 1/4.
    nu : ndarray or float
        Precision a + b.
    mean : ndarray or float
        Fitted mean a / (a + b) (the pooled accuracy when a fallback is used).
    s2 : ndarray or float
        Marchal-Arbel proxy 1/(4 (a + b + 1)); 1/4 for the fallbacks. Never NaN.
    icc : ndarray or float
        Intraclass correlation 1/(a + b + 1) = 4 s2 (the correlation of two items of one
        subject under the beta-binomial model).
    loglik : ndarray or float
        Maximised log-likelihood (including the binomial coefficients); 0 for fallbacks.
    n_subjects : ndarray or int
        Subjects used.
    n_items : ndarray or int
        Items (trials) used.
    status : ndarray of str or str
        ``"ok"``, ``"underdispersed"``, ``"lower_bound"``, ``"one_subject"``,
        ``"boundary_mean"``, ``"single_items"`` or ``"no_subjects"``.
    degenerate : ndarray of bool or bool
        True for every status but ``"ok"``; each such fit was warned about.
    converged : ndarray of bool or bool
        The optimiser met its tolerance (fallbacks count as converged).
    method : str
        ``"beta_binomial_mle"`` or ``"beta_mle_on_subject_means"``.
    assumptions : tuple of str
    nu_lower, s2_upper : ndarray or float or None
        With ``upper_alpha``: the one-sided profile-likelihood lower confidence bound on
        a + b and the proxy 1/(4 (nu_lower + 1)) it gives (an upper confidence bound on the
        subject proxy); 0 and 1/4 for the worst-case fallbacks. None without ``upper_alpha``.
    upper_alpha : ndarray or float or None
        One-sided level of that bound per fit.
    profile : ndarray, shape (..., G - 1), or None
        With ``upper_alpha``: per grid interval of log(a + b) (:data:`_W_GRID`) a lower bound on
        the profile deviance 2 (l_max - l_p) over that interval (inf for the fallbacks); what
        :func:`joint_subject_bound` combines across domains.
    """

    a: np.ndarray | float
    b: np.ndarray | float
    nu: np.ndarray | float
    mean: np.ndarray | float
    s2: np.ndarray | float
    icc: np.ndarray | float
    loglik: np.ndarray | float
    n_subjects: np.ndarray | int
    n_items: np.ndarray | int
    status: np.ndarray | str
    degenerate: np.ndarray | bool
    converged: np.ndarray | bool
    method: str
    assumptions: tuple[str, ...]
    nu_lower: np.ndarray | float | None = None
    s2_upper: np.ndarray | float | None = None
    upper_alpha: np.ndarray | float | None = None
    profile: np.ndarray | None = None

    @property
    def reason(self):
        """Plain-language explanation of each fit's status."""
        st = np.asarray(self.status)
        out = np.vectorize(lambda s: _STATUS[s][1], otypes=[object])(st) if st.size else st.astype(object)
        return out.item() if st.ndim == 0 else out


def _trigamma_lift(x, floor: int):
    """(z, acc): x lifted to >= ``floor`` by the recurrence psi1(x) = 1/x^2 + psi1(x + 1), and the
    terms 1/x^2 taken on the way (entries below ``floor`` only; any x > 0 needs at most ``floor`` steps)."""
    z = np.array(x, dtype=float, copy=True, order="C")  # C order: the flat views below must be views
    acc = np.zeros_like(z)
    zf, af = z.reshape(-1), acc.reshape(-1)
    low = np.flatnonzero(zf < floor)
    if low.size:
        zs = zf[low]
        accs = np.zeros_like(zs)
        for _ in range(floor):
            small = zs < floor
            if not small.any():
                break
            accs += np.where(small, 1.0 / (zs * zs), 0.0)
            zs += small
        zf[low], af[low] = zs, accs
    return z, acc


def _trigamma(x):
    """Trigamma function, about 10x faster than scipy's polygamma(1, x) (its Hessians are
    the fit's main cost).

    Recurrence psi1(x) = 1/x^2 + psi1(x + 1) lifts x to >= 10, then the asymptotic series
    psi1(z) ~ 1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1) (Abramowitz and Stegun 6.4.12) to
    z^-11; the truncation error is below 3e-14 relative (the tests compare with polygamma).
    The recurrence runs on the entries below 10 only (most counts Y_k + a are larger).
    """
    z, acc = _trigamma_lift(x, 10)
    # r + r^2 / 2 + r^3 (1/6 + r^2 (-1/30 + r^2 (1/42 + r^2 (-1/30 + r^2 5/66)))), in place
    r = np.divide(1.0, z, out=z)
    r2 = r * r
    poly = r2 * 5.0
    poly /= 66
    for c in (-1.0 / 30, 1.0 / 42, -1.0 / 30):
        poly += c
        poly *= r2
    poly += 1.0 / 6
    poly *= r * r2
    r2 *= 0.5
    r2 += r
    r2 += poly
    acc += r2
    return acc


def _trigamma_rough(x):
    """Trigamma to about 2e-8 relative, for Newton's step sizes in the profile search only (a step
    from a Hessian off by 1e-8 converges as fast, and the stopping rules read the gradient, which is
    exact): the recurrence lifts x to >= 6, then the asymptotic series to z^-7 (truncation error
    below 1/(30 z^9))."""
    z, acc = _trigamma_lift(x, 6)
    r = np.divide(1.0, z, out=z)
    r2 = r * r
    poly = r2 / 42.0
    poly -= 1.0 / 30
    poly *= r2
    poly += 1.0 / 6
    poly *= r
    poly += 0.5
    poly *= r2
    poly += r
    acc += poly
    return acc


def _row_sum(x, mask, full):
    return np.sum(x if full else np.where(mask, x, 0.0), axis=1)


class _BetaBinomialLik:
    """Beta-binomial log-likelihood of padded rows (mask = subject present)."""

    def __init__(self, y, m, mask):
        self.y, self.m, self.mask = y, m, mask
        self.k = mask.sum(axis=1)
        self.f = m - y
        self.full = bool(mask.all())  # no padding: the masking is skipped

    def loglik(self, a, b):
        a2, b2 = a[:, None], b[:, None]
        terms = betaln(self.y + a2, self.f + b2)
        return _row_sum(terms, self.mask, self.full) - self.k * betaln(a, b)

    def derivs(self, a, b):
        a2, b2 = a[:, None], b[:, None]
        nu = a + b
        mask, full = self.mask, self.full
        ya, fb, mn = self.y + a2, self.f + b2, self.m + nu[:, None]
        psi_mn = psi(mn)
        la = _row_sum(psi(ya) - psi_mn, mask, full) - self.k * (psi(a) - psi(nu))
        lb = _row_sum(psi(fb) - psi_mn, mask, full) - self.k * (psi(b) - psi(nu))
        t_mn = _trigamma(mn)
        t_nu = _trigamma(nu)
        lab = -_row_sum(t_mn, mask, full) + self.k * t_nu
        laa = _row_sum(_trigamma(ya), mask, full) - self.k * _trigamma(a) + lab
        lbb = _row_sum(_trigamma(fb), mask, full) - self.k * _trigamma(b) + lab
        return la, lb, laa, lbb, lab


class _BetaLik:
    """Beta log-likelihood of padded rows of values in (0, 1)."""

    def __init__(self, x, mask):
        self.mask = mask
        self.k = mask.sum(axis=1)
        self.s1 = np.sum(np.where(mask, np.log(np.where(mask, x, 0.5)), 0.0), axis=1)
        self.s2 = np.sum(np.where(mask, np.log1p(-np.where(mask, x, 0.5)), 0.0), axis=1)

    def loglik(self, a, b):
        return (a - 1.0) * self.s1 + (b - 1.0) * self.s2 - self.k * betaln(a, b)

    def derivs(self, a, b):
        nu = a + b
        la = self.s1 - self.k * (psi(a) - psi(nu))
        lb = self.s2 - self.k * (psi(b) - psi(nu))
        lab = self.k * _trigamma(nu)
        laa = -self.k * _trigamma(a) + lab
        lbb = -self.k * _trigamma(b) + lab
        return la, lb, laa, lbb, lab


def _ab(t, w):
    mu = 0.5 * (1.0 + np.tanh(0.5 * t))  # logistic, stable for large |t|
    nu = np.exp(w)
    return mu * nu, (1.0 - mu) * nu, mu, nu


def _maximise(lik, t0, w0, *, max_iter=150, tol=1e-10):
    """Batched Levenberg-Marquardt ascent in (t, w) = (logit mean, log precision).

    Each row is an independent 2-parameter problem; the damping adapts per row, a step is
    kept only if it raises that row's log-likelihood, and w is held in
    [log NU_MIN, log NU_MAX] (a projected step: at a bound with the gradient pointing out,
    only the mean moves). Returns (t, w, loglik, converged, grad_w).
    """
    t, w = t0.astype(float).copy(), np.clip(w0.astype(float), _LOG_NU_MIN, _LOG_NU_MAX)
    a, b, mu, nu = _ab(t, w)
    ll = lik.loglik(a, b)
    lam = np.full(t.shape, 1e-3)
    done = np.zeros(t.shape, dtype=bool)
    gw = np.zeros(t.shape)
    for _ in range(max_iter):
        act = ~done
        if not act.any():
            break
        idx = np.flatnonzero(act)
        sub = lik if act.all() else _subset(lik, idx)
        ta, wa, lla = t[idx], w[idx], ll[idx]
        a, b, mu, nu = _ab(ta, wa)
        la, lb, laa, lbb, lab = sub.derivs(a, b)
        v = nu * mu * (1.0 - mu)  # d a / d t = - d b / d t
        gt = v * (la - lb)
        gwa = a * la + b * lb
        htt = v * v * (laa - 2.0 * lab + lbb) + v * (1.0 - 2.0 * mu) * (la - lb)
        hww = a * a * laa + 2.0 * a * b * lab + b * b * lbb + gwa
        htw = v * ((la - lb) + a * laa + b * lab - a * lab - b * lbb)
        gw[idx] = gwa
        at_hi = (wa >= _LOG_NU_MAX - 1e-12) & (gwa > 0)
        at_lo = (wa <= _LOG_NU_MIN + 1e-12) & (gwa < 0)
        fixed_w = at_hi | at_lo
        gnorm = np.abs(gt) + np.where(fixed_w, 0.0, np.abs(gwa))
        conv = gnorm <= tol * (1.0 + np.abs(lla))
        # Up to 8 damping increases per outer iteration, vectorised over rows.
        lam_a = lam[idx]
        new_t, new_w, new_ll = ta.copy(), wa.copy(), lla.copy()
        pending = ~conv
        step_small = np.zeros(idx.size, dtype=bool)
        for _ in range(8):
            if not pending.any():
                break
            # Solve (-H + lam I) delta = g ; -H made positive by the damping when needed.
            ntt, nww, ntw = -htt, -hww, -htw
            scale = np.maximum(np.abs(ntt) + np.abs(nww), 1e-12)
            d_tt = ntt + lam_a * scale
            d_ww = nww + lam_a * scale
            det = d_tt * d_ww - ntw * ntw
            ok_pd = (d_tt > 0) & (det > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                dt_full = (d_ww * gt - ntw * gwa) / det
                dw_full = (d_tt * gwa - ntw * gt) / det
                dt_only = gt / d_tt
            dt = np.where(fixed_w, dt_only, dt_full)
            dw = np.where(fixed_w, 0.0, dw_full)
            ok_pd = np.where(fixed_w, d_tt > 0, ok_pd)
            # Steps are capped so that one iteration never jumps across the whole range.
            dt = np.clip(np.nan_to_num(dt), -5.0, 5.0)
            dw = np.clip(np.nan_to_num(dw), -5.0, 5.0)
            cand_t = np.clip(ta + dt, -_LOGIT_MAX, _LOGIT_MAX)
            cand_w = np.clip(wa + dw, _LOG_NU_MIN, _LOG_NU_MAX)
            try_rows = pending & ok_pd
            if try_rows.any():
                ca, cb, _, _ = _ab(cand_t[try_rows], cand_w[try_rows])
                sub_try = _subset(sub, np.flatnonzero(try_rows))
                cll = sub_try.loglik(ca, cb)
                better = np.zeros(idx.size, dtype=bool)
                better[try_rows] = cll >= lla[try_rows] - 1e-12 * (1.0 + np.abs(lla[try_rows]))
                gain = np.zeros(idx.size)
                gain[try_rows] = cll
                accept = better & pending
                new_t[accept], new_w[accept], new_ll[accept] = cand_t[accept], cand_w[accept], gain[accept]
                step_small |= accept & (np.abs(cand_t - ta) + np.abs(cand_w - wa) < tol)
                lam_a = np.where(accept, np.maximum(lam_a / 5.0, 1e-12), lam_a)
                pending &= ~accept
            lam_a = np.where(pending, np.maximum(lam_a * 10.0, 1e-6), lam_a)
        lam[idx] = lam_a
        t[idx], w[idx], ll[idx] = new_t, new_w, new_ll
        stuck = pending  # no improving step found even with heavy damping: at a maximum
        done[idx] = conv | step_small | stuck
    return t, w, ll, done, gw


def _subset(lik, idx):
    if isinstance(lik, _BetaBinomialLik):
        return type(lik)(lik.y[idx], lik.m[idx], lik.mask[idx])
    new = object.__new__(_BetaLik)
    new.mask, new.k, new.s1, new.s2 = lik.mask[idx], lik.k[idx], lik.s1[idx], lik.s2[idx]
    return new


def _moment_start(p, wts, mask, inv_m_mean):
    """Method-of-moments (logit mean, log precision) of padded rows of subject proportions."""
    k = mask.sum(axis=1)
    mu = np.sum(np.where(mask, p * wts, 0.0), axis=1) / np.maximum(np.sum(np.where(mask, wts, 0.0), axis=1), 1e-300)
    mu = np.clip(mu, 1e-6, 1 - 1e-6)
    dev = np.where(mask, (p - mu[:, None]) ** 2, 0.0)
    s2 = np.sum(dev, axis=1) / np.maximum(k - 1, 1)
    v = mu * (1.0 - mu)
    rho = (s2 / v - inv_m_mean) / np.maximum(1.0 - inv_m_mean, 1e-12)
    rho = np.clip(rho, 1.0 / (1e5 + 1.0), 1.0 / (0.5 + 1.0))
    return np.log(mu / (1.0 - mu)), np.log(1.0 / rho - 1.0)


def _best_of_starts(lik, starts):
    """Run the maximiser from several starts (batched together) and keep each row's best."""
    n = starts[0][0].size
    t0 = np.concatenate([s[0] for s in starts])
    w0 = np.concatenate([s[1] for s in starts])
    big = _stack(lik, len(starts))
    t, w, ll, conv, gw = _maximise(big, t0, w0)
    s = len(starts)
    ll_r = ll.reshape(s, n)
    best = np.argmax(np.where(np.isfinite(ll_r), ll_r, -np.inf), axis=0)
    pick = best * n + np.arange(n)
    return t[pick], w[pick], ll[pick], conv[pick], gw[pick]


def _stack(lik, times):
    if isinstance(lik, _BetaBinomialLik):
        return type(lik)(np.tile(lik.y, (times, 1)), np.tile(lik.m, (times, 1)), np.tile(lik.mask, (times, 1)))
    new = object.__new__(_BetaLik)
    new.mask = np.tile(lik.mask, (times, 1))
    new.k, new.s1, new.s2 = (np.tile(v, times) for v in (lik.k, lik.s1, lik.s2))
    return new


#: Grid of w = log(a + b) on which the profile likelihood is evaluated for the lower
#: confidence bound on the precision (spacing 0.2: the per-domain crossing is then refined by
#: a bracketing root search; the joint bound is conservative between grid points).
_W_GRID = np.linspace(_LOG_NU_MIN, _LOG_NU_MAX, 116)

#: A fit's profile uses the count form (:class:`_CountProfile`) when its largest subject has at
#: most this many items per subject of the fit: J logs or reciprocals cost less than K special
#: functions up to about that ratio.
_COUNT_FORM_RATIO = 3
#: Newton's stopping rules in t = logit(mean) at fixed precision: a decrement (log-likelihood
#: still to gain) below _L_TOL, or a step below _T_TOL (what is left after either is of the
#: order of its square); and the width in w = log(a + b) at which the crossing search stops.
_L_TOL = 1e-9
_T_TOL = 1e-10
_W_TOL = 2e-11


def _colsum(x):
    """Sum of each column of a (J, F) array, strictly row after row (a running sum, whatever the
    shape: np.sum may sum a lone column pairwise), so that zero padding rows and the other
    columns of the batch leave each column's sum unchanged to the last bit."""
    return np.add.accumulate(x, axis=0)[-1]


class _CountProfile:
    r"""Beta-binomial log-likelihood at fixed precision through count statistics.

    For integer counts, log Gamma(y + a) - log Gamma(a) = sum_{j < y} log(a + j), so

    .. math:: \sum_k [\log B(y_k + a, f_k + b) - \log B(a, b)]
              = \sum_{j<J} [A_j \log(a + j) + B_j \log(b + j) - N_j \log(a + b + j)]

    with A_j = #{k : y_k > j}, B_j = #{k : f_k > j}, N_j = #{k : m_k > j}, J = max m_k: the
    mean-dependent part and its derivatives need J logs or reciprocals per side instead of
    K log-gammas, digammas and trigammas. Arrays are (J, F), one column per fit.
    """

    def __init__(self, A, B, N):
        self.A, self.B, self.N = A, B, N
        self.j = np.arange(A.shape[0], dtype=float)[:, None]

    @classmethod
    def from_counts(cls, y, m, mask):
        """From padded (F, K) successes and trials (``mask`` = subject present)."""
        f_rows = y.shape[0]
        yy = np.where(mask, y, 0).astype(np.int64)
        mm = np.where(mask, m, 0).astype(np.int64)
        jmax = max(int(mm.max()) if mm.size else 0, 1)
        row = np.repeat(np.arange(f_rows), y.shape[1]).reshape(y.shape) * (jmax + 1)

        def above(v):  # (J, F): #{k : v_k > j}
            hist = np.bincount((row + v).ravel(), minlength=f_rows * (jmax + 1)).reshape(f_rows, jmax + 1)
            tail = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]  # #{k : v_k >= j}
            return np.ascontiguousarray(tail[:, 1:].T, dtype=float)

        return cls(above(yy), above(mm - yy), above(mm))

    def take(self, idx):
        return _CountProfile(*(np.ascontiguousarray(v[:, idx]) for v in (self.A, self.B, self.N)))

    def const(self, nu):
        """The part that depends on the precision only."""
        return -_colsum(self.N * np.log(nu + self.j))

    def value(self, a, b):
        return _colsum(self.A * np.log(a + self.j)) + _colsum(self.B * np.log(b + self.j))

    def mean_grad(self, a, b):
        """(l_a - l_b, l_aa + l_bb): the terms in a + b cancel in a step of the mean alone."""
        ra = 1.0 / (a + self.j)
        wa = self.A * ra
        rb = 1.0 / (b + self.j)
        wb = self.B * rb
        d1 = _colsum(wa) - _colsum(wb)
        wa *= ra
        wb *= rb
        return d1, -(_colsum(wa) + _colsum(wb))


class _SubjectProfile:
    """Beta-binomial log-likelihood at fixed precision, one term per subject: (K, F) arrays of
    successes, failures and trials (padding: all 0, whose terms are exactly 0)."""

    def __init__(self, y, f, m):
        self.y, self.f, self.m = y, f, m

    @classmethod
    def from_counts(cls, y, m, mask):
        yy = np.ascontiguousarray(np.where(mask, y, 0.0).T)
        mm = np.ascontiguousarray(np.where(mask, m, 0.0).T)
        return cls(yy, mm - yy, mm)

    def take(self, idx):
        return _SubjectProfile(*(np.ascontiguousarray(v[:, idx]) for v in (self.y, self.f, self.m)))

    def const(self, nu):
        return _colsum(gammaln(nu) - gammaln(self.m + nu))

    def value(self, a, b):
        return _colsum(gammaln(self.y + a) - gammaln(a)) + _colsum(gammaln(self.f + b) - gammaln(b))

    def mean_grad(self, a, b):
        pa, pb = psi(a), psi(b)
        ta, tb = _trigamma_rough(a), _trigamma_rough(b)
        ya, fb = self.y + a, self.f + b
        d1 = _colsum(psi(ya) - pa) - _colsum(psi(fb) - pb)
        return d1, _colsum(_trigamma_rough(ya) - ta) + _colsum(_trigamma_rough(fb) - tb)


class _MeansProfile:
    """Beta log-likelihood of subject means at fixed precision, from its sufficient statistics
    (sum log x_k, sum log(1 - x_k), K) per fit."""

    def __init__(self, s1, s2, k):
        self.s1, self.s2, self.k = s1, s2, k.astype(float)

    def take(self, idx):
        return _MeansProfile(self.s1[idx], self.s2[idx], self.k[idx])

    def const(self, nu):
        return self.k * gammaln(nu) - self.s1 - self.s2

    def value(self, a, b):
        return a * self.s1 + b * self.s2 - self.k * (gammaln(a) + gammaln(b))

    def mean_grad(self, a, b):
        return (self.s1 - self.s2 - self.k * (psi(a) - psi(b)),
                -self.k * (_trigamma_rough(a) + _trigamma_rough(b)))


def _profile_forms(lik):
    """[(rows, form)]: the fits of ``lik`` split by the cheaper evaluation of their profile."""
    if isinstance(lik, _BetaLik):
        return [(np.arange(lik.k.size), _MeansProfile(lik.s1, lik.s2, lik.k))]
    jmax = np.max(np.where(lik.mask, lik.m, 0), axis=1)
    count = jmax <= _COUNT_FORM_RATIO * np.maximum(lik.k, 1)
    out = []
    for use_count in (True, False):
        rows = np.flatnonzero(count == use_count)
        if rows.size:
            cls = _CountProfile if use_count else _SubjectProfile
            out.append((rows, cls.from_counts(lik.y[rows], lik.m[rows], lik.mask[rows])))
    return out


def _max_over_mean(form, t, w, *, max_iter=200):
    """Maximise each fit's log-likelihood over t = logit(mean) with w = log(a + b) held fixed.

    At fixed a + b the log-likelihood is concave in the mean (a sum of logs, or of minus
    log-gammas, of a + j and b + j, linear in it), so its t-derivative changes sign once:
    Newton's method in t inside a bracket of that sign change (a step that leaves the bracket,
    or is not uphill, is replaced by the bracket's midpoint) reaches the maximiser in [-25, 25]
    from any start. Each fit stops on its own once a step is below ``_T_TOL``. Returns
    (t, profile log-likelihood at w).
    """
    t = np.array(t, dtype=float)
    w = np.broadcast_to(np.asarray(w, dtype=float), t.shape)
    lo = np.full(t.shape, -np.inf)  # largest t seen with derivative > 0
    hi = np.full(t.shape, np.inf)  # smallest t seen with derivative < 0
    act = np.arange(t.size)
    sub = form
    for _ in range(max_iter):
        if not act.size:
            break
        ta, wa = t[act], w[act]
        a, b, mu, nu = _ab(ta, wa)
        d1, d2 = sub.mean_grad(a, b)
        v = nu * mu * (1.0 - mu)
        g = v * d1
        h = v * v * d2 + v * (1.0 - 2.0 * mu) * d1
        lo_a = np.where(g > 0, ta, lo[act])
        hi_a = np.where(g < 0, ta, hi[act])
        newton = (h < 0) & np.isfinite(g) & np.isfinite(h)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = np.where(newton, -g / h, np.sign(g) * 3.0)
        step = np.clip(np.nan_to_num(step), -3.0, 3.0)
        cand = np.clip(ta + step, -_LOGIT_MAX, _LOGIT_MAX)
        # Newton's decrement g^2 / (2 |h|), the log-likelihood still to gain, below _L_TOL: the
        # step is taken and ends the search (it leaves a gain of the order of the decrement's
        # square). Any other step must land strictly inside the bracket, else the midpoint.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            small = newton & (g * g <= -2.0 * _L_TOL * h)
        done = (g == 0) | ~np.isfinite(g) | small | (newton & (np.abs(step) <= _T_TOL))
        ok = done | ((cand > lo_a) & (cand < hi_a))
        mid = 0.5 * (np.maximum(lo_a, -_LOGIT_MAX) + np.minimum(hi_a, _LOGIT_MAX))
        cand = np.where(ok, cand, mid)
        done |= np.abs(cand - ta) <= _T_TOL * 1e-3  # the bracket itself has closed
        t[act] = np.where((g == 0) | ~np.isfinite(g), ta, cand)
        lo[act], hi[act] = lo_a, hi_a
        keep = ~done
        if not keep.all():
            act = act[keep]
            sub = form.take(act) if act.size else sub
    a, b, _, nu = _ab(t, w)
    return t, form.value(a, b) + form.const(nu)


def _profile_grid(form, t_hat, w_hat):
    """(G, F) profile log-likelihood on :data:`_W_GRID` (-inf where not needed) and the (G, F)
    maximising t. Only grid points up to the first one at or above w_hat are needed: both
    bounds look at precisions below the maximum (above it the deviance rises and the proxy
    falls). The grid is walked downwards from w_hat, each fit's maximiser at one point starting
    the search at the next (extrapolated linearly)."""
    g = _W_GRID
    step = g[1] - g[0]
    f = t_hat.size
    lp = np.full((g.size, f), -np.inf)
    tg = np.zeros((g.size, f))
    top_j = np.searchsorted(g, w_hat + step, side="right") - 1  # last grid index with g_j <= w_hat + step
    for j in range(g.size - 1, -1, -1):
        rows = np.flatnonzero(top_j >= j)
        if not rows.size:
            continue
        # Start: the fit's mean at its first grid point, then the maximisers of the points
        # above extrapolated (linearly from two, quadratically from three).
        seen = top_j[rows] - j
        t1, t2, t3 = (tg[np.minimum(j + i, g.size - 1), rows] for i in (1, 2, 3))
        start = np.select([seen == 0, seen == 1, seen == 2], [t_hat[rows], t1, 2.0 * t1 - t2],
                          3.0 * t1 - 3.0 * t2 + t3)
        start = np.clip(start, -_LOGIT_MAX, _LOGIT_MAX)
        sub = form if rows.size == f else form.take(rows)
        tg[j, rows], lp[j, rows] = _max_over_mean(sub, start, g[j])
    return lp, tg


def _crossing(form, lo, hi, f_lo, f_hi, t_lo, t_hi, top, crit, *, max_iter=80):
    """The outside end of a bracket [lo, hi] of the crossing of the profile deviance
    2 (top - l_p(w)) with crit (f = deviance - crit: > 0 at lo, <= 0 at hi), narrowed to
    :data:`_W_TOL` by the Illinois variant of regula falsi (a bisection every fourth step keeps
    the bracket shrinking). The outside end is returned, so the bound errs low."""
    lo, hi, f_lo, f_hi = (np.array(v, dtype=float) for v in (lo, hi, f_lo, f_hi))
    t_lo, t_hi = np.array(t_lo, dtype=float), np.array(t_hi, dtype=float)
    side = np.zeros(lo.shape, dtype=np.int8)  # which end moved last: -1 lo, +1 hi
    act = np.flatnonzero(hi - lo > _W_TOL)
    for it in range(max_iter):
        if not act.size:
            break
        l, h, fl, fh = lo[act], hi[act], f_lo[act], f_hi[act]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = h - fh * (h - l) / (fh - fl)
        bisect = ~((x > l) & (x < h)) | (it % 4 == 3)
        x = np.where(bisect, 0.5 * (l + h), x)
        frac = np.where(h > l, (x - l) / (h - l), 0.5)
        t0 = t_lo[act] + frac * (t_hi[act] - t_lo[act])
        sub = form.take(act)
        tx, lpx = _max_over_mean(sub, t0, x)
        fx = 2.0 * (top[act] - lpx) - crit[act]
        out = fx > 0
        # Illinois: an end kept twice in a row has its value halved
        f_hi[act] = np.where(out & (side[act] == -1), 0.5 * fh, fh)
        f_lo[act] = np.where(~out & (side[act] == 1), 0.5 * fl, fl)
        r_out, r_in = act[out], act[~out]
        lo[r_out], f_lo[r_out], t_lo[r_out] = x[out], fx[out], tx[out]
        hi[r_in], f_hi[r_in], t_hi[r_in] = x[~out], fx[~out], tx[~out]
        side[r_out], side[r_in] = -1, 1
        act = act[hi[act] - lo[act] > _W_TOL]
    return lo


def _precision_lower_bound(form, t_hat, w_hat, ll_hat, crit):
    """One-sided profile-likelihood lower confidence bound on w = log(a + b), per fit.

    The bound is the infimum of {w : 2 (l(w_hat) - l_p(w)) <= crit}: the lowest grid point of
    :data:`_W_GRID` (w <= w_hat) inside the set, refined between it and the grid point below
    it (keeping the outside end). Taking the infimum of the whole set (not only the connected
    piece around the maximum) errs on the low side, i.e. conservative.
    """
    g = _W_GRID
    lp, tg = _profile_grid(form, t_hat, w_hat)
    top = np.maximum(ll_hat, np.max(lp, axis=0))
    dev = 2.0 * (top[None, :] - lp)
    inside = (dev <= crit[None, :]) & (g[:, None] <= w_hat[None, :] + 1e-12)
    any_in = inside.any(axis=0)
    j0 = np.where(any_in, np.argmax(inside, axis=0), 0)
    # The crossing lies between grid points j0 - 1 (outside) and j0 (inside).
    lo, hi = g[np.maximum(j0 - 1, 0)], np.minimum(g[j0], w_hat)
    refine = np.flatnonzero(any_in & (j0 > 0))
    if refine.size:
        jr = j0[refine]
        at_hat = g[jr] > w_hat[refine]
        f_hi = np.where(at_hat, 2.0 * (top[refine] - ll_hat[refine]), dev[jr, refine]) - crit[refine]
        t_hi = np.where(at_hat, t_hat[refine], tg[jr, refine])
        lo[refine] = _crossing(form.take(refine), lo[refine], hi[refine], dev[jr - 1, refine] - crit[refine],
                               f_hi, tg[jr - 1, refine], t_hi, top[refine], crit[refine])
    w_lo = np.where(any_in & (j0 > 0), lo, np.where(any_in, np.minimum(g[0], w_hat), _LOG_NU_MIN))
    # For the joint bound: a lower bound on the deviance over each grid interval [g_j, g_j+1],
    # assuming the profile deviance is unimodal in w (falls to 0 at w_hat, then rises): the
    # smaller end, and 0 on the interval holding w_hat.
    holds = (g[:-1, None] <= w_hat[None, :] + 1e-12) & (g[1:, None] >= w_hat[None, :] - 1e-12)
    mdev = np.where(holds, 0.0, np.minimum(dev[:-1], dev[1:]))
    return w_lo, np.maximum(mdev, 0.0)


#: Deviance budget bins of :func:`joint_subject_bound`'s knapsack (costs are rounded down to a
#: bin, which can only enlarge the feasible set: the bound stays conservative).
_BUDGET_BINS = 400


def joint_subject_bound(profile, a2_dom, *, alpha):
    r"""Upper confidence bound on the subject term sum_d A_d s_d^2 from every domain's profile likelihood.

    Parameters
    ----------
    profile : ndarray, shape (D, M, G - 1)
        :attr:`DomainFits.profile`: per (domain, model) and grid interval of w = log(a + b), a
        lower bound on the profile deviance over the interval; inf everywhere for a domain
        whose proxy is the worst case 1/4 (inf for single intervals not computed).
    a2_dom : ndarray, shape (D, M)
        A_d = sum of the squared subject weights of domain d (0 for unanswered domains).
    alpha : float, keyword-only
        One-sided level of the bound.

    Returns
    -------
    ndarray, shape (M,)

    Notes
    -----
    The subject term is one number, psi = sum_d A_d s^2(nu_d), s^2(nu) = 1/(4 (nu + 1)), so
    its one-sided profile-likelihood bound is (domains are independent, so their deviances add)

    .. math:: \psi_U = \max\Big\{\sum_d A_d s^2(\nu_d) : \sum_d \mathrm{dev}_d(\nu_d) \le z^2_{1-\alpha}\Big\},

    one constraint for the whole term instead of a Bonferroni share per domain. It is solved
    as a knapsack over the grid intervals of log(nu): each domain picks one interval, worth
    A_d times the proxy at the interval's lower end (the largest in it) and costing the
    interval's smallest deviance (:attr:`BetaFit.profile`) rounded down to 1/400 of the budget.
    Both choices can only raise the value, so the result is >= the exact psi_U. With one
    domain it is that domain's own bound (to within the grid). Worst-case domains add A_d / 4.
    """
    from benchcert.stats._dist import norm

    crit = float(norm.isf(alpha)) ** 2
    prof = np.asarray(profile, dtype=float)
    a = np.asarray(a2_dom, dtype=float)
    d, mdl, gi = prof.shape
    s2j = 0.25 / (np.exp(_W_GRID[:gi]) + 1.0)
    s2j[0] = WORST_CASE_S2  # below the grid: nu -> 0
    fixed = ~np.isfinite(prof).any(axis=-1)
    base = np.sum(np.where(fixed, a * WORST_CASE_S2, 0.0), axis=0)
    nb = _BUDGET_BINS
    unit = crit / nb
    with np.errstate(invalid="ignore", over="ignore"):
        cost = np.where(np.isfinite(prof), np.floor(prof / unit), nb + 1).clip(0, nb + 1).astype(np.int64)
    if d == 1:  # one domain: the largest proxy within the budget, no knapsack needed
        val = np.where(~fixed[0][:, None] & (cost[0] <= nb), a[0][:, None] * s2j[None, :], 0.0)
        return base + val.max(axis=1)
    # best[m, b]: largest value with total cost <= b bins (nondecreasing in b)
    best = np.zeros((mdl, nb + 1))
    # padded[m, s:s + nb + 1] for s = nb + 1 - c is best[m] shifted right by c bins (-inf below c):
    # one contiguous window per model instead of an index per bin.
    padded = np.full((mdl, 2 * nb + 2), -np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, nb + 1, axis=1)
    for dd in range(d):
        use = ~fixed[dd] & (a[dd] > 0)
        if not use.any():
            continue
        padded[:, nb + 1:] = best
        new = np.full((mdl, nb + 1), -np.inf)
        for j in range(gi):
            c = cost[dd, :, j]
            r = np.flatnonzero(use & (c <= nb))  # only the models for which this interval is affordable
            if not r.size:
                continue
            val = windows[r, nb + 1 - c[r]] + (a[dd, r] * s2j[j])[:, None]
            new[r] = np.maximum(new[r], val)
        best = np.where(use[:, None], new, best)
    return base + best[:, nb]


#: Cells (fits x subjects) of one chunk of the profile computation: its temporaries, (subjects or
#: count rows) x fits, stay within a core's cache (the count form is at most _COUNT_FORM_RATIO
#: times wider).
_PROFILE_CELLS = 1 << 16


def _upper_proxy(lik, t_hat, w_hat, ll_hat, upper_alpha):
    """(nu_lower, s2_upper, profile deviances) from the profile bound at one-sided level upper_alpha per row."""
    from benchcert.stats._dist import norm

    crit = np.broadcast_to(norm.isf(np.asarray(upper_alpha, dtype=float)) ** 2, t_hat.shape)
    # Fits are taken in chunks of at most _PROFILE_CELLS cells, so that the temporaries stay
    # small whatever the number of models; every fit is computed on its own (sums over axis 0
    # only), so neither the chunks nor the split by form change any result.
    f = t_hat.size
    per = max(1, _PROFILE_CELLS // max(lik.mask.shape[1], 1))
    w_lo, mdev = np.empty(f), np.empty((_W_GRID.size - 1, f))
    for lo in range(0, f, per):
        chunk = np.arange(lo, min(f, lo + per))
        for sel, form in _profile_forms(_subset(lik, chunk) if chunk.size < f else lik):
            rows = chunk[sel]
            w_lo[rows], mdev[:, rows] = _precision_lower_bound(form, t_hat[rows], w_hat[rows], ll_hat[rows],
                                                               crit[rows])
    nu_lo = np.exp(w_lo)
    return nu_lo, 0.25 / (nu_lo + 1.0), mdev


def _finish(t, w, ll, conv, gw, status, pooled_mean, k, n_items, method, assumptions, shape, stacklevel,
            nu_lower=None, upper_alpha=None, profile=None):
    a, b, mu, nu = _ab(t, w)
    at_hi = (w >= _LOG_NU_MAX - 1e-9) & (gw > 0)
    at_lo = (w <= _LOG_NU_MIN + 1e-9) & (gw < 0)
    status = status.copy()
    status[(status == "ok") & at_hi] = "underdispersed"
    status[(status == "ok") & at_lo] = "lower_bound"
    fallback = np.isin(status, ["no_subjects", "one_subject", "boundary_mean", "single_items"])
    a = np.where(fallback, 0.0, a)
    b = np.where(fallback, 0.0, b)
    nu = np.where(fallback, 0.0, nu)
    mu = np.where(fallback, pooled_mean, mu)
    ll = np.where(fallback, 0.0, ll)
    conv = conv | fallback
    s2 = np.where(fallback, WORST_CASE_S2, 0.25 / (nu + 1.0))
    degenerate = status != "ok"
    _warn_statuses(status, method, shape, stacklevel + 2)
    if not conv.all():
        where, refs = _fit_rows(~conv, shape)
        warn_degenerate(f"{method}: the optimiser did not meet its tolerance" + where + "; the best point found "
                        "is reported (converged=False)", *refs, stacklevel=stacklevel + 1)

    def r(x):
        x = np.asarray(x).reshape(shape)
        return x.item() if x.ndim == 0 else x

    extra = {}
    if nu_lower is not None:
        nu_lo = np.where(fallback, 0.0, np.minimum(nu_lower, nu))
        extra = dict(nu_lower=r(nu_lo), s2_upper=r(np.where(fallback, WORST_CASE_S2, 0.25 / (nu_lo + 1.0))),
                     upper_alpha=r(np.broadcast_to(upper_alpha, nu_lo.shape).astype(float)))
        if profile is not None:
            # fallbacks: no curve (their proxy is the worst case 1/4 whatever the deviance)
            prof = np.where(fallback[:, None], np.inf, profile)
            extra["profile"] = prof.reshape(shape + (prof.shape[-1],))
    return BetaFit(a=r(a), b=r(b), nu=r(nu), mean=r(mu), s2=r(s2), icc=r(4.0 * s2), loglik=r(ll),
                   n_subjects=r(k.astype(np.int64)), n_items=r(n_items), status=r(status.astype(str)),
                   degenerate=r(degenerate), converged=r(conv), method=method, assumptions=assumptions, **extra)


def _warn_statuses(status, method, shape, stacklevel):
    for st in ("one_subject", "boundary_mean", "single_items", "underdispersed", "lower_bound", "no_subjects"):
        hit = status == st
        if hit.any():
            where, refs = _fit_rows(hit, shape)
            warn_degenerate(f"{method}: {_STATUS[st][1]}" + where, *refs, stacklevel=stacklevel)


def _fit_rows(mask, shape) -> tuple[str, tuple[Ref, ...]]:
    """Which fit rows a warning is about (a template fragment and its ref); nothing for one fit."""
    if len(shape) == 0:
        return "", ()
    return " ({})", (Ref("fit row", np.flatnonzero(mask)),)


def _rows(x, name):
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array; got {type(x).__name__}") from exc
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (one fit) or 2-D (one fit per row); got shape {arr.shape}")
    return arr


def _fit_beta_binomial_iv(successes, trials):
    y = _rows(successes, "successes")
    m = _rows(trials, "trials")
    if y.shape != m.shape:
        raise ValueError(f"successes and trials must have the same shape; got {y.shape} and {m.shape}")
    if y.size == 0:
        raise ValueError(f"successes must hold at least one subject; got shape {y.shape}")
    for name, v in (("successes", y), ("trials", m)):
        bad = ~np.isfinite(v) | (v < 0) | (v != np.round(v))
        if bad.any():
            raise ValueError(f"{name} must be non-negative integers; got {v[bad].flat[0]!r}")
    if np.any(y > m):
        raise ValueError(f"successes must not exceed trials; got {y[y > m].flat[0]!r} > {m[y > m].flat[0]!r}")
    return y, m


def fit_beta_binomial(successes, trials, *, upper_alpha=None) -> BetaFit:
    r"""Beta-binomial maximum-likelihood fit of subject counts (paper section 6.2).

    Parameters
    ----------
    successes : array_like of int, shape (K,) or (F, K)
        Correct answers :math:`Y_k` per subject; a 2-D input holds F independent fits
        (e.g. every domain of every model), one per row.
    trials : array_like of int, same shape
        Answered items :math:`m_k` per subject. Entries with ``trials == 0`` are padding
        (or subjects not answered) and are ignored.

    Returns
    -------
    BetaFit
        Scalars for 1-D input, (F,) arrays for 2-D input.

    Notes
    -----
    Maximises (section 6.2)

    .. math::

        \ell(a, b) = \sum_k \Big[\log\binom{m_k}{Y_k} + \log B(Y_k + a, m_k - Y_k + b)
                     - \log B(a, b)\Big]

    over a, b > 0 in the coordinates (logit of a/(a+b), log(a+b)), by a batched
    Levenberg-Marquardt (damped Newton) ascent with analytic gradient and Hessian
    (digamma / trigamma), from three starts (method of moments, a + b = 1, a + b = 100),
    keeping each row's best. The proxy is the Marchal-Arbel :math:`s^2 = 1/(4(a+b+1))`
    (Eq. 4) and the ICC :math:`1/(a+b+1)`.

    Degenerate cases are explicit and warned (:class:`DegenerateDataWarning`), never
    silent:

    * one subject, every subject at 0 or at m_k, or no subject with two items: a + b is
      not identifiable, so the worst-case proxy 1/4 is used (a = b = 0 reported);
    * under-dispersion (the MLE of a + b is infinite): reported at a + b = 1e6 (s2 = 2.5e-7);
    * a + b at its lower bound 1e-4 (extreme over-dispersion): s2 ~ 1/4.
    """
    y, m = _fit_beta_binomial_iv(successes, trials)
    if upper_alpha is not None:
        upper_alpha = _check_upper_alpha(upper_alpha, y.shape[0] if y.ndim == 2 else 1)
    shape = () if y.ndim == 1 else (y.shape[0],)
    y2, m2 = np.atleast_2d(y), np.atleast_2d(m)
    return _fit_bb_rows(y2, m2, shape, stacklevel=3, upper_alpha=upper_alpha)


def _check_upper_alpha(upper_alpha, rows):
    ua = np.asarray(upper_alpha, dtype=float)
    if ua.ndim > 1 or (ua.ndim == 1 and ua.shape != (rows,)) or np.any(~((ua > 0) & (ua < 1))):
        raise ValueError(f"upper_alpha must be in (0, 1) (one value, or one per fit); got {upper_alpha!r}")
    return ua


def _fit_bb_rows(y, m, shape, stacklevel, upper_alpha=None):
    mask = m > 0
    k = mask.sum(axis=1)
    ysum, msum = np.sum(np.where(mask, y, 0), axis=1), np.sum(np.where(mask, m, 0), axis=1)
    pooled = np.where(msum > 0, ysum / np.maximum(msum, 1), 0.5)
    status = np.full(k.shape, "ok", dtype=object)
    status[np.all(~mask | (y == 0), axis=1) | np.all(~mask | (y == m), axis=1)] = "boundary_mean"
    status[~np.any(mask & (m >= 2), axis=1)] = "single_items"
    status[k == 1] = "one_subject"
    status[k == 0] = "no_subjects"
    fit_rows = np.flatnonzero(status == "ok")
    n = k.size
    t = np.zeros(n)
    w = np.zeros(n)
    ll = np.zeros(n)
    conv = np.ones(n, dtype=bool)
    gw = np.zeros(n)
    if fit_rows.size:
        yy, mm, mk = y[fit_rows], m[fit_rows], mask[fit_rows]
        # Keep the padded columns harmless (m = 1, y = 0) for the special functions.
        yy = np.where(mk, yy, 0.0)
        mm = np.where(mk, mm, 1.0)
        lik = _BetaBinomialLik(yy, mm, mk)
        p = yy / mm
        inv_m = np.sum(np.where(mk, 1.0 / mm, 0.0), axis=1) / k[fit_rows]
        t_mom, w_mom = _moment_start(p, mm, mk, inv_m)
        starts = [(t_mom, w_mom), (t_mom, np.zeros_like(t_mom)), (t_mom, np.full_like(t_mom, math.log(100.0)))]
        t_f, w_f, ll_f, conv_f, gw_f = _best_of_starts(lik, starts)
        const = np.sum(np.where(mk, gammaln(mm + 1) - gammaln(yy + 1) - gammaln(mm - yy + 1), 0.0), axis=1)
        t[fit_rows], w[fit_rows], ll[fit_rows] = t_f, w_f, ll_f + const
        conv[fit_rows], gw[fit_rows] = conv_f, gw_f
    nu_lo, mdev = _profile_rows(n, fit_rows, upper_alpha,
                                lambda ua: _upper_proxy(lik, t_f, w_f, ll_f, ua))
    return _finish(t, w, ll, conv, gw, status, pooled, k, np.asarray(msum, dtype=np.int64),
                   "beta_binomial_mle", _BB_ASSUMPTIONS, shape, stacklevel + 1, nu_lower=nu_lo,
                   upper_alpha=upper_alpha, profile=mdev)


def _profile_rows(n: int, fit_rows: np.ndarray, upper_alpha, upper_proxy):
    """(nu_lower, profile deviances) for all n rows, or (None, None) without ``upper_alpha``.

    Rows that were not fitted keep nu_lower = 0 (the worst-case proxy) and an infinite profile;
    ``upper_proxy(alpha of the fitted rows)`` runs the profile search on the fitted rows only.
    """
    if upper_alpha is None:
        return None, None
    ua = np.broadcast_to(np.asarray(upper_alpha, dtype=float), (n,))
    nu_lo = np.zeros(n)
    mdev = np.full((n, _W_GRID.size - 1), np.inf)
    if fit_rows.size:
        nu_f, _, md = upper_proxy(ua[fit_rows])
        nu_lo[fit_rows], mdev[fit_rows] = nu_f, md.T
    return nu_lo, mdev


def _fit_beta_means_iv(means, mask):
    x = _rows(means, "means")
    if mask is None:
        mk = ~np.isnan(x)
    else:
        mk = np.asarray(mask)
        if mk.shape != x.shape or mk.dtype != np.bool_:
            raise ValueError(f"mask must be a boolean array of shape {x.shape}; got {mk.dtype} {mk.shape}")
        mk = mk & ~np.isnan(x)
    bad = mk & ~((x >= 0) & (x <= 1))
    if bad.any():
        raise ValueError(f"means must lie in [0, 1]; got {x[bad].flat[0]!r}")
    return x, mk


def fit_beta_means(means, *, mask=None) -> BetaFit:
    r"""Maximum-likelihood Beta(a, b) fit to subject mean scores (non-binary scores).

    Parameters
    ----------
    means : array_like, shape (K,) or (F, K)
        Subject mean scores in [0, 1]; NaN entries are ignored.
    mask : array_like of bool, same shape, keyword-only, optional
        Which entries to use (default: the non-NaN ones).

    Returns
    -------
    BetaFit
        ``method="beta_mle_on_subject_means"``.

    Notes
    -----
    For scores that are not 0/1 the beta-binomial likelihood does not apply; this
    fits a Beta to the subject means :math:`x_k` instead, maximising
    :math:`\sum_k[(a-1)\log x_k + (b-1)\log(1-x_k)] - K\log B(a, b)` (concave in (a, b)).
    Since :math:`\mathrm{Var}(x_k) = \mathrm{Var}(p_k) + E[\text{item noise}]`, the fitted
    spread overstates the subject spread and the proxy errs conservative. Means of exactly
    0 or 1 are squeezed to :math:`(x(K-1) + 1/2)/K` (Smithson and Verkuilen 2006, a
    deliberate departure needed for a finite likelihood). Degenerate cases follow
    :func:`fit_beta_binomial` (one subject or all means equal to 0 or to 1: worst case 1/4;
    all means equal: under-dispersed, reported at the bound).
    """
    x, mk = _fit_beta_means_iv(means, mask)
    shape = () if x.ndim == 1 else (x.shape[0],)
    return _fit_means_rows(np.atleast_2d(x), np.atleast_2d(mk), shape, stacklevel=3)


def _fit_means_rows(x, mask, shape, stacklevel, n_items=None, upper_alpha=None):
    k = mask.sum(axis=1)
    xs = np.where(mask, x, 0.5)
    pooled = np.where(k > 0, np.sum(np.where(mask, xs, 0.0), axis=1) / np.maximum(k, 1), 0.5)
    status = np.full(k.shape, "ok", dtype=object)
    status[np.all(~mask | (xs == 0), axis=1) | np.all(~mask | (xs == 1), axis=1)] = "boundary_mean"
    status[k == 1] = "one_subject"
    status[k == 0] = "no_subjects"
    n = k.size
    t, w, ll, gw = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    conv = np.ones(n, dtype=bool)
    fit_rows = np.flatnonzero(status == "ok")
    if fit_rows.size:
        kk = k[fit_rows][:, None].astype(float)
        xx = (xs[fit_rows] * (kk - 1.0) + 0.5) / kk
        mk = mask[fit_rows]
        # All means equal: the Beta MLE has a + b = infinity (zero spread).
        spread = np.max(np.where(mk, xx, -np.inf), axis=1) - np.min(np.where(mk, xx, np.inf), axis=1)
        lik = _BetaLik(xx, mk)
        ones = np.ones_like(xx)
        t_mom, w_mom = _moment_start(xx, ones, mk, np.zeros(fit_rows.size))
        starts = [(t_mom, w_mom), (t_mom, np.zeros_like(t_mom)), (t_mom, np.full_like(t_mom, math.log(100.0)))]
        t_f, w_f, ll_f, conv_f, gw_f = _best_of_starts(lik, starts)
        flat = spread <= 0
        w_f = np.where(flat, _LOG_NU_MAX, w_f)
        gw_f = np.where(flat, 1.0, gw_f)
        t[fit_rows], w[fit_rows], ll[fit_rows], conv[fit_rows], gw[fit_rows] = t_f, w_f, ll_f, conv_f, gw_f
    nu_lo, mdev = _profile_rows(n, fit_rows, upper_alpha,
                                lambda ua: _upper_proxy(lik, t_f, w_f, ll_f, ua))
    items = k.astype(np.int64) if n_items is None else n_items
    return _finish(t, w, ll, conv, gw, status, pooled, k, items, "beta_mle_on_subject_means",
                   _BETA_MEANS_ASSUMPTIONS, shape, stacklevel + 1, nu_lower=nu_lo, upper_alpha=upper_alpha,
                   profile=mdev)


# ======================================================================================
# All (domain, model) fits of a score matrix


@dataclass(frozen=True)
class DomainFits:
    """Per-domain fits of every model, with the subject counts they came from.

    Attributes
    ----------
    a, b, nu, mean, s2, icc, loglik : ndarray, shape (D, M)
        As in :class:`BetaFit`, one per (domain, model).
    n_subjects : ndarray, shape (D, M), int
        Answered subjects per domain and model (K_d for that model).
    n_items : ndarray, shape (D, M), int
        Answered items per domain and model.
    status : ndarray of str, shape (D, M)
    degenerate, converged : ndarray of bool, shape (D, M)
    fit_method : ndarray of str, shape (M,)
        ``"beta_binomial_mle"`` (binary scores) or ``"beta_mle_on_subject_means"``.
    binary : ndarray of bool, shape (M,)
        Whether every observed score of the model is 0 or 1.
    n : ndarray, shape (K, M), int
        Answered items per subject and model.
    total : ndarray, shape (K, M)
        Sum of scores per subject and model.
    subject_domains : ndarray, shape (K,), int
    method : str
        ``"domain_beta_fits"``.
    assumptions : tuple of str
    nu_lower, s2_upper, upper_alpha : ndarray, shape (D, M), or None
        With ``proxy_alpha``: per (domain, model) the profile-likelihood lower confidence
        bound on a + b, the subject proxy 1/(4 (nu_lower + 1)) it gives (1/4 for the
        worst-case fallbacks), and its one-sided level (``proxy_alpha`` shared equally over the
        model's domains with two or more answered subjects).
    proxy_alpha : float or None
        The share of alpha spent on the proxies' upper bounds, per model.
    profile : ndarray, shape (D, M, G - 1), or None
        Per (domain, model) the interval-wise lower bounds on the profile deviance of log(a + b)
        (see :attr:`BetaFit.profile`); inf where the proxy is the worst case.
    """

    a: np.ndarray
    b: np.ndarray
    nu: np.ndarray
    mean: np.ndarray
    s2: np.ndarray
    icc: np.ndarray
    loglik: np.ndarray
    n_subjects: np.ndarray
    n_items: np.ndarray
    status: np.ndarray
    degenerate: np.ndarray
    converged: np.ndarray
    fit_method: np.ndarray
    binary: np.ndarray
    n: np.ndarray
    total: np.ndarray
    subject_domains: np.ndarray
    method: str
    assumptions: tuple[str, ...]
    nu_lower: np.ndarray | None = None
    s2_upper: np.ndarray | None = None
    upper_alpha: np.ndarray | None = None
    proxy_alpha: float | None = None
    profile: np.ndarray | None = None

    @property
    def reason(self) -> np.ndarray:
        """Plain-language explanation of each (domain, model) fit's status."""
        return np.vectorize(lambda s: _STATUS[s][1], otypes=[object])(self.status)

    @property
    def subject_means(self) -> np.ndarray:
        """(K, M) subject mean scores; NaN where the model answered none of the subject."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, self.total / np.where(self.n > 0, self.n, 1), np.nan)


def _matrix_iv(scores, subjects, subject_domains, n_subjects=None):
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    codes = check_codes(subjects, "subjects", length=s.shape[0])
    empty = all_missing_columns(s)
    if empty.size:
        raise ValueError(f"scores has no observed (non-NaN) item for model column(s) {_short(empty)}")
    k = int(codes.max()) + 1 if n_subjects is None else int(n_subjects)
    if subject_domains is None:
        doms = np.zeros(k, dtype=np.int64)
    else:
        doms = check_codes(subject_domains, "subject_domains")
        if doms.shape[0] < int(codes.max()) + 1:
            raise ValueError(f"subject_domains must have one code per subject (at least "
                             f"{int(codes.max()) + 1}); got length {doms.shape[0]}")
        k = doms.shape[0]
    return s, codes, doms, k


def _counts(s, codes, k):
    grouping = Grouping(codes, k)
    ss = grouping.gather(s)
    obs = ~np.isnan(ss)
    n = grouping.reduce_sorted(obs)
    filled = np.fmax(ss, 0.0, out=ss)
    total = grouping.reduce_sorted(filled)
    binary = np.all(~obs | (filled == 0.0) | (filled == 1.0), axis=0)
    return n.astype(np.int64), total, binary


def _fit_domains_iv(scores, subjects, subject_domains):
    return _matrix_iv(scores, subjects, subject_domains)


def fit_domains(scores, subjects, subject_domains=None, *, proxy_alpha=None) -> DomainFits:
    r"""Fit every (domain, model) of a score matrix at once (paper section 6.2).

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Item scores in [0, 1]; NaN marks an item a model did not answer.
    subjects : array_like of int, shape (n_items,)
        Subject code of each item, 0..K-1.
    subject_domains : array_like of int, shape (K,), optional
        Domain code of each subject; default one domain (hierarchy "subject" only).

    Returns
    -------
    DomainFits

    Notes
    -----
    For a model whose observed scores are all 0/1 each domain gets
    :func:`fit_beta_binomial` on its subjects' (correct, answered) counts; otherwise
    :func:`fit_beta_means` on the subject means (section 6.2). A subject a model never
    answered is left out of that model's fit. All fits run as one batch. Subjects with a
    single answered item are kept (they inform the mean only) and warned about.
    """
    s, codes, doms, k = _fit_domains_iv(scores, subjects, subject_domains)
    if proxy_alpha is not None:
        proxy_alpha = check_alpha(proxy_alpha)
    n, total, binary = _counts(s, codes, k)
    return _fit_domains_counts(n, total, binary, doms, stacklevel=3, proxy_alpha=proxy_alpha)


def _fit_domains_counts(n, total, binary, doms, stacklevel, proxy_alpha=None):
    k, mdl = n.shape
    d = int(doms.max()) + 1 if doms.size else 1
    single = (n == 1)
    if single.any():
        subj = np.flatnonzero(single.any(axis=1))
        warn_degenerate("fit_domains: {} have a single answered item for some model; such a subject's "
                        "accuracy is 0 or 1 and informs the domain mean only", Ref("subject", subj),
                        stacklevel=stacklevel)
    order = np.argsort(doms, kind="stable")
    sizes = np.bincount(doms, minlength=d)
    kmax = max(int(sizes.max()), 1)
    pos = np.empty(k, dtype=np.int64)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pos[order] = np.arange(k) - np.repeat(starts, sizes)
    # Padded (D, Kmax, M) layout, then one row per (domain, model).
    y_pad = np.zeros((d, kmax, mdl))
    m_pad = np.zeros((d, kmax, mdl))
    y_pad[doms, pos] = total
    m_pad[doms, pos] = n
    y_rows = y_pad.transpose(0, 2, 1).reshape(d * mdl, kmax)
    m_rows = m_pad.transpose(0, 2, 1).reshape(d * mdl, kmax)
    model_of_row = np.tile(np.arange(mdl), d)
    bin_rows = binary[model_of_row]
    ua_rows = None
    if proxy_alpha is not None:
        # Bonferroni over the domains whose proxy is estimated (two or more answered subjects).
        fitted = (np.sum(m_rows > 0, axis=1) >= 2).reshape(d, mdl)
        n_fit = np.maximum(fitted.sum(axis=0), 1)
        ua_rows = np.broadcast_to(proxy_alpha / n_fit, (d, mdl)).reshape(-1)
    names = ("a", "b", "nu", "mean", "s2", "icc", "loglik", "status")
    if ua_rows is not None:
        names += ("nu_lower", "s2_upper", "upper_alpha")
    fields = {f: np.empty(d * mdl, dtype=object if f == "status" else float) for f in names}
    prof_rows = np.full((d * mdl, _W_GRID.size - 1), np.inf) if ua_rows is not None else None
    n_sub = np.zeros(d * mdl, dtype=np.int64)
    n_it = np.zeros(d * mdl, dtype=np.int64)
    conv = np.ones(d * mdl, dtype=bool)
    for is_bin in (True, False):
        rows = np.flatnonzero(bin_rows == is_bin)
        if not rows.size:
            continue
        if is_bin:
            # Binary: totals are integer counts (rounded against float summation noise).
            fit = _fit_bb_rows(np.round(y_rows[rows]), m_rows[rows], (rows.size,), stacklevel=stacklevel + 1,
                               upper_alpha=None if ua_rows is None else ua_rows[rows])
        else:
            mk = m_rows[rows] > 0
            with np.errstate(invalid="ignore", divide="ignore"):
                xm = np.where(mk, y_rows[rows] / np.where(mk, m_rows[rows], 1.0), np.nan)
            fit = _fit_means_rows(xm, mk, (rows.size,), stacklevel + 1,
                                  n_items=m_rows[rows].sum(axis=1).astype(np.int64),
                                  upper_alpha=None if ua_rows is None else ua_rows[rows])
        for f in fields:
            fields[f][rows] = getattr(fit, f)
        if prof_rows is not None:
            prof_rows[rows] = fit.profile
        n_sub[rows] = fit.n_subjects
        n_it[rows] = fit.n_items
        conv[rows] = fit.converged

    def r(x):
        return np.asarray(x).reshape(d, mdl)

    status = r(fields["status"]).astype(str)
    upper = {}
    if ua_rows is not None:
        upper = dict(nu_lower=r(fields["nu_lower"]).astype(float), s2_upper=r(fields["s2_upper"]).astype(float),
                     upper_alpha=r(fields["upper_alpha"]).astype(float), proxy_alpha=float(proxy_alpha),
                     profile=prof_rows.reshape(d, mdl, -1))
    return DomainFits(
        a=r(fields["a"]).astype(float), b=r(fields["b"]).astype(float), nu=r(fields["nu"]).astype(float),
        mean=r(fields["mean"]).astype(float), s2=r(fields["s2"]).astype(float),
        icc=r(fields["icc"]).astype(float), loglik=r(fields["loglik"]).astype(float),
        n_subjects=r(n_sub), n_items=r(n_it), status=status, degenerate=status != "ok", converged=r(conv),
        fit_method=np.where(binary, "beta_binomial_mle", "beta_mle_on_subject_means"), binary=binary,
        n=n, total=total, subject_domains=doms, method="domain_beta_fits",
        assumptions=_BB_ASSUMPTIONS if binary.all() else _BB_ASSUMPTIONS + _BETA_MEANS_ASSUMPTIONS[:1], **upper,
    )


# ======================================================================================
# Corollary 6.1


_COR61_ASSUMPTIONS = (
    "fixed-domain hierarchy (Corollary 6.1): within a domain, subject accuracies p_k are "
    "exchangeable given a domain factor; within a subject, items are independent given p_k",
    "the interval is about E[Z | domain factors] (domains are fixed strata, sigma2_dom = 0 "
    "by default, as in the paper's MMLU analysis); a top-level proxy can be added",
    "s_d^2 is the Marchal-Arbel proxy of the fitted beta-binomial, a plug-in: the MLE's own "
    "error is not in the half-width (paper sections 6.2, 7.6); non-identifiable domains use "
    "the worst case 1/4",
    "sub-Gaussian (Chernoff) half-width sqrt(2 sigma2_eff log(2/alpha)): conservative "
    "relative to a normal interval with the same variance",
)

_COR61_UPPER_ASSUMPTIONS = (
    _COR61_ASSUMPTIONS[0],
    _COR61_ASSUMPTIONS[1],
    "the subject term is an upper confidence bound: with the domains' profile likelihoods, the one-sided "
    "profile-likelihood bound on sum_d s_d^2 A_d at level proxy_alpha (else the Marchal-Arbel proxy at "
    "each domain's lower bound on a + b, Bonferroni over domains); the union bound with the Chernoff tail "
    "at alpha - proxy_alpha gives miscoverage <= alpha (the likelihood-ratio bound is large-sample; "
    "simulations with 2-11 subjects per domain cover, see tests/stats/test_stats_hierarchical.py); "
    "non-identifiable domains use the worst case 1/4",
    _COR61_ASSUMPTIONS[3],
)

_ITEM_ONLY_ASSUMPTIONS = (
    "hierarchy 'none': items are treated as independent, so only the item-level "
    "bounded-difference proxy (Hoeffding/McDiarmid) is used; dependence between items of a "
    "subject is assumed away and the interval is NOT robust to it",
    "sub-Gaussian (Chernoff) half-width sqrt(2 sigma2_item log(2/alpha))",
)

_WEIGHTINGS = {
    "macro": "macro weights a_k = 1/K over the model's answered subjects",
    "pooled": "pooled weights a_k = m_k/N over the model's answered items",
    "user": "user weights a_k, restricted to the model's answered subjects and renormalised to sum 1",
}


@dataclass(frozen=True)
class HierarchicalBound:
    """Corollary 6.1 for every model of a matrix.

    Attributes
    ----------
    estimate, lower, upper, half_width : ndarray, shape (M,)
        Z_a, the interval clipped to [0, 1], and the unclipped half-width
        sqrt(2 sigma2_eff log(2/alpha)).
    sigma2_item : ndarray, shape (M,)
        (1/4) sum_k a_k^2 / m_k (R = 1).
    sigma2_subj : ndarray, shape (M,)
        sum_d s_d^2 sum_{k in d} a_k^2 (0 for hierarchy "none").
    sigma2_dom : ndarray, shape (M,)
        The top-level proxy supplied (0 by default).
    sigma2_eff : ndarray, shape (M,)
        The sum of the three.
    weights : ndarray, shape (K, M)
        a_k used for each model (0 for unanswered subjects).
    alpha : float
    n : ndarray, shape (M,), int
        Answered items per model.
    n_subjects : ndarray, shape (M,), int
        Subjects with positive weight.
    weighting : str
        ``"macro"``, ``"pooled"`` or ``"user"``.
    method : str
        ``"hierarchical"``.
    assumptions : tuple of str
    proxy_alpha : float
        Share of alpha spent on upper bounds for the subject proxies (0: plug-in or known).
    """

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    sigma2_item: np.ndarray
    sigma2_subj: np.ndarray
    sigma2_dom: np.ndarray
    sigma2_eff: np.ndarray
    weights: np.ndarray
    alpha: float
    n: np.ndarray
    n_subjects: np.ndarray
    weighting: str
    method: str
    assumptions: tuple[str, ...]
    proxy_alpha: float = 0.0


def _hierarchical_bound_iv(subject_means, subject_sizes, subject_domains, domain_s2, weights, alpha, sigma2_dom,
                           proxy_alpha=0.0):
    alpha = check_alpha(alpha)
    if isinstance(proxy_alpha, (bool, np.bool_)) or not isinstance(proxy_alpha, (int, float)) \
            or not 0.0 <= float(proxy_alpha) < alpha:
        raise ValueError(f"proxy_alpha must be a number in [0, alpha) = [0, {alpha:g}); got {proxy_alpha!r}")
    try:
        n = np.asarray(subject_sizes, dtype=float)
        x = np.asarray(subject_means, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"subject_means and subject_sizes must be numeric; got {exc}") from exc
    if n.ndim == 1:
        n, x = n[:, None], x[:, None]
    if n.ndim != 2 or x.shape != n.shape or n.size == 0:
        raise ValueError(f"subject_means and subject_sizes must both have shape (K, M); got {x.shape} and {n.shape}")
    if np.any(~np.isfinite(n) | (n < 0) | (n != np.round(n))):
        raise ValueError(f"subject_sizes must be non-negative integers; got {n[~np.isfinite(n) | (n < 0)].flat[:1]!r}")
    ans = n > 0
    if np.any(ans & ~((x >= 0) & (x <= 1))):
        raise ValueError(f"subject_means must lie in [0, 1] where subject_sizes > 0; got {x[ans & ~((x >= 0) & (x <= 1))].flat[0]!r}")
    if not ans.any(axis=0).all():
        raise ValueError(f"every model needs an answered subject; model column(s) {_short(np.flatnonzero(~ans.any(axis=0)))} have none")
    k, mdl = n.shape
    doms = check_codes(subject_domains, "subject_domains", length=k)
    d = int(doms.max()) + 1
    if domain_s2 is None:
        s2 = None
    else:
        s2 = np.asarray(domain_s2, dtype=float)
        if s2.ndim == 1:
            s2 = s2[:, None]
        if s2.shape[0] < d or s2.shape[1] not in (1, mdl):
            raise ValueError(f"domain_s2 must have shape (D, M) = ({d}, {mdl}); got {np.shape(domain_s2)}")
        if np.any(~np.isfinite(s2) | (s2 < 0)):
            raise ValueError(f"domain_s2 must be finite and >= 0; got {s2[~np.isfinite(s2) | (s2 < 0)].flat[0]!r}")
        s2 = np.broadcast_to(s2, (s2.shape[0], mdl))
    if isinstance(weights, str):
        if weights not in ("macro", "pooled"):
            raise ValueError(f"weights must be 'macro', 'pooled' or an array of K subject weights; got {weights!r}")
        w = weights
    else:
        try:
            w = np.asarray(weights, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"weights must be 'macro', 'pooled' or numeric; got {weights!r}") from exc
        if w.shape != (k,):
            raise ValueError(f"weights must have one entry per subject (length {k}); got shape {w.shape}")
        if np.any(~np.isfinite(w) | (w < 0)) or not w.sum() > 0:
            raise ValueError(f"weights must be finite, >= 0 and not all 0; got {weights!r}")
    sd = np.asarray(sigma2_dom, dtype=float)
    if sd.ndim > 1 or (sd.ndim == 1 and sd.shape != (mdl,)) or np.any(~np.isfinite(sd) | (sd < 0)):
        raise ValueError(f"sigma2_dom must be a finite value >= 0 (or one per model); got {sigma2_dom!r}")
    return x, n, doms, d, s2, w, alpha, np.broadcast_to(sd, (mdl,)).astype(float)


def hierarchical_bound(subject_means, subject_sizes, subject_domains, domain_s2, *, weights="macro",
                       alpha=0.05, sigma2_dom=0.0, proxy_alpha=0.0, profile=None) -> HierarchicalBound:
    r"""Corollary 6.1: hierarchical bounded-difference interval for any subject weights.

    Parameters
    ----------
    subject_means : array_like, shape (K, M)
        Mean score of each subject for each model (ignored where ``subject_sizes == 0``).
    subject_sizes : array_like of int, shape (K, M)
        Answered items m_k per subject and model; 0 = the model did not answer the subject.
    subject_domains : array_like of int, shape (K,)
        Domain code of each subject.
    domain_s2 : array_like, shape (D, M) or (D,), or None
        Subject-level proxy s_d^2 per domain (and model), e.g. :attr:`DomainFits.s2`.
        None means hierarchy "none": item-level proxy only.
    weights : {"macro", "pooled"} or array_like of shape (K,), keyword-only
        Subject weights a_k (user weights are renormalised over each model's answered subjects).
    alpha : float, keyword-only
    sigma2_dom : float or array_like of shape (M,), keyword-only
        Optional top-level (domain mixture) proxy; 0 treats domains as fixed strata.
    proxy_alpha : float, keyword-only
        Share of ``alpha`` already spent on upper confidence bounds for ``domain_s2`` (e.g.
        :attr:`DomainFits.s2_upper`); the Chernoff half-width then uses ``alpha -
        proxy_alpha`` and the union bound gives miscoverage <= alpha. 0 (default) when the
        proxies are known or plug-in.
    profile : ndarray, shape (D, M, G - 1), keyword-only, optional
        :attr:`DomainFits.profile`. With ``proxy_alpha > 0`` the subject term is then the joint
        upper confidence bound :func:`joint_subject_bound` at level ``proxy_alpha`` (one
        constraint over all domains) instead of sum_d s_d^2 A_d with ``domain_s2``.

    Returns
    -------
    HierarchicalBound

    Notes
    -----
    Corollary 6.1 (exchangeable bounded-difference paper, section 6.1): with
    :math:`Z_a = \sum_{d,k} a_{d,k}\bar X_{d,k}`, :math:`a_{d,k}\ge 0`, :math:`\sum a = 1`,

    .. math::

        P\{|Z_a - EZ_a| \ge t\} \le 2\exp\Big(-\frac{t^2}{2\sigma^2_{hier}}\Big),\quad
        \sigma^2_{hier} = \underbrace{\tfrac14\sum_{d,k}\frac{a_{d,k}^2}{m_{d,k}}}_{item}
        + \underbrace{\sum_d s_d^2\sum_{k\in d}a_{d,k}^2}_{subject}
        + \underbrace{\sigma^2_{dom}}_{domain},

    (the item term is the paper's :math:`\frac14\sum_{d,k,j}(a_{d,k}/m_{d,k})^2`), and the
    1 - alpha half-width is :math:`h = \sqrt{2\sigma^2_{hier}\log(2/\alpha)}` (section 7.4),
    the interval :math:`Z_a \pm h` clipped to [0, 1]. Macro:
    :math:`a_k = 1/K`; pooled: :math:`a_k = m_k/N`. It is Theorem 4.2 with item constants
    :math:`c = a_k/m_k` and :math:`\sigma^2_{mix} = \sigma^2_{subj} + \sigma^2_{dom}`
    (the tests check this identity against :func:`exchangeable_bound`).

    Departure (missing responses, not in the paper): a model is scored on the subjects and
    items it answered; its weights are taken over those.
    """
    x, n, doms, d, s2, w, alpha, sd = _hierarchical_bound_iv(
        subject_means, subject_sizes, subject_domains, domain_s2, weights, alpha, sigma2_dom, proxy_alpha)
    ans = n > 0
    if isinstance(w, str) and w == "macro":
        a = ans / ans.sum(axis=0)
        weighting = "macro"
    elif isinstance(w, str):
        a = n / n.sum(axis=0)
        weighting = "pooled"
    else:
        a = w[:, None] * ans
        tot = a.sum(axis=0)
        lost = tot <= 0
        if lost.any():
            warn_degenerate("hierarchical_bound: {} answered no subject with positive user weight; macro "
                            "weights used for them instead", Ref("model", np.flatnonzero(lost)))
            a[:, lost] = ans[:, lost]
            tot = a.sum(axis=0)
        partial = (w[:, None] > 0) & ~ans
        if partial.any():
            warn_degenerate("hierarchical_bound: {} did not answer every subject with positive weight; their "
                            "weights are renormalised over the answered subjects",
                            Ref("model", np.flatnonzero(partial.any(axis=0))))
        a = a / tot
        weighting = "user"
    xs = np.where(ans, x, 0.0)
    est = np.clip(np.sum(a * xs, axis=0), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_item = 0.25 * np.sum(np.where(ans, a * a / np.where(ans, n, 1.0), 0.0), axis=0)
    if s2 is None:
        s_subj = np.zeros_like(s_item)
        assumptions = _ITEM_ONLY_ASSUMPTIONS + (_WEIGHTINGS[weighting],)
    else:
        a2_dom = np.zeros((d, a.shape[1]))
        np.add.at(a2_dom, doms, a * a)
        if profile is not None and proxy_alpha > 0:
            prof = np.asarray(profile, dtype=float)
            if prof.ndim != 3 or prof.shape[:2] != (d, a.shape[1]):
                raise ValueError(f"profile must have shape (D, M, G - 1) = ({d}, {a.shape[1]}, ...); got {prof.shape}")
            s_subj = joint_subject_bound(prof, a2_dom, alpha=float(proxy_alpha))
        else:
            s_subj = np.sum(s2[:d] * a2_dom, axis=0)
        assumptions = ((_COR61_UPPER_ASSUMPTIONS if proxy_alpha > 0 else _COR61_ASSUMPTIONS)
                       + (_WEIGHTINGS[weighting],))
    s_eff = s_item + s_subj + sd
    hw = _half_width(s_eff, alpha - float(proxy_alpha))
    return HierarchicalBound(
        estimate=est, lower=np.clip(est - hw, 0.0, 1.0), upper=np.clip(est + hw, 0.0, 1.0), half_width=hw,
        sigma2_item=s_item, sigma2_subj=s_subj, sigma2_dom=sd.copy(), sigma2_eff=s_eff, weights=a,
        alpha=alpha, n=n.sum(axis=0).astype(np.int64), n_subjects=(a > 0).sum(axis=0).astype(np.int64),
        weighting=weighting, method="hierarchical", assumptions=assumptions, proxy_alpha=float(proxy_alpha),
    )


@dataclass(frozen=True)
class HierarchicalInterval:
    """:func:`hierarchical_interval`'s result: Corollary 6.1 plus the fits behind it.

    Attributes
    ----------
    bound : HierarchicalBound
    fits : DomainFits
    estimate, lower, upper, half_width : ndarray, shape (M,)
        Shortcuts to ``bound``'s fields.
    alpha : float
    n : ndarray, shape (M,)
    method : str
        ``"hierarchical"``.
    assumptions : tuple of str
    """

    bound: HierarchicalBound
    fits: DomainFits
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    alpha: float
    n: np.ndarray
    method: str
    assumptions: tuple[str, ...]


def _hierarchical_interval_iv(scores, subjects, subject_domains, fits):
    s, codes, doms, k = _matrix_iv(scores, subjects, subject_domains)
    if fits is not None and not isinstance(fits, DomainFits):
        raise ValueError(f"fits must be a DomainFits from fit_domains; got {type(fits).__name__}")
    if fits is not None and fits.n.shape != (k, s.shape[1]):
        raise ValueError(f"fits were made for {fits.n.shape} (K, M); scores give {(k, s.shape[1])}")
    return s, codes, doms, k


#: Default share of alpha spent on the subject proxies' upper confidence bounds.
PROXY_SHARE = 0.5


def hierarchical_interval(scores, subjects, subject_domains=None, *, weights="macro", alpha=0.05,
                          sigma2_dom=0.0, fits=None, proxy="upper", proxy_share=PROXY_SHARE) -> HierarchicalInterval:
    r"""Fit the domains and apply Corollary 6.1 to every model of a score matrix.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Item scores in [0, 1]; NaN = not answered.
    subjects : array_like of int, shape (n_items,)
        Subject code of each item.
    subject_domains : array_like of int, shape (K,), optional
        Domain of each subject (default: one domain).
    weights, alpha, sigma2_dom : keyword-only
        As in :func:`hierarchical_bound`.
    fits : DomainFits, keyword-only, optional
        Reuse fits from :func:`fit_domains` (they do not depend on the weights). With
        ``proxy="upper"`` they must have been made with ``proxy_alpha = proxy_share * alpha``.
    proxy : {"upper", "plugin"}, keyword-only
        ``"upper"`` (default): the subject proxy of each domain is an upper confidence bound
        (see Notes), which keeps the level with few subjects per domain. ``"plugin"``: the
        paper's section 7.4 plug-in of the fitted proxy, which does not (kept for comparison
        and for the paper's numbers).
    proxy_share : float, keyword-only
        Fraction of alpha spent on the proxies' bounds (default 1/2).

    Returns
    -------
    HierarchicalInterval

    Notes
    -----
    :func:`fit_domains` (beta-binomial MLE per domain, Marchal-Arbel proxy) followed by
    :func:`hierarchical_bound` - the paper's section 7.4 procedure, for any weights.

    Why the plug-in is not enough (departure from the paper). Corollary 6.1 holds for the
    TRUE proxies s_d^2. With 2-5 subjects in a domain the beta-binomial MLE of a + b is often
    infinite (under-dispersed fits: about half of them at K_d = 3-5) and the plug-in proxy is
    then ~0, so the subject term vanishes and macro/pooled coverage falls to 0.67-0.88 at
    alpha = 0.05 (pooled weights suffer most: one big subject carries most of the weight).

    The construction used by default. Let alpha_p = proxy_share * alpha. The subject term
    psi = sum_d A_d s_d^2 (A_d = sum of the squared weights of domain d's subjects) is replaced
    by psi_U, its one-sided profile-likelihood upper confidence bound at level alpha_p: the
    largest sum_d A_d / (4 (nu_d + 1)) over precisions whose total profile deviance
    sum_d 2 (l_max,d - l_p,d(nu_d)) is <= z^2_{1 - alpha_p} (each l_p,d profiles the domain's
    mean out; domains are independent, so their deviances add), computed conservatively by
    a knapsack over the grid of log(a + b) (:func:`joint_subject_bound`). An under-dispersed domain has a finite lower
    bound on a + b, so it no longer drives its proxy to 0; one constraint for the whole term
    costs far less than a Bonferroni share per domain. Then, as h is increasing in psi,

    P(|Z_a - E Z_a| > h) <= P(psi_U < psi) + P(|Z_a - E Z_a| > h(psi, alpha - alpha_p))
                         <= alpha_p + (alpha - alpha_p) = alpha

    (union bound). The first inequality's level is the likelihood-ratio bound's large-sample
    level; the seeded simulations in the tests check the whole interval at 2-11 subjects per
    domain, equal and very unequal subject sizes, macro, pooled and user weights, and
    MMLU-Pro's own structure. Cost: on MMLU-Pro (3-11 subjects in each of 14 domains) the
    half-widths grow 1.35-1.39x (macro, median 3.5 -> 4.8 pp) and 1.55-1.97x (pooled,
    4.6 -> 8.2 pp) over the plug-in (benchmarks/hierarchical_cost.py); with a Bonferroni share
    per domain instead (the per-domain bounds in ``fits.s2_upper``) it was 2.2-2.7x and
    2.8-3.7x.
    """
    s, codes, doms, k = _hierarchical_interval_iv(scores, subjects, subject_domains, fits)
    if proxy not in ("upper", "plugin"):
        raise ValueError(f"proxy must be 'upper' or 'plugin'; got {proxy!r}")
    alpha = check_alpha(alpha)
    if isinstance(proxy_share, bool) or not isinstance(proxy_share, (int, float)) or not 0 < proxy_share < 1:
        raise ValueError(f"proxy_share must be in (0, 1); got {proxy_share!r}")
    p_alpha = proxy_share * alpha if proxy == "upper" else 0.0
    if fits is None:
        fits = fit_domains(s, codes, doms, proxy_alpha=p_alpha if p_alpha > 0 else None)
    elif p_alpha > 0 and (fits.s2_upper is None or not math.isclose(fits.proxy_alpha, p_alpha)):
        raise ValueError(f"fits must come from fit_domains(..., proxy_alpha={p_alpha:g}) for proxy='upper'; "
                         f"got proxy_alpha={fits.proxy_alpha!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(fits.n > 0, fits.total / np.where(fits.n > 0, fits.n, 1), 0.0)
    bound = hierarchical_bound(means, fits.n, fits.subject_domains, fits.s2_upper if p_alpha > 0 else fits.s2,
                               weights=weights, alpha=alpha, sigma2_dom=sigma2_dom, proxy_alpha=p_alpha,
                               profile=fits.profile if p_alpha > 0 else None)
    return HierarchicalInterval(bound=bound, fits=fits, estimate=bound.estimate, lower=bound.lower,
                                upper=bound.upper, half_width=bound.half_width, alpha=bound.alpha, n=bound.n,
                                method="hierarchical", assumptions=bound.assumptions)
