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


def spread_looks(sizes, n_looks: int) -> np.ndarray:
    """Each item's look (0-based): every subject's items spread evenly over the looks, so that every
    look's new items represent the benchmark's subjects in proportion (the 'spread' arrival)."""
    return np.concatenate([(np.arange(k) * n_looks) // k for k in sizes])


def recorded_side_p(rng, sizes, gap: float, sd: float, runs: int, *, n_looks: int, alpha: float,
                    share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """One benchmark's recorded items-question verdict over ``n_looks`` looks, at the stats level:
    (p regressed (runs, 2) at the first and the last look, its own recorded 'regressed' (runs, looks)).

    The first look's test and the betting test are the recorded engine's
    (tasks/compare/verdicts.py, items question: a mixture of constant bets on the items, by counts,
    :func:`benchcert.stats.sequential.betting_test_counts`; the first look decides at alpha x share,
    the betting test at alpha x (1 - share) over every look); the anytime-valid one-sided p-value is
    :func:`benchcert.stats.multiplicity.e_to_anytime_p` on the running maximum of the log e-process.
    """
    from benchcert.stats.multiplicity import e_to_anytime_p
    from benchcert.stats.sequential import betting_test_counts, nightly_verdicts

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
    first_gap = (cum_pos[:, 0] - cum_neg[:, 0]) / cum_n[:, 0]
    # the first look's directional p (two-sided, of the side with more evidence; 1 against the gap's sign)
    first_p = np.minimum(1.0, 2.0 * np.exp(-np.maximum(lp[:, 0], lm[:, 0])))
    direction = np.sign(lp[:, 0] - lm[:, 0])
    first_p = np.where(direction * first_gap > 0, first_p, 1.0)
    run_max = np.maximum.accumulate(lm, axis=1)
    # the p-value falls over looks, so Holm's claims only grow: the first and the last look say everything
    p_down = np.array([[e_to_anytime_p(run_max[r, t], first_p=first_p[r] / 2 if first_gap[r] < 0 else 1.0,
                                       first_look_share=share) for t in (0, n_looks - 1)] for r in range(runs)])
    nv = nightly_verdicts(first_p, first_gap, seq, alpha=alpha, first_look_share=share)
    return p_down, np.asarray(nv.verdict) == "regressed"


def recorded_suite_runs(rng, sizes, gaps, *, sd: float = 0.05, runs: int, n_looks: int = 30,
                        alpha: float = 0.05) -> dict:
    """The suite claim of ``compare --suite --record`` over ``n_looks`` looks: made at some look?
    Beside it, whether some benchmark's own recorded verdict said regressed at some look."""
    from benchcert.stats.multiplicity import directional_holm

    per = [recorded_side_p(rng, sizes, g, sd, runs, n_looks=n_looks, alpha=alpha) for g in gaps]
    p_down = np.stack([x[0] for x in per], axis=1)  # (runs, m, looks)
    own = np.stack([x[1] for x in per], axis=1)
    ones = np.ones(len(gaps))
    first_look_claim = np.array([directional_holm(ones, p_down[r, :, 0], alpha=alpha).any_regressed
                                 for r in range(runs)])
    # at some look = at the last look (the anytime p-values only fall, and Holm's claims with them)
    claim = np.array([directional_holm(ones, p_down[r, :, -1], alpha=alpha).any_regressed for r in range(runs)])
    return {"suite_claim": claim, "suite_claim_look_1": first_look_claim,
            "per_benchmark_alarm": own.any(axis=(1, 2))}
