"""Beta-binomial and Beta maximum-likelihood fits, batched over many domains and models
(exchangeable-bounds paper, section 6.2): :class:`BetaFit`, :func:`fit_beta_binomial`,
:func:`fit_beta_means`, and the status rules of a degenerate fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ..degenerate import Ref, warn_degenerate
from ..validation import as_float_array
from .likelihood import _BetaBinomialLik, _BetaLik, _ab, _best_of_starts, _moment_start
from .limits import NU_MAX, NU_MIN, WORST_CASE_S2, _LOG_NU_MAX, _LOG_NU_MIN
from .profile import _W_GRID, _upper_proxy
from .special import prepare_compiled

__all__ = ["BetaFit", "fit_beta_binomial", "fit_beta_means"]

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
        With ``upper_alpha``: per grid interval of log(a + b) (:data:`_W_GRID`) the smaller of
        the profile deviance 2 (l_max - l_p) at its two ends (0 on the fit's interval; inf for the
        fallbacks); what :func:`joint_subject_bound` combines across domains. That is the
        deviance's minimum over the interval where it is monotone across it (every interval of
        a unimodal profile); in a two-mode profile the interval holding the local maximum of
        l_p dips below both ends, and its value overstates the minimum slightly (at most 0.0059
        on the outlier rows of test_fit_global_max: not a strict lower bound there). Where both
        ends of an interval lie above the fit's critical value z^2 at ``upper_alpha`` (by a
        margin of 2/400 of it), the deviance of a grid point is a bound from one evaluation, not its maximum over the mean:
        still a lower bound above that value, which is all a bound at a level at or above
        ``upper_alpha`` reads of it (its knapsack cost is then "unaffordable" either way).
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


@dataclass(frozen=True)
class _Optimum:
    """The maximiser's point per fit row: t = logit(mean), w = log(a + b), the log-likelihood there,
    whether it converged, and the gradient in w (its sign tells a bound hit from above or below)."""

    t: np.ndarray
    w: np.ndarray
    ll: np.ndarray
    conv: np.ndarray
    gw: np.ndarray


@dataclass(frozen=True)
class _RowFacts:
    """What the rows' data say before any fit: status, pooled mean (the fallback's mean), subjects
    and items per row."""

    status: np.ndarray
    pooled_mean: np.ndarray
    k: np.ndarray
    n_items: np.ndarray


@dataclass(frozen=True)
class _FitKind:
    """Which fit this is (method name and assumptions) and the shape its results take."""

    method: str
    assumptions: tuple
    shape: tuple


@dataclass(frozen=True)
class _ProfileBound:
    """The profile-likelihood lower bound on a + b per row, its level, and the profile deviances."""

    nu_lower: np.ndarray
    upper_alpha: object
    profile: np.ndarray | None


def _profile_bound(nu_lower, upper_alpha, profile) -> _ProfileBound | None:
    return None if nu_lower is None else _ProfileBound(nu_lower, upper_alpha, profile)


def _finish(opt: _Optimum, rows: _RowFacts, kind: _FitKind, stacklevel: int,
            upper: _ProfileBound | None = None) -> BetaFit:
    t, w, ll, conv, gw = opt.t, opt.w, opt.ll, opt.conv, opt.gw
    status, pooled_mean, k, n_items = rows.status, rows.pooled_mean, rows.k, rows.n_items
    method, assumptions, shape = kind.method, kind.assumptions, kind.shape
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
    if upper is not None:
        nu_lo = np.where(fallback, 0.0, np.minimum(upper.nu_lower, nu))
        extra = dict(nu_lower=r(nu_lo), s2_upper=r(np.where(fallback, WORST_CASE_S2, 0.25 / (nu_lo + 1.0))),
                     upper_alpha=r(np.broadcast_to(upper.upper_alpha, nu_lo.shape).astype(float)))
        if upper.profile is not None:
            # fallbacks: no curve (their proxy is the worst case 1/4 whatever the deviance)
            # in place: the deviances are this fit's own (one (rows, G - 1) array: 0.46 GB at 500,000 fits)
            prof = upper.profile
            prof[fallback] = np.inf
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
    arr = as_float_array(x, name)
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
    keeping each row's best. The profile likelihood of a + b can have two modes (subjects that
    agree but for a few small ones at 0 or 100%: a local maximum at a finite a + b, the global
    one at the upper bound), so a coarse grid of 12 values of log(a + b) at the moment mean
    is also evaluated and a row ascends again from its best grid point where that point beats
    the maximum found or lies more than a grid step (2.1 in log(a + b)) from it. Against a
    dense, polished profile reference (``python tests/stats/hierarchical/_beta_fit_reference.py``:
    1,000 such fits), the three starts alone stopped at a local maximum in 13 (at a + b = 8-51)
    and this search in none; in a grid of ordinary data (2-60 subjects, 5-3,000 items each,
    rates 0.001-0.999) neither missed (the same script; a seeded part of both in
    tests/stats/hierarchical/test_fit_global_max.py). The proxy is the Marchal-Arbel
    :math:`s^2 = 1/(4(a+b+1))` (Eq. 4) and the ICC :math:`1/(a+b+1)`.

    Degenerate cases are explicit and warned (:class:`DegenerateDataWarning`), never
    silent:

    * one subject, every subject at 0 or at m_k, or no subject with two items: a + b is
      not identifiable, so the worst-case proxy 1/4 is used (a = b = 0 reported);
    * under-dispersion (the log-likelihood still rises at a + b = 1e6, its supremum is the
      binomial limit a + b -> infinity): reported at a + b = 1e6 (s2 = 2.5e-7), status
      ``"underdispersed"``, with the log-likelihood at 1e6 (below the limit's by at most about
      N / (2 10^6) for N items in all, reached when every subject scores the same proportion:
      0.009 for 60 identical subjects of 300 items, 0.099 for 20 of 10,000);
    * a + b at its lower bound 1e-4 (extreme over-dispersion, subjects near all wrong or all
      right: the two-point limit a + b -> 0): reported at 1e-4, status ``"lower_bound"``,
      s2 = 1/(4 (1 + 1e-4)) ~ 1/4.
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
    prepare_compiled(y.size)  # the compiled trigamma when these fits pay numba's start (the same bits)
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
    return _finish(_Optimum(t, w, ll, conv, gw), _RowFacts(status, pooled, k, np.asarray(msum, dtype=np.int64)),
                   _FitKind("beta_binomial_mle", _BB_ASSUMPTIONS, shape), stacklevel + 1,
                   _profile_bound(nu_lo, upper_alpha, mdev))


def _profile_rows(n: int, fit_rows: np.ndarray, upper_alpha, upper_proxy):
    """(nu_lower, profile deviances) for all n rows, or (None, None) without ``upper_alpha``.

    Rows that were not fitted keep nu_lower = 0 (the worst-case proxy) and an infinite profile;
    ``upper_proxy(alpha of the fitted rows)`` runs the profile search on the fitted rows only.
    """
    if upper_alpha is None:
        return None, None
    ua = np.broadcast_to(np.asarray(upper_alpha, dtype=float), (n,))
    nu_lo = np.zeros(n)
    if fit_rows.size == n:  # every row fitted (fit_rows = 0..n-1): the deviances as computed, not a copy
        nu_f, _, md = upper_proxy(ua)
        nu_lo[:] = nu_f
        return nu_lo, md.T
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
    prepare_compiled(x.size)
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
    return _finish(_Optimum(t, w, ll, conv, gw), _RowFacts(status, pooled, k, items),
                   _FitKind("beta_mle_on_subject_means", _BETA_MEANS_ASSUMPTIONS, shape), stacklevel + 1,
                   _profile_bound(nu_lo, upper_alpha, mdev))
