"""Scale: the fast paths equal the plain ones they replace (oracles), and memory stays bounded.

Oracles: ``segment_sums`` against ``np.add.reduceat`` (exact on integers, booleans and 0/1
scores; to rounding on other floats, since the two add a block's rows in different orders).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchcert.stats.segments import segment_sums

from comparison_support import assert_same_comparison


@pytest.mark.parametrize("seed", range(4))
def test_segment_sums_equal_reduceat(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(1, 3000))
        shape = (n,) + tuple(int(v) for v in rng.integers(1, 20, rng.integers(0, 3)))
        kind = rng.integers(0, 3)
        x = rng.random(shape)
        x = x < 0.5 if kind == 0 else (np.round(x) if kind == 1 else x * 10.0 ** rng.integers(-8, 9))
        k = int(rng.integers(1, n + 1))
        starts = np.r_[0, np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))] if k > 1 else np.array([0])
        dt = np.int64 if x.dtype == bool else None
        got, ref = segment_sums(x, starts, dt), np.add.reduceat(x, starts, axis=0, dtype=dt)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        if kind < 2:
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("seed, with_subjects, family", [(0, True, "all"), (1, False, "all"), (2, True, "baseline"),
                                                         (3, True, "pairs")])
def test_blocked_pairwise_equals_the_dense_computation_exactly(seed, with_subjects, family):
    # 0/1 scores (Gram sums are exact integers, so the numbers must agree to the last bit), missing
    # answers, unequal subjects; blocks of 1-5 models, i.e. many block pairs and pairs split
    # across blocks in both orders.
    import warnings

    from benchcert.stats.comparisons import pairwise_comparisons

    rng = np.random.default_rng(seed)
    k, n = 11, 240
    s = (rng.random((n, k)) < rng.uniform(0.2, 0.9, k)).astype(float)
    s[rng.random(s.shape) < 0.05] = np.nan
    s[:, 7] = s[:, 2]  # a pair with no discordant item (warned in both paths)
    subjects = rng.integers(0, 8, n) if with_subjects else None
    kw = {"all": {}, "baseline": {"baseline": 3},
          "pairs": {"pairs": rng.permutation(np.array([(i, j) for i in range(k) for j in range(k) if i != j]))[:40]}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = pairwise_comparisons(s, subjects, block_models=k, **kw[family])
        for bm in (1, 2, 5):
            assert_same_comparison(dense, pairwise_comparisons(s, subjects, block_models=bm, **kw[family]))


@pytest.mark.parametrize("seed, with_subjects", [(4, True), (5, False)])
def test_pair_by_pair_sums_equal_the_gram_path_exactly(seed, with_subjects, monkeypatch):
    # Few pairs among many models are summed column by column (PAIR_DIRECT_RATIO); on 0/1 scores
    # every number equals the Gram path's.
    import warnings

    from benchcert.stats import comparisons as cmp
    from benchcert.stats.comparisons import gram as gram_sums

    rng = np.random.default_rng(seed)
    k, n = 12, 300
    s = (rng.random((n, k)) < rng.uniform(0.2, 0.9, k)).astype(float)
    s[rng.random(s.shape) < 0.05] = np.nan
    subjects = rng.integers(0, 9, n) if with_subjects else None
    pairs = np.array([(0, 1), (5, 2), (11, 3), (7, 8), (4, 9)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(gram_sums, "PAIR_DIRECT_RATIO", 0)  # Gram
        gram = cmp.pairwise_comparisons(s, subjects, pairs=pairs)
        monkeypatch.setattr(gram_sums, "PAIR_DIRECT_RATIO", 10**9)  # pair by pair
        direct = cmp.pairwise_comparisons(s, subjects, pairs=pairs)
    assert_same_comparison(gram, direct)


def test_blocked_pairwise_with_fractional_scores_agrees_to_rounding():
    # Non-integer Gram sums depend on BLAS's summation order, which depends on the block's width.
    import warnings

    from benchcert.stats.comparisons import pairwise_comparisons

    rng = np.random.default_rng(7)
    s = np.round(rng.random((200, 9)), 2)
    subjects = rng.integers(0, 6, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_comparison(pairwise_comparisons(s, subjects, block_models=9),
                                pairwise_comparisons(s, subjects, block_models=2), exact=False)


def _matrices(n_models, n_items, n_subjects, seed=0):
    import polars as pl

    from benchcert.tasks.store.matrices import BenchmarkMatrices

    rng = np.random.default_rng(seed)
    subj = (np.arange(n_items) * n_subjects) // n_items
    p = 1 / (1 + np.exp(-(rng.normal(0, 1, n_models)[None, :] - rng.normal(0, 0.7, n_subjects)[:, None])))
    scores = (rng.random((n_items, n_models)) < p[subj]).astype(float)
    items = pl.DataFrame({"item_id": [f"i{i:06d}" for i in range(n_items)], "subject": [f"s{s:03d}" for s in subj],
                          "domain": [f"d{s % 3}" for s in subj]})
    return BenchmarkMatrices("syn", "", items=items, models=[f"m{j:04d}" for j in range(n_models)], scores=scores,
                             n_replicates=np.ones(scores.shape, np.uint32))


def test_many_models_compare_the_leaderboard_family_with_multiplicity_over_it():
    # 160 models (> ALL_PAIRS_MAX_MODELS): neighbours in the ranking + every pair of the top 20,
    # Holm and BH over exactly the pairs in the table; --all-pairs restores every pair.
    from benchcert.stats.comparisons import adjust_pvalues
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.compare import analysis as cmp

    m = _matrices(cmp.ALL_PAIRS_MAX_MODELS + 10, 300, 12)
    k = len(m.models)
    out = cmp.analyze(m, AuditConfig())
    table = out.tables["comparisons"]
    assert set(table["family"]) == {"leaderboard"}
    pooled = np.nanmean(m.scores, axis=0)
    order = [m.models[j] for j in np.argsort(-pooled, kind="stable")]
    pairs = {frozenset(p) for p in zip(table["model"], table["versus"])}
    assert all(frozenset(p) in pairs for p in zip(order[:-1], order[1:]))  # every neighbour pair
    assert all(frozenset((a, b)) in pairs for a in order[:cmp.TOP_N] for b in order[:cmp.TOP_N] if a != b)
    assert table.height == len(pairs) == (k - 1) + cmp.TOP_N * (cmp.TOP_N - 1) // 2 - (cmp.TOP_N - 1)
    p = table["p_value"].to_numpy()
    np.testing.assert_allclose(table["p_holm"].to_numpy(), adjust_pvalues(p, method="holm").p_adjusted)
    np.testing.assert_allclose(table["p_bh"].to_numpy(), adjust_pvalues(p, method="bh").p_adjusted)
    assert any("leaderboard" in w for w in out.warnings)
    assert out.tables["comparison_ranks"].height == k
    every = cmp.analyze(m, AuditConfig(all_pairs=True)).tables["comparisons"]
    assert every.height == k * (k - 1) // 2 and set(every["family"]) == {"all_pairs"}


def test_leaderboard_family_ranks_follow_the_scores():
    """Beyond ALL_PAIRS_MAX_MODELS a model meets only its neighbours (and the top 20), so ordering
    by mean shared-item gap scrambled the ranking (Spearman 0.02 in review); the point rank and the
    tied groups' order follow the pooled score there."""
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.compare import analysis as cmp

    m = _matrices(cmp.ALL_PAIRS_MAX_MODELS + 10, 300, 12, seed=3)
    ranks = cmp.analyze(m, AuditConfig()).tables["comparison_ranks"]
    pooled = dict(zip(m.models, np.nanmean(m.scores, axis=0)))
    by_rank = ranks.sort("rank")
    scores = [pooled[x] for x in by_rank["model"]]
    assert all(a >= b for a, b in zip(scores[:-1], scores[1:]))  # rank 1 holds the best score, and so on
    assert (ranks["rank_lower"] <= ranks["rank"]).all() and (ranks["rank"] <= ranks["rank_upper"]).all()


#: The memory regression check: every analysis of the audit on 1,000 models x 2,000 items
#: (2 million responses, 100 subjects in 10 domains), in a fresh process, under this peak RSS
#: (VmHWM, Python and numpy included). Measured: see the test's docstring.
MEMORY_MODELS, MEMORY_ITEMS, MEMORY_SUBJECTS = 1000, 2000, 100
MEMORY_PEAK_LIMIT = 1536 * 2**20

_MEMORY_SCRIPT = r"""
import json, sys, warnings
import numpy as np, polars as pl
from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
M, N, S = (int(v) for v in sys.argv[1:4])
rng = np.random.default_rng(0)
subj = (np.arange(N) * S) // N
p = 1 / (1 + np.exp(-(rng.normal(0, 1, M)[None, :] - rng.normal(0, 0.7, S)[:, None])))
scores = (rng.random((N, M)) < p[subj]).astype(float)
items = pl.DataFrame({"item_id": [f"i{i:06d}" for i in range(N)], "subject": [f"s{s:03d}" for s in subj],
                      "domain": [f"d{s * 10 // S:02d}" for s in subj]})
m = BenchmarkMatrices("syn", "", items=items, models=[f"m{j:05d}" for j in range(M)], scores=scores,
                      n_replicates=np.ones(scores.shape, np.uint32))
tables = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for name, fn in ANALYSES.items():
        out = run_analysis(name, fn, m, AuditConfig())
        tables.update({k: v.height for k, v in out.tables.items()})
peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"peak": peak, "tables": tables}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux) for the peak RSS")
def test_audit_memory_stays_bounded_at_1000_models():
    """Every analysis on 1,000 models x 2,000 items in a fresh process peaks under 1.5 GiB.

    Measured 892 MiB, then 1,302 MiB with the hierarchical analysis' joint subject-term bound
    (the hierarchical analysis is the peak: comparisons 350 MiB, the rest < 300 MiB; 2026-11,
    2-CPU machine). Before the leaderboard family and the blocked pairwise path, comparisons alone held three
    subjects x pairs float64 arrays: 100 x 499,500 x 3 x 8 B = 1.2 GB on top of the matrix.
    """
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, str(MEMORY_MODELS), str(MEMORY_ITEMS),
                           str(MEMORY_SUBJECTS)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["tables"]["model_scores"] == MEMORY_MODELS
    assert res["tables"]["comparison_ranks"] == MEMORY_MODELS
    assert res["peak"] < MEMORY_PEAK_LIMIT, f"peak RSS {res['peak'] / 2**20:.0f} MiB"


def _tied_runs_oracle(distinct, by_score):
    """The former loop (O(K^3)), verbatim."""
    k = by_score.size
    groups, prev_end = [], -1
    for start in range(k):
        end = start
        while end + 1 < k and not distinct[by_score[end + 1], by_score[start:end + 1]].any():
            end += 1
        if end > prev_end:
            groups.append(tuple(int(i) for i in by_score[start:end + 1]))
            prev_end = end
    return groups


@pytest.mark.parametrize("seed", range(6))
def test_tied_runs_equal_the_former_loop(seed):
    from benchcert.stats.comparisons.ranks import _tied_runs

    rng = np.random.default_rng(seed)
    for _ in range(40):
        k = int(rng.integers(1, 40))
        d = rng.random((k, k)) < rng.choice([0.0, 0.05, 0.3, 0.9])
        d = d | d.T
        np.fill_diagonal(d, False)
        order = rng.permutation(k)
        a, b = np.nonzero(d)  # the pairs, both ways round, as the former matrix held them
        assert _tied_runs(a, b, order) == _tied_runs_oracle(d, order)
        a, b = np.nonzero(np.triu(d))  # each pair once, either way round
        assert _tied_runs(b, a, order) == _tied_runs_oracle(d, order)
