"""Subsample guarantees: what a random n-item subset costs in accuracy (docs/methods.md,
section 4: the exchangeable-bounds paper, Theorem 5.2 and Remark 7.2, in its Table 4 and
Figure 4 layout), and the certified full-score estimates of checkpoints evaluated on a
recorded subset.

Tables:

* ``subsample_curve`` - per n: cost n/N, the Theorem 5.2, Barber (non-negative and signed),
  Serfling, stratified and exact worst-case half-widths, and across models the mean and
  worst exact 95% error and the largest violation rate of Theorem 5.2 (Table 4 columns);
* ``subsample_models`` - per model and n: exact 95% error, violation rates of Theorem 5.2
  and of h*, exact SDs of the uniform and the subject-stratified estimator;
* ``subsample_pairs`` - per model pair and n: the paired gap's exact 95% error against
  Theorem 5.2 with R = 2 (Remark 7.2);
* ``subsample_estimates`` - models evaluated on exactly a recorded subset
  (``benchcert subsample``): the estimated full score with its guarantee and the exact
  post-hoc interval (also returned as intervals, metric ``pooled``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import polars as pl

from benchcert.stats.subsample import (
    barber_halfwidth,
    paired_error_distribution,
    proportional_allocation,
    serfling_halfwidth,
    stratified_error_sd,
    stratified_halfwidth,
    subsample_error_distribution,
    theorem_5_2_halfwidth,
    worst_case_halfwidth,
)
from benchcert.tasks.audit.contract import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.subsample import hstar_cache
from benchcert.tasks.render.sections import subsample as subsample_sections

#: The subset sizes of the paper's Table 4 (used where n < N).
PAPER_GRID = (250, 500, 1000, 2000, 5000, 10000)
#: Fractions of N used when fewer than four paper sizes fit (small benchmarks).
FRACTION_GRID = (0.05, 0.1, 0.25, 0.5, 0.75)
#: Paired gaps are computed for at most this many model pairs.
MAX_PAIRS = 40

CURVE_SCHEMA = {
    "n": pl.Int64, "N": pl.Int64, "cost_fraction": pl.Float64, "alpha": pl.Float64,
    "theorem_5_2": pl.Float64, "barber_nonnegative": pl.Float64, "barber_signed": pl.Float64,
    "serfling": pl.Float64, "stratified_proxy": pl.Float64, "exact_worst_case": pl.Float64,
    "worst_case_K": pl.Int64, "n_models": pl.Int64, "mean_model_error95": pl.Float64,
    "worst_model_error95": pl.Float64, "max_violation_theorem": pl.Float64,
    "max_violation_exact_worst_case": pl.Float64, "theorem_5_2_paired": pl.Float64, "n_pairs": pl.Int64,
    "mean_pair_error95": pl.Float64, "worst_pair_error95": pl.Float64, "max_violation_paired_theorem": pl.Float64,
}
MODELS_SCHEMA = {
    "model": pl.String, "n": pl.Int64, "N": pl.Int64, "K": pl.Int64, "full_score": pl.Float64,
    "error95": pl.Float64, "violation_theorem": pl.Float64, "violation_exact_worst_case": pl.Float64,
    "uniform_sd": pl.Float64, "stratified_sd": pl.Float64, "alpha": pl.Float64,
}
PAIRS_SCHEMA = {
    "model_a": pl.String, "model_b": pl.String, "n": pl.Int64, "N": pl.Int64, "b_better": pl.Int64,
    "a_better": pl.Int64, "full_gap": pl.Float64, "theorem_5_2_paired": pl.Float64, "error95": pl.Float64,
    "violation_theorem": pl.Float64, "sd": pl.Float64, "alpha": pl.Float64,
}


def n_grid(N: int) -> list[int]:
    """Subset sizes to tabulate: the paper's (n < N), or fractions of N for small benchmarks."""
    grid = [n for n in PAPER_GRID if n < N]
    if len(grid) < 4:
        grid = sorted(set(grid) | {int(round(f * N)) for f in FRACTION_GRID} - {0, N})
    return [n for n in grid if 1 <= n < N]


@lru_cache(maxsize=256)
def _worst_case(n: int, N: int, alpha: float) -> tuple[float, int]:
    # h* depends only on (n, N, alpha): nightly audits of one benchmark in a long-lived
    # process (a Prefect worker) pay for it once.
    w = worst_case_halfwidth(n, N, alpha=alpha)
    return float(w.half_width), int(w.worst_K)


def _pairs(models: list[str], pooled: np.ndarray, baseline: str | None) -> list[tuple[int, int]]:
    """Which pairs to tabulate: baseline vs every model, else neighbours in the ranking."""
    if baseline is not None and baseline in models:
        b = models.index(baseline)
        return [(b, j) for j in range(len(models)) if j != b][:MAX_PAIRS]
    order = np.argsort(pooled, kind="stable")
    return [(int(order[i]), int(order[i + 1])) for i in range(len(order) - 1)][:MAX_PAIRS]


def exact_inputs(m: BenchmarkMatrices, subset_models: set[str]):
    """What the exact columns start from: per model whether it answered every item (``full``) and
    only 0/1 (``binary``), the models kept (both, and not subset-evaluated), subject sizes, the kept
    models' correct answers per subject (``counts``, C order) and in all (``K``).

    From the per-subject counts the analyses share (``BenchmarkMatrices.subject_counts``): no masks
    or column copies of the matrix (the former 0.64 GB copy of the kept columns at 4,000 models x
    20,000 items). 0/1 scores of complete models: every sum is an exact integer.
    """
    sc = m.subject_counts
    full = sc.n_items == m.n_items
    binary = sc.binary
    keep = np.array([f and b and mod not in subset_models for f, b, mod in zip(full, binary, m.models)], dtype=bool)
    sizes = np.bincount(m.item_subject)
    present = sizes > 0
    # C order, as the former per-model stack: stratified_error_sd's sums over subjects run the same way
    counts = np.ascontiguousarray(sc.total[present][:, np.flatnonzero(keep)].round().astype(np.int64))
    return full, binary, keep, sizes[present], counts, counts.sum(axis=0)


def _subsets_for(m: BenchmarkMatrices, config: AuditConfig, subsets):
    if subsets is None:
        subsets = m.store_inputs.get("subsets")  # read with the matrices (tasks/audit/steps.py store_inputs)
    if subsets is not None:
        return list(subsets), []
    db = getattr(config, "db", None)
    if not db:
        return [], []
    from benchcert.tasks.subsample.subsets import load_subsets_from_db

    try:
        # A short wait: an ingest holding the store must not stall the audit for long.
        return load_subsets_from_db(db, m.benchmark, lock_timeout=60.0), []
    except Exception as exc:  # a missing or locked store must not fail the audit
        return [], [f"subsample: recorded subsets could not be read ({type(exc).__name__}: {exc})"]


def analyze(m: BenchmarkMatrices, config: AuditConfig, *, subsets=None) -> AnalysisOutput:
    """Cost-accuracy tables and certified subset estimates for one benchmark.

    ``subsets`` are the recorded :class:`~benchcert.tasks.subsample.subsets.SubsetManifest` of the
    benchmark; when None they are read from the store named by ``config.db`` (if the
    audit config carries one).
    """
    from benchcert.tasks.subsample.subsets import ESTIMATE_SCHEMA, subset_estimates

    alpha = config.alpha
    notes: list[str] = []
    manifests, read_notes = _subsets_for(m, config, subsets)
    notes += read_notes
    estimates = subset_estimates(m, manifests, alpha=alpha)
    # Subset-evaluated checkpoints are not full response vectors: keep them out of the curve.
    subset_models = set(estimates["model"].to_list())

    N = m.n_items
    grid = n_grid(N)
    full, binary, keep, sizes, counts, K = exact_inputs(m, subset_models)
    cols = np.flatnonzero(keep)  # the kept models' columns of the matrix
    models = [mod for mod, k in zip(m.models, keep) if k]
    notes += _left_out_notes(m.models, subset_models, full, binary)

    curve_rows, model_rows, pair_rows = [], [], []
    if not grid:
        notes.append(f"subsample: the benchmark has {N} item(s); no proper subset size to tabulate")
    pair_idx = _pairs(models, K / N if N else K.astype(float), config.baseline) if len(models) >= 2 else []
    # h* kept beside the store once computed; in memory too (_worst_case) for a long-lived worker.
    worst = hstar_cache.worst_cases(grid, N, alpha, getattr(config, "db", None), one=_worst_case)
    thms = {n: float(theorem_5_2_halfwidth(n, N, alpha=alpha).half_width) for n in grid}
    thm2s = {n: float(theorem_5_2_halfwidth(n, N, alpha=alpha, R=2.0).half_width) for n in grid}
    if pair_idx:
        # The pairs' columns only (an out-of-core matrix reads just these, tasks/store/blocked.py).
        A = m.columns([cols[i] for i, _ in pair_idx])
        B = m.columns([cols[j] for _, j in pair_idx])
        b_better = ((B == 1) & (A == 0)).sum(axis=0)
        a_better = ((A == 1) & (B == 0)).sum(axis=0)

    def exact(n: int):
        """The exact per-model and per-pair error distributions at subset size n."""
        d = (subsample_error_distribution(K, n, N, alpha=alpha, half_widths=[thms[n], worst[n][0]])
             if models else None)
        pe = (paired_error_distribution(b_better, a_better, n, N, alpha=alpha, half_widths=[thm2s[n]])
              if pair_idx else None)
        return d, pe

    distributions = hstar_cache.per_size(exact, grid)
    for n in grid:
        thm = thms[n]
        hstar, worst_K = worst[n]
        d, pe = distributions[n]
        strat = strat_sd = None
        if n >= sizes.size:
            alloc = proportional_allocation(sizes, n)
            strat = stratified_halfwidth(sizes, alloc, alpha=alpha).half_width
            if models:
                strat_sd = stratified_error_sd(counts, sizes, alloc).stratified_sd
        row = {"n": n, "N": N, "cost_fraction": n / N, "alpha": alpha, "theorem_5_2": thm,
               "barber_nonnegative": float(barber_halfwidth(n, N, alpha=alpha).half_width),
               "barber_signed": float(barber_halfwidth(n, N, alpha=alpha, signed=True).half_width),
               "serfling": float(serfling_halfwidth(n, N, alpha=alpha).half_width), "stratified_proxy": strat,
               "exact_worst_case": hstar, "worst_case_K": worst_K, "n_models": len(models),
               "theorem_5_2_paired": thm2s[n],
               "mean_model_error95": None, "worst_model_error95": None, "max_violation_theorem": None,
               "max_violation_exact_worst_case": None, "n_pairs": len(pair_idx), "mean_pair_error95": None,
               "worst_pair_error95": None, "max_violation_paired_theorem": None}
        if d is not None:
            q = np.atleast_1d(d.error_quantile)
            row.update(mean_model_error95=float(q.mean()), worst_model_error95=float(q.max()),
                       max_violation_theorem=float(d.violation[:, 0].max()),
                       max_violation_exact_worst_case=float(d.violation[:, 1].max()))
            model_rows += _model_rows(models, K, n, N, d, strat_sd, alpha)
        if pe is not None:
            q2 = np.atleast_1d(pe.error_quantile)
            row.update(mean_pair_error95=float(q2.mean()), worst_pair_error95=float(q2.max()),
                       max_violation_paired_theorem=float(pe.violation[:, 0].max()))
            pair_rows += _pair_rows([(models[i], models[j]) for i, j in pair_idx], n, N, pe, (b_better, a_better),
                                    row["theorem_5_2_paired"], alpha)
        curve_rows.append(row)

    curve = pl.DataFrame(curve_rows, schema=CURVE_SCHEMA) if curve_rows else pl.DataFrame(schema=CURVE_SCHEMA)
    per_model = pl.DataFrame(model_rows, schema=MODELS_SCHEMA) if model_rows else pl.DataFrame(schema=MODELS_SCHEMA)
    pairs = pl.DataFrame(pair_rows, schema=PAIRS_SCHEMA) if pair_rows else pl.DataFrame(schema=PAIRS_SCHEMA)
    estimates = estimates.cast(ESTIMATE_SCHEMA)
    intervals = (estimates.filter(pl.col("lower").is_not_null())
                 .select("model", pl.lit("pooled").alias("metric"), "method", "estimate", "lower", "upper",
                         "half_width", "alpha").cast(INTERVAL_SCHEMA))
    notes += _estimate_notes(estimates, m.n_items)
    return AnalysisOutput(
        name="subsample",
        tables={"subsample_curve": curve, "subsample_models": per_model, "subsample_pairs": pairs,
                "subsample_estimates": estimates},
        intervals=intervals if intervals.height else None,
        sections=[subsample_sections.section(curve, pairs, estimates, alpha, N, config.baseline)],
        warnings=notes,
    )


def _left_out_notes(all_models: list[str], subset_models: set[str], full, binary) -> list[str]:
    """One line per reason a fully evaluated model is left out of the exact columns, listing the models."""
    notes = []
    partial = [mod for mod, f in zip(all_models, full) if mod not in subset_models and not f]
    fractional = [mod for mod, f, b in zip(all_models, full, binary) if mod not in subset_models and f and not b]
    for names, why in ((partial, "did not answer every item: left out of the exact subsample columns"),
                       (fractional, "have non-binary scores: the exact (hypergeometric) columns need 0/1 scores")):
        if names:
            shown = ", ".join(repr(x) for x in names[:12]) + (f" ... ({len(names)} in all)" if len(names) > 12 else "")
            notes.append(f"model(s) {shown} {why}")
    return notes


def _model_rows(models: list[str], K, n: int, N: int, d, strat_sd, alpha: float) -> list[dict]:
    """Table ``subsample_models``' rows at subset size n: each model's exact error distribution ``d``."""
    q, sd = np.atleast_1d(d.error_quantile), np.atleast_1d(d.sd)
    return [{"model": mod, "n": n, "N": N, "K": int(K[j]), "full_score": K[j] / N,
             "error95": float(q[j]), "violation_theorem": float(d.violation[j, 0]),
             "violation_exact_worst_case": float(d.violation[j, 1]),
             "uniform_sd": float(sd[j]),
             "stratified_sd": None if strat_sd is None else float(strat_sd[j]),
             "alpha": alpha}
            for j, mod in enumerate(models)]


def _pair_rows(pairs: list[tuple[str, str]], n: int, N: int, pe, better: tuple, thm2: float,
               alpha: float) -> list[dict]:
    """Table ``subsample_pairs``' rows at subset size n: each pair's exact gap error distribution ``pe``;
    ``better``: the items only b, and only a, gets right."""
    b_better, a_better = better
    q2, sd2, gap = (np.atleast_1d(pe.error_quantile), np.atleast_1d(pe.sd), np.atleast_1d(pe.full_gap))
    return [{"model_a": a, "model_b": b, "n": n, "N": N,
             "b_better": int(b_better[t]), "a_better": int(a_better[t]),
             "full_gap": float(gap[t]), "theorem_5_2_paired": thm2, "error95": float(q2[t]),
             "violation_theorem": float(pe.violation[t, 0]), "sd": float(sd2[t]),
             "alpha": alpha}
            for t, (a, b) in enumerate(pairs)]


def _estimate_notes(estimates: pl.DataFrame, n_items: int) -> list[str]:
    """What the run says of the recorded subsets' estimates: a subset drawn from another item count,
    and each model evaluated on a subset only."""
    notes = []
    for r in estimates.unique("subset_id").iter_rows(named=True):
        if r["N"] != n_items:
            notes.append(f"subset {r['subset_id']} was drawn from {r['N']} items; the benchmark now has {n_items}: "
                         "its estimates are about the full score over the items at drawing time")
    for r in estimates.filter(pl.col("method") != "subsample_exact").iter_rows(named=True):
        notes.append(f"model {r['model']!r} was evaluated on recorded subset {r['subset_id']} ({r['n']} of "
                     f"{r['N']} items): estimated full score {100 * r['estimate']:.2f}% +/- "
                     f"{100 * r['half_width']:.2f} pp ({r['method']})")
    return notes
