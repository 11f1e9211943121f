"""A synthetic suite for the suite-level Monte-Carlo tests (issue #35): benchmarks with MMLU-Pro-like
subject sizes (scaled), subject gaps N(0, sd^2) centred so that each benchmark's item-weighted gap is
exactly its stated gap, and paired 0/1 scores with a fixed discordance rate.

Per-benchmark numbers come from benchcert.stats.comparisons.pairwise_comparisons (the engine of the
compare service, ``primary="stratified_items"``: the items question) on blocks of runs laid side by
side as model columns; the suite's decisions from benchcert.stats.multiplicity and
benchcert.stats.suite_score - the functions tasks/compare/suite.py calls.
"""

from __future__ import annotations

import numpy as np

#: Share of items on which the two models disagree.
DISCORDANCE = 0.4
#: Accuracy of both models on the items they agree on.
AGREE_ACCURACY = 0.6


def scaled_sizes(sizes, scale: float) -> np.ndarray:
    """MMLU-Pro subject sizes scaled by ``scale`` (at least 5 items a subject)."""
    return np.maximum(5, np.round(np.asarray(sizes) * scale)).astype(int)


def subject_gaps(rng, sizes, gap: float, sd: float, runs: int) -> np.ndarray:
    """(runs, subjects) gaps ~ N(0, sd^2), clipped inside the discordance and shifted so that the
    item-weighted gap is ``gap`` exactly in every run."""
    mu = np.clip(rng.normal(0.0, sd, (runs, sizes.size)), -0.25, 0.25)
    w = sizes / sizes.sum()
    return mu - (mu @ w)[:, None] + gap


def paired_scores(rng, sizes, mu) -> tuple[np.ndarray, np.ndarray]:
    """Scores (n_items, 2 runs) - baseline, candidate per run - and subject codes, for gaps ``mu`` (runs, C)."""
    subj = np.repeat(np.arange(sizes.size), sizes)
    runs = mu.shape[0]
    m = mu[:, subj].T  # (n, runs): each item's gap
    u = rng.random((subj.size, runs))
    up = u < (DISCORDANCE + m) / 2
    down = (u >= (DISCORDANCE + m) / 2) & (u < DISCORDANCE)
    same = (rng.random((subj.size, runs)) < AGREE_ACCURACY).astype(float)
    a = np.where(up, 0.0, np.where(down, 1.0, same))
    b = np.where(up, 1.0, np.where(down, 0.0, same))
    s = np.empty((subj.size, 2 * runs))
    s[:, 0::2], s[:, 1::2] = a, b
    return s, subj


def benchmark_rows(rng, sizes, gap: float, sd: float, runs: int, *, alpha: float = 0.05, block: int = 100):
    """Per run: (gap estimate, se, two-sided p, verdict) of one benchmark's items-question comparison."""
    from benchcert.stats.comparisons import pairwise_comparisons

    est, se, p, verdict = [], [], [], []
    for start in range(0, runs, block):
        r = min(block, runs - start)
        s, subj = paired_scores(rng, sizes, subject_gaps(rng, sizes, gap, sd, r))
        pairs = np.column_stack([np.arange(0, 2 * r, 2), np.arange(1, 2 * r, 2)])
        res = pairwise_comparisons(s, subj, pairs=pairs, alpha=alpha, primary="stratified_items")
        est.append(res.estimate), se.append(res.se), p.append(res.p_value), verdict.append(np.asarray(res.verdict))
    return np.concatenate(est), np.concatenate(se), np.concatenate(p), np.concatenate(verdict).astype(str)


def suite_runs(rng, sizes, gaps, *, sd: float = 0.05, runs: int, alpha: float = 0.05) -> dict:
    """A suite of ``len(gaps)`` benchmarks (true item-weighted gaps ``gaps``) over ``runs`` runs: each
    run's suite decisions (Holm), per-benchmark alarms and the suite score's interval."""
    from benchcert.stats.multiplicity import directional_holm, one_sided_p_values
    from benchcert.stats.suite_score import suite_score

    per = [benchmark_rows(rng, sizes, g, sd, runs, alpha=alpha) for g in gaps]
    est = np.stack([x[0] for x in per], axis=1)
    se = np.stack([x[1] for x in per], axis=1)
    p = np.stack([x[2] for x in per], axis=1)
    verdict = np.stack([x[3] for x in per], axis=1)
    n = np.full(len(gaps), int(sizes.sum()))
    regressed_sets, suite_claim, covered = [], np.zeros(runs, bool), np.zeros(runs, bool)
    truth = float(np.mean(gaps))
    for i in range(runs):
        up, down = one_sided_p_values(p[i], est[i])
        fam = directional_holm(up, down, alpha=alpha)
        suite_claim[i] = fam.any_regressed
        regressed_sets.append(frozenset(np.flatnonzero(fam.regressed).tolist()))
        sc = suite_score(est[i], se[i], n, alpha=alpha)
        covered[i] = sc.lower <= truth <= sc.upper
    return {"suite_claim": suite_claim, "per_benchmark_alarm": (verdict == "regressed").any(axis=1),
            "regressed_sets": regressed_sets, "covered": covered}


def spread_looks(sizes, n_looks: int, first_share: float = 0.5) -> np.ndarray:
    """Each item's look (0-based): ``first_share`` of every subject's items at the first look (the
    initial evaluation, so that the first look's store weights are the benchmark's), the rest spread
    evenly over the later looks, so that every look's new items represent the benchmark's subjects in
    proportion (the 'spread' arrival). One look: every item at it."""
    if n_looks == 1:
        return np.zeros(int(np.sum(sizes)), dtype=np.int64)
    out = []
    for k in np.asarray(sizes):
        k1 = max(2, int(round(first_share * k)))
        out.append(np.r_[np.zeros(k1, dtype=np.int64), 1 + (np.arange(k - k1) * (n_looks - 1)) // max(1, k - k1)])
    return np.concatenate(out)


def recorded_side_p(rng, sizes, gap: float, sd: float, runs: int, *, n_looks: int, alpha: float,
                    share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """One benchmark's recorded items-question verdict over ``n_looks`` looks, with the recorded
    engine's functions since issue #36 (``first_method`` ``stratified_store_weights``): (p regressed
    (runs, looks), its own recorded 'regressed' (runs, looks)).

    * first look: :func:`benchcert.tasks.compare.recorded.items_first` at alpha x share on the first
      look's items, weighted by the store's items per subject then (the stratified test of
      :func:`benchcert.stats.recorded.stratified_first_look`, or below 100 effectively nonzero
      differences the betting bound);
    * every look: the betting test on the items at alpha x (1 - share), by counts
      (:func:`benchcert.stats.sequential.betting_test_counts`, what the engine runs for 0/1 scores
      when every subject had a shared item at the first look - as here);
    * the verdict: :func:`benchcert.stats.sequential.nightly_verdicts`, as the engine combines them;
    * the suite's anytime-valid one-sided p-value:
      :func:`benchcert.tasks.compare.suite_evidence.side_p_values`, the function ``compare --suite
      --record`` calls, on the running maximum of the stored log e-values.
    """
    from benchcert.stats.sequential import betting_test_counts, nightly_verdicts
    from benchcert.tasks.compare.recorded import items_first
    from benchcert.tasks.compare.suite_evidence import side_p_values

    s, subj = paired_scores(rng, sizes, subject_gaps(rng, sizes, gap, sd, runs))
    d = s[:, 1::2] - s[:, 0::2]  # (n, runs)
    look = spread_looks(sizes, n_looks)
    pos = np.stack([np.bincount(look, weights=(d[:, r] == 1), minlength=n_looks) for r in range(runs)])
    neg = np.stack([np.bincount(look, weights=(d[:, r] == -1), minlength=n_looks) for r in range(runs)])
    cnt = np.bincount(look, minlength=n_looks)
    cum_pos, cum_neg = np.cumsum(pos, axis=1).astype(int), np.cumsum(neg, axis=1).astype(int)
    cum_n = np.broadcast_to(np.cumsum(cnt), cum_pos.shape)
    seq = betting_test_counts(cum_pos, cum_neg, cum_n, alpha=alpha * (1 - share))
    lp, lm = np.asarray(seq.log_e_improved), np.asarray(seq.log_e_regressed)
    first = look == 0
    store_counts = np.bincount(subj[first], minlength=sizes.size).astype(float)
    firsts = np.array([items_first(d[first, r], subj[first], store_counts, alpha * share)[:2] for r in range(runs)])
    first_p, first_gap = firsts[:, 0], firsts[:, 1]
    run_up, run_down = np.maximum.accumulate(lp, axis=1), np.maximum.accumulate(lm, axis=1)
    p_down = np.array([[side_p_values("stratified_store_weights", first_p_value=first_p[r], first_gap=first_gap[r],
                                      first_look_share=share, max_log_e_improved=run_up[r, t],
                                      max_log_e_regressed=run_down[r, t], alpha=alpha)[1] for t in range(n_looks)]
                       for r in range(runs)])
    nv = nightly_verdicts(first_p, first_gap, seq, alpha=alpha, first_look_share=share)
    return p_down, np.asarray(nv.verdict) == "regressed"  # (runs, looks): the engine's verdict after each look


def recorded_suite_runs(rng, sizes, gaps, *, sd: float = 0.05, runs: int, n_looks: int = 30,
                        alpha: float = 0.05) -> dict:
    """The suite claim of ``compare --suite --record`` over ``n_looks`` looks: made at some look?
    Beside it, whether some benchmark's own recorded verdict said regressed at some look."""
    from benchcert.stats.multiplicity import directional_holm

    per = [recorded_side_p(rng, sizes, g, sd, runs, n_looks=n_looks, alpha=alpha) for g in gaps]
    p_down = np.stack([x[0] for x in per], axis=1)  # (runs, m, looks)
    own = np.stack([x[1] for x in per], axis=1)  # (runs, m, looks): its own verdict regressed by that look
    ones = np.ones(len(gaps))
    first_look_claim = np.array([directional_holm(ones, p_down[r, :, 0], alpha=alpha).any_regressed
                                 for r in range(runs)])
    # at some look (the p-values only fall, and Holm's claims with them, unless a benchmark's verdict reverts)
    claim = np.array([any(directional_holm(ones, p_down[r, :, t], alpha=alpha).any_regressed
                          for t in range(n_looks)) for r in range(runs)])
    return {"suite_claim": claim, "suite_claim_look_1": first_look_claim,
            "per_benchmark_alarm": own.any(axis=(1, 2)),
            # a suite of one benchmark: its p <= alpha/2 exactly when its own verdict says regressed
            "disagree": int(((p_down <= alpha / 2) != own).sum())}
