r"""The recorded (checkpoint) verdict's tests that spend their level (issue #36).

A recorded verdict answers one question over any number of looks with a false-claim rate of at
most alpha/2 per side over all of them. Until #36 its first look spent half of alpha on a test
that, for the items question, was the betting test itself (the same decision in every run), and
the new-subjects betting capped its bets far below what bounded units allow. This module holds
the three tests that replace them; tasks/compare/verdicts.py chooses by question and records the
choice at the question's first look (``first_method``).

**Items, first look** (:func:`stratified_first_look`): the fixed-sample test of the item-weighted
gap over the benchmark's items in the store, :math:`\theta = \sum_s w_s \mu_s` with
:math:`w_s = N_s / N` (N_s items of subject s in the store; :math:`\mu_s` the mean expected
difference of its items). The shared items of each subject estimate :math:`\mu_s`
(:math:`\hat\theta = \sum_{s \in P} w_s \bar D_s` over the subjects P with a shared item), with
the stratified variance of Cochran 1977, *Sampling Techniques*, 3rd ed., Sections 5.4-5.5,
eqs. (5.6)/(5.7) (subjects as fixed strata, each with its own variance; the finite-population
correction is omitted, which is conservative):

.. math:: \widehat{\mathrm{se}}^2 = \sum_{s\in P} w_s^2 \tilde s_s^2 / n_s,\qquad
          \nu = \frac{(\sum_s a_s)^2}{\sum_s a_s^2 / \max(n_s - 1, 1)},\quad a_s = w_s^2\tilde s_s^2/n_s,

and Student's t on the Welch-Satterthwaite :math:`\nu` degrees of freedom (Cochran, Section 5.4,
eq. (5.16)). :math:`\tilde s_s^2 = \max(s_s^2, v_s)`: the stratum's sample variance, floored by
the variance of its items with :data:`PSEUDO` pseudo-items added, half at +M and half at -M
(M the largest |D| shared, so the test is unchanged when every difference is rescaled):
:math:`v_s = (\sum_i D_i^2 + c M^2)/(n_s + c) - (n_s \bar D_s/(n_s + c))^2`. The floor is what a
stratum's own variance cannot tell: with 1-3 shared items, or a small stratum of 0/1 differences
all ties or all wins (near the ceiling), :math:`s_s^2` is 0 (or undefined) while the true variance
is not, and a stratum carrying most of the store's weight then vanished from the se.
When every item is shared (one look) the estimate is ``compare``'s ``stratified_items`` estimate.
Subjects with no shared item can carry any gap in [-1, 1]: their weight :math:`w_0` is added to
each side of the interval (the worst case; Manski 1990, "Nonparametric bounds on treatment
effects", AER 80(2), no assumption on the missing), so the claim is about the whole benchmark's
items and never narrows to what arrived first. The p-values and the interval come from the one
statistic :math:`(\hat\theta \mp w_0)/\widehat{\mathrm{se}}` on :math:`\nu` df, so the interval
excludes 0 exactly when the test claims. Validity is the CLT for a weighted sum of many
independent bounded items (Lindeberg), not a finite-sample theorem: checked by seeded simulation
in the settings of tests/stats/test_recorded_verdicts.py and tests/stats/test_first_look_size.py
(F1, F2, F3, near-ceiling, 1 and 30 looks; unequal sharing both ways, 2-5 subjects, a stratum of
1-3 shared items carrying most of the weight, near-ceiling and fractional scores), and used only
at the first look at its share of alpha, and only with at least 100 effectively nonzero weighted
differences (:func:`effective_differences`; tasks/compare/recorded.py: below that the first look
is the betting bound).

Until issue #36's last remainder the se used ONE pooled within-subject variance
:math:`\hat\sigma^2 = \sum_s\sum_i (D_i - \bar D_s)^2/(n - |P|)` on n - |P| df (Cochran's eq. (5.6)
with a pooled variance, right only when the strata are shared in proportion to their size). Shared
unequally it was not: a subject of 3,000 items with 100 shared at -5 points beside one of 150,
all shared and all won (zero variance), had its variance diluted by the small one's 150 zeros, and
the first look claimed "improved" in 11.2% [9.3, 13.3] of 1,000 runs at a store gap of exactly 0
(nominal 1.25%). Why each piece (seeded, 1,000 runs per setting, one-sided nominal 1.25%): the
per-stratum variance alone 1.6% [0.9, 2.6] there (the estimate then rests on about 10 discordant
items of the large subject: the normal approximation, not the variance, is off - hence the
count of *weighted* effective differences, which sends that case to the betting bound: 0 of 1,000);
the per-stratum variance without the floor, with the guard, 70-90% when a subject of 3,000 items
has 1-3 shared items (all ties) beside a fully shared small one; with the floor 0 of 1,000. The
pooled variance as a floor was rejected: it is no bound for a heavy stratum whose items
disagree more than the others'. Pseudo-counts of 0.5 and 1 held the same settings; 1 is the more
conservative, and costs no power where the power is measured (items power in docs/methods.md,
section 6, within 0.7 points of the pooled variance's on the same draws).

**New subjects, default** (:func:`subject_e_process`, ``assume="none"``): the predictable
plug-in betting capital of Waudby-Smith and Ramdas (2024, JRSS-B 86(1), Section 3, eq. (26)
for the bets; Proposition 3 / Ville's inequality for the guarantee) on the subjects' mean
differences rescaled to :math:`Y = (X + 1)/2 \in [0, 1]`,

.. math:: K^+_t(m) = \prod_{i \le t}\big(1 + \min(\lambda_i, c/m)(Y_i - m)\big),\quad
          \lambda_i = \sqrt{2\log(2/\alpha)/(N\hat\sigma^2_{i-1})},

tuned for the N subjects of the benchmark in the store (known at the first look, so the bets do
not depend on how many subjects have arrived), with the truncation c = :data:`CAP` (each factor
>= 1 - c > 0). ONE test with all of alpha: it is anytime-valid already, so a separate first look
would only split the level. Under :math:`E[Y_i\mid\text{past}] \le m` every factor has
conditional mean <= 1; Ville's inequality gives :math:`P(\exists t: K^+_t(m) \ge 2/\alpha) \le
\alpha/2`. Why c matters: at a gap of 0 (m = 1/2) the bet is at most 2c, so the log-capital grows
by at most about :math:`2c\,\delta` per subject at a gap of :math:`\delta` on the [0, 1] scale:
this test cannot claim a gap below about :math:`\log(2/\alpha)/(c n)` whatever the data
(:func:`detectable_gap` reports it; about 12.4 points on the [-1, 1] scale at 30 subjects, 4.1
points at 91; stats/betting.py explains why no test valid for every bounded distribution of
subject gaps does much better with few subjects).

**New subjects, ``assume="symmetric"``**: subject gaps symmetric about their mean
:math:`\theta`. For X symmetric about 0 and any :math:`\lambda \ge 0`,
:math:`E\exp(\lambda X - \lambda^2 X^2/2) \le 1` (pair x with -x:
:math:`2\cosh(\lambda x)e^{-\lambda^2x^2/2} \le 2`; de la Pena 1999, Ann. Probab. 27(1),
"A general class of exponential inequalities for martingales and ratios", its bound for
conditionally symmetric increments; the conditionally symmetric case of Howard, Ramdas, McAuliffe and Sekhon 2020, Probab. Surveys 17,
"Time-uniform Chernoff bounds via nonnegative supermartingales", with :math:`V_t = \sum X_i^2`).
No bound on the bet is needed. The factor used is
:math:`\phi_\lambda(x) = \exp(\lambda\tilde x - \lambda^2\tilde x^2/2)` with
:math:`\tilde x = \min(x, 1/\lambda)`: nondecreasing in x, and still of mean <= 1 under symmetry
about 0 (for x > 1/lambda the pair sums to :math:`e^{1/2} + e^{-\lambda x - \lambda^2x^2/2}
\le e^{1/2} + e^{-3/2} < 2`). Monotonicity gives the composite null: X symmetric about
:math:`\theta \le 0` is X_0 + theta with X_0 symmetric about 0, so
:math:`E\phi_\lambda(X) \le E\phi_\lambda(X_0) \le 1`. With a predictable
:math:`\lambda_i = \sqrt{2\log(2/\alpha)/N}/\hat\sigma_{i-1}` (the plug-in of the default test
in the self-normalised scale; :math:`\hat\sigma^2` the running variance with one pseudo-unit
of variance :data:`SYM_PRIOR_VAR`), :math:`\prod_i\phi_{\lambda_i}(X_i - m)` is a nonnegative
supermartingale whenever the subjects are i.i.d. and symmetric about a mean <= m, and Ville's
inequality gives the same alpha/2 per side over every look. When the gap moves with subject size
the subject means are not symmetric (docs/guarantees.md: what that does to the rate).

Every test here reports the capital at each look (``log_e_improved`` / ``log_e_regressed``):
an e-value for "gap <= 0" / "gap >= 0" at that look, whatever the stopping rule
(:func:`benchcert.tasks.compare.evalues.recorded_e_values` reads them back for suite-level
e-Holm / e-BH).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
# Student's t through scipy.special (stdtr, stdtrit: what scipy.stats.t's sf and ppf call), not
# scipy.stats, whose import alone took most of a `benchcert compare`'s second beyond the
# interpreter's start (benchmarks/cli_latency.py).
from scipy import special as _special

from .degenerate import warn_degenerate
from .sequential import SequentialResult, _finish
from .validation import check_alpha
from .verdicts import interval_verdict

__all__ = ["CAP", "PSEUDO", "SYM_PRIOR_VAR", "StratifiedFirstLook", "stratified_first_look", "effective_differences",
           "subject_e_process",
           "detectable_gap", "either_of"]

#: Truncation of the default new-subjects bets (Waudby-Smith and Ramdas's c): each factor >= 1 - CAP.
CAP = 0.99

#: The symmetric test's prior variance of a subject mean (one pseudo-unit) before any subject is seen.
SYM_PRIOR_VAR = 0.01

#: Pseudo-items (half at +M, half at -M) whose variance floors each subject's sample variance in the first look.
PSEUDO = 1.0

_BISECT = 30

_FIRST_ASSUMPTIONS = (
    "items independent given their subjects; the estimand is the item-weighted mean gap over the benchmark's "
    "items in the store (weights N_s / N, fixed by the store, not by what has arrived)",
    "within a subject, the shared items represent the subject's items (which items are shared does not depend "
    "on their differences); a subject with no shared item counts at the worst case (its weight on each side)",
    "normal approximation to a weighted sum of many independent bounded items (each subject's own variance, "
    "floored by one pseudo-item; t on Welch-Satterthwaite df), checked by seeded simulation at a one-sided 1.25%",
)


@dataclass(frozen=True)
class StratifiedFirstLook:
    """The items question's first-look test (see the module docstring).

    Attributes
    ----------
    estimate : float
        :math:`\\hat\\theta`, the store-weighted mean of the subjects' shared mean differences.
    lower, upper : float
        A 1 - alpha interval of the store's item-weighted gap (each side one-sided 1 - alpha/2),
        widened by ``absent_weight`` on each side.
    se : float
    p_improved, p_regressed : float
        One-sided p-values of "gap <= 0" and "gap >= 0" (``p_improved <= alpha/2`` exactly when
        ``lower > 0``).
    verdict : str
    absent_weight : float
        Store weight of the subjects with no shared item.
    n, n_subjects : int
        Shared items and the subjects they come from.
    alpha : float
    method : str
    assumptions : tuple of str
    """

    estimate: float
    lower: float
    upper: float
    se: float
    p_improved: float
    p_regressed: float
    verdict: str
    absent_weight: float
    n: int
    n_subjects: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def _first_look_iv(d, subjects, store_counts, alpha):
    alpha = check_alpha(alpha)
    try:
        x = np.asarray(d, dtype=float).reshape(-1)
        g = np.asarray(subjects).reshape(-1)
        nc = np.asarray(store_counts, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"d, subjects and store_counts must be numeric arrays; got {exc}") from exc
    if x.size == 0 or g.shape != x.shape:
        raise ValueError(f"d and subjects must be 1-D of one non-zero length; got {x.shape} and {g.shape}")
    if not np.all((x >= -1) & (x <= 1)):
        raise ValueError(f"d must lie in [-1, 1]; got {x[~((x >= -1) & (x <= 1))][0]!r}")
    if not np.issubdtype(g.dtype, np.integer) or g.min() < 0 or g.max() >= nc.size:
        raise ValueError(f"subjects must be integer codes in [0, {nc.size}) indexing store_counts; got {g.dtype} "
                         f"in [{g.min()!r}, {g.max()!r}]")
    n_s = np.bincount(g, minlength=nc.size)
    if not np.all(np.isfinite(nc)) or np.any(nc < n_s):
        raise ValueError("store_counts must be finite and at least the shared items of each subject")
    return x, g.astype(np.int64), nc, n_s, alpha


def stratified_first_look(d, subjects, store_counts, *, alpha=0.025) -> StratifiedFirstLook:
    r"""The items question's first-look test of the store's item-weighted gap.

    Parameters
    ----------
    d : array_like, shape (n,)
        Differences b - a of the shared items, in [-1, 1].
    subjects : array_like of int, shape (n,)
        Subject code of each item, indexing ``store_counts``.
    store_counts : array_like, shape (S,)
        Items of each subject of the benchmark in the store (the weights' N_s); subjects with 0
        carry no weight.
    alpha : float, keyword-only
        Two-sided level (each claim at alpha/2): the recorded verdict passes alpha x first-look share.

    Returns
    -------
    StratifiedFirstLook

    Notes
    -----
    Formula, assumptions and the worst case for subjects without a shared item: module docstring
    (each subject's own variance with a floor, Welch-Satterthwaite df; pooled until issue #36's
    last remainder). No subject with two shared items warns and claims nothing.
    """
    x, g, nc, n_s, alpha = _first_look_iv(d, subjects, store_counts, alpha)
    w = nc / nc.sum()
    present = n_s > 0
    absent = float(w[~present].sum())
    sums = np.bincount(g, weights=x, minlength=nc.size)
    means = np.where(present, sums / np.maximum(n_s, 1), 0.0)
    est = float((w * means).sum())
    if not np.any(n_s > 1):
        warn_degenerate("stratified_first_look: no subject has two shared items; the within-subject variance "
                        "cannot be estimated and the test claims nothing", stacklevel=2)
        se, crit, pu, pd = np.inf, np.inf, 1.0, 1.0
    else:
        se, df = _stratified_se(x, g, n_s, means, w)
        crit = float(_special.stdtrit(df, 1.0 - alpha / 2.0))  # = scipy.stats.t.ppf(1 - alpha/2, df)
        with np.errstate(divide="ignore", invalid="ignore"):
            zu, zd = (est - absent) / se, (-est - absent) / se
        # se = 0 only when every shared difference is 0 (M = 0): the sign of the shifted estimate decides
        pu = float(_special.stdtr(df, -zu)) if np.isfinite(zu) else (0.0 if zu > 0 else 1.0)  # t.sf(zu, df)
        pd = float(_special.stdtr(df, -zd)) if np.isfinite(zd) else (0.0 if zd > 0 else 1.0)
    lo = max(-1.0, float(est - crit * se - absent)) if np.isfinite(se) else -1.0
    hi = min(1.0, float(est + crit * se + absent)) if np.isfinite(se) else 1.0
    se = float(se)
    return StratifiedFirstLook(estimate=est, lower=lo, upper=hi, se=se, p_improved=pu, p_regressed=pd,
                               verdict=str(interval_verdict(lo, hi)), absent_weight=absent, n=int(x.size),
                               n_subjects=int(present.sum()), alpha=alpha, method="stratified_store_weights",
                               assumptions=_FIRST_ASSUMPTIONS)


def _stratified_se(x, g, n_s, means, w):
    """Cochran's stratified se with each subject's floored variance, and its Welch-Satterthwaite df."""
    pres = n_s > 0
    ns, wp = n_s[pres].astype(float), w[pres]
    ss = np.bincount(g, weights=(x - means[g]) ** 2, minlength=n_s.size)[pres]
    s2 = np.where(ns > 1, ss / np.maximum(ns - 1.0, 1.0), 0.0)
    big_m = float(np.abs(x).max())
    sq = np.bincount(g, weights=x * x, minlength=n_s.size)[pres]
    floor = (sq + PSEUDO * big_m ** 2) / (ns + PSEUDO) - (ns * means[pres] / (ns + PSEUDO)) ** 2
    a = wp ** 2 * np.maximum(s2, floor) / ns
    v = float(a.sum())
    if v <= 0:  # every difference 0: no spread to estimate, and nothing to claim
        return np.float64(0.0), 1.0
    return np.float64(np.sqrt(v)), float(v ** 2 / (a ** 2 / np.maximum(ns - 1.0, 1.0)).sum())


def effective_differences(d, subjects, store_counts) -> float:
    r"""How many effectively nonzero differences carry the first look's estimate.

    :math:`(\sum_i c_i^2 D_i^2)^2 / \sum_i c_i^4 D_i^4` with :math:`c_i = w_s / n_s` the weight of
    item i in :math:`\hat\theta` (s its subject): the number of equal terms whose sum of squares
    and sum of fourth powers match the estimate's (Lyapunov's ratio; the discordant items for 0/1
    scores when every subject is shared in proportion to its store size, where every
    :math:`c_i` is 1/n). Shared unequally, a large subject with few shared items dominates
    :math:`\hat\theta` and this counts its differences, not the small subjects' (issue #36).
    """
    x, g = np.asarray(d, dtype=float).reshape(-1), np.asarray(subjects).reshape(-1)
    nc = np.asarray(store_counts, dtype=float).reshape(-1)
    if g.shape != x.shape or not np.issubdtype(g.dtype, np.integer) or (g.size and (g.min() < 0 or g.max() >= nc.size)):
        raise ValueError(f"subjects must be integer codes in [0, {nc.size}), one per difference; got {g.dtype} "
                         f"{g.shape} for {x.shape} differences")
    n_s = np.bincount(g, minlength=nc.size)
    c = (nc / nc.sum() / np.maximum(n_s, 1))[g]
    sq = (c * x) ** 2
    return float(sq.sum() ** 2 / (sq * sq).sum()) if sq.any() else 0.0

# --------------------------------------------------------------------------------------
# new subjects: one anytime-valid test on subject means, with all of alpha


def _running_var(x, prior_mean, prior_var):
    """Predictable running variance: entry i uses units before i only (one pseudo-unit of prior)."""
    t = np.arange(1, x.size + 1, dtype=float)
    mu = (prior_mean + np.cumsum(x)) / (t + 1.0)
    var = (prior_var + np.cumsum((x - mu) ** 2)) / (t + 1.0)
    return np.concatenate([[prior_var], var[:-1]])


def _log_k(x, bets, m, sign, cum, assume):
    """log K^{sign}_t(m) at each look (cum = units by each look; m shape (T,)); x on [-1, 1]."""
    n = x.size
    inside = np.arange(n)[None, :] < cum[:, None]
    mm = m[:, None]
    if assume == "symmetric":
        z = np.minimum(sign * (x[None, :] - mm), 1.0 / bets[None, :])
        step = bets * z - 0.5 * (bets * z) ** 2
    else:
        y, my = (x + 1.0) / 2.0, (mm + 1.0) / 2.0
        cap = CAP / (my if sign > 0 else 1.0 - my)
        step = np.log1p(sign * np.minimum(bets[None, :], cap) * (y[None, :] - my))
    return np.where(inside, step, 0.0).sum(axis=1)


def _bets(x, n_planned, alpha, assume):
    level = 2.0 * np.log(2.0 / alpha) / n_planned
    if assume == "symmetric":
        return np.sqrt(level / _running_var(x, 0.0, SYM_PRIOR_VAR))
    y = (x + 1.0) / 2.0
    return np.sqrt(level / _running_var(y, 0.5, 0.25))


def _bound(x, bets, thr, cum, sign, assume):
    """The confidence sequence's end at each look: K^+ decreases in m (lower end), K^- increases."""
    lo, hi = np.full(cum.size, -1.0 + 1e-9), np.full(cum.size, 1.0 - 1e-9)
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        rejected = _log_k(x, bets, mid, sign, cum, assume) >= thr
        if sign > 0:
            lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
        else:
            lo, hi = np.where(rejected, lo, mid), np.where(rejected, mid, hi)
    return lo if sign > 0 else hi


def _e_process_iv(x, looks, alpha, n_planned, assume):
    alpha = check_alpha(alpha)
    if assume not in ("none", "symmetric"):
        raise ValueError(f"assume must be 'none' or 'symmetric'; got {assume!r}")
    try:
        v = np.asarray(x, dtype=float).reshape(-1)
        cum = np.asarray(looks).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"x and looks must be numeric arrays; got {exc}") from exc
    if v.size == 0 or not np.all((v >= -1) & (v <= 1)):
        raise ValueError("x must be a non-empty array of subject mean differences in [-1, 1]")
    if (cum.size == 0 or not np.issubdtype(cum.dtype, np.integer) or cum[0] < 1 or np.any(np.diff(cum) < 0)
            or cum[-1] > v.size):
        raise ValueError(f"looks must be non-decreasing integer counts in [1, {v.size}]; got {cum.tolist()}")
    if isinstance(n_planned, bool) or not isinstance(n_planned, (int, np.integer)) or n_planned < cum[-1]:
        raise ValueError(f"n_planned must be an integer >= the units seen ({int(cum[-1])}); got {n_planned!r}")
    return v, cum.astype(np.int64), alpha, int(n_planned)


def subject_e_process(x, looks, *, alpha=0.05, n_planned, assume="none") -> SequentialResult:
    r"""One anytime-valid test of the subject-weighted gap, with all of alpha (new-subjects question).

    Parameters
    ----------
    x : array_like, shape (n,)
        Subject mean differences in [-1, 1], in the betting order (fixed before the data and
        unrelated to the gaps: tasks/compare/verdicts.py uses a hash of the subject's name).
    looks : array_like of int, shape (T,)
        Units available at each look (non-decreasing, first >= 1).
    alpha : float, keyword-only
        Two-sided level: each claim at alpha/2 over every look.
    n_planned : int, keyword-only
        The number of subjects the bets are tuned for (the benchmark's subjects in the store).
    assume : {"none", "symmetric"}, keyword-only
        ``none``: predictable plug-in betting, valid for any bounded subject gaps;
        ``symmetric``: the self-normalised symmetric e-process (subject gaps symmetric about
        their mean). Formulas and theorems: module docstring.

    Returns
    -------
    SequentialResult
        ``log_e_improved`` / ``log_e_regressed``: log capital at each look (e-values);
        ``lower`` / ``upper``: the confidence sequence (intersected over looks); verdicts
        sticky, ``method`` ``plugin_betting_all_alpha`` or ``symmetric_selfnormalised``.
    """
    v, cum, alpha, n_planned = _e_process_iv(x, looks, alpha, n_planned, assume)
    bets = _bets(v, n_planned, alpha, assume)
    zero = np.zeros(cum.size)
    lp = _log_k(v, bets, zero, 1.0, cum, assume)
    lm = _log_k(v, bets, zero, -1.0, cum, assume)
    thr = np.log(2.0 / alpha)
    low, high = _bound(v, bets, thr, cum, 1.0, assume), _bound(v, bets, thr, cum, -1.0, assume)
    # the bisection bracket is conservative; the verdict is the exact test at 0 and the bounds agree with it
    low = np.where(lp >= thr, np.maximum(low, 1e-15), np.minimum(low, 0.0))
    high = np.where(lm >= thr, np.minimum(high, -1e-15), np.maximum(high, 0.0))
    est = np.cumsum(v)[cum - 1] / cum
    method = "symmetric_selfnormalised" if assume == "symmetric" else "plugin_betting_all_alpha"
    res = _finish(est, low, high, lp, lm, cum, alpha, np.asarray(bets), method)
    assumptions = ("subjects i.i.d. draws from the subject population, bet on in an order unrelated to their gaps",
                   "time-uniform by Ville's inequality: valid over any number of looks at any times",
                   "subject gaps symmetric about their mean (e.g. no gap that moves with subject size)"
                   if assume == "symmetric" else
                   "no assumption on the shape of the subject gaps (any distribution on [-1, 1]); the price is a "
                   f"smallest detectable gap of about {100 * detectable_gap(n_planned, alpha=alpha):.1f} points "
                   f"with {n_planned} subjects")
    return SequentialResult(**{**res.__dict__, "assumptions": assumptions})


def detectable_gap(n_subjects: int, *, alpha: float = 0.05) -> float:
    r"""The gap (on the [-1, 1] scale) below which the assumption-light new-subjects test cannot claim.

    At a gap of 0 the bet is at most 2c (c = :data:`CAP`) and the log-capital grows by at most
    :math:`\log(1 + 2c\,\delta/2) \approx c\,\delta` per subject at a gap of :math:`\delta`; the
    claim needs :math:`\log(2/\alpha)`, so no gap below :math:`\log(2/\alpha)/(c\,n)` can be
    claimed whatever the spread (the capital's ceiling, not a power figure: a claim near it
    needs nearly no spread between subjects).
    """
    alpha = check_alpha(alpha)
    if isinstance(n_subjects, bool) or not isinstance(n_subjects, (int, np.integer)) or n_subjects < 1:
        raise ValueError(f"n_subjects must be a positive integer; got {n_subjects!r}")
    return float(min(1.0, np.log(2.0 / alpha) / (CAP * n_subjects)))


def either_of(first: SequentialResult, second: SequentialResult | None, *, alpha: float,
              estimate=None) -> SequentialResult:
    r"""Two anytime-valid tests of one estimand, each run at alpha/2, as one test at alpha.

    :math:`\max(K_1, K_2)/2 \le (K_1 + K_2)/2`, the mean of two nonnegative supermartingales: an
    e-process, so ``log_e = max(log K_1, log K_2) - log 2`` is an e-value at every look and reaches
    :math:`\log(2/\alpha)` exactly when one of the two reaches :math:`\log(4/\alpha)`, its own
    alpha/2 threshold; the confidence sequence is the intersection of the two (each at alpha/2;
    union bound), so the verdict is "the sequence excludes 0". ``second`` None (not started):
    ``first`` alone, still at alpha/2. Both must have the same looks (a test not yet started holds
    log_e 0 and the interval [-1, 1] there). ``estimate``: the running gap to report (default ``first``'s).
    """
    alpha = check_alpha(alpha)
    half = np.log(2.0)
    if second is None:
        lp, lm, lo, hi = first.log_e_improved - half, first.log_e_regressed - half, first.lower, first.upper
    else:
        lp = np.maximum(first.log_e_improved, second.log_e_improved) - half
        lm = np.maximum(first.log_e_regressed, second.log_e_regressed) - half
        lo = None if first.lower is None else np.maximum(first.lower, second.lower)
        hi = None if first.upper is None else np.minimum(first.upper, second.upper)
    est = first.estimate if estimate is None else estimate
    lo, hi = (None, None) if lo is None else (np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    return _finish(np.asarray(est, dtype=float), lo, hi, lp, lm, first.n, alpha, first.lambdas,
                   "either_of_two_betting_tests")
