"""Every paired test of a family of pairs from its per-cluster sufficient statistics.

:func:`_engine` turns, for P pairs, the shared-item counts, sums and sums of squares of the
difference D = B - A per cluster (subject) into the paired CLT, clustered (CR2) and
fixed-strata tests, the exact McNemar / sign test, the Hoeffding interval, the MDE and the
verdict. The item-level, count-level and matrix-level entry points
(:mod:`~benchcert.stats.comparisons.paired`, :mod:`~benchcert.stats.comparisons.gram`) only
compute those statistics. The unpaired z-test, the contrast peers report, is here too.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

import numpy as np
from benchcert.stats import _dist as _st  # scipy.stats' t and binom without its import cost
from scipy.special import ndtr, ndtri

from .._common import cr2_mean, unwrap_scalar
from ..degenerate import Ref, warn_degenerate
from ..validation import check_unit_interval
from ..verdicts import interval_verdict
from .results import (
    MIN_SUBJECTS_CLUSTERED,
    _CLUSTERED_ASSUMPTIONS,
    _HOEFFDING_ASSUMPTIONS,
    _MCNEMAR_ASSUMPTIONS,
    _PAIRED_CLT_ASSUMPTIONS,
    _SIGN_ASSUMPTIONS,
    _STRATIFIED_ASSUMPTIONS,
    _UNPAIRED_ASSUMPTIONS,
    QUESTIONS,
    ComparisonTest,
)
from .score import bounded_mean_score_test, stratified_score_test
from .score_mde import bounded_score_test_mde, score_test_mde
from .signflip import MAX_CLUSTERS, _inverted, sign_flip_cluster_test, sign_flip_group


def _z(alpha: float) -> float:
    return float(ndtri(1.0 - alpha / 2.0))


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)


#: Position in the whole family of each pair of the block being computed (blocked pairwise).
_PAIR_INDEX: contextvars.ContextVar[np.ndarray | None] = contextvars.ContextVar("_PAIR_INDEX", default=None)


def _where(mask: np.ndarray) -> tuple[str, tuple[Ref, ...]]:
    """Which comparisons of the family a warning is about: a template piece (" ({})", or nothing for
    one scalar pair) and its :class:`Ref` of positions in the whole family ("comparison(s) [4]")."""
    if mask.ndim == 0:
        return "", ()
    hit = np.flatnonzero(mask)
    where = _PAIR_INDEX.get()
    return " ({})", (Ref("comparison", hit if where is None else np.unique(where[hit])),)


def _normal_test(est, se, ok, n, z, *, method, reason, worst_se, df=None, stacklevel=4, other=None):
    """est +/- z se with a two-sided normal p-value; worst case where the SE is not estimable.

    With ``df`` the critical value and p-value come from Student's t with df degrees of freedom.
    ``stacklevel``: the warnings' frame, the public function's caller. ``other``: the pairs whose
    interval another test replaces (no zero-width warning there).

    Where ``ok`` is False the SE cannot be estimated and the worst case for a mean of
    [-1, 1]-valued variables is used instead (``worst_se``: 1/sqrt(n) for independent
    items, 1 under arbitrary dependence), with a warning. A zero SE is warned too: the data
    show no variation, which is not the same as none.
    """
    est = np.asarray(est, dtype=float)
    ok = np.asarray(ok, dtype=bool)
    se = np.where(ok, np.asarray(se, dtype=float), worst_se)
    # Rounding leaves ~1e-17 where the exact variance is 0; no real SE of a gap is that small.
    se = np.where(se < 1e-12, 0.0, se)
    hw = z * se
    lower = np.clip(est - hw, -1.0, 1.0)
    upper = np.clip(est + hw, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        zstat = np.where(se > 0, est / np.where(se > 0, se, 1.0), np.where(est == 0, 0.0, np.sign(est) * np.inf))
    if df is None:
        p = np.where(np.isfinite(zstat), 2.0 * ndtr(-np.abs(zstat)), 0.0)
    else:
        p = np.where(np.isfinite(zstat), 2.0 * _st.t.sf(np.abs(zstat), df), 0.0)
    if not ok.all():
        at, refs = _where(~ok)
        warn_degenerate(f"{method}: {reason}{at}; using the worst-case SE for a mean of "
                        "[-1, 1]-valued differences", *refs, stacklevel=stacklevel)
    zero = ok & (se == 0.0) & (True if other is None else ~np.asarray(other, dtype=bool))
    if zero.any():
        at, refs = _where(zero)
        warn_degenerate(f"{method}: zero standard error{at} (every shared item has the same "
                        "difference); the interval has zero width - see the hoeffding interval for a "
                        "distribution-free statement", *refs, stacklevel=stacklevel)
    return est, lower, upper, se, zstat, p


def _exact_binomial_p(k_b, n_disc) -> np.ndarray:
    """Two-sided exact binomial p-value for k successes out of n at p = 1/2 (doubled smaller tail).

    For p = 1/2 the distribution is symmetric, so doubling the smaller tail equals the
    'sum of outcomes no more likely than the observed one' p-value of scipy.stats.binomtest.
    """
    k_b = np.asarray(k_b, dtype=float)
    n_disc = np.asarray(n_disc, dtype=float)
    small = np.minimum(k_b, n_disc - k_b)
    p = 2.0 * _st.binom.cdf(small, n_disc, 0.5)
    return np.where(n_disc > 0, np.minimum(p, 1.0), 1.0)


def _mde_core(se, n, alpha, power, df=None):
    # With a t reference the MDE uses the same t quantiles as the interval (finding: a gap
    # equal to a normal-quantile MDE is not detected with the stated power by a t test).
    if df is None:
        k = _z(alpha) + float(ndtri(power))
    else:
        dfa = np.asarray(df, dtype=float)
        k = _st.t.ppf(1.0 - alpha / 2.0, dfa) + _st.t.ppf(power, dfa)
    se = np.asarray(se, dtype=float)
    n = np.asarray(n, dtype=float)
    # With a zero SE the formula would claim any gap is detectable. The smallest variance a
    # gap delta of ternary differences can have is delta (1 - delta) (every discordant item
    # goes one way); solving delta = k sqrt(delta (1 - delta) / n) gives the floor k^2/(n + k^2).
    floor_zero = k * k / (n + k * k)
    mde = np.where(se > 0, k * se, floor_zero)
    return np.minimum(mde, 1.0), floor_zero


@dataclass(frozen=True)
class ComparisonSettings:
    """How every pair of one family is tested.

    ``alpha`` the two-sided level, ``power`` the power the MDE is reported at, ``primary`` the
    method behind the verdict; ``all_binary`` whether every pair of the whole family is 0/1
    (names the exact test for all pairs when the family is computed in blocks; None: decided
    from the pairs at hand); ``family_size`` the pairs of the whole family (above 1, the
    sign-flip interval is also inverted at ``alpha / family_size``, the family's Bonferroni level);
    ``mde_alpha`` the two-sided level the MDE is stated at (None: ``alpha``; a family whose verdicts are
    read at Bonferroni ``alpha / P`` states it there, so the number beside a verdict is what it can detect).
    """

    alpha: float
    power: float
    primary: str
    all_binary: bool | None = None
    family_size: int = 1
    mde_alpha: float | None = None

    @property
    def mde_level(self) -> float:
        """The level the MDE is stated at."""
        return self.alpha if self.mde_alpha is None else self.mde_alpha


def check_mde_alpha(mde_alpha) -> float | None:
    """``mde_alpha`` (the level an MDE is stated at) as a float in (0, 1), or None (the pairs' alpha)."""
    return None if mde_alpha is None else check_unit_interval("mde_alpha", mde_alpha)


@dataclass(frozen=True)
class PairSums:
    """Per-cluster sufficient statistics of D = B - A for P pairs.

    ``n_c`` shared items, ``s_c`` sum D, ``q_c`` sum D^2 per cluster, shape (C, P) (one row
    when not ``clustered``); ``n_pos`` / ``n_neg`` items with D > 0 / D < 0, ``binary`` whether
    the pair's shared scores are 0/1, ``n_only_a`` / ``n_only_b`` items only one model
    answered, shape (P,). ``d_items``: per pair, the differences D of its shared items where the pair's
    scores are fractional and the family small enough for the bounded score test (None elsewhere, or
    None for all): that test needs every D, not only the sums.
    """

    n_c: np.ndarray
    s_c: np.ndarray
    q_c: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray
    binary: np.ndarray
    n_only_a: np.ndarray
    n_only_b: np.ndarray
    clustered: bool
    d_items: tuple | None = None


def _engine(sums: PairSums, settings: ComparisonSettings) -> dict:
    """Every test, the MDE and the verdict from per-cluster sufficient statistics of D
    (the fields of :class:`PairedComparison` but the model means)."""
    n_c, s_c, q_c, n_pos, n_neg = sums.n_c, sums.s_c, sums.q_c, sums.n_pos, sums.n_neg
    binary, n_only_a, n_only_b, clustered = sums.binary, sums.n_only_a, sums.n_only_b, sums.clustered
    alpha, power, primary, all_binary = settings.alpha, settings.power, settings.primary, settings.all_binary
    n = n_c.sum(axis=0)
    s = s_c.sum(axis=0)
    q = q_c.sum(axis=0)
    gap = s / n
    nf = n.astype(float)
    z = _z(alpha)
    tests: dict[str, ComparisonTest] = {}

    # paired CLT: Var(D) with ddof=1; clip the O(1e-16) negative rounding.
    ok = n >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.maximum(q - nf * gap * gap, 0.0) / np.where(ok, nf - 1.0, 1.0)
        se = np.sqrt(var / nf)
    # on 0/1 scores the interval and p-value are Tango's score test of the paired difference (one stratum),
    # as for the items question with subjects: the Wald interval's end away from the ceiling is short
    # (issue #36; a non-inferiority gate at the margin passed above 2.5%: tests/stats/comparisons/test_score.py)
    # (and on fractional scores the same construction on [-1, 1]: score.bounded_mean_score_test)
    score = np.asarray(binary, dtype=bool) & ok & (max(settings.family_size, np.size(n)) <= SCORE_MAX_PAIRS)
    bounded = _bounded(sums.d_items, np.shape(n), alpha, settings.family_size)  # once for both items tests
    frac = bounded[0] & ok
    est, lo, hi, se_p, zs, p = _normal_test(
        gap, se, ok, n, z, method="paired_clt", worst_se=1.0 / np.sqrt(nf),
        reason="only one shared item, so Var(D) cannot be estimated", other=score | frac)
    zs, p, lo, hi = (np.array(x, dtype=float, copy=True) for x in (zs, p, lo, hi))
    # the score test of the pooled counts, once: the stratified_items test below reads the same one on a
    # subset of these pairs (its pairs have n - C >= 1, so n >= 2)
    pooled = _pooled_score(score, n_c, s_c, q_c, alpha, settings.family_size)
    sim = _stratified_score(score, n_c, s_c, q_c, alpha, settings.family_size, (zs, p, lo, hi),
                            frac=frac, bounded=bounded, pooled=pooled)
    tests["paired_clt"] = ComparisonTest(_out(est), _out(lo), _out(hi), _out(se_p), _out(zs), _out(p), alpha,
                                         _out(n), "paired_clt", _PAIRED_CLT_ASSUMPTIONS,
                                         simultaneous_lower=sim[0], simultaneous_upper=sim[1])

    n_clusters = None
    flip = np.zeros(np.shape(n), dtype=bool)
    if clustered:
        # the sign-flip interval (about 7 ms a pair at 14 subjects) where it decides or is shown: as the
        # primary test, or in a small family (compare's candidates); elsewhere only its p-value is used
        invert = primary == "clustered_subject" or max(settings.family_size, n_c.shape[1]) <= INVERT_MAX_PAIRS
        # the items question's score interval on 0/1 scores (a few microseconds a pair); the t interval on
        # fractional scores and in very large families
        score = np.asarray(binary, dtype=bool) & (max(settings.family_size, n_c.shape[1]) <= SCORE_MAX_PAIRS)
        n_clusters, flip = _clustered_tests(tests, n_c, s_c, q, gap, alpha, settings.family_size, invert,
                                            q_c=q_c, score=score, bounded=bounded, pooled=pooled)

    # exact McNemar (binary) / sign test (otherwise): binomial on the discordant items
    n_disc = n_pos + n_neg
    p_ex = _exact_binomial_p(n_pos, n_disc)
    none_disc = n_disc == 0
    if none_disc.any():
        at, refs = _where(none_disc)
        warn_degenerate(f"mcnemar_exact/sign_test: no discordant item{at}, so the exact test "
                        "has no information; p-value 1", *refs, stacklevel=3)
    ref = tests[primary]
    binary = np.asarray(binary, dtype=bool)
    # all_binary: of the whole family when the caller computes it in blocks (one test name for all)
    all_binary = bool(binary.all()) if all_binary is None else bool(all_binary)
    name = "mcnemar_exact" if all_binary else "sign_test"
    tests[name] = ComparisonTest(_out(gap), ref.lower, ref.upper, None, _out(n_pos), _out(p_ex), alpha, _out(n),
                                 name, _MCNEMAR_ASSUMPTIONS if all_binary else _SIGN_ASSUMPTIONS)

    # Hoeffding on D in [-1, 1]: half-width R sqrt(log(2/alpha) / (2n)) with R = 2.
    hw_h = np.sqrt(2.0 * np.log(2.0 / alpha) / nf)
    p_h = np.minimum(1.0, 2.0 * np.exp(-nf * gap * gap / 2.0))
    tests["hoeffding"] = ComparisonTest(_out(gap), _out(np.clip(gap - hw_h, -1, 1)), _out(np.clip(gap + hw_h, -1, 1)),
                                        None, _out(np.sqrt(nf) * np.abs(gap)), _out(p_h), alpha, _out(n), "hoeffding",
                                        _HOEFFDING_ASSUMPTIONS)

    prim = tests[primary]
    mde, mde_rule = _primary_mde(prim, sums, settings, n_clusters)
    verdict = interval_verdict(prim.lower, prim.upper)  # stats/verdicts.py: the interval decides
    return dict(
        estimate=_out(gap), lower=prim.lower, upper=prim.upper, se=prim.se, p_value=prim.p_value,
        verdict=_out(verdict), alpha=alpha, n=_out(n),
        n_only_a=_out(n_only_a), n_only_b=_out(n_only_b), n_excluded=_out(np.asarray(n_only_a) + np.asarray(n_only_b)),
        n_clusters=None if n_clusters is None else _out(n_clusters),
        n_b_wins=_out(n_pos), n_a_wins=_out(n_neg), binary=_out(binary), mde=_out(mde), power=power,
        mde_alpha=settings.mde_level, mde_method=_out(mde_rule),
        method=primary, assumptions=prim.assumptions, tests=tests, question=QUESTIONS[primary],
    )


#: What :func:`_primary_mde` computed each pair's MDE with (``PairedComparison.mde_method``): the pooled score
#: test's power, the bounded score test's, or the t approximation's (also the rule "more items needed" follows).
MDE_RULES = ("score", "bounded", "t")


def _primary_mde(prim: ComparisonTest, sums: PairSums, settings: ComparisonSettings, n_clusters):
    """(MDE, its rule in :data:`MDE_RULES`) of the test that decides, at ``settings.mde_level``: the pooled score
    test's (:func:`score_test_mde`) on the pairs whose primary interval is that test's (0/1 scores, the items
    question), the bounded score test's (:func:`bounded_score_test_mde`) on the fractional pairs it decides,
    else the t approximation's at the primary SE and df (the clustered question, very large families)."""
    n = sums.n_c.sum(axis=0)
    level = settings.mde_level
    mde, _ = _mde_core(prim.se, n, level, settings.power, df=prim.df)
    rule = np.full(np.shape(n), "t", dtype="<U7")  # a fixed width: blocked results are scattered into one array
    if settings.primary == "clustered_subject" or max(settings.family_size, np.size(n)) > SCORE_MAX_PAIRS:
        return mde, rule
    ok = n >= 2
    if settings.primary == "stratified_items":
        ok &= n - np.asarray(n_clusters) >= 1  # where the fixed-strata test has its score interval
    score = np.asarray(sums.binary, dtype=bool) & ok
    frac = _kept(sums.d_items, np.shape(n)) & ok  # fractional pairs decided by the bounded score test
    if score.any() or frac.any():
        mde = np.array(mde, dtype=float, copy=True)
    if score.any():
        mde[score] = score_test_mde(np.asarray(sums.n_pos)[score], np.asarray(sums.n_neg)[score], n[score],
                                    alpha=level, power=settings.power)
        rule[score] = "score"
    if frac.any():
        mde[frac] = bounded_score_test_mde([sums.d_items[j] for j in np.flatnonzero(frac)], alpha=level,
                                           power=settings.power)
        rule[frac] = "bounded"
    return mde, rule


#: Up to this many pairs in a family the items question's interval and p-value on 0/1 scores are the
#: score test's (:mod:`~benchcert.stats.comparisons.score`); beyond (all pairs of hundreds of models),
#: the t interval's.
SCORE_MAX_PAIRS = 50_000

#: Up to this many pairs in a family the items question's interval and p-value on fractional scores are the
#: bounded score test's (:func:`~benchcert.stats.comparisons.score.bounded_mean_score_test`, which needs every
#: item's D: about 0.2 CPU s a pair at 12,000 items); beyond (the audit's tables of many models), the t interval's.
BOUNDED_SCORE_MAX_PAIRS = 20

#: Up to this many pairs the clustered test's sign-flip interval is computed even where it is not the
#: primary test (``compare --json`` shows it beside its p-value); beyond, unless it is primary, its
#: interval is NaN (not computed: no output shows it) and only its p-value is used.
INVERT_MAX_PAIRS = 20


def _clustered_tests(tests: dict, n_c, s_c, q, gap, alpha: float, family_size: int = 1, invert: bool = True,
                     *, q_c=None, score=None, bounded=None, pooled=None):
    """Add the tests that use the subjects to ``tests``: ``clustered_subject`` (subjects sampled) and
    ``stratified_items`` (subjects as fixed strata; on the pairs ``score`` marks, 0/1 scores, the
    stratified score test and its interval, from the per-subject ``q_c``; on the fractional pairs of
    ``bounded`` (:func:`_bounded`), the bounded score test on the pooled D; ``pooled``: the score test of
    :func:`_pooled_score` when the caller has it); returns (subjects per pair, the pairs whose clustered
    test and interval are the sign-flip test's)."""
    n = n_c.sum(axis=0)
    nf = n.astype(float)
    c = (n_c > 0).sum(axis=0)
    resid = s_c - n_c * gap
    okc = c >= 2
    # CR2 with Bell-McCaffrey df (Pustejovsky & Tipton 2018) rather than CR1 with C - 1 df:
    # CR1 over-rejects when subject sizes are very unequal.
    var_cl, df_bm = cr2_mean(n_c, resid)
    se_cl = np.sqrt(var_cl)
    df = np.where(okc, df_bm, np.inf)
    t_crit = _st.t.ppf(1.0 - alpha / 2.0, df)
    # stacklevel 5: one frame deeper than _engine's own tests, the warnings still name the caller
    est, lo, hi, se_c, zs, p = _normal_test(
        gap, se_cl, okc, n, t_crit, method="clustered_subject", worst_se=np.ones_like(nf), df=df,
        reason="fewer than 2 subjects with shared items, so the between-subject variance "
               "cannot be estimated", stacklevel=5)
    # Fewer than MIN_SUBJECTS_CLUSTERED subjects: the p-value and the interval (so, as primary, the
    # verdict) are the sign-flip randomisation test's, the interval that test inverted (issue #36:
    # CR2-BM over-rejects there once subject gaps vary, and its interval contradicted the test).
    flip = okc & (c < MIN_SUBJECTS_CLUSTERED)
    sim_lo = sim_hi = None
    if family_size > 1 and invert:  # every block of a family holds them (blocks.py scatters arrays)
        sim_lo, sim_hi = np.full(np.shape(p), np.nan), np.full(np.shape(p), np.nan)
    if flip.any():
        p, lo, hi = (np.array(x, dtype=float, copy=True) for x in (p, lo, hi))
        levels = (alpha,) if family_size <= 1 else (alpha, alpha / family_size)
        pf, ends = _sign_flip(n_c[:, flip], s_c[:, flip], levels if invert else ())
        p[flip] = pf
        lo[flip], hi[flip] = ends[0] if invert else (np.nan, np.nan)
        if sim_lo is not None:
            sim_lo[flip], sim_hi[flip] = ends[1]
    tests["clustered_subject"] = ComparisonTest(_out(est), _out(lo), _out(hi), _out(se_c), _out(zs), _out(p),
                                                alpha, _out(n), "clustered_subject", _CLUSTERED_ASSUMPTIONS,
                                                df=_out(df), simultaneous_lower=sim_lo, simultaneous_upper=sim_hi)
    # Subjects as fixed strata: pooled within-subject variance of D, t on N - C df.
    with np.errstate(divide="ignore", invalid="ignore"):
        between = np.where(n_c > 0, s_c * s_c / np.where(n_c > 0, n_c, 1.0), 0.0).sum(axis=0)
        ssw = np.maximum(q - between, 0.0)
        df_w = nf - c
        oks = df_w >= 1
        se_st = np.sqrt(ssw / np.where(oks, df_w, 1.0) / nf)
    df_s = np.where(oks, df_w, np.inf)
    est, lo, hi, se_s, zs, p = _normal_test(
        gap, se_st, oks, n, _st.t.ppf(1.0 - alpha / 2.0, df_s), method="stratified_items",
        worst_se=1.0 / np.sqrt(nf), df=df_s,
        reason="no subject has two shared items, so the within-subject variance cannot be estimated", stacklevel=5,
        other=None if score is None else (score | (False if bounded is None else bounded[0])) & oks)
    score = None if score is None else score & oks
    zs, p, lo, hi = (np.array(x, dtype=float, copy=True) for x in (zs, p, lo, hi))
    sim = _stratified_score(score, n_c, s_c, q_c, alpha, family_size, (zs, p, lo, hi),
                            frac=None if bounded is None else bounded[0] & oks, bounded=bounded, pooled=pooled)
    tests["stratified_items"] = ComparisonTest(_out(est), _out(lo), _out(hi), _out(se_s), _out(zs), _out(p),
                                               alpha, _out(n), "stratified_items", _STRATIFIED_ASSUMPTIONS,
                                               df=_out(df_s), simultaneous_lower=sim[0], simultaneous_upper=sim[1])
    return c, flip


def _kept(d_items, shape):
    """The pairs whose items' differences were kept (fractional scores), a boolean array of ``shape``."""
    if d_items is None:
        return np.zeros(shape, dtype=bool)
    return np.reshape(np.array([d is not None for d in d_items], dtype=bool), shape)


def _bounded(d_items, shape, alpha, family_size):
    """The bounded score test of the pairs whose items' differences were kept (fractional scores): (those
    pairs, statistic, p-value, ends at alpha, ends at alpha / family_size or None), full-shape arrays."""
    mask = _kept(d_items, shape)
    if not mask.any():
        return mask, None, None, None, None
    levels = (alpha,) if family_size <= 1 else (alpha, alpha / family_size)
    got, pv, ends = bounded_mean_score_test([d_items[j] for j in np.flatnonzero(mask)], levels)
    full = [np.full(shape, np.nan) for _ in range(2 + 2 * len(levels))]
    for arr, new in zip(full, (got, pv, *[x for e in ends for x in e])):
        arr[mask] = new
    return mask, full[0], full[1], (full[2], full[3]), None if len(levels) == 1 else (full[4], full[5])


def _pooled_score(score, n_c, s_c, q_c, alpha, family_size):
    """Tango's score test on the subjects' pooled counts of the pairs ``score`` marks: (those pairs,
    statistic, p-value, ends per level), full-shape arrays (NaN elsewhere); None when it marks none.

    Each pair's numbers are its own (the test is elementwise over pairs), so the paired and the
    stratified items tests, which both use it, read one computation.
    """
    score = None if score is None else np.asarray(score, dtype=bool)
    if score is None or not score.any():
        return None
    levels = (alpha,) if family_size <= 1 else (alpha, alpha / family_size)
    s, q = s_c[:, score].sum(axis=0, keepdims=True), q_c[:, score].sum(axis=0, keepdims=True)
    stat, pv, ends = stratified_score_test((q + s) / 2.0, (q - s) / 2.0, n_c[:, score].sum(axis=0, keepdims=True),
                                           levels)
    full = [np.full(score.shape, np.nan) for _ in range(2 + 2 * len(levels))]
    for arr, new in zip(full, (stat, pv, *[x for e in ends for x in e])):
        arr[score] = new
    return score, full[0], full[1], [(full[2 + 2 * i], full[3 + 2 * i]) for i in range(len(levels))]


def _stratified_score(score, n_c, s_c, q_c, alpha, family_size, out, *, frac=None, bounded=None, pooled=None):
    """Where ``score`` (0/1 scores): replace the t (or Wald) test's statistic, p-value and interval in
    ``out`` = (zs, p, lo, hi) by the score test's, in place, and return that test's interval at the
    family's Bonferroni level (NaN elsewhere; None for one pair). Where ``frac`` (fractional scores) the
    same by the bounded score test on the pooled D, ``bounded`` (:func:`_bounded`).

    Issue #36: the t interval's end away from the ceiling was short (near the ceiling few items are
    discordant, and the estimated variance is small exactly when few went the baseline's way), so a
    non-inferiority gate at a true gap of exactly -D passed 3.0% of runs for 2.5% (14 unequal subjects,
    errors 2%; 4.5% with 2 subjects). The score test puts the null's variance instead: Tango's (1998)
    on the counts pooled over the subjects, with Miettinen and Nurminen's N / (N - 1). Pooling adds the
    subjects' between-subject spread of gaps to the variance, so with subjects as fixed strata it is
    conservative (about 1 point of power at a 30-point swing of subject gaps); the per-subject
    constrained fit (``stratified_score_test`` with C strata) over-fits small subjects (14 of 8 items:
    3.1% at the margin) and is not used.
    """
    sim = (None, None)
    score = None if score is None else np.asarray(score, dtype=bool)
    anyf = frac is not None and bool(np.any(frac))
    if family_size > 1 and ((score is not None and score.any()) or anyf):
        shape = (score if score is not None else frac).shape
        sim = (np.full(shape, np.nan), np.full(shape, np.nan))
    if anyf:
        frac = np.asarray(frac, dtype=bool)
        for arr, new in zip(out, (bounded[1], bounded[2], *bounded[3])):
            arr[frac] = new[frac]
        if sim[0] is not None:
            sim[0][frac], sim[1][frac] = bounded[4][0][frac], bounded[4][1][frac]
    if score is None or not score.any():
        return sim
    if pooled is None or (score & ~pooled[0]).any():
        pooled = _pooled_score(score, n_c, s_c, q_c, alpha, family_size)
    _, stat, pv, ends = pooled
    for arr, new in zip(out, (stat, pv, *ends[0])):
        arr[score] = new[score]
    if sim[0] is not None:
        sim[0][score], sim[1][score] = ends[1][0][score], ends[1][1][score]
    return sim


def _sign_flip(n_c, s_c, levels):
    """The sign-flip test's p-values and its inverted intervals at each of ``levels`` of pairs with few
    subjects, over the subjects any of them has: (p, [(lower, upper) per level])."""
    rows = (n_c > 0).any(axis=1)
    if rows.sum() <= MAX_CLUSTERS:
        t = sign_flip_cluster_test(n_c[rows], s_c[rows], alpha=levels[0] if levels else 0.05,
                                   interval=len(levels) == 1)
        if len(levels) <= 1:
            return t.p_value, [(t.lower, t.upper)] * len(levels)
        e = sign_flip_group(int(rows.sum()))
        return t.p_value, _inverted(e[: e.shape[0] // 2], n_c[rows], s_c[rows], levels)
    p = np.empty(n_c.shape[1])  # very many subjects over the family: each pair on its own (< 30)
    ends = [(np.empty(n_c.shape[1]), np.empty(n_c.shape[1])) for _ in levels]
    for j in range(n_c.shape[1]):
        r = n_c[:, j] > 0
        pj, ej = _sign_flip(n_c[r, j:j + 1], s_c[r, j:j + 1], levels)
        p[j] = pj[0]
        for (lo, hi), (lo_j, hi_j) in zip(ends, ej):
            lo[j], hi[j] = lo_j[0], hi_j[0]
    return p, ends


def _scalar(v):
    if isinstance(v, np.ndarray) and v.shape == (1,):
        x = v[0]
        return x.item() if isinstance(x, np.generic) else x
    return v


def _scalar_test(t: ComparisonTest) -> ComparisonTest:
    return ComparisonTest(**{k: _scalar(getattr(t, k)) for k in t.__dataclass_fields__})


def _unpaired_core(ma, va, na, mb, vb, nb, alpha, stacklevel=3):
    """Two-sample z-test from each model's mean, variance (ddof=1) and count, vectorised."""
    single = (na < 2) | (nb < 2)
    if np.any(single):
        warn_degenerate("unpaired_z: a model has a single answered item; using the worst-case variance 1/4",
                        stacklevel=stacklevel)
    va = np.where(na >= 2, va, 0.25)
    vb = np.where(nb >= 2, vb, 0.25)
    se = np.sqrt(va / na + vb / nb)
    est, lo, hi, se, zs, p = _normal_test(mb - ma, se, np.ones(np.shape(se), bool), np.minimum(na, nb), _z(alpha),
                                          method="unpaired_z", reason="", worst_se=0.5)
    return ComparisonTest(est, lo, hi, se, zs, p, alpha, np.minimum(na, nb), "unpaired_z", _UNPAIRED_ASSUMPTIONS)


def _stat_rows(k: int) -> int:
    """Rows per block of :func:`column_stats` and :func:`column_sums` (a few MB of temporaries)."""
    return max(1, (1 << 21) // max(k, 1))


def column_sums(x2: np.ndarray):
    """Per-column count and sum of the answered scores, summed block by block as :func:`column_stats`
    sums them (the same bits), and whether each column's answered scores are all 0 or 1: one pass
    over the matrix for what its callers otherwise read in three."""
    k = x2.shape[1]
    rows = _stat_rows(k)
    n = np.zeros(k, dtype=np.int64)
    total = np.zeros(k)
    binary = np.ones(k, dtype=bool)
    for lo in range(0, x2.shape[0], rows):
        block = x2[lo:lo + rows]
        nan = np.isnan(block)
        obs = ~nan
        n += obs.sum(axis=0)
        total += np.where(obs, block, 0.0).sum(axis=0)
        binary &= np.all(nan | (block == 0) | (block == 1), axis=0)
    return n, total, binary


def column_stats(x2: np.ndarray, *, sums=None):
    """Per-column count, mean and sample variance (ddof=1; 0 where fewer than 2) ignoring NaN.

    Two passes (mean, then squared deviations) over blocks of rows: the temporaries stay a few
    MB instead of three copies of the matrix (2.4 GB at 4,000 models x 20,000 items). ``sums``:
    the count and sum of :func:`column_sums`, when the caller has them (the first pass skipped).
    """
    k = x2.shape[1]
    rows = _stat_rows(k)
    if sums is None:
        n, total, _ = column_sums(x2)
    else:
        n, total = sums
    mean = total / np.maximum(n, 1)
    ss = np.zeros(k)
    for lo in range(0, x2.shape[0], rows):
        block = x2[lo:lo + rows]
        dev = np.where(np.isnan(block), 0.0, block - mean)
        ss += (dev * dev).sum(axis=0)
    return n, mean, ss / np.maximum(n - 1, 1)
