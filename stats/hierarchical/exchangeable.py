"""Theorem 4.2 of the exchangeable-bounds paper (the bounded-difference bound with a mixture
proxy) and the Marchal-Arbel sub-Gaussian proxy of a Beta variable (section 6.2, Eq. 3-4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..degenerate import warn_degenerate
from ..validation import check_alpha

__all__ = ["ExchangeableBound", "exchangeable_bound", "marchal_arbel_proxy"]

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
