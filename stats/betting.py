r"""Confidence bounds for a bounded mean by betting, valid by theorem at a fixed sample size.

The directional claims of the verdicts (``improved`` / ``regressed``) rest on this module where
the units are i.i.d. draws of a bounded variable - the subjects' mean differences of the
new-subjects question (:func:`betting_mean_bounds`) - and where they are independent but not
identically distributed - the items of the items question, whose expectations differ by subject
(:func:`independent_mean_bounds`).

*i.i.d. units* (Waudby-Smith and Ramdas 2024, "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 1-27; Section 3, the predictable plug-in betting strategy with its
fixed-sample tuning, their eq. (26), and Theorem 3 / Proposition 3 for the validity of the
capital process).  Rescale :math:`Y_i = (X_i + 1)/2 \in [0, 1]`.  For a candidate mean m the
capital

.. math:: K^+_t(m) = \prod_{i \le t} \big(1 + \lambda^+_i(m) (Y_i - m)\big), \qquad
          \lambda^+_i(m) = \min\Big(\frac{c}{m}, \sqrt{\tfrac{2\log(2/\alpha)}{n\,\hat\sigma^2_{i-1}}}\Big),

with :math:`\hat\mu_i = (1/2 + \sum_{j \le i} Y_j)/(i + 1)`,
:math:`\hat\sigma^2_i = (1/4 + \sum_{j \le i}(Y_j - \hat\mu_j)^2)/(i + 1)` (predictable: the
bet on unit i uses units before it only) and c = 3/4, is a nonnegative supermartingale whenever
:math:`E[Y_i \mid Y_{<i}] \le m` (each factor has conditional mean
:math:`1 + \lambda_i(E[Y_i \mid \cdot] - m) \le 1` and is >= 1 - c > 0 because
:math:`Y_i - m \ge -m`).  Ville's inequality gives
:math:`P(\sup_t K^+_t(m) \ge 2/\alpha) \le \alpha/2` for every m at or above the true mean, so
``improved`` (:math:`\sup_t K^+_t(0) \ge 2/\alpha`, i.e. the lower bound above 0) is false with
probability <= alpha/2 whenever the mean is <= 0: the one-sided null is composite and one test
at its boundary covers all of it.  :math:`K^-` bets the other way.  The bounds
:math:`L = \inf\{m: \sup_t K^+_t(m) < 2/\alpha\}` and U likewise are found by bisection
(each factor :math:`1 + \min(\lambda, c/m)(Y - m)` is decreasing in m for Y in [0, 1], so
:math:`K^+_t(m)` is; :math:`K^-` uses :math:`\min(\lambda, c/(1 - m))` and increases).  The
plug-in is tuned for the sample size n the bound is computed at (eq. (26)); the sup over t
keeps the bound valid at every prefix too.

*What boundedness costs.* No test valid for every distribution on [-1, 1] can reject a mean of 0
from n units that all sit a little above it: a distribution with a rare unit at -1 and the rest
just above 0 has mean 0 and produces such samples often.  The capital grows at most by
:math:`1 + c(Y - m)/m` per unit, so a claim needs a gap of roughly
:math:`2 m \log(2/\alpha)/(c n)` on the [-1, 1] scale whatever the spread (m = 1/2 at a gap of
0): about 20 points with 30 subjects at a one-sided 1.25%, 6 points with 91 (simulated power in
docs/methods.md, section 6).  No valid test does much better: with 30 units a mass of 0.14 at -1
goes unseen 1.25% of the time, so even the all-in bet needs about 16 points.  That is the price of
a guarantee that also holds when a few small subjects carry a large gap of the other sign.

*Independent, not identically distributed units.*  For items of the items question,
:math:`D_i` independent in [-1, 1] with means :math:`\mu_i` (the subject's), the estimand is
:math:`\bar\mu = N^{-1}\sum_i \mu_i` (subjects as fixed strata, weights n_s/N known).  With a
CONSTANT bet :math:`\lambda \in (0, 1/2]`,
:math:`E\prod_i(1 + \lambda(D_i - m)) = \prod_i(1 + \lambda(\mu_i - m)) \le (1 + \lambda(\bar\mu - m))^N
\le 1` when :math:`\bar\mu \le m` (independence, then the AM-GM inequality on the nonnegative
factors), and so is the mean over a grid of bets: Markov's inequality gives the same alpha/2 per
side at the fixed N - a predictable bet would not do here, because the next item's mean
:math:`\mu_i` need not be <= m under the null.  This is
:func:`benchcert.stats.sequential.betting_test` evaluated at one look.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .degenerate import warn_degenerate
from .validation import as_float_array, check_alpha

__all__ = ["BettingBounds", "betting_mean_bounds", "independent_mean_bounds", "BET_CAP"]

#: The paper's c: bets are truncated at c/m (c/(1 - m) the other way), so each factor stays >= 1 - c.
BET_CAP = 0.75

_BISECT = 40

_ASSUMPTIONS = (
    "units i.i.d. (exchangeable) draws of a variable in [-1, 1], processed in an order that does not "
    "depend on their values (for subject means: subjects an independent sample of the subject "
    "population, each subject's mean unbiased for its gap)",
    "valid by theorem at any sample size (Ville's inequality for the betting capital; Waudby-Smith and "
    "Ramdas 2024, JRSS-B, Section 3, predictable plug-in, eq. (26)); no symmetry or normality needed",
)


@dataclass(frozen=True)
class BettingBounds:
    """Betting bounds of a bounded mean (last axis = units).

    Attributes
    ----------
    estimate : float or ndarray
        Sample mean of the units present.
    lower, upper : float or ndarray
        Each a one-sided 1 - alpha/2 bound (together a 1 - alpha interval).
    p_value : float or ndarray
        Two-sided: min(1, 2 min(1/sup K+(0), 1/sup K-(0))); ``p_value <= alpha`` exactly when
        the interval excludes 0.
    verdict : str or ndarray of str
        ``improved`` (lower > 0), ``regressed`` (upper < 0) or ``inconclusive``.
    direction : float or ndarray
        +1 / -1 on the side whose capital is larger (the side a small p-value speaks for), 0 on ties.
    n : int or ndarray
        Units present.
    alpha : float
    method : str
    assumptions : tuple of str
    """

    estimate: float | np.ndarray
    lower: float | np.ndarray
    upper: float | np.ndarray
    p_value: float | np.ndarray
    verdict: str | np.ndarray
    direction: float | np.ndarray
    n: int | np.ndarray
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def _iv(x, alpha):
    alpha = check_alpha(alpha)
    v = as_float_array(x, "x", "a numeric array of values in [-1, 1]", shown="repr")
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"x must have at least one unit on its last axis; got shape {v.shape}")
    ok = np.isnan(v) | ((v >= -1) & (v <= 1))
    if not ok.all():
        raise ValueError(f"x must lie in [-1, 1] (NaN = unit absent); got {v[~ok].flat[0]!r}")
    if np.any(np.all(np.isnan(v), axis=-1)):
        raise ValueError("x has no unit (all NaN) in some row; there is nothing to bound")
    return v, alpha


def _bets(y: np.ndarray, present: np.ndarray, n: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bets before truncation (eq. (26) of the paper), 0 where a unit is absent."""
    t = np.cumsum(present, axis=-1)
    ysum = np.cumsum(np.where(present, y, 0.0), axis=-1)
    mu = (0.5 + ysum) / (t + 1.0)
    dev = np.where(present, (y - mu) ** 2, 0.0)
    var = (0.25 + np.cumsum(dev, axis=-1)) / (t + 1.0)
    prev = np.concatenate([np.full(var.shape[:-1] + (1,), 0.25), var[..., :-1]], axis=-1)
    lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (n[..., None] * prev))
    return np.where(present, lam, 0.0)


def _sup_log_capital(y, present, lam, m, sign):
    """log sup_t K^{sign}_t(m) for m in (0, 1) of the leading shape (broadcast over units)."""
    mm = m[..., None]
    cap = BET_CAP / (mm if sign > 0 else 1.0 - mm)
    step = np.where(present, np.log1p(sign * np.minimum(lam, cap) * (y - mm)), 0.0)
    return np.maximum(np.cumsum(step, axis=-1).max(axis=-1), 0.0)


def betting_mean_bounds(x, *, alpha=0.05, n_planned=None) -> BettingBounds:
    r"""Betting confidence bounds of the mean of i.i.d. units in [-1, 1] (last axis; NaN = absent).

    Parameters
    ----------
    x : array_like, shape (n,) or (..., n)
        The units in the order they are bet on (an order that does not depend on their values);
        leading axes are independent problems.
    alpha : float, keyword-only
        Two-sided level: each bound is a one-sided 1 - alpha/2 bound.
    n_planned : int, keyword-only, optional
        The sample size the bets are tuned for (default: the units present). Give it when the
        number of units bet on depends on the data (a prefix chosen by arrival): the bets must
        not depend on how many units follow.

    Returns
    -------
    BettingBounds

    Notes
    -----
    The construction and its theorem are in the module docstring (Waudby-Smith and Ramdas 2024,
    Section 3; the sup over t is Ville's inequality, so the bounds hold at every prefix too).
    A single unit warns (:class:`DegenerateDataWarning`): the bounds are then wide.
    """
    v, alpha = _iv(x, alpha)
    present = ~np.isnan(v)
    n = present.sum(axis=-1)
    if np.any(n < 2):
        warn_degenerate("betting_mean_bounds: fewer than 2 units; the bounds are nearly [-1, 1]", stacklevel=2)
    y = np.where(present, (v + 1.0) / 2.0, 0.5)
    if n_planned is not None and (isinstance(n_planned, bool) or not isinstance(n_planned, (int, np.integer))
                                  or n_planned < 1):
        raise ValueError(f"n_planned must be a positive integer; got {n_planned!r}")
    lam = _bets(y, present, n if n_planned is None else np.full(n.shape, int(n_planned)), alpha)
    thr = np.log(2.0 / alpha)
    lead = v.shape[:-1]

    def bound(sign):
        # K+ decreases in m: the rejected set is [0, L); K- increases: (U, 1]
        lo, hi = np.full(lead, 1e-9), np.full(lead, 1.0 - 1e-9)
        for _ in range(_BISECT):
            mid = 0.5 * (lo + hi)
            rejected = _sup_log_capital(y, present, lam, mid, sign) >= thr
            if sign > 0:
                lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
            else:
                lo, hi = np.where(rejected, lo, mid), np.where(rejected, mid, hi)
        # report the conservative end of the bracket
        return lo if sign > 0 else hi

    low, high = 2.0 * bound(+1) - 1.0, 2.0 * bound(-1) - 1.0
    half = np.full(lead, 0.5)
    lp, lm = _sup_log_capital(y, present, lam, half, +1), _sup_log_capital(y, present, lam, half, -1)
    up, down = lp >= thr, lm >= thr
    # the bisection's bracket is conservative: the verdict is the exact test at 0, the bounds agree with it
    low = np.where(up, np.maximum(low, 1e-15), np.minimum(low, 0.0))
    high = np.where(down, np.minimum(high, -1e-15), np.maximum(high, 0.0))
    est = np.where(present, v, 0.0).sum(axis=-1) / n
    p = np.minimum(1.0, 2.0 * np.exp(-np.maximum(lp, lm)))
    verdict = np.where(up & ~down, "improved", np.where(down & ~up, "regressed", "inconclusive")).astype(object)
    direction = np.sign(lp - lm)

    def out(a):
        a = np.asarray(a)
        return a.item() if a.ndim == 0 else a

    return BettingBounds(estimate=out(est), lower=out(low), upper=out(high), p_value=out(p), verdict=out(verdict),
                         direction=out(direction), n=out(n), alpha=alpha, method="betting_plugin",
                         assumptions=_ASSUMPTIONS)


def independent_mean_bounds(d, *, alpha=0.05):
    r"""Bounds of the mean of the means of independent (not identically distributed) units in [-1, 1].

    The items question's first look: :func:`benchcert.stats.sequential.betting_test` at one look
    (a mixture of constant bets), valid for :math:`\bar\mu = N^{-1}\sum_i E D_i` by the AM-GM
    argument of the module docstring; returns its :class:`~benchcert.stats.sequential.SequentialResult`.
    Ternary differences go through the count form (same numbers, faster).
    """
    from .sequential import betting_test, betting_test_counts

    x = np.asarray(d, dtype=float).reshape(-1)
    if x.size and np.all(np.isin(x, (-1.0, 0.0, 1.0))):
        return betting_test_counts(np.array([int((x == 1).sum())]), np.array([int((x == -1).sum())]),
                                   np.array([x.size]), alpha=alpha)
    return betting_test(x, np.array([x.size]), alpha=alpha)
