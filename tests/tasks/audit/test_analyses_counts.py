"""Issue #27: the audit's analyses start from the per-subject counts they share
(``BenchmarkMatrices.subject_counts``) instead of masks and copies of the matrix. The subject table
must equal the long rows counted by polars; each other former computation is kept here verbatim and
the new one must equal it to the last bit: the comparisons' pooled scores and shared-item counts,
the subsample's exact-column inputs (and what stratified_error_sd makes of them: their memory order
matters), and every analysis' tables on a matrix with missing answers, fractional models and
skipped subjects."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from benchcert.stats.subsample import proportional_allocation, stratified_error_sd
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices


def _matrices(seed: int, *, binary: bool = True, n_items: int = 700, n_models: int = 30) -> BenchmarkMatrices:
    rng = np.random.default_rng(seed)
    subj = np.sort(rng.integers(0, 24, n_items))
    items = pl.DataFrame({"item_id": [f"q{i:04d}" for i in range(n_items)], "subject": [f"s{s:02d}" for s in subj],
                          "domain": [f"d{s // 6}" for s in subj]})
    s = (rng.random((n_items, n_models)) < rng.uniform(0.2, 0.9, n_models)).astype(float)
    s[:, 3] = np.where(rng.random(n_items) < 0.1, np.nan, s[:, 3])  # a partial model
    s[subj == 5, 4] = np.nan                                          # a model that skipped a subject
    if not binary:
        s[rng.random(n_items) < 0.2, 6] = 0.5                         # a fractional model
    return BenchmarkMatrices("t", "", items=items, models=[f"m{j:02d}" for j in range(n_models)], scores=s,
                             n_replicates=(~np.isnan(s)).astype(np.uint32))


def _subjects_by_models_oracle(m: BenchmarkMatrices) -> pl.DataFrame:
    """The subject table by polars from the long (item, model, score) rows: answered items and
    their score sum per (subject, model), subjects in code order and models in ``m.models``' order.
    Exact whatever the order of the sums: the scores are 0, 1/2 and 1."""
    i_idx, m_idx = np.nonzero(~np.isnan(m.scores))
    long = pl.DataFrame({"code": m.item_subject[i_idx].astype(np.int64), "m": m_idx.astype(np.int64),
                         "score": m.scores[i_idx, m_idx]})
    counts = long.group_by("code", "m").agg(pl.len().cast(pl.Int64).alias("n"), pl.col("score").sum().alias("sum"))
    names = m.subjects.select("domain", "subject").with_row_index("code").with_columns(pl.col("code").cast(pl.Int64))
    models = pl.DataFrame({"model": m.models}).with_row_index("m").with_columns(pl.col("m").cast(pl.Int64))
    return (counts.join(names, on="code").join(models, on="m").sort("code", "m")
            .select("domain", "subject", "model", "n", "sum")
            .with_columns((pl.col("sum") / pl.col("n")).alias("mean")))


def _shared_counts_former(obs, a, b):
    """tasks/compare/analysis.py _shared_counts before issue #27, verbatim."""
    if obs.all():
        return np.full(a.size, obs.shape[0], dtype=np.int64)
    out = np.empty(a.size, dtype=np.int64)
    step = max(1, (1 << 24) // max(obs.shape[0], 1))
    for lo in range(0, a.size, step):
        out[lo:lo + step] = np.count_nonzero(obs[:, a[lo:lo + step]] & obs[:, b[lo:lo + step]], axis=0)
    return out


def _subsample_inputs_former(m: BenchmarkMatrices, subset_models: set[str]):
    """The lines of tasks/subsample/analysis.py analyze before issue #27 that made these arrays, verbatim."""
    S = m.scores
    full = ~np.isnan(S).any(axis=0)
    binary = np.all((S == 0.0) | (S == 1.0) | np.isnan(S), axis=0)
    keep = np.array([f and b and mod not in subset_models for f, b, mod in zip(full, binary, m.models)], dtype=bool)
    models = [mod for mod, k in zip(m.models, keep) if k]
    X = S[:, keep]
    K = X.sum(axis=0).round().astype(np.int64) if models else np.zeros(0, np.int64)
    sizes = np.bincount(m.item_subject)
    sizes = sizes[sizes > 0]
    counts = (np.stack([np.bincount(m.item_subject, weights=X[:, j])[np.bincount(m.item_subject) > 0]
                        for j in range(X.shape[1])], axis=1).round().astype(np.int64)
              if models else np.zeros((sizes.size, 0), np.int64))
    return full, binary, keep, sizes, counts, K


@pytest.mark.parametrize("binary", [True, False])
def test_subject_table_equals_the_long_rows_counted(binary):
    m = _matrices(1, binary=binary)
    new, old = m.subjects_by_models(), _subjects_by_models_oracle(m)
    assert new.schema == old.schema and new.shape == old.shape
    for c in new.columns:
        assert new[c].equals(old[c]), c


def test_comparisons_pooled_and_shared_counts_equal_the_former():
    from benchcert.tasks.compare.analysis import _shared_counts

    m = _matrices(2)
    c = m.subject_counts
    assert c.binary.all()
    assert np.array_equal(c.total.sum(axis=0) / c.n_items, np.nanmean(m.scores, axis=0))
    assert np.array_equal(c.n_items, (~np.isnan(m.scores)).sum(axis=0))
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    obs = ~np.isnan(m.scores)
    assert np.array_equal(_shared_counts(m.scores, c.n_items, a, b), _shared_counts_former(obs, a, b))
    full = np.nan_to_num(m.scores)
    assert np.array_equal(_shared_counts(full, np.full(30, full.shape[0]), a, b),
                          _shared_counts_former(~np.isnan(full), a, b))


@pytest.mark.parametrize("binary, subset_models", [(True, set()), (False, {"m07"})])
def test_subsample_inputs_equal_the_former(binary, subset_models):
    from benchcert.tasks.subsample.analysis import exact_inputs

    m = _matrices(3, binary=binary)
    new, old = exact_inputs(m, subset_models), _subsample_inputs_former(m, subset_models)
    for name, a, b in zip(("full", "binary", "keep", "sizes", "counts", "K"), new, old):
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    sizes, counts = new[3], new[4]
    alloc = proportional_allocation(sizes, 300)
    # the memory order of counts decides how stratified_error_sd sums over subjects
    assert np.array_equal(stratified_error_sd(counts, sizes, alloc).stratified_sd,
                          stratified_error_sd(old[4], sizes, alloc).stratified_sd)


def _run_all(m: BenchmarkMatrices, config: AuditConfig) -> dict:
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: run_analysis(name, fn, m, config) for name, fn in ANALYSES.items() if name != "hierarchical"}


@pytest.mark.parametrize("binary", [True, False])
def test_counts_are_computed_once_per_audit(binary, monkeypatch):
    """The analyses share one computation of the counts (the first analysis that asks pays for it)."""
    from benchcert.stats import subject_counts as sc

    calls = []
    real = sc.subject_counts
    monkeypatch.setattr(sc, "subject_counts", lambda *a, **k: calls.append(1) or real(*a, **k))
    outputs = _run_all(_matrices(4, binary=binary), AuditConfig())
    assert len(calls) == 1
    assert outputs["scores"].tables["model_scores"].height == 30


@pytest.mark.parametrize("shape", [(100000, 3), (5000, 300)])
def test_blocked_column_means_equal_nanmean(shape):
    """The comparisons' pooled scores of fractional benchmarks: np.nanmean's bits without its copy."""
    from benchcert.tasks.compare.analysis import _nanmean_columns

    rng = np.random.default_rng(shape[1])
    s = rng.random(shape)
    s[rng.random(shape) < 0.1] = np.nan
    assert np.array_equal(_nanmean_columns(s, (~np.isnan(s)).sum(axis=0)), np.nanmean(s, axis=0))
