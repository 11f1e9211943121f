"""Model comparisons for the audit (the Hardt chapter's paired tests): which models are really different?

Every pair of models (or every model against ``AuditConfig.baseline``) is compared on the
items both answered - paired, because two models' scores on the same items are strongly
correlated - with raw and multiplicity-adjusted p-values and a verdict. Items only one model
of a pair answered are excluded from that pair and counted in the table.

Tables:

* ``comparisons`` - one row per pair: gap (model - versus) on shared items, the primary
  interval and the question it answers (``question``: clustered by subject - "does the gap
  generalise to new subjects" - when the hierarchy has 30 or more subjects; subjects as fixed
  strata - "is the model better on this benchmark's items" - with fewer, with a note; paired
  CLT without subjects) and its Bonferroni-simultaneous version on the same t reference
  (it excludes 0 exactly when ``p_bonferroni`` <= alpha), p-values of every method (paired
  CLT, clustered, exact McNemar / sign test, Hoeffding, and the unpaired z-test peers use),
  Holm, Bonferroni and Benjamini-Hochberg adjusted p-values, the minimum detectable effect
  and the verdict. The verdict is the simultaneous interval's: ``improved`` when it lies above
  0 (model significantly better than versus), ``regressed`` below 0, else ``inconclusive``;
  so a verdict and its interval never disagree. ``p_holm`` is reported for reference only:
  Holm's step-down can reject a pair whose simultaneous interval still covers 0, and no
  informative interval agrees with those extra rejections (see
  :func:`benchcert.stats.comparisons.simultaneous_intervals`, Notes);
* ``tied_groups`` - one row per (group, model): maximal runs of models, in score order,
  within which no pair differs (Bonferroni over the pairs tested, the verdicts' rule); a
  model may sit in several;
* ``comparison_ranks`` - one row per model: point rank and simultaneous rank interval. The
  rank order (and the order of tied groups) is by ``shared_gap``, the model's mean gap against
  every other on the items each pair shares - what the tests compare - not by its score on
  its own answered items (``score``), which differ when models skipped items.

Beyond ``ALL_PAIRS_MAX_MODELS`` models (without a baseline) the family is the leaderboard's:
each model against the next one in the ranking and every pair among the top ``TOP_N``
(``family = "leaderboard"``); the adjustments are over exactly the pairs tested, and the rank
intervals and tied groups come from them (untested pairs count as not distinguished, which only
widens the intervals). ``AuditConfig.all_pairs`` (``--all-pairs``) asks for every pair.

On a benchmark whose scores are all 0 or 1 the matrix is read only through
``BenchmarkMatrices.column_blocks``, once, into each model's bit-packed answered and correct
items (stats/comparisons/packed.py), and never through ``scores``: what an out-of-core matrix
allows; every number is the matrix computation's to the last bit. Fractional scores are compared
from ``scores``.

The report gets a rank plot (rank intervals), the tied groups and the table.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from benchcert.stats.comparisons import (
    MIN_SUBJECTS_CLUSTERED,
    PackedScores,
    adjust_pvalues,
    pack_binary_scores,
    pack_block_models,
    pairwise_comparisons,
    pairwise_comparisons_packed,
    point_ranks,
    family_intervals,
    rank_confidence,
)
from benchcert.stats.degenerate import IndexedWarning, Ref
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.compare.service import interval_verdicts
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.sections import compare as compare_sections

POWER = 0.8

COMPARISON_SCHEMA = {
    "model": pl.String, "versus": pl.String, "family": pl.String,
    "n_shared": pl.Int64, "n_only_model": pl.Int64, "n_only_versus": pl.Int64, "n_excluded": pl.Int64,
    "score_model": pl.Float64, "score_versus": pl.Float64, "gap": pl.Float64,
    "method": pl.String, "question": pl.String, "se": pl.Float64, "lower": pl.Float64, "upper": pl.Float64,
    "simultaneous_lower": pl.Float64, "simultaneous_upper": pl.Float64,
    "p_value": pl.Float64, "p_holm": pl.Float64, "p_bonferroni": pl.Float64, "p_bh": pl.Float64,
    "p_paired_clt": pl.Float64, "p_clustered": pl.Float64, "p_exact": pl.Float64, "exact_test": pl.String,
    "p_hoeffding": pl.Float64, "hoeffding_lower": pl.Float64, "hoeffding_upper": pl.Float64,
    "p_unpaired": pl.Float64, "mde": pl.Float64, "mde_alpha": pl.Float64, "verdict": pl.String,
    "significant_bh": pl.Boolean, "alpha": pl.Float64,
}
TIED_SCHEMA = {"group": pl.Int64, "model": pl.String, "score": pl.Float64, "rank": pl.Int64,
               "rank_lower": pl.Int64, "rank_upper": pl.Int64, "group_size": pl.Int64}
RANK_SCHEMA = {"model": pl.String, "score": pl.Float64, "shared_gap": pl.Float64, "rank": pl.Int64, "rank_lower": pl.Int64,
               "rank_upper": pl.Int64, "n_significantly_better": pl.Int64, "n_significantly_worse": pl.Int64,
               "groups": pl.String}


def _empty(note: str) -> AnalysisOutput:
    return AnalysisOutput(
        name="comparisons",
        tables={"comparisons": pl.DataFrame(schema=COMPARISON_SCHEMA), "tied_groups": pl.DataFrame(schema=TIED_SCHEMA),
                "comparison_ranks": pl.DataFrame(schema=RANK_SCHEMA)},
        sections=[compare_sections.empty_section(note)],
        warnings=[note])


#: Beyond this many models the default family is the leaderboard's (:func:`_leaderboard_pairs`),
#: not every pair: at 4,000 models all pairs are 8 million comparisons, a table no one reads
#: and a Holm correction that leaves no power. ``--all-pairs`` (AuditConfig.all_pairs) asks
#: for every pair anyway; the computation is then blocked (stats/comparisons/blocks.py).
ALL_PAIRS_MAX_MODELS = 150
#: The leaderboard family compares every pair among the top TOP_N models by score.
TOP_N = 20


def _leaderboard_pairs(pooled: np.ndarray, top_n: int = TOP_N) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours in the ranking (each model against the next one down) and every pair among the
    top ``top_n``: (k - 1) + top_n (top_n - 1) / 2 pairs at most, deduplicated, as (i, j), i < j."""
    order = np.argsort(-pooled, kind="stable")
    top = order[:top_n]
    a = np.r_[order[:-1], np.repeat(top, top.size)]
    b = np.r_[order[1:], np.tile(top, top.size)]
    i, j = np.minimum(a, b), np.maximum(a, b)
    keep = i < j
    key = np.unique(i[keep].astype(np.int64) * pooled.size + j[keep])
    return (key // pooled.size).astype(np.intp), (key % pooled.size).astype(np.intp)


def _family(k: int, baseline: int | None, all_pairs: bool) -> str:
    if baseline is not None:
        return "versus_baseline"
    return "all_pairs" if all_pairs or k <= ALL_PAIRS_MAX_MODELS else "leaderboard"


def _nanmean_columns(scores: np.ndarray, answered: np.ndarray) -> np.ndarray:
    """``np.nanmean(scores, axis=0)`` to the last bit, a block of rows at a time: the running column
    sums continue block to block in row order (the previous sums prepended as a row), as numpy's
    sequential sum down the rows of the zero-filled copy that nanmean makes (0.64 GB at 4,000 x 20,000)."""
    k = scores.shape[1]
    rows = max(1, (1 << 20) // (8 * max(k, 1)))
    buf = np.zeros((rows + 1, k))
    for lo in range(0, scores.shape[0], rows):
        block = scores[lo:lo + rows]
        part = buf[:block.shape[0] + 1]
        np.copyto(part[1:], block)
        part[1:][np.isnan(block)] = 0.0
        part[0] = part.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return buf[0] / answered


def _shared_counts(scores, answered: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Items answered by both models of each pair (a[p], b[p]); O(n_items P), not a K x K product.
    ``answered``: items each model answered (when every model answered every item, no pass).
    ``scores``: the matrix, or its :class:`PackedScores` (popcounts of the answered bits)."""
    n_items = scores.n_items if isinstance(scores, PackedScores) else scores.shape[0]
    if np.all(answered == n_items):
        return np.full(a.size, n_items, dtype=np.int64)
    if isinstance(scores, PackedScores):
        return scores.shared_counts(a, b)
    out = np.empty(a.size, dtype=np.int64)
    step = max(1, (1 << 24) // max(scores.shape[0], 1))
    for lo in range(0, a.size, step):
        ca, cb = a[lo:lo + step], b[lo:lo + step]
        out[lo:lo + step] = np.count_nonzero(~np.isnan(scores[:, ca]) & ~np.isnan(scores[:, cb]), axis=0)
    return out


def _compare(scores, subjects, pairs: np.ndarray, alpha: float, mde_alpha: float | None = None):
    """:func:`pairwise_comparisons` of ``pairs``, from the matrix or from its :class:`PackedScores`
    (the same numbers: see :func:`_source`); the MDE at ``mde_alpha`` (default ``alpha``)."""
    if isinstance(scores, PackedScores):
        return pairwise_comparisons_packed(scores, pairs=pairs, alpha=alpha, power=POWER, mde_alpha=mde_alpha)
    return pairwise_comparisons(scores, subjects, pairs=pairs, alpha=alpha, power=POWER, mde_alpha=mde_alpha)


def _source(m: BenchmarkMatrices, counts, subjects):
    """What the pairs are computed from: when every score is 0 or 1, each model's answered and correct
    bits, read from ``m`` a block of models at a time (``column_blocks``: 2 bits a cell, no
    matrix-sized array; an out-of-core matrix never holds ``scores``), from which every pair's
    statistics are exact integers, so the results are the matrix computation's to the last bit;
    otherwise (fractional scores, or scores outside [0, 1], which pairwise_comparisons refuses)
    the matrix itself."""
    if counts.binary.all() and counts.in_unit_interval:
        packed = m.packed_bits(subjects)  # an out-of-core matrix packed them while reading its counts
        if packed is not None:
            return packed
        return pack_binary_scores(m.column_blocks(pack_block_models(m.n_items)), m.n_items, len(m.models),
                                  subjects)
    return m.scores


def _pairs(models: list[str], pooled: np.ndarray, baseline: int | None, all_pairs: bool = False):
    """(versus, model) column pairs: against the baseline, every pair, or (beyond
    ALL_PAIRS_MAX_MODELS models) the leaderboard family; the better-scoring model first so that
    gaps read 'model is ahead of versus by ...'."""
    k = len(models)
    if baseline is not None:
        others = np.array([j for j in range(k) if j != baseline], dtype=np.intp)
        return np.full(others.shape, baseline, dtype=np.intp), others
    if _family(k, None, all_pairs) == "leaderboard":
        i, j = _leaderboard_pairs(pooled)
    else:
        i, j = np.triu_indices(k, 1)
    # higher pooled score first; equal scores keep name order
    swap = pooled[j] > pooled[i]
    model = np.where(swap, j, i)
    versus = np.where(swap, i, j)
    return versus.astype(np.intp), model.astype(np.intp)


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    models = m.models
    alpha = config.alpha
    if len(models) < 2:
        return _empty(f"comparisons: {len(models)} model(s) in the benchmark; nothing to compare")
    subjects, notes = _clusters(m, config)
    counts = m.subject_counts  # shared by the analyses: no mask or zero-filled copy of the matrix here
    answered = counts.n_items
    scores = _source(m, counts, subjects)
    if counts.binary.all():
        pooled = counts.total.sum(axis=0) / answered  # exact integer sums: np.nanmean's numbers
    else:
        pooled = _nanmean_columns(scores, answered)
    baseline = None
    if config.baseline is not None:
        if config.baseline in models:
            baseline = models.index(config.baseline)
        else:
            notes.append(f"comparisons: baseline {config.baseline!r} is not a model of this benchmark; "
                         "comparing all pairs instead")
    for name, n in zip(models, answered):
        if n < m.n_items:
            notes.append(f"comparisons: {name!r} answered {int(n)} of {m.n_items} items; each of its comparisons "
                         "uses only the items both models answered (the rest are counted in n_excluded)")

    # Pairs that share no item cannot be compared; they stay in the table, flagged.
    all_pairs_asked = bool(getattr(config, "all_pairs", False))
    versus, model = _pairs(models, pooled, baseline, all_pairs_asked)
    comparable = _shared_counts(scores, answered, versus, model) > 0
    if not comparable.all():
        for v, w in zip(versus[~comparable], model[~comparable]):
            notes.append(f"comparisons: {models[w]!r} and {models[v]!r} share no answered item; not compared")
    pv, pm = versus[comparable], model[comparable]
    family = _family(len(models), baseline, all_pairs_asked)
    if family == "leaderboard":
        notes.append(f"comparisons: {len(models)} models (more than {ALL_PAIRS_MAX_MODELS}): compared are each model "
                     f"against the next one in the ranking and every pair among the top {TOP_N} ({pv.size} pairs, "
                     "family 'leaderboard'); the Bonferroni intervals (which decide the verdicts), Holm and "
                     "Benjamini-Hochberg adjust over exactly these pairs, and rank intervals count untested pairs as "
                     "not distinguished (wider). Every pair: --all-pairs")
    frame = pl.DataFrame(schema=COMPARISON_SCHEMA)
    r = None
    if pv.size:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # the verdicts are the Bonferroni intervals' (alpha / P): the MDE beside them is stated there
            r = _compare(scores, subjects, np.column_stack([pv, pm]), alpha, mde_alpha=alpha / pv.size)
        _pass_on(caught, pm, pv)
        frame = _comparison_frame(r, [models[j] for j in pm], [models[j] for j in pv], family, alpha)
    if not comparable.all():
        none = pl.DataFrame({"model": [models[j] for j in model[~comparable]],
                             "versus": [models[j] for j in versus[~comparable]], "family": family,
                             "n_shared": 0, "n_only_model": answered[model[~comparable]].astype(np.int64),
                             "n_only_versus": answered[versus[~comparable]].astype(np.int64),
                             "verdict": "not comparable: no shared item", "alpha": alpha},
                            schema_overrides={k: v for k, v in COMPARISON_SCHEMA.items()
                                              if k in ("n_shared", "n_only_model", "n_only_versus")})
        none = none.with_columns((pl.col("n_only_model") + pl.col("n_only_versus")).alias("n_excluded"))
        frame = pl.concat([frame, none], how="diagonal_relaxed").select(list(COMPARISON_SCHEMA)).cast(COMPARISON_SCHEMA)

    # Ranks come from every pair (the leaderboard family beyond ALL_PAIRS_MAX_MODELS); without a
    # baseline that is the table's own family. With one they answer the ranking question over a wider
    # family than the K - 1 verdicts, and the report's text says so.
    all_pairs = (pv, pm, r) if baseline is None else None
    ranks, tied, rank_groups = _ranks(scores, subjects, models, pooled, alpha, all_pairs, answered,
                                      leaderboard=_family(len(models), None, all_pairs_asked) == "leaderboard")
    return AnalysisOutput(
        name="comparisons",
        tables={"comparisons": frame, "tied_groups": tied, "comparison_ranks": ranks},
        sections=[compare_sections.section(
            frame, ranks, rank_groups, models, baseline, alpha,
            r.method if r is not None else ("clustered_subject" if subjects is not None else "paired_clt"),
            top_n=TOP_N, all_pairs_max_models=ALL_PAIRS_MAX_MODELS, benchmark=m.benchmark)],
        warnings=notes,
    )


def _clusters(m: BenchmarkMatrices, config: AuditConfig) -> tuple[np.ndarray | None, list[str]]:
    """(each item's subject code, or None for paired CLT intervals; the notes that say why or what
    so few subjects can answer)."""
    notes: list[str] = []
    subjects = m.item_subject if "subject" in config.hierarchy else None
    if subjects is not None and m.subjects.height < 2:
        # One subject leaves nothing to cluster over; the clustered SE would be the worst case.
        subjects = None
        notes.append("comparisons: the benchmark has a single subject, so intervals are paired CLT, not clustered")
    if subjects is not None and np.unique(subjects).size < MIN_SUBJECTS_CLUSTERED:
        notes.append(f"comparisons: {np.unique(subjects).size} subjects (fewer than {MIN_SUBJECTS_CLUSTERED}): verdicts, "
                     "intervals and ranks answer 'is the model better on this benchmark's items' (subjects as fixed "
                     "strata). Whether a gap generalises to new subjects (p_clustered) cannot be answered reliably "
                     "with so few subjects: that test has little power and a noisy standard error")
    return subjects, notes


def _comparison_frame(r, model: list[str], versus: list[str], family: str, alpha: float) -> pl.DataFrame:
    """Table ``comparisons``' rows of the compared pairs: the engine's result ``r`` with its adjusted
    p-values, simultaneous intervals and verdicts."""
    holm = adjust_pvalues(r.p_value, alpha=alpha, method="holm")
    bh = adjust_pvalues(r.p_value, alpha=alpha, method="bh")
    bonf = adjust_pvalues(r.p_value, alpha=alpha, method="bonferroni")
    # The same test as the p-values (the score test on 0/1 scores, else t with its df), so an
    # interval excluding 0 is a Bonferroni rejection. The verdict is read off the interval, not
    # off Holm: Holm's extra step-down rejections have no interval that agrees with them.
    sim = family_intervals(r, alpha=alpha)
    exact_name = "mcnemar_exact" if "mcnemar_exact" in r.tests else "sign_test"
    verdict = interval_verdicts(sim.lower, sim.upper)  # the compare command's rule (tasks/compare/service.py)
    cl = r.tests.get("clustered_subject")
    frame = pl.DataFrame({
        "model": model, "versus": versus, "family": family,
        "n_shared": r.n, "n_only_model": r.n_only_b, "n_only_versus": r.n_only_a, "n_excluded": r.n_excluded,
        "score_model": r.mean_b, "score_versus": r.mean_a, "gap": r.estimate,
        "method": r.method, "question": r.question, "se": r.se, "lower": r.lower, "upper": r.upper,
        "simultaneous_lower": sim.lower, "simultaneous_upper": sim.upper,
        "p_value": r.p_value, "p_holm": holm.p_adjusted, "p_bonferroni": bonf.p_adjusted, "p_bh": bh.p_adjusted,
        "p_paired_clt": r.tests["paired_clt"].p_value,
        "p_clustered": cl.p_value if cl is not None else np.full(len(versus), np.nan),
        "p_exact": r.tests[exact_name].p_value, "exact_test": exact_name,
        "p_hoeffding": r.tests["hoeffding"].p_value,
        "hoeffding_lower": r.tests["hoeffding"].lower, "hoeffding_upper": r.tests["hoeffding"].upper,
        "p_unpaired": r.tests["unpaired_z"].p_value, "mde": r.mde, "mde_alpha": r.mde_alpha, "verdict": verdict,
        "significant_bh": bh.rejected, "alpha": alpha,
    }, schema=COMPARISON_SCHEMA)
    if cl is None:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("p_clustered"))
    return frame


def _pass_on(caught, model: np.ndarray, versus: np.ndarray, prefix: str = "") -> None:
    """Warn again every warning the stats layer gave, each once, for run_analysis to record.

    The stats layer names pairs by their position in the family computed (a ``Ref("comparison",
    [4])`` field, "comparison(s) [4]" in the text); that becomes the pair's model columns
    (``Ref("model pair", [(model, versus)])``, "model column pair(s) [(model, versus)]"), which
    run_analysis names (tasks/audit/analyses.py ``_named``) like every other analysis' column
    indices. Nothing is re-derived from the results, nothing read back from the text.
    """
    def columns(ref: Ref) -> Ref:
        if ref.kind != "comparison":
            return ref
        return Ref("model pair", [(int(model[j]), int(versus[j])) for j in ref.indices])

    first = {}
    for w in caught:
        first.setdefault((str(w.message), w.category), w)
    for w in first.values():
        message = w.message
        if isinstance(message, IndexedWarning):
            warnings.warn(message.retold(prefix, refs=tuple(columns(r) for r in message.refs)), stacklevel=2)
        else:
            warnings.warn(prefix + str(message), w.category, stacklevel=2)


def _ranks(scores, subjects, models, pooled, alpha, all_pairs, answered, leaderboard=False):
    """Rank intervals and tied groups from every comparable pair (Bonferroni over all pairs), or
    from the leaderboard family (Bonferroni over it; untested pairs count as not distinguished).

    Bonferroni, like the table's verdicts: a pair counts as distinguished exactly when its
    simultaneous interval excludes 0, so ranks, tied groups and verdicts never disagree."""
    k = len(models)
    if all_pairs is not None:
        pv, pm, r = all_pairs
        pairs = np.column_stack([pv, pm])
        gap, p = (r.estimate, r.p_value) if r is not None else (np.zeros(0), np.zeros(0))
    else:
        i, j = _leaderboard_pairs(pooled) if leaderboard else np.triu_indices(k, 1)
        ok = _shared_counts(scores, answered, i, j) > 0
        pairs = np.column_stack([i[ok], j[ok]])
        gap = p = np.zeros(0)
        if pairs.shape[0]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                r = _compare(scores, subjects, pairs, alpha)
            # pairs are (i, j), gap = j - i; the table's own family was passed on already
            _pass_on(caught, pairs[:, 1], pairs[:, 0], prefix=f"rank intervals ({'leaderboard family' if leaderboard else 'every pair'}): ")
            gap, p = r.estimate, r.p_value
    if pairs.shape[0]:
        # Mean shared-item gaps order models only when every pair is compared; in the leaderboard
        # family a model meets one or two neighbours, whose local gaps say nothing about its place.
        rc = rank_confidence(pooled, pairs[:, 0], pairs[:, 1], gap, p, alpha=alpha, method="bonferroni",
                             order="estimate" if leaderboard else "gaps")
        rank, lo, hi, groups, order_score = rc.rank, rc.lower, rc.upper, rc.groups, rc.order_score
        n_better, n_worse = rc.n_better, rc.n_worse
    else:
        rank = point_ranks(pooled)
        lo, hi = np.ones(k, np.int64), np.full(k, k, np.int64)
        groups = (tuple(int(x) for x in np.argsort(-pooled, kind="stable")),)
        order_score = np.full(k, np.nan)
        n_better = n_worse = np.zeros(k, np.int64)
    member = {g: [] for g in range(k)}
    rows = []
    for gid, grp in enumerate(groups, start=1):
        for idx in grp:
            member[idx].append(gid)
            rows.append({"group": gid, "model": models[idx], "score": float(pooled[idx]), "rank": int(rank[idx]),
                         "rank_lower": int(lo[idx]), "rank_upper": int(hi[idx]), "group_size": len(grp)})
    tied = pl.DataFrame(rows, schema=TIED_SCHEMA)
    ranks = pl.DataFrame({
        "model": models, "score": pooled, "shared_gap": order_score, "rank": rank.astype(np.int64), "rank_lower": np.asarray(lo, np.int64),
        "rank_upper": np.asarray(hi, np.int64), "n_significantly_better": np.asarray(n_better, np.int64),
        "n_significantly_worse": np.asarray(n_worse, np.int64),
        "groups": [",".join(str(g) for g in member[x]) for x in range(k)],
    }, schema=RANK_SCHEMA).sort("rank", "model")
    return ranks, tied, groups
