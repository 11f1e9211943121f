"""The recorded verdict's tests since issue #36, chosen per question and fixed at its first look.

:mod:`benchcert.tasks.compare.verdicts` asks this module which tests answer a question
(:func:`scheme`) and, for the questions first recorded since #36, runs them (the statistics are
:mod:`benchcert.stats.recorded` and :mod:`benchcert.stats.store_batches`):

* ``items`` (``store_weighted_batches``): the first look by the stratified test of the store's
  item-weighted gap at alpha x first-look share (the power of ``compare``'s fixed-sample test; a
  subject with no shared item counts at the worst case); every look by the betting test of the
  store's gap at the rest of alpha, the items bet on in batches reweighted to the store
  (:func:`items_anytime`; a look's new items wait until the items waiting cover every subject not yet
  fully shared, at most :data:`~benchcert.stats.store_batches.MAX_WAIT` looks; a subject still
  missing from a batch counted at the worst case for its bets, or the batch not bet on), so the
  claim and its anytime interval are about the whole benchmark's items however unequally the
  subjects were shared;
* ``items`` asked first before that (``stratified_store_weights``): the same first look; the betting
  test on the pooled items (when every subject was shared at the first look), else two betting tests
  at half that level each: one on the first look's subjects testing "gap <= w0 / (1 - w0)" on them,
  one on every item from the look at which every subject has a shared item. Pooled, these test the
  shared items' mean, not the store's gap (issue #36: 1,000 of 1,000 false claims with a subject
  shared barely beside one shared fully); kept so that a recorded look never changes meaning;
* ``new-subjects`` (``plugin_betting_all_alpha``): one anytime-valid test with all of alpha
  (predictable plug-in betting tuned for the store's subjects, bets truncated at 0.99 of what keeps
  the capital positive); no separate first look, whose share would only split the level;
* ``new-subjects`` with ``--assume symmetric`` (``symmetric_selfnormalised``): the self-normalised
  symmetric e-process, all of alpha.

Questions recorded before #36 keep their tests (``first_method`` ``betting_constant_mixture_items``,
``betting_plugin_subject_means`` or empty): a recorded look never changes meaning.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl

from benchcert.stats.recorded import (detectable_gap, effective_differences, either_of, stratified_first_look,
                                      subject_e_process)
from benchcert.stats.sequential import betting_test, subject_entry_means
from benchcert.stats.store_batches import (MAX_WAIT, absent_weight, settle_looks, store_weighted_bets,
                                           store_weighted_batches)
from benchcert.tasks.errors import NoDataError
from benchcert.tasks.finite import finite_or_none as _num

__all__ = ["ASSUMES", "V2_METHODS", "POOLED_ITEMS", "SINCE_36", "AssumeError", "items_anytime", "scheme", "items_first",
           "store_weighted_bets", "deciding_interval",
           "absent_weight", "on_store_scale",
           "store_estimand", "store_grew", "late_subjects", "subjects_test", "subject_units", "spend"]

#: ``--assume`` choices: what the new-subjects test may assume about the subject gaps.
ASSUMES = ("none", "symmetric")

#: The first method recorded for a question first asked since #36, by (question, assume).
V2_METHODS = {("items", "none"): "store_weighted_batches", ("new-subjects", "none"): "plugin_betting_all_alpha",
              ("new-subjects", "symmetric"): "symmetric_selfnormalised"}

#: The items question's method from #36 until its anytime part was reweighted look by look: its betting part
#: pools the shared items. A question recorded with it keeps it.
POOLED_ITEMS = "stratified_store_weights"

#: Every ``first_method`` of a question first recorded since #36.
SINCE_36 = frozenset(V2_METHODS.values()) | {POOLED_ITEMS}


class AssumeError(NoDataError):
    """``--assume`` differs from the question's first look, or does not apply (exit code 1)."""


def scheme(looks: pl.DataFrame, question: str, assume: str) -> str | None:
    """The question's test (a :data:`V2_METHODS` value), or None for a question recorded before #36.

    Raises :class:`AssumeError` when ``assume`` is not the one the question was first asked with,
    or is ``symmetric`` for the items question.
    """
    if assume not in ASSUMES:
        raise AssumeError(f"assume must be one of {list(ASSUMES)}; got {assume!r}")
    if question == "items" and assume != "none":
        raise AssumeError("--assume symmetric is about the subject gaps of --question new-subjects; the items "
                          "question needs no assumption on them")
    new = V2_METHODS[(question, assume)]
    if not looks.height:
        return new
    recorded = looks.row(0, named=True).get("first_method") or ""
    if recorded == POOLED_ITEMS and new == V2_METHODS[("items", "none")]:
        return recorded  # asked before the look-by-look reweighting: its recorded looks keep their meaning
    if recorded in SINCE_36:
        if recorded != new:
            was = "symmetric" if recorded == "symmetric_selfnormalised" else "none"
            raise AssumeError(f"this question was first asked with --assume {was}; its guarantee holds only if that "
                              f"stays fixed - ask with --assume {was} (got --assume {assume})")
        return recorded
    if assume != "none":
        raise AssumeError("this question was recorded before --assume existed (its tests assume nothing of the "
                          "subject gaps); continue it without --assume, or ask on a fresh store")
    return None


def late_subjects(looks: pl.DataFrame) -> str:
    """How the items question's betting test counts the subjects not shared at its first look, in words, by the
    question's recorded (or, on a first look, new) method; "" for a question recorded before #36 (which leaves
    them out)."""
    first = (looks.row(0, named=True).get("first_method") or "") if looks.height else V2_METHODS[("items", "none")]
    if first not in SINCE_36:
        return ""
    if first == POOLED_ITEMS:
        return "the betting test counts them so until every subject of the store has a shared item, then also bets " \
               "on all items"
    return (f"the betting test holds the items back until the items waiting cover every subject of the store not yet "
            f"fully shared (at most {MAX_WAIT} looks), then bets on them as one batch reweighted to the store, a "
            "subject still missing counted at the worst case or the batch not bet on")


#: Below this many effectively nonzero differences, weighted as the estimate weighs them
#: (:func:`benchcert.stats.recorded.effective_differences`; the discordant items for binary scores shared in
#: proportion to the store), the first look is the betting bound instead of the normal approximation: with 4-6
#: discordant items the stratified t's one-sided rate reached 2.0-2.5% at a nominal 1.25%, and with about 10
#: discordant items in a subject carrying 95% of the weight 1.6% (tests/stats/test_recorded_verdicts.py).
MIN_EFFECTIVE = 100


def items_first(d: np.ndarray, subjects: np.ndarray, store_counts: np.ndarray, a1: float,
                margin: float = 0.0) -> tuple[float, float, float, float]:
    """The items question's first-look claim at ``a1``: (two-sided p, estimate), as nightly_verdicts reads them,
    and the test's 1 - ``a1`` interval (lower, upper: the interval that decides a first-look verdict, shown beside
    it; every first look has one).

    The stratified test of the store's gap (:func:`benchcert.stats.recorded.stratified_first_look`; its interval
    excludes 0 exactly when it claims); with fewer than :data:`MIN_EFFECTIVE` effectively nonzero differences
    (weighted as the estimate weighs them: :func:`benchcert.stats.recorded.effective_differences`) the
    mixture of constant bets on the shared items reweighted to the store (:func:`store_weighted_bets`: each bet's
    expectation is the store-weighted gap of the subjects with a shared item over ``R``), at ``margin / R``; its
    interval is the same bets' confidence set at ``a1`` scaled back by ``R``, put on the store's scale as the
    betting test's anytime interval is (:func:`on_store_scale`, with the store weight w0 of the subjects without
    a shared item): ``(1 - w0) R lower - w0 > 0`` exactly when ``R lower > w0 / (1 - w0)``, the margin the bets
    test, so the interval excludes 0 exactly when the bets claim. Where the store-weighted estimate's sign
    differs from the side the bets favour no claim is made (``p = 1``) and the interval is widened to reach 0 (it
    says what the claim says: nothing). ``p <= a1`` with the estimate's sign is exactly the claim at level ``a1``.

    Until issue #36's review the bets pooled the shared items unweighted: they tested the shared-item-weighted
    gap, not the store's, and with unequal sharing (one subject shared fully, a large one barely) claimed
    "improved" in 54% of runs of a store whose gap was -1 point (tests/stats/test_recorded_verdicts.py).
    """
    if effective_differences(d, subjects, store_counts) < MIN_EFFECTIVE:
        x, big_r = store_weighted_bets(d, subjects, store_counts)
        r = betting_test(x, np.array([d.size]), alpha=a1, margin=min(0.999, margin / big_r))
        w0 = absent_weight(store_counts, np.unique(subjects))[0] if margin else 0.0
        lo = float(np.asarray(r.lower).ravel()[-1]) * big_r
        hi = float(np.asarray(r.upper).ravel()[-1]) * big_r
        lo, hi = (float(np.clip((1 - w0) * lo - w0, -1.0, 1.0)), float(np.clip((1 - w0) * hi + w0, -1.0, 1.0)))
        lp, lm = float(r.log_e_improved[-1]), float(r.log_e_regressed[-1])
        p, side = min(1.0, 2.0 * math.exp(-max(lp, lm))), (1.0 if lp > lm else -1.0)
        n_s = np.bincount(subjects, minlength=store_counts.size)
        sums = np.bincount(subjects, weights=d, minlength=store_counts.size)
        est = float((store_counts * np.where(n_s > 0, sums / np.maximum(n_s, 1), 0.0)).sum() / store_counts.sum())
        if side * est <= 0:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
    else:
        r = stratified_first_look(d, subjects, store_counts, alpha=a1)
        side = 1.0 if r.p_improved <= r.p_regressed else -1.0
        p, est = min(1.0, 2.0 * min(r.p_improved, r.p_regressed)), float(r.estimate)
        lo, hi = float(r.lower), float(r.upper)
    if side * est <= 0:
        p = 1.0
    return p, est, lo, hi


def store_estimand(store_counts: np.ndarray, method: str = V2_METHODS[("items", "none")]) -> dict:
    """The items question's estimand since #36, in words (``estimand`` and ``estimand_note`` of the look)."""
    n, k = int(store_counts.sum()), int((store_counts > 0).sum())
    text = (f"item-weighted mean gap over the benchmark's {n} items in the store ({k} subjects as fixed strata, each "
            "weighted by its items in the store, not by what has arrived)")
    how = (f"the items bet on in batches reweighted to the store: a look's new items wait until the items waiting "
           f"cover every subject not yet fully shared (at most {MAX_WAIT} looks), a subject still missing from a "
           "batch at the worst case for its bets or the batch not bet on" if method != POOLED_ITEMS else
           "subjects with no item shared at the first look at the worst case until every subject has one")
    return {"estimand": text, "estimand_note": f"estimand: {text}; the first-look test, the betting test and the "
            f"anytime interval are about it ({how}); this look's fixed-sample gap and interval are over every shared "
            "item"}


def store_grew(looks: pl.DataFrame, store_counts: np.ndarray | None, method: str | None) -> list[str]:
    """The warning when an items question's store differs in number of items from its first look's (``method``
    ``store_weighted_batches``, with subjects; else none). That test weighs every batch by the store's counts at
    this look; its guarantee is for counts fixed from the first look. The first look recorded its shared and
    one-model items, not the counts per subject: a change that keeps the total goes unseen."""
    if not looks.height or store_counts is None or method != V2_METHODS[("items", "none")]:
        return []
    row = looks.row(0, named=True)
    parts = [row.get(k) for k in ("n_shared", "n_only_baseline", "n_only_candidate")]
    if any(p is None for p in parts) or int(sum(parts)) == int(store_counts.sum()):
        return []
    return [f"the store holds {int(store_counts.sum())} items either model answered, {int(sum(parts))} at this "
            "question's first look: the estimand's weights N_s / N are the store's at each look, so every batch "
            "already bet on is reweighted to the new counts; the anytime guarantee is for counts fixed since the "
            "first look (ask about the grown store as a question of its own to keep it)"]


def on_store_scale(seq, w0: float):
    """The betting test's anytime interval of the strata's gap, as an interval of the store's gap."""
    if w0 == 0 or seq.lower is None:
        return seq
    return dataclasses.replace(seq, lower=np.maximum(-1.0, (1 - w0) * np.asarray(seq.lower) - w0),
                               upper=np.minimum(1.0, (1 - w0) * np.asarray(seq.upper) + w0))


def subjects_test(units, alpha: float, n_planned: int, assume: str):
    """The new-subjects test on the subjects' prefix at each look (looks before the first subject of
    the betting order entered hold the capital at 1), and the assumptions it adds."""
    cum = np.asarray(units.looks)
    kind = "symmetric" if assume == "symmetric" else "none"
    extra = (f"no separate first look: one anytime-valid test with all of alpha ({alpha:g}); the first-look share "
             "is not used by this question",)
    if kind == "none":
        extra += (f"assumption-light: no claim is possible below a gap of about "
                  f"{100 * detectable_gap(n_planned, alpha=alpha):.1f} points with {n_planned} subjects, whatever "
                  "the data (--assume symmetric detects smaller gaps when subject gaps are symmetric)",)
    if cum[-1] == 0:
        seq = subject_e_process(np.zeros(1), np.array([1]), alpha=alpha, n_planned=max(1, n_planned), assume=kind)
        start = cum.size
    else:
        start = int(np.argmax(cum > 0))
        seq = subject_e_process(units.estimate, cum[start:], alpha=alpha, n_planned=n_planned, assume=kind)
    if start == 0:
        return seq, tuple(seq.assumptions) + extra
    keep = slice(0, 0) if cum[-1] == 0 else slice(None)

    def pad(v, fill):
        return np.concatenate([np.full(start, fill, dtype=np.asarray(v).dtype), np.asarray(v)[keep]])

    seq = dataclasses.replace(
        seq, estimate=pad(seq.estimate.astype(float), np.nan), lower=pad(seq.lower, -1.0), upper=pad(seq.upper, 1.0),
        log_e_improved=pad(seq.log_e_improved, 0.0), log_e_regressed=pad(seq.log_e_regressed, 0.0),
        e_improved=pad(seq.e_improved, 1.0), e_regressed=pad(seq.e_regressed, 1.0), p_value=pad(seq.p_value, 1.0),
        verdict=pad(seq.verdict, "inconclusive"), n=cum,
        decided_at=np.where(np.asarray(seq.decided_at) >= 0, np.asarray(seq.decided_at) + start, -1)
        if cum[-1] else np.array(-1))
    return seq, tuple(seq.assumptions) + extra


def subject_units(sc, ledger, led, look: int):
    """Each subject once, its mean at its first look, in the fixed betting order (prefix per look)."""
    subj_of = dict(zip(sc.item_ids.tolist(), sc.subjects.tolist()))
    ids_all = np.concatenate([ledger["item_id"].to_numpy(), led.new_ids]).astype(str)
    looks_all = np.concatenate([ledger["look"].to_numpy(), np.full(led.new_d.size, look)]).astype(np.int64)
    return subject_entry_means(led.d_all, np.array([subj_of[i] for i in ids_all], dtype=np.int64), looks_all,
                               n_looks=look, universe_order=sc.order)


def spend(method: str, primary: str, sc, history, led, look: int,
          settings, fx: dict, sequential):
    """The tests of a question first recorded since #36 (:mod:`benchcert.tasks.compare.recorded`):
    (betting result, its units, assumptions, (first-look p, gap, lower, upper), the share of alpha the first look
    used); the first look's interval is None where it has none (no first look, or a look before it was stored)."""
    alpha, share = settings.alpha, settings.first_look_share
    if primary == "clustered_subject":
        units = subject_units(sc, history.ledger, led, look)
        seq, notes = subjects_test(units, alpha, int(sc.order.size), settings.assume)
        return seq, int(units.looks[-1]), tuple(units.assumptions) + notes, (1.0, float(fx["gap"]), None, None), 0.0
    first = (1.0, float(fx["gap"]), None, None)
    if history.looks.height:
        row = history.looks.row(0, named=True)
        first = (float(row["first_p_value"]), float(row["first_gap"]), row.get("first_lower"), row.get("first_upper"))
    seq_alpha = alpha * (1 - share)
    if sc.subjects is None:
        if not history.looks.height and share > 0:  # no subjects: one stratum, the items either model answered
            d = (sc.b - sc.a)[sc.shared]
            first = items_first(d, np.zeros(d.size, dtype=np.int64),
                                np.array([float((~np.isnan(sc.a) | ~np.isnan(sc.b)).sum())]), alpha * share)
        return sequential(led.d_all, led.cum, seq_alpha), int(led.cum[-1]), (), first, share
    subj, looks = _ledger_subjects(sc, history.ledger, led, look)
    strata = np.unique(subj[looks == 1])
    w0, margin = absent_weight(sc.store_counts, strata)
    if not history.looks.height and share > 0:
        first = items_first((sc.b - sc.a)[sc.shared], sc.subjects[sc.shared], sc.store_counts, alpha * share, margin)
    if method != POOLED_ITEMS:
        seq, notes = items_anytime(led.d_all, subj, looks, sc.store_counts, seq_alpha, n_looks=int(led.cum.size))
        return seq, int(np.asarray(seq.n)[-1]), notes, first, share  # the items bet on, not the ledger's
    if w0 == 0:
        return sequential(led.d_all, led.cum, seq_alpha), int(led.cum[-1]), (), first, share
    return _split_betting(sc, led, subj, looks, strata, w0, margin, seq_alpha, sequential) + (first, share)


def items_anytime(d: np.ndarray, subjects: np.ndarray, looks: np.ndarray, store_counts: np.ndarray, seq_alpha: float,
                  *, n_looks: int | None = None, interval: bool = True):
    """The items question's anytime part (``store_weighted_batches``): the betting test of the store's gap with each
    look's new items reweighted to the store (:func:`benchcert.stats.store_batches.store_weighted_batches`) at
    ``seq_alpha``, and the assumptions it adds. ``looks``: the look each ledger item entered at."""
    seq = store_weighted_batches(d, subjects, looks, store_counts, alpha=seq_alpha, n_looks=n_looks,
                                 interval=interval)
    n_all = int(np.asarray(d).size)
    settled = int((settle_looks(subjects, looks, store_counts, int(np.max(looks)) if n_looks is None else n_looks)
                   > 0).sum())
    waiting, unbet = n_all - settled, settled - int(np.asarray(seq.n)[-1])
    notes = (f"{waiting} of {n_all} items wait to be bet on until the items waiting cover every subject "
             f"of the store not yet fully shared (at most {MAX_WAIT} looks)",) if waiting else ()
    if unbet:
        notes += (f"{unbet} of {n_all} items are in batches not bet on (a subject missing from the batch, its "
                  "worst case above half the earlier batches' estimate): they leave the capital where it was",)
    return seq, tuple(seq.assumptions) + notes


def _ledger_subjects(sc, ledger, led, look: int) -> tuple[np.ndarray, np.ndarray]:
    """The subject code and entry look of every item of the betting test (ledger, then this look's new items)."""
    subj_of = dict(zip(sc.item_ids.tolist(), sc.subjects.tolist()))
    ids = np.concatenate([ledger["item_id"].to_numpy(), led.new_ids]).astype(str)
    looks = np.concatenate([ledger["look"].to_numpy(), np.full(led.new_d.size, look)]).astype(np.int64)
    return np.array([subj_of[i] for i in ids], dtype=np.int64), looks


def _split_betting(sc, led, subj, looks, strata, w0, margin, seq_alpha, sequential):
    """Some subjects of the store had no item shared at the first look: two betting tests at half the
    level each (:func:`benchcert.stats.recorded.either_of`) - on the first look's subjects at the
    worst-case margin, and from the first look at which every subject of the store has a shared item,
    on all items with no margin (the items up to that look its first batch). Both rest on each look's
    new items representing the items of the subjects they bet on."""
    n_looks = led.cum.size
    in1 = np.isin(subj, strata)
    cum1 = np.array([int((in1 & (looks <= t)).sum()) for t in range(1, n_looks + 1)], dtype=np.int64)
    part1 = on_store_scale(sequential(led.d_all[in1], cum1, seq_alpha / 2, margin), w0)
    everyone = np.flatnonzero(sc.store_counts > 0)
    entry = np.full(sc.store_counts.size, np.iinfo(np.int64).max)
    np.minimum.at(entry, subj, looks)
    start = int(entry[everyone].max())
    part2 = None
    if start <= n_looks:
        tail = sequential(led.d_all, led.cum[start - 1:], seq_alpha / 2)
        pad = start - 1
        part2 = dataclasses.replace(
            tail, log_e_improved=np.r_[np.zeros(pad), tail.log_e_improved],
            log_e_regressed=np.r_[np.zeros(pad), tail.log_e_regressed],
            lower=np.r_[np.full(pad, -1.0), tail.lower], upper=np.r_[np.full(pad, 1.0), tail.upper])
    est = np.cumsum(led.d_all)[led.cum - 1] / led.cum
    seq = either_of(part1, part2, alpha=seq_alpha, estimate=est)
    notes = (f"{100 * w0:.1f}% of the benchmark's items are in subjects with no item shared at the first look: the "
             "verdict counts them at the worst case (a gap anywhere in [-1, 1]) in one betting test at half the "
             "level; the other half bets on all items once every subject of the store has a shared item"
             + ("" if part2 is None else f" (from look {start})"),)
    return seq, int(led.cum[-1]), notes


def deciding_interval(detail: dict, verdict: str | None = None) -> tuple[float | None, float | None, str, str]:
    """(lower, upper, key, name) of the interval that decides a recorded verdict, from its recorded fields (a look's
    :meth:`~benchcert.tasks.compare.verdicts.CheckpointVerdict.as_dict`, or summary.json's ``detail`` with the
    verdict passed as ``verdict``; default ``detail["verdict"]``).

    A recorded checkpoint verdict (tasks/compare/verdicts.py) is decided by the first-look test at alpha x
    first-look share or by the anytime test at the rest; its look's fixed-sample interval is at full alpha, so
    beside the verdict it can contradict it (an interval excluding 0 beside "inconclusive" after one look).
    The row shows instead:

    * an open verdict, or one the anytime test decided: the anytime interval (``cs_lower``/``cs_upper``,
      valid at every look), when recorded;
    * a verdict the first-look test decided: its first-look interval (``first_lower``/``first_upper``; every
      first look records it since issue #37, and since #36 also below 100 effectively nonzero differences
      with a margin). A look recorded before has none: the anytime interval when it lies on the verdict's
      side of 0 (valid at every look, and then it says what the verdict says), else the fixed-sample
      interval, named as not the verdict's;
    * a verdict without a recorded anytime interval (not a recorded look): its fixed-sample interval.

    ``key`` is ``"first_look"``, ``"anytime"`` or ``"fixed_sample"`` (what a row's ``interval.method`` names),
    ``name`` the words a page shows.
    """
    lo, hi = _num(detail.get("cs_lower")), _num(detail.get("cs_upper"))
    if str(detail.get("decided_by") or "") == "first_look":
        f_lo, f_hi = _num(detail.get("first_lower")), _num(detail.get("first_upper"))
        if f_lo is not None and f_hi is not None:
            share = _num(detail.get("first_look_share"))
            return f_lo, f_hi, "first_look", "first-look interval" + (f" at alpha \u00d7 {share:g}" if share is not None
                                                                      else "")
        said = str(detail.get("verdict") if verdict is None else verdict)
        if lo is not None and hi is not None and ((said == "improved" and lo > 0) or (said == "regressed" and hi < 0)):
            return lo, hi, "anytime", ("anytime interval (valid at every look; the first-look test decided, its "
                                       "interval is not recorded)")
        return (_num(detail.get("lower")), _num(detail.get("upper")), "fixed_sample",
                "fixed-sample interval at full alpha (the first-look test decided; its interval is not recorded)")
    if lo is not None and hi is not None:
        return lo, hi, "anytime", "anytime interval (valid at every look)"
    return _num(detail.get("lower")), _num(detail.get("upper")), "fixed_sample", "fixed-sample interval"


def deciding_gap(detail: dict) -> float | None:
    """The gap estimate to print beside :func:`deciding_interval`: the first-look test's own gap (``first_gap``)
    when its interval decides, so that a later look does not put its own fixed-sample gap beside the first look's
    interval (which need not contain it); else the look's gap (the anytime interval is valid at every look, so
    it holds the current estimate's estimand)."""
    gap = detail.get("gap")
    if deciding_interval(detail)[2] == "first_look":
        gap = detail.get("first_gap", gap)
    return _num(gap)
