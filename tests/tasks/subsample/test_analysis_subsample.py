"""The subsample analysis (tasks/subsample/analysis.py) on real and synthetic stores.

The real MMLU-Pro store (29 models, 26 of which answered all 12,032 items) gives the paper's
Table 4 / Figure 4 layout; a synthetic store exercises the subset-manifest path: a
checkpoint evaluated on exactly a recorded random subset gets its estimated full score with
the Theorem 5.2 guarantee and the exact post-hoc interval. Reference values are recomputed
from benchcert.stats.subsample (tested against the papers in test_stats_subsample.py).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from benchcert.stats.subsample import (
    paired_error_distribution,
    posthoc_interval,
    proportional_allocation,
    stratified_halfwidth,
    subsample_error_distribution,
    theorem_5_2_halfwidth,
)
from benchcert.tasks.audit.contract import INTERVAL_SCHEMA, AuditConfig
from benchcert.tasks.render.sections.subsample import line_plot_svg
from benchcert.tasks.subsample.analysis import PAPER_GRID, analyze, n_grid
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.store.matrices import load_matrices
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.subsample.subsets import create_subset, load_subsets


@pytest.fixture(scope="module")
def mmlu_out(mmlu_db):
    with open_store(mmlu_db, write=False) as con:
        m = load_matrices(con, "mmlu_pro")
    return m, analyze(m, AuditConfig(alpha=0.05))


def test_mmlu_cost_accuracy_tables(mmlu_out):
    m, out = mmlu_out
    assert out.name == "subsample"
    assert set(out.tables) == {"subsample_curve", "subsample_models", "subsample_pairs", "subsample_estimates"}
    curve, models, pairs = (out.tables[k] for k in ("subsample_curve", "subsample_models", "subsample_pairs"))
    N = m.n_items
    assert N == 12032 and curve["n"].to_list() == list(PAPER_GRID)
    # Theorem 5.2 column: sqrt((N - n)/(2 n N) log 40), e.g. n = 250: sqrt(11782/6016000 * 3.688879) = 0.08500.
    np.testing.assert_allclose(curve["theorem_5_2"], theorem_5_2_halfwidth(list(PAPER_GRID), N).half_width)
    assert curve["theorem_5_2"][0] == pytest.approx(0.08500, abs=5e-5)
    # Exact worst case is below Theorem 5.2 everywhere and holds for every model (<= alpha).
    assert (curve["exact_worst_case"] < curve["theorem_5_2"]).all()
    assert (curve["max_violation_exact_worst_case"] <= 0.05).all() and (curve["max_violation_theorem"] <= 0.05).all()
    # The 3 models that skipped items are left out (and said so); 26 full response vectors remain.
    full = int((~np.isnan(m.scores).any(axis=0)).sum())
    assert full == 26 and (curve["n_models"] == full).all() and models.height == 26 * len(PAPER_GRID)
    # one line for the condition, naming the three models
    (line,) = [w for w in out.warnings if "did not answer every item" in w]
    assert line.count("', '") == 2
    # No model's exact 95% error exceeds h* (the worst case over all K); each row = stats directly.
    j = models.join(curve.select("n", "exact_worst_case", "theorem_5_2"), on="n")
    assert (j["error95"] <= j["exact_worst_case"] + 1e-15).all()
    r = models.row(7, named=True)
    d = subsample_error_distribution([r["K"]], r["n"], N, half_widths=[theorem_5_2_halfwidth(r["n"], N).half_width])
    assert r["error95"] == d.error_quantile[0] and r["violation_theorem"] == d.violation[0, 0]
    # Stratifying by subject lowers the exact SD of (almost) every model.
    assert (models["stratified_sd"] < models["uniform_sd"]).mean() > 0.9
    # Paired gaps between neighbours in the ranking: 25 pairs per n, exact error <= Theorem 5.2 (R = 2).
    assert pairs.height == 25 * len(PAPER_GRID) and (curve["n_pairs"] == 25).all()
    assert (pairs["error95"] <= pairs["theorem_5_2_paired"]).all()
    p = pairs.row(3, named=True)
    pe = paired_error_distribution(p["b_better"], p["a_better"], p["n"], N)
    assert p["error95"] == pytest.approx(float(pe.error_quantile)) and p["full_gap"] == pytest.approx(pe.full_gap)
    assert out.intervals is None   # no checkpoint was evaluated on a recorded subset


def test_mmlu_report_section(mmlu_out):
    _, out = mmlu_out
    (sec,) = out.sections
    assert sec.anchor == "subsample" and sec.html.count("<svg") == 2
    assert "Theorem 5.2" in sec.html and "http" not in sec.html and "<script" not in sec.html


def test_baseline_pairs(mmlu_db):
    with open_store(mmlu_db, write=False) as con:
        m = load_matrices(con, "mmlu_pro")
    full = [mod for mod, f in zip(m.models, ~np.isnan(m.scores).any(axis=0)) if f][:4]
    m_small = m.__class__(benchmark=m.benchmark, variant=m.variant, long=m.long.filter(pl.col("model").is_in(full)))
    out = analyze(m_small, AuditConfig(baseline=full[1]))
    pairs = out.tables["subsample_pairs"]
    assert set(pairs["model_a"]) == {full[1]} and set(pairs["model_b"]) == set(full) - {full[1]}


def _synthetic_csv(path, rng, n_items=600, n_subjects=12, models=("m_a", "m_b", "m_c")):
    rows = []
    ability = {mod: 0.3 + 0.2 * i for i, mod in enumerate(models)}
    for i in range(n_items):
        subj = f"s{i % n_subjects}"
        for mod in models:
            rows.append((mod, f"item{i:04d}", subj, f"d{(i % n_subjects) % 3}", int(rng.random() < ability[mod])))
    pl.DataFrame(rows, schema=["model", "item_id", "subject", "domain", "score"], orient="row").write_csv(path)
    return rows


def test_checkpoint_on_recorded_subset_gets_certified_estimate(tmp_path):
    rng = np.random.default_rng(0)
    db = tmp_path / "syn.duckdb"
    _synthetic_csv(tmp_path / "full.csv", rng)
    assert ingest_file(db, tmp_path / "full.csv", benchmark="syn", mapping=parse_mapping()).status == "ingested"
    uni = create_subset(db, "syn", 80, seed=1)
    strat = create_subset(db, "syn", 40, seed=2, stratified=True)
    # The checkpoints answer exactly the recorded items; "other" answers 80 items of its own choosing.
    truth = {f"item{i:04d}": int(rng.random() < 0.55) for i in range(600)}

    def row(model, item):
        k = int(item[4:]) % 12
        return (model, item, f"s{k}", f"d{k % 3}", truth[item])

    ck = [row("ckpt@1", i) for i in uni.items["item_id"]]
    ck += [row("ckpt@2", i) for i in strat.items["item_id"]]
    ck += [row("other", f"item{i:04d}") for i in range(80)]
    pl.DataFrame(ck, schema=["model", "item_id", "subject", "domain", "score"], orient="row").write_csv(
        tmp_path / "ck.csv")
    assert ingest_file(db, tmp_path / "ck.csv", benchmark="syn", mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con:
        m = load_matrices(con, "syn")
        manifests = load_subsets(con, "syn")
    assert {s.subset_id for s in manifests} == {uni.subset_id, strat.subset_id}
    # The audit reads the manifests from the store named in its config.
    out = analyze(m, SimpleNamespace(alpha=0.05, baseline=None, db=str(db)))
    est = out.tables["subsample_estimates"]
    assert set(est["model"]) == {"ckpt@1", "ckpt@2"}
    e1 = {r["method"]: r for r in est.filter(pl.col("model") == "ckpt@1").iter_rows(named=True)}
    k = sum(truth[i] for i in uni.items["item_id"])
    p = posthoc_interval(k, 80, 600)
    assert e1["subsample_exact"]["estimate"] == k / 80
    assert (e1["subsample_exact"]["lower"], e1["subsample_exact"]["upper"]) == (p.lower, p.upper)
    hw = theorem_5_2_halfwidth(80, 600).half_width
    assert e1["subsample_theorem_5_2"]["half_width"] == hw
    assert e1["subsample_theorem_5_2"]["lower"] == pytest.approx(max(k / 80 - hw, k / 600, 0.0))
    assert k / 600 <= p.lower <= p.upper <= (600 - 80 + k) / 600   # coverage itself: test_stats_subsample.py
    (e2,) = est.filter(pl.col("model") == "ckpt@2").iter_rows(named=True)
    sizes = np.full(12, 50)
    assert e2["method"] == "subsample_stratified"
    assert e2["half_width"] == pytest.approx(stratified_halfwidth(sizes, proportional_allocation(sizes, 40)).half_width)
    means = {}
    for i in strat.items["item_id"]:
        means.setdefault(f"s{int(i[4:]) % 12}", []).append(truth[i])
    assert e2["estimate"] == pytest.approx(sum(50 / 600 * np.mean(v) for v in means.values()))
    # Intervals for the summary: metric pooled, one per method, schema of every analysis.
    iv = out.intervals
    assert iv.schema == pl.Schema(INTERVAL_SCHEMA) and set(iv["metric"]) == {"pooled"}
    assert set(zip(iv["model"], iv["method"])) == {("ckpt@1", "subsample_theorem_5_2"), ("ckpt@1", "subsample_exact"),
                                                  ("ckpt@2", "subsample_stratified")}
    # Checkpoints are not full vectors; "other" is not a recorded subset: both stay out of the curve.
    assert (out.tables["subsample_curve"]["n_models"] == 3).all()
    assert any("'other' did not answer every item" in w for w in out.warnings)
    # Without a store in the config there are no manifests, hence no certified estimates.
    plain = analyze(m, AuditConfig())
    assert plain.tables["subsample_estimates"].height == 0 and plain.intervals is None


def test_small_benchmark_grid_hostile_names_and_nonbinary(tmp_path):
    hostile = '<img src=x onerror="alert(1)">'
    rows = [(hostile, f"q{i}", "t&<b>", "a", float(i % 2)) for i in range(8)]
    rows += [("plain", f"q{i}", "t&<b>", "a", float(i < 5)) for i in range(8)]
    rows += [("half", f"q{i}", "t&<b>", "a", 0.5) for i in range(8)]
    pl.DataFrame(rows, schema=["model", "item_id", "subject", "domain", "score"], orient="row").write_csv(
        tmp_path / "h.csv")
    db = tmp_path / "h.duckdb"
    assert ingest_file(db, tmp_path / "h.csv", benchmark="h", mapping=parse_mapping()).status == "ingested"
    with open_store(db, write=False) as con:
        m = load_matrices(con, "h")
    out = analyze(m, AuditConfig(baseline=hostile))
    # N = 8: fractions of N, {0.4, 0.8, 2, 4, 6} rounded, 0 dropped -> [1, 2, 4, 6].
    assert n_grid(8) == [1, 2, 4, 6] == out.tables["subsample_curve"]["n"].to_list()
    assert any("'half' have non-binary scores" in w for w in out.warnings)
    assert sorted(out.tables["subsample_models"]["model"].unique().to_list()) == sorted([hostile, "plain"])
    assert out.tables["subsample_pairs"]["model_a"].unique().to_list() == [hostile]
    html = out.sections[0].html
    assert "<img" not in html
    assert "&lt;img" in html
    assert n_grid(1) == [] and n_grid(2) == [1]


def test_line_plot_escapes_and_handles_nothing():
    svg = line_plot_svg([10, 100], [{"name": "<b>&", "y": [2.0, 1.0], "color": "javascript:x"}], title="<t>")
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg and "&lt;t&gt;" in svg and "javascript" not in svg
    assert "nothing to plot" in line_plot_svg([], [])
    assert "nothing to plot" in line_plot_svg([1, 2], [{"name": "x", "y": [None, math.nan]}])
