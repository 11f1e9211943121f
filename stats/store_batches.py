r"""The items question's anytime test of the store's gap, reweighted look by look (issue #36).

The recorded items verdict's estimand is the item-weighted gap over the benchmark's items in the
store, :math:`\theta = \sum_s (N_s/N)\,\theta_s` (:math:`N_s` items of subject s in the store,
:math:`\theta_s` the expected difference of its items). A betting test on the POOLED shared items
tests their mean instead: when a log shares a large subject barely and a small one fully (subject A
3,000 items, 20 shared at -2 points; B 30 items, all shared and won; the store's gap -1 point) the
pooled test claimed "improved" in 1,000 of 1,000 runs. :func:`store_weighted_batches` bets on the
items batch by batch, each batch reweighted to the store as the first look's bets are
(:func:`store_weighted_bets`).

**Batches** (:func:`settle_looks`). A look's new items wait, with the items still waiting, until
together they cover every subject of the store that can still send an item (fewer items in the
ledger than in the store), or until they have waited :data:`MAX_WAIT` looks; then they are bet on
as one batch :math:`B_b`, at that look. The rule reads which subjects and how many items each look
brought, never a difference. Waiting costs nothing in validity: the capital below uses an item's
outcome only once its batch is complete, so it is a supermartingale for the filtration of the
batches' compositions and the outcomes of the items already bet on, and Ville's inequality bounds
its supremum over every look whatever the looks' timing; it costs only the delay. Without it a
subject absent from a look (random arrival, a subject entering late) would put that look's bets at
its worst case: 30 looks of random arrival, 91 subjects, a 2-point gap: 1.5% power look by look
against 55.5% with the waiting (200 runs each; pooled 57.5%; measured while building it, not reproducible by
tests/recorded_sim.py, which runs the waiting version only).

**Batch b.** Of its :math:`n_b` items, :math:`n_{s,b}` are subject s's; :math:`P_b` the subjects
with one, :math:`w_{0,b} = 1 - \sum_{s\in P_b} N_s/N` the store weight of the others,
:math:`w_{s,b} = N_s/\sum_{u \in P_b}N_u`, :math:`r_{s,b} = w_{s,b}\,n_b/n_{s,b}`,
:math:`R_b = \max_s r_{s,b} \ge 1` and :math:`x_i = d_i\,r_{s(i),b}/R_b \in [-1, 1]`. If every item
of subject s has expectation :math:`\theta_s` given the earlier batches and the batches'
composition is independent of the outcomes, the batch mean of :math:`E x_i` is
:math:`\theta_{1,b}/R_b` with :math:`\theta_{1,b} = \sum_{s \in P_b} w_{s,b}\theta_s`; as
:math:`\theta = (1 - w_{0,b})\theta_{1,b} + w_{0,b}\theta_{0,b}` and :math:`\theta_{0,b} \ge -1`,
":math:`\theta \le \theta_0`" implies :math:`\theta_{1,b}/R_b \le m_b(\theta_0) =
(\theta_0 + w_{0,b})/((1 - w_{0,b})R_b)` (the worst case for the absent subjects, as
:func:`absent_weight`). For a bet :math:`\beta \in (0, 1/2]` and
:math:`\bar m_b = \min(1, \max(-1, m_b))` every factor :math:`1 + \beta(x_i - \bar m_b) \ge 0`;
the items are independent given the past, so :math:`E[\prod_{i \in B_b}(1 + \beta(x_i - \bar m_b))
\mid \text{past}] = \prod_i(1 + \beta(E x_i - \bar m_b)) \le (1 + \beta(\theta_{1,b}/R_b - \bar
m_b))^{n_b} \le 1` (AM-GM over the nonnegative factors; clipping :math:`m_b` above at 1 keeps the
bound since :math:`x_i \le 1`, clipping it below at -1 only lowers the factors). Batch b's bet for
the grid's constant :math:`\lambda` is :math:`\beta_b(\lambda) = \min(\lambda R_b, 1/2)`: the bet
:math:`\lambda` on the unscaled :math:`d_i r_{s,b}` (so batches of different :math:`R_b` are bet on
alike), truncated where the factor could turn negative; it reads the batch's composition only. So
for each :math:`\lambda` the product over batches

.. math:: K^+_t(\theta_0; \lambda) = \prod_{b \le t,\ b \in U^+}\ \prod_{i \in B_b}
          \big(1 + \beta_b(\lambda)(x_i - \bar m_b(\theta_0))\big)

is a test supermartingale over the batches under ":math:`\theta \le \theta_0`", and so is its mean
over the bet grid (:data:`benchcert.stats.sequential.DEFAULT_LAMBDAS`): an e-process, and Ville's
inequality gives :math:`P(\exists t: K^+_t(\theta_0) \ge 2/\alpha) \le \alpha/2` (the constant bets
of Waudby-Smith and Ramdas 2024, "Estimating means of bounded random variables by betting", JRSS-B
86(1), reweighted per batch; Ville 1939, *Etude critique de la notion de collectif*).
:math:`K^-` bets the other way with :math:`1 - \beta_b(\lambda)(x_i - \bar m^-_b(\theta_0))`,
:math:`m^-_b(\theta_0) = (\theta_0 - w_{0,b})/((1 - w_{0,b})R_b)`.

**Which batches are bet on** (:math:`U^\pm`; a bet of 0 elsewhere). A batch with absent subjects
pays the worst case :math:`\mu_b = w_{0,b}/(1 - w_{0,b})` on the gap scale: it gains only when the
present subjects' gap exceeds :math:`\mu_b`, and otherwise drains the capital of every bet (the bets
that later batches would need most). So batch b is bet on for "improved" when :math:`\mu_b = 0` or
:math:`\mu_b < \hat\theta_{<b}/2`, and for "regressed" when :math:`\mu_b = 0` or :math:`\mu_b <
-\hat\theta_{<b}/2`, with :math:`\hat\theta_{<b}` the store-weighted estimate from the earlier
batches' items (0 before any): the choice reads the batch's composition and earlier batches only,
never its own outcomes, so the products stay supermartingales. It does not depend on
:math:`\theta_0`, so :math:`K^+_t` decreases and :math:`K^-_t` increases in :math:`\theta_0` and the
confidence sequence :math:`L_t = \inf\{\theta_0: K^+_t(\theta_0) < 2/\alpha\}`, :math:`U_t =
\sup\{\theta_0: K^-_t(\theta_0) < 2/\alpha\}` (bisection, intersected over looks) is on the store's
scale and excludes 0 exactly when a claim is made.

With every subject in every look in proportion to its store size (:math:`R_b = 1`,
:math:`w_{0,b} = 0`, every look its own batch) every :math:`x_i = d_i`, every bet :math:`\lambda`,
every margin :math:`\theta_0` and every batch is bet on: the pooled betting test of
:func:`benchcert.stats.sequential.betting_test`, exactly (tested). The price of unequal sharing is
the spread of the weights :math:`r_{s,b}` (the store-weighted mean's variance), the delay of
waiting, and for a batch that still misses subjects its margin or no bet at all.

The weights :math:`N_s` are the store's at the look (the estimand's); a store whose subjects grow
between looks reweights every batch, which the guarantee does not cover (it is for fixed
:math:`N_s`; the recorded verdict warns when the store's item count differs from its first look's,
:func:`benchcert.tasks.compare.recorded.store_grew`).
"""

from __future__ import annotations

import numpy as np

from .sequential import _FLOOR, SequentialResult, _bisect, _check_lambdas, _finish, _logmean
from .validation import check_alpha

__all__ = ["METHOD", "MAX_WAIT", "ASSUMPTIONS", "absent_weight", "settle_looks", "store_weighted_batches",
           "store_weighted_bets"]

METHOD = "store_weighted_batches"

#: Looks a batch may wait for its subjects before it is bet on anyway (a subject that stays short of shared items
#: would otherwise hold the capital still).
MAX_WAIT = 5

ASSUMPTIONS = (
    "the null of the 'improved' claim is that the store's item-weighted gap sum_s (N_s / N) theta_s is <= 0 "
    "(theta_s the expected difference of subject s's items), symmetrically for 'regressed'; the look's items need "
    "not be a representative sample of the store's",
    "the estimand is the item-weighted gap over the benchmark's items in the store (weights N_s / N of the store "
    "at this look); the items are bet on in batches reweighted to the store: a look's new items wait until the "
    f"items waiting cover every subject of the store not yet fully shared (at most {MAX_WAIT} looks), a subject "
    "still missing from a batch counted at the worst case (a gap anywhere in [-1, 1]) or the batch not bet on",
    "every item of a subject has expected difference equal to the subject's gap given the earlier looks (items "
    "independent draws; which items and subjects a look adds, and when looks are taken, do not depend on their "
    "differences)",
    "time-uniform by Ville's inequality: a product over batches of constant-bet factors with conditional mean <= 1, "
    "mixed over the bet grid (Waudby-Smith and Ramdas 2024, reweighted per batch)",
)


def _batches_iv(d, subjects, looks, store_counts, alpha, n_looks, lambdas):
    alpha = check_alpha(alpha)
    lam = _check_lambdas(lambdas)
    try:
        x = np.asarray(d, dtype=float).reshape(-1)
        g = np.asarray(subjects).reshape(-1)
        lk = np.asarray(looks).reshape(-1)
        nc = np.asarray(store_counts, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"d, subjects, looks and store_counts must be numeric arrays; got {exc}") from exc
    if x.size == 0 or g.shape != x.shape or lk.shape != x.shape:
        raise ValueError(f"d, subjects and looks must be 1-D of one non-zero length; got {x.shape}, {g.shape}, "
                         f"{lk.shape}")
    if not np.all((x >= -1) & (x <= 1)):
        raise ValueError(f"d must lie in [-1, 1]; got {x[~((x >= -1) & (x <= 1))][0]!r}")
    if not np.issubdtype(g.dtype, np.integer) or g.min() < 0 or g.max() >= nc.size:
        raise ValueError(f"subjects must be integer codes in [0, {nc.size}) indexing store_counts; got {g.dtype}")
    if not np.issubdtype(lk.dtype, np.integer) or lk.min() < 1:
        raise ValueError(f"looks must be integer look numbers >= 1, one per item; got {lk.dtype} from {lk.min()!r}")
    t = int(lk.max()) if n_looks is None else n_looks
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < lk.max():
        raise ValueError(f"n_looks must be an integer >= the largest look ({int(lk.max())}); got {n_looks!r}")
    if not np.all(np.isfinite(nc)) or np.any(nc < np.bincount(g, minlength=nc.size)):
        raise ValueError("store_counts must be finite and at least the items of each subject in d")
    return x, g.astype(np.int64), lk.astype(np.int64), nc, alpha, int(t), lam


def _bets_iv(d, subjects, store_counts, strata=None):
    nc = np.asarray(store_counts, dtype=float).reshape(-1)
    if not np.all(np.isfinite(nc)) or np.any(nc < 0):
        raise ValueError(f"store_counts must be finite counts >= 0; got {nc!r}")
    out = [np.asarray(d, dtype=float).reshape(-1), np.asarray(subjects).reshape(-1), nc]
    if strata is not None:
        out.append(np.asarray(strata, dtype=np.int64).reshape(-1) if np.size(strata) == 0 else np.asarray(strata))
    for name, codes in (("subjects", out[1]),) + ((("strata", out[3]),) if strata is not None else ()):
        if codes.size and (not np.issubdtype(codes.dtype, np.integer) or codes.min() < 0 or codes.max() >= nc.size):
            raise ValueError(f"{name} must be integer codes in [0, {nc.size}) indexing store_counts; got {codes!r}")
    if out[0].shape != out[1].shape or not np.all(np.abs(out[0]) <= 1):
        raise ValueError(f"d must lie in [-1, 1], one per subject code; got {out[0].size} and {out[1].size}")
    return tuple(out)


def store_weighted_bets(d: np.ndarray, subjects: np.ndarray, store_counts: np.ndarray) -> tuple[np.ndarray, float]:
    r"""The shared items' differences reweighted to the store, and the factor R that scales them into [-1, 1].

    Notes
    -----
    Subject :math:`s` with a shared item has :math:`n_s` of the :math:`n` shared items and store share
    :math:`w_s = N_s / \sum_{n_u > 0} N_u` among the subjects with a shared item;
    :math:`r_s = w_s / (n_s / n)`, :math:`R = \max_s r_s \ge 1` (the :math:`r_s` average 1 over the items) and
    :math:`x_i = d_i r_{s(i)} / R \in [-1, 1]`. If each subject's shared items are a random sample of its store
    items, chosen independently of the outcomes, :math:`E d_i = \theta_s` and
    :math:`\frac1n\sum_i E x_i = \sum_s w_s\theta_s / R = \theta_1 / R`, the store-weighted gap of those
    subjects over R. For a bet :math:`\lambda \in (0, 1/2]` and :math:`m < 1` every factor
    :math:`1 + \lambda(x_i - m)` is nonnegative; within a subject (sampling without replacement) the product's
    expectation is at most its mean factor to the power :math:`n_s` (Maclaurin's inequality), across subjects
    the factors multiply and AM-GM gives
    :math:`E\prod_i(1 + \lambda(x_i - m)) \le (1 + \lambda(\theta_1/R - m))^n \le 1` whenever
    :math:`\theta_1 \le mR`; so the mixture over the bet grid is an e-value for ":math:`\theta_1 \le mR`" at the
    first look's fixed n (the constant bets of Waudby-Smith and Ramdas 2024, JRSS-B 86(1), reweighted), and
    Markov's inequality gives the level. It is an e-value at that n, not a supermartingale item by item (an
    item's expectation :math:`\theta_s r_s / R` can be positive under the null) - the first look is a one-shot
    test. With every subject shared in proportion to its store size R = 1 and these are the pooled bets; the
    price of unequal sharing is the scale 1 / R of the bets. :func:`store_weighted_batches` bets each batch so.
    """
    d, subjects, store_counts = _bets_iv(d, subjects, store_counts)
    n_s = np.bincount(subjects, minlength=store_counts.size).astype(float)
    present = n_s > 0
    w = np.where(present, store_counts, 0.0)
    w = w / w.sum() if w.sum() > 0 else present / max(1, present.sum())
    r = np.where(present, w / np.maximum(n_s, 1.0) * n_s.sum(), 0.0)
    big_r = float(r.max()) if r.size and r.max() > 0 else 1.0
    ratio = r / big_r
    ratio = np.where(np.abs(ratio - 1.0) < 1e-12, 1.0, ratio)  # proportional sharing: exactly the pooled bets
    return np.clip(d * ratio[subjects], -1.0, 1.0), big_r


def absent_weight(store_counts: np.ndarray, strata: np.ndarray) -> tuple[float, float]:
    """(w0, margin): the store weight of the subjects outside ``strata``, and the betting margin.

    With :math:`\\theta = (1 - w_0)\\theta_1 + w_0\\theta_0` and :math:`\\theta_0 \\le 1`, "theta <= 0"
    implies :math:`\\theta_1 \\le w_0/(1 - w_0)`: the betting test on the strata's items tests that.
    """
    store_counts, strata = _bets_iv(np.zeros(0), np.zeros(0, dtype=np.int64), store_counts, strata)[2:]
    total = float(store_counts.sum())
    w0 = 1.0 - float(store_counts[strata].sum()) / total if total > 0 else 0.0
    w0 = max(0.0, w0)
    return w0, (min(0.999, w0 / (1.0 - w0)) if w0 < 1 else 0.999)


def _batch_terms(x, g, lk, nc, n_looks):
    """Per item its bet x_i (:func:`store_weighted_bets` of its batch); per look its batch's R, its absent weight
    w0 and worst-case margin w0 / (1 - w0) (:func:`absent_weight`), and its margin scale a = 1 / ((1 - w0) R)."""
    w0, margin, scale, rs = np.zeros(n_looks), np.zeros(n_looks), np.ones(n_looks), np.ones(n_looks)
    xs = np.empty_like(x)
    for t in np.unique(lk):
        at = lk == t
        xs[at], rs[t - 1] = store_weighted_bets(x[at], g[at], nc)
        w0[t - 1], margin[t - 1] = absent_weight(nc, np.unique(g[at]))
        scale[t - 1] = 1.0 / ((1.0 - w0[t - 1]) * rs[t - 1]) if w0[t - 1] < 1 else 0.0
    return xs, w0, margin, scale, rs


def _settle_iv(subjects, looks, store_counts, n_looks):
    g, lk = np.asarray(subjects).reshape(-1), np.asarray(looks).reshape(-1)
    nc = np.asarray(store_counts, dtype=float).reshape(-1)
    ints = np.issubdtype(g.dtype, np.integer) and np.issubdtype(lk.dtype, np.integer)
    if g.shape != lk.shape or (g.size and not (ints and g.min() >= 0 and g.max() < nc.size and lk.min() >= 1)):
        raise ValueError("subjects and looks must be integer arrays of one length (codes indexing store_counts, looks "
                         f">= 1); got {g.dtype} {g.shape} and {lk.dtype} {lk.shape}")
    if isinstance(n_looks, bool) or not isinstance(n_looks, (int, np.integer)) or (lk.size and n_looks < lk.max()):
        raise ValueError(f"n_looks must be an integer >= the largest look; got {n_looks!r}")
    return g, lk, nc


def settle_looks(subjects, looks, store_counts, n_looks: int) -> np.ndarray:
    """The look at which each item's batch is bet on (0: still pending after ``n_looks``); module docstring.

    A look's new items wait, with any still pending, until the pending items cover every subject of the store that
    can still send one (fewer items in the ledger than in the store: a subject not yet shared, or not all of it),
    or until they have waited :data:`MAX_WAIT` looks. The rule reads the batches' composition only, never a
    difference.
    """
    g, lk, nc = _settle_iv(subjects, looks, store_counts, n_looks)
    out = np.zeros(g.size, dtype=np.int64)
    seen = np.zeros(nc.size)
    opened = 1
    for t in range(1, n_looks + 1):
        at = lk == t
        seen += np.bincount(g[at], minlength=nc.size)
        pending = (lk <= t) & (out == 0)
        if not pending.any():
            opened = t + 1
            continue
        covered = np.bincount(g[pending], minlength=nc.size) > 0
        waiting = seen < nc
        if np.all(covered | ~waiting) or t - opened + 1 >= MAX_WAIT:
            out[pending] = t
            opened = t + 1
    return out


def _running_estimate(x, g, lk, nc, n_looks):
    """The store-weighted gap of the items up to each look (a subject without an item yet at 0)."""
    sums = np.zeros((n_looks, nc.size))
    cnt = np.zeros((n_looks, nc.size))
    np.add.at(sums, (lk - 1, g), x)
    np.add.at(cnt, (lk - 1, g), 1.0)
    sums, cnt = np.cumsum(sums, axis=0), np.cumsum(cnt, axis=0)
    means = np.where(cnt > 0, sums / np.maximum(cnt, 1.0), 0.0)
    return (means * nc).sum(axis=1) / nc.sum()


def _used(est, mu, n_looks):
    """Looks bet on for each side: margin ``mu`` 0, or below half the earlier looks' estimate."""
    before = np.r_[0.0, est[:-1]] if n_looks > 1 else np.zeros(1)
    return (mu == 0) | (mu < before / 2), (mu == 0) | (mu < -before / 2)


def store_weighted_batches(d, subjects, looks, store_counts, *, alpha=0.05, n_looks=None, lambdas=None,
                           interval=True) -> SequentialResult:
    r"""Anytime-valid test and confidence sequence of the store's item-weighted gap, bet on look by look.

    Parameters
    ----------
    d : array_like, shape (n,)
        Differences b - a of the shared items, each once (the ledger), in [-1, 1].
    subjects : array_like of int, shape (n,)
        Subject code of each item, indexing ``store_counts``.
    looks : array_like of int, shape (n,)
        The look (1, 2, ...) at which each item entered: the look's batch.
    store_counts : array_like, shape (S,)
        Items of each subject in the store (the estimand's weights N_s); subjects with 0 carry no weight.
    alpha : float, keyword-only
        Two-sided level (each claim at alpha/2 over every look): the recorded verdict passes
        alpha x (1 - first-look share).
    n_looks : int, optional, keyword-only
        Looks so far (default the last look with an item; a look that added nothing holds the capital).
    lambdas : array_like, optional, keyword-only
        The bet grid in (0, 1/2] (default :data:`benchcert.stats.sequential.DEFAULT_LAMBDAS`).
    interval : bool, keyword-only
        Compute the confidence sequence (False leaves ``lower`` / ``upper`` None).

    Returns
    -------
    SequentialResult
        Per look: ``log_e_improved`` / ``log_e_regressed`` (log K+(0), log K-(0)), the confidence sequence of
        the store's gap, sticky verdicts, ``estimate`` the store-weighted gap of the items so far (a subject
        with none at 0), ``n`` items bet on so far (in batches bet on for either side: not the items still
        waiting, nor those of a batch bet on for neither side), ``method`` ``store_weighted_batches``.

    Notes
    -----
    Construction, its theorem (AM-GM per batch, Ville's inequality over looks; Waudby-Smith and Ramdas
    2024, JRSS-B 86(1)) and which looks are bet on: module docstring. Proportional sharing at every look
    gives the pooled :func:`benchcert.stats.sequential.betting_test` exactly.
    """
    x, g, lk, nc, alpha, t_n, lam = _batches_iv(d, subjects, looks, store_counts, alpha, n_looks, lambdas)
    if not isinstance(interval, (bool, np.bool_)):
        raise ValueError(f"interval must be True or False; got {interval!r}")
    est = _running_estimate(x, g, lk, nc, t_n)
    at = settle_looks(g, lk, nc, t_n)
    x, g, lk = x[at > 0], g[at > 0], at[at > 0]  # from here a batch is the items bet on together, at its look
    xs, w0, margin, scale, big_r = _batch_terms(x, g, lk, nc, t_n)
    use_up, use_down = _used(_running_estimate(x, g, lk, nc, t_n), margin, t_n)
    # group the items by (look, bet): the capital depends on the multiset per look only
    values, at = np.unique(xs, return_inverse=True)
    keys, counts = np.unique((lk - 1) * values.size + at.reshape(-1), return_counts=True)
    counts = counts.astype(float)
    g_look, g_x = keys // values.size, values[keys % values.size]
    g_w0, g_a = w0[g_look], scale[g_look]
    bets = np.minimum(lam[None, :] * big_r[g_look][:, None], 0.5)  # (G, L): lambda on the unscaled d r_s
    marks = np.unique(g_look)  # the looks at which a batch was bet on: the capital changes there only
    before = g_look[None, :] <= marks[:, None]  # (M, G): the group is in that look's capital

    def log_k(theta0, sign):
        used = (use_up if sign > 0 else use_down)[g_look]
        m = np.clip((theta0[:, None] + sign * g_w0[None, :]) * g_a[None, :], -1.0, 1.0)
        terms = np.log1p(np.maximum(sign * bets[None, :, :] * (g_x[None, :, None] - m[:, :, None]), _FLOOR))
        weight = np.where(before & used[None, :], counts[None, :], 0.0)
        return _logmean((weight[:, :, None] * terms).sum(axis=1))

    last = np.searchsorted(marks, np.arange(t_n), side="right") - 1  # the last batch's look, -1 before any
    # K(0) from the capital the interval inverts, so the verdict and the interval are one computation
    lp, lm = (np.where(last >= 0, log_k(np.zeros(marks.size), sign)[np.maximum(last, 0)], 0.0) if marks.size
              else np.zeros(t_n) for sign in (1.0, -1.0))
    lower = upper = None
    thr = np.log(2.0 / alpha)
    if interval and not marks.size:  # every item still waits: the capital is 1 whatever theta0
        lower, upper = np.full(t_n, -1.0), np.full(t_n, 1.0)
    elif interval:
        lower, upper = (np.where(last >= 0, bound[np.maximum(last, 0)], -sign) for bound, sign in (
            (_bisect(lambda m: log_k(m, 1.0), thr, marks.shape, increasing=False), 1.0),
            (_bisect(lambda m: log_k(m, -1.0), thr, marks.shape, increasing=True), -1.0)))
    bet_on = (use_up | use_down)[lk - 1]  # a batch bet on for neither side leaves the capital where it was
    n = np.cumsum(np.bincount(lk[bet_on] - 1, minlength=t_n)).astype(np.int64)
    res = _finish(est, lower, upper, lp, lm, n, alpha, lam, METHOD)
    return SequentialResult(**{**res.__dict__, "assumptions": ASSUMPTIONS})

