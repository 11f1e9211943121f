"""The per-model-block fan-out of one audit (tasks/audit/distributed.py): blocking changes no number.

Oracles: the single-process computation on the whole matrix. In process, the hierarchical
analysis assembled from blocks of models and the paired comparisons computed group by group
through a block runner equal the whole-matrix ones to the last bit (0/1, fractional and
missing scores, degenerate pairs). On a real 2-process LocalCluster (started by the tests,
shared by the session's Dask tests: no other service), an audit whose hierarchical fits and pairs
go out in blocks of 3 models (5 blocks, 15 pairs of blocks) writes the single-process
artifacts, and Holm / Bonferroni / Benjamini-Hochberg are applied to the whole family after
the blocks are assembled, not block by block.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import polars as pl
import pytest

from benchcert.stats import comparisons as C
from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.hierarchical import analysis as H
from benchcert.tasks.store.matrices import BenchmarkMatrices

from comparison_support import assert_same_comparison


def _matrix(seed: int, n_items: int, k: int, n_subjects: int = 40):
    """0/1 scores with one fractional model, 5 % missing answers, a model that skipped a subject and
    two identical models (zero-SE pair)."""
    rng = np.random.default_rng(seed)
    subj = np.sort(rng.integers(0, n_subjects, n_items))
    p = rng.beta(2, 2, (n_subjects, k))
    s = (rng.random((n_items, k)) < p[subj]).astype(float)
    s[:, 5] = rng.random(n_items)
    s[rng.random(s.shape) < 0.05] = np.nan
    s[subj == 3, 7] = np.nan
    s[:, 4] = s[:, 6]
    return s, subj


def _benchmark(seed: int, n_items: int, k: int) -> BenchmarkMatrices:
    s, subj = _matrix(seed, n_items, k)
    i, j = np.nonzero(~np.isnan(s))
    long = pl.DataFrame({"model": [f"m{c:02d}" for c in j], "item_id": [f"i{r:05d}" for r in i],
                         "subject": [f"s{subj[r]:02d}" for r in i], "domain": [f"d{subj[r] % 5}" for r in i],
                         "score": s[i, j]})
    return BenchmarkMatrices("b", "", long)


@pytest.mark.parametrize("block", [2, 3, 10])
def test_hierarchical_assembled_from_model_blocks_is_the_whole_analysis(block):
    from benchcert.tasks.audit.distributed import model_blocks

    m = _benchmark(3, 1500, 23)
    cfg = AuditConfig(subject_weights={"s01": 2.0, "s02": 1.0})
    gc.collect()
    whole = run_analysis("hierarchical", H.analyze, m, cfg)
    parts = [H.model_block(BenchmarkMatrices("b", "", items=m.items, models=m.models[lo:hi],
                                             scores=np.ascontiguousarray(m.scores[:, lo:hi]),
                                             n_replicates=m.n_replicates[:, lo:hi]), cfg)
             for lo, hi in model_blocks(len(m.models), block)]
    assert len(parts) > 2
    blocked = run_analysis("hierarchical", lambda mm, c: H.assemble(mm, c, parts, H.split_part(mm, c)), m, cfg)
    assert whole.tables.keys() == blocked.tables.keys()
    for name in whole.tables:
        assert whole.tables[name].equals(blocked.tables[name]), name
    assert whole.intervals.equals(blocked.intervals)
    # Named warnings, in the same order. (A ResourceWarning of another test's unclosed file, raised when
    # the garbage collector happens to run inside one of the two calls, is no warning of the analysis.)
    def own(ws):
        return [w for w in ws if "ResourceWarning" not in w]

    assert own(whole.warnings) == own(blocked.warnings) and len(own(whole.warnings)) >= 2
    assert [s.html for s in whole.sections] == [s.html for s in blocked.sections]


@pytest.mark.parametrize("fractional", [False, True])
@pytest.mark.parametrize("pairs", [None, [[0, 1]], [[0, 1], [5, 18], [2, 17], [3, 9], [4, 6]]])
@pytest.mark.parametrize("block", [2, 3, 7])
def test_pairs_through_a_block_runner_equal_the_one_process_computation(fractional, pairs, block):
    # The runner gets the groups of pairs (here computed in turn, as a worker would, from the group's
    # columns only) and the whole matrix' column statistics; every field of every test equals the
    # dense computation's, and so do the warnings (which name pairs by their place in the family).
    s, subj = _matrix(1, 2000, 19)
    if not fractional:
        s[:, 5] = np.round(s[:, 5])
    pairs = None if pairs is None else np.asarray(pairs)
    calls = []

    def run(groups, codes, colstats, **settings):
        calls.append(len(groups))
        return [C.pair_block(s[:, g.cols], codes, g, tuple(c[g.cols] for c in colstats), **settings) for g in groups]

    with warnings.catch_warnings(record=True) as w_dense:
        warnings.simplefilter("always")
        dense = C.pairwise_comparisons(s, subj, pairs=pairs)
    with warnings.catch_warnings(record=True) as w_blocked:
        warnings.simplefilter("always")
        with C.pair_block_runner(run, block):
            blocked = C.pairwise_comparisons(s, subj, pairs=pairs)
    assert_same_comparison(dense, blocked)
    assert [str(w.message) for w in w_blocked] == [str(w.message) for w in w_dense]
    # All pairs of 0/1 scores go out in blocks; fractional ones in the blocks the one-process
    # computation uses (here one group: Gram sums of fractions depend on the order BLAS adds them in),
    # and so do a few pairs among many models (the direct path: one group).
    assert calls == [1] if fractional or pairs is not None else calls[0] > 1


def test_block_size_option_is_checked_before_any_work(tmp_path):
    from benchcert.flows.scale_out import ScaleOut, dask_audit
    from benchcert.tasks.audit.request import AuditRequest

    request = AuditRequest(db=str(tmp_path / "none.duckdb"), artifacts_root=str(tmp_path), benchmark="b",
                           lock_timeout=1.0)
    with pytest.raises(ValueError, match="--dask-block-models"):
        dask_audit(ScaleOut(block_models=5), request, None)  # without a cluster
    with pytest.raises(ValueError, match="block_models must be an integer >= 2"):
        dask_audit(ScaleOut(workers=2, block_models=1), request, None)  # before the export is written
    assert not (tmp_path / ".export").exists()


def test_a_group_over_every_model_is_computed_on_the_flow_not_sent_out():
    # A few pairs among many models (leaderboard or baseline family) form one group over every column;
    # sending it to a worker made that worker read the whole matrix again from the export. The cluster
    # runner computes it on the flow's matrix: no Prefect task is submitted (there is no flow or export
    # here, so a submission would fail), and every field equals the one-process computation.
    from benchcert.tasks.audit.distributed import _PairBlocksOnCluster

    s, subj = _matrix(2, 1500, 19)
    s[:, 5] = np.round(s[:, 5])  # all 0/1: the cluster path's condition
    pairs = np.asarray([[0, 1], [5, 18], [2, 17]])
    runner = _PairBlocksOnCluster(None, "b", "", [f"m{i}" for i in range(19)], s.shape[0], s)
    with warnings.catch_warnings(record=True) as w_dense:
        warnings.simplefilter("always")
        dense = C.pairwise_comparisons(s, subj, pairs=pairs)
    with warnings.catch_warnings(record=True) as w_here:
        warnings.simplefilter("always")
        with C.pair_block_runner(lambda *a, **k: list(runner(*a, **k)), 5):
            here = C.pairwise_comparisons(s, subj, pairs=pairs)
    assert_same_comparison(dense, here)
    assert [str(w.message) for w in w_here] == [str(w.message) for w in w_dense]
