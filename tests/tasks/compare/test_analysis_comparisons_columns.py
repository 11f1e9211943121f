"""The comparisons analysis on a 0/1 benchmark reads the matrix only through ``column_blocks``
(and the shared subject counts), never ``scores``: what an out-of-core matrix allows. Every
table, section and warning equals the in-memory run's, for each family (leaderboard beyond 150
models, against a baseline, every pair, every pair by blocks through a block runner), with
missing cells and a pair sharing no item.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benchcert.stats.comparisons import pack_binary_scores, pair_block, pair_block_runner
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.compare.analysis import analyze
from benchcert.tasks.store.matrices import BenchmarkMatrices


class _NoScores(BenchmarkMatrices):
    """A matrix whose ``scores`` cannot be read (as an out-of-core one): columns and blocks are new
    arrays served from the real one."""

    @property
    def scores(self):
        raise AssertionError("the comparisons analysis read m.scores")

    def columns(self, cols):
        return np.array(self._scores[:, np.asarray(cols, dtype=np.intp)])

    def column_blocks(self, block_models):
        for lo in range(0, len(self.models), block_models):
            yield lo, min(len(self.models), lo + block_models), np.array(self._scores[:, lo:lo + block_models])


def _matrices(n_items, k, n_subjects, seed, missing=0.1):
    rng = np.random.default_rng(seed)
    ability = rng.uniform(0.2, 0.9, k)
    ability[1:3] = 0.97  # among the top 20: compared in the leaderboard family too
    s = (rng.random((n_items, k)) < ability).astype(float)
    s[rng.random((n_items, k)) < missing] = np.nan
    s[: n_items // 2, 1] = np.nan  # models 1 and 2 share no answered item: a pair not compared
    s[n_items // 2:, 2] = np.nan
    s[:, 3] = s[:, 4]  # two identical models: zero standard errors, degenerate warnings
    subject = np.sort(rng.integers(0, n_subjects, n_items))
    items = pl.DataFrame({"item_id": [f"i{j:04d}" for j in range(n_items)],
                          "subject": [f"s{c:03d}" for c in subject], "domain": "d"})
    models = [f"m{j:03d}" for j in range(k)]
    return (BenchmarkMatrices("b", "", items=items, models=models, scores=s),
            _NoScores("b", "", items=items, models=models, scores=s))


def _run(m, config):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = analyze(m, config)
    return out, [(w.category, str(w.message)) for w in caught]


def _same(a, b, caught=True):
    (out_a, caught_a), (out_b, caught_b) = a, b
    assert out_a.tables.keys() == out_b.tables.keys()
    for name in out_a.tables:
        assert_frame_equal(out_a.tables[name], out_b.tables[name], check_exact=True)
    assert out_a.warnings == out_b.warnings
    assert [s.html for s in out_a.sections] == [s.html for s in out_b.sections]
    assert caught_a == caught_b or not caught


@pytest.mark.parametrize("shape, config, family", [
    ((40, 160, 4), AuditConfig(), "leaderboard"),  # > 150 models: each against the next + the top 20
    ((40, 160, 4), AuditConfig(hierarchy=()), "leaderboard"),
    ((300, 30, 35), AuditConfig(baseline="m001"), "versus_baseline"),  # ranks: every pair besides
    ((200, 24, 6), AuditConfig(), "all_pairs"),
    ((40, 160, 4), AuditConfig(all_pairs=True), "all_pairs"),
])
def test_a_binary_benchmark_is_compared_from_its_columns_alone(shape, config, family):
    memory, columns = _matrices(*shape, seed=sum(shape))
    ref = _run(memory, config)
    assert ref[0].tables["comparisons"]["family"].unique().to_list() == [family]
    assert ref[0].tables["comparisons"]["verdict"].is_in(["not comparable: no shared item"]).any()
    # a degenerate pair warns on both paths: with subjects the clustered test's zero SE; without, Tango's
    # interval is not of zero width, and the exact test's "no discordant item" is the warning
    expect = "zero standard error" if config.hierarchy else "no discordant item"
    assert any(expect in msg for _, msg in ref[1])
    # the MDE beside each verdict is stated at the level the verdicts are decided at: Bonferroni over the pairs
    table = ref[0].tables["comparisons"]
    compared = table.filter(pl.col("n_shared") > 0)
    assert compared["mde_alpha"].unique().to_list() == [pytest.approx(0.05 / compared.height)]
    assert table.filter(pl.col("n_shared") == 0)["mde_alpha"].null_count() == table.height - compared.height
    assert "<code>mde_alpha</code>" in ref[0].sections[0].html
    _same(ref, _run(columns, config))


@pytest.mark.parametrize("shape, config, n_sent", [
    ((120, 24, 6), AuditConfig(), 3 * 4 // 2),  # every pair: the 6 pairs of 3 blocks of 8 models go out
    ((40, 160, 4), AuditConfig(), 0),  # the leaderboard family: one group over every model, computed here
    ((60, 30, 35), AuditConfig(baseline="m001"), 4 * 5 // 2),  # the table here; the ranks' every pair out
])
def test_the_block_runner_gets_the_groups_and_the_numbers_stay_the_same(shape, config, n_sent):
    # The Dask path (tasks/audit/distributed.py): pairs of model blocks go to the runner, which reads
    # the groups' columns itself; the flow keeps only the bits, and computes a group over every model.
    memory, columns = _matrices(*shape, seed=5)
    sent = []

    def runner(groups, codes, colstats, **settings):
        for g in groups:
            sent.append(g.blocks)
            yield pair_block(memory.columns(g.cols), codes, g, tuple(c[g.cols] for c in colstats), **settings)

    with pair_block_runner(lambda *a, **k: list(runner(*a, **k)), 8):
        got = _run(columns, config)
    assert len(set(sent)) == n_sent
    with pair_block_runner(lambda *a, **k: list(runner(*a, **k)), 8):
        _same(_run(memory, config), got)  # the in-memory run's through the runner
    # and the one-process numbers (a blocked run warns group by group, so those texts may be split)
    _same(_run(memory, config), got, caught=n_sent == 0)


def test_packing_refuses_scores_that_are_not_0_or_1():
    memory, _ = _matrices(50, 6, 3, seed=1)
    s = memory.columns(range(6))
    s[3, 2] = 0.5
    with pytest.raises(ValueError, match=r"model column\(s\) \[2\] are not all 0 or 1"):
        pack_binary_scores([(0, 6, s)], 50, 6)
    with pytest.raises(ValueError, match="consecutive blocks"):
        pack_binary_scores([(0, 3, s[:, :3]), (4, 6, s[:, 4:])], 50, 6)
    with pytest.raises(ValueError, match="ended at 3"):
        pack_binary_scores([(0, 3, s[:, :3])], 50, 6)
