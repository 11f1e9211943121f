"""The perturbation audit on real logs: llm-stability (data/llm_stability/SOURCE.txt).

* newsletter_grice - gpt-4o, MMLU college_mathematics, 10 prompt variants with repeated runs:
  the classical test (Fisher against the base prompt "0") flags a change on up to 34% of items per
  variant; the composite test, which asks whether the change goes beyond the spread of the other
  rewordings, on far fewer, and on none after Benjamini-Hochberg.
* stochastic_non_determinism - one prompt repeated; its runs split round-robin into three
  pseudo-variants, so every rejection is a false positive: both tests must stay at or below alpha.

Reference counts below were computed by this code from the bundled files and checked against an
independent count (Fisher's test per item with scipy) in test_classical_counts_are_fisher_per_item.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import fisher_exact

from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.perturbation.analysis import analyze
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.matrices import load_matrices
from benchcert.tasks.perturbation.service import (VariantMatrices, default_design, load_variant_counts, make_design,
                                          run_design, with_variant_counts)
from benchcert.tasks.render.report import render_report
from benchcert.tasks.store.connection import open_store

from conftest import DATA, GRICE, GRICE_CSV, SMALL_CSV, ingest_native
from store_support import ingested_text

NOISE = ("llm_stability_noise_college_mathematics", "llm_stability_noise_navigate", "llm_stability_noise_ruin_names")
ALPHA = 0.05


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("llm_stability") / "store.duckdb"
    for path in (GRICE_CSV, DATA / "llm_stability" / "stochastic_noise.csv.gz"):
        ingest_native(db, path)
    return db


def _matrices(db, benchmark, variant=None):
    with open_store(db, write=False) as con:
        return with_variant_counts(con, load_matrices(con, benchmark, variant))


@pytest.fixture(scope="module")
def grice(store):
    m = _matrices(store, GRICE, "0")
    out = run_analysis("perturbation", analyze, m, AuditConfig(alpha=ALPHA))
    return m, out


def test_grice_classical_vs_composite_per_variant(grice):
    """gpt-4o at temperature 0: most variants answer an item always right or always wrong, so the nine
    null variants of an item usually span 0 to 1 (no alternative), and where they agree the items
    with few replicates cannot reject (no power).  The widened-range test rejects nothing and says
    why for every item; the plug-in test (issue #13) had 25 rejections, 22 of them on a [0, 1] range."""
    m, out = grice
    assert isinstance(m, VariantMatrices) and m.variant_counts["variant"].n_unique() == 10
    v = out.tables["perturbation_variants"]
    assert v["variant"].to_list() == ["answ_schema", "chomsky", "grice", "gricean_long", "no-schema", "no_grice",
                                      "no_ling", "schema", "str_chomsky"]
    # Fisher against the base, per item (checked independently below)
    assert v["classical_rejections"].to_list() == [30, 19, 34, 32, 0, 11, 27, 33, 9]
    # Shares are over the items Fisher's test can reject at all (smallest attainable p <= alpha; the others
    # are classical no_power, as the composite test's untested items): e.g. 25 BH rejections of 93 items
    # for 'answ_schema' (0.25 of all 100 before). Checked by brute force over every table with scipy's
    # fisher_exact and false_discovery_control in test_classical_no_power_matches_brute_force.
    assert v["classical_share_bh"].to_list() == pytest.approx([25 / 93, 15 / 86, 30 / 96, 31 / 78, 0.0, 8 / 36,
                                                               23 / 90, 28 / 87, 2 / 60])
    assert v["composite_rejections"].sum() == 0 and v["n_tested"].sum() == int(v["n_ok"].sum())
    assert (v["n_no_power"] + v["n_no_alternative"] + v["n_ok"] == 100).all()
    assert v["composite_share"].is_null().sum() == (v["n_tested"] == 0).sum()     # no 0% for untested
    assert all(s.startswith("with m = 9 null variants and r = 1 to") for s in v["no_power"])
    items = out.tables["perturbation_items"]
    assert items.height == 900 and set(items["status"]) <= {"ok", "no_power", "no_alternative"}
    assert items.filter(pl.col("status") != "ok")["p_value"].is_null().all()
    assert items["unequal_replicates"].all()          # partial runs upstream: explicit in the output
    assert any("unequal replicate" in w for w in out.warnings)
    assert any("no_power" in w and "says nothing" in w for w in out.warnings)


def test_classical_counts_are_fisher_per_item(store):
    with open_store(store, write=False) as con:
        counts = load_variant_counts(con, GRICE)
    cells = {(r["item_id"], r["variant"]): (r["k"], r["r"]) for r in counts.iter_rows(named=True)}
    n = 0
    for item in {i for i, _ in cells}:
        kt, rt = cells[(item, "grice")]
        kb, rb = cells[(item, "0")]
        n += fisher_exact([[kt, rt - kt], [kb, rb - kb]]).pvalue <= ALPHA
    assert n == 34


def test_classical_no_power_matches_brute_force(grice, store):
    """Fisher's test cannot reject an item whose smallest attainable p-value (over every table with its
    replicate counts) exceeds alpha, e.g. 1 tested run against 10 base runs (1/11). Such items are
    classical no_power, with no p-value and outside Benjamini-Hochberg; before, they counted as tested
    and not significant (variant 'no-schema': a 0% share of which 96 of 100 items could not reject)."""
    from scipy.stats import false_discovery_control

    with open_store(store, write=False) as con:
        counts = load_variant_counts(con, GRICE)
    cells = {(r["item_id"], r["variant"]): (r["k"], r["r"]) for r in counts.iter_rows(named=True)}
    items = grice[1].tables["perturbation_items"]
    v = {r["variant"]: r for r in grice[1].tables["perturbation_variants"].iter_rows(named=True)}
    min_p = {}
    for variant in ("no-schema", "str_chomsky"):
        p, powerless = [], 0
        for item in sorted({i for i, _ in cells}):
            (kt, rt), (kb, rb) = cells[(item, variant)], cells[(item, "0")]
            key = (rt, rb)
            if key not in min_p:
                min_p[key] = min(fisher_exact([[a, rt - a], [b, rb - b]]).pvalue
                                 for a in range(rt + 1) for b in range(rb + 1))
            if min_p[key] > ALPHA:
                powerless += 1
            else:
                p.append(fisher_exact([[kt, rt - kt], [kb, rb - kb]]).pvalue)
        bh = int(np.sum(false_discovery_control(np.array(p), method="bh") <= ALPHA))
        assert (v[variant]["n_classical_no_power"], v[variant]["classical_tested"]) == (powerless, len(p))
        assert v[variant]["classical_share_bh"] == pytest.approx(bh / len(p))
    assert (v["no-schema"]["n_classical_no_power"], v["no-schema"]["classical_tested"]) == (96, 4)
    assert "cannot reject at alpha = 0.05" in v["no-schema"]["classical_no_power"]
    nopower = items.filter(pl.col("classical_status") == "no_power")
    assert nopower["classical_p"].is_null().all() and nopower["classical_reject_bh"].is_null().all()
    assert (nopower["classical_min_p"] > ALPHA).all()
    assert any("classical test(s) no_power" in w for w in grice[1].warnings)


def test_one_item_by_hand(grice):
    """Item 12: the base prompt answers it right 60% of the time (6 of 10 runs), every other
    variant never; Fisher flags e.g. 'grice' (0 of 14) against the base, the composite test does not:
    'grice' sits inside the null variants' range (T = 0) and that range is [0, 0.6] widened."""
    items = grice[1].tables["perturbation_items"]
    row = items.filter((pl.col("item_id") == "12") & (pl.col("variant") == "grice")).row(0, named=True)
    assert (row["test_rate"], row["base_rate"], row["statistic"]) == (0.0, 0.6, 0.0)
    assert row["classical_reject"] and not row["reject"] and row["m"] == 9
    assert row["status"] in ("no_power", "no_alternative") and row["p_value"] is None


def test_report_sections_render_offline(grice):
    _, out = grice
    html = render_report(title="t", meta={}, sections=out.sections, generated_at="now")
    assert html.count("<svg") >= 2           # share bars, accuracy histogram (no item was tested)
    assert "Benjamini-Hochberg" in html and "no_alternative" in html and "No power" in html
    assert "this says nothing about whether the prompt matters" in html and "Assumption 2" in html


@pytest.mark.parametrize("benchmark", NOISE)
def test_pure_noise_null_is_not_rejected(store, benchmark):
    """Pseudo-variants made of runs of one prompt: H0 holds exactly, so no valid test may reject more
    than alpha of items; with two null pseudo-variants and a handful of runs the widened-range test
    can test (almost) nothing and says so."""
    # no variant "" here: the matrices (not used by this analysis) need one named
    m = _matrices(store, benchmark, "runs_mod3_0")
    out = analyze(m, AuditConfig(alpha=ALPHA))
    v = out.tables["perturbation_variants"]
    tested, comp = int(v["n_tested"].sum()), int(v["composite_rejections"].sum())
    ctested, clas = int(v["classical_tested"].sum()), int(v["classical_rejections"].sum())
    assert comp <= ALPHA * max(tested, 1) and clas <= ALPHA * ctested
    statuses = set(out.tables["perturbation_items"]["status"])
    assert "no_power" in statuses and statuses <= {"ok", "no_power", "no_alternative", "one_null_variant"}
    if benchmark.endswith("navigate"):
        assert "one_null_variant" in statuses     # items with two runs: one null pseudo-variant


def test_pure_noise_null_with_stochastic_rates():
    """The same property where rates are not degenerate: synthetic pure-noise variants of items with
    p in (0.2, 0.8), 8 variants x 20 runs, leave-one-out design: composite and classical shares
    both stay at or below alpha (99% binomial interval)."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(4)
    n_items, n_var, r = 80, 8, 20
    p = rng.uniform(0.2, 0.8, n_items)
    k = rng.binomial(r, np.repeat(p, n_var))
    counts = pl.DataFrame({"model": "m", "item_id": np.repeat(np.arange(n_items), n_var).astype(str),
                           "variant": np.tile([f"v{j:02d}" for j in range(n_var)], n_items), "k": k, "r": r,
                           "binary": True})
    audit = run_design(counts, default_design(counts["variant"].unique().to_list()), alpha=ALPHA)
    items = audit.items
    for col in ("reject", "classical_reject"):
        x = int(items[col].sum())
        assert binomtest(x, items.height).proportion_ci(0.99).low <= ALPHA


def test_user_design_and_config(store):
    m = _matrices(store, GRICE, "0")
    spec = {"base": "0", "null": ["schema", "answ_schema", "grice"], "test": ["chomsky"]}
    out = analyze(m, AuditConfig(alpha=ALPHA, options={"perturbation": spec}))
    v = out.tables["perturbation_variants"]
    assert v["variant"].to_list() == ["chomsky"] and v["base"].to_list() == ["0"]
    assert (out.tables["perturbation_items"]["m"] <= 4).all()
    bad = analyze(m, AuditConfig(alpha=ALPHA, options={"perturbation": {"base": "nope"}}))
    assert not bad.tables and "not in the benchmark" in bad.warnings[0]
    d = make_design(["0", "a", "b"], base="0", null=["a", "b"], test=["a"])
    assert d.null_for("a") == ("0", "b")


def test_no_variants_returns_empty_without_any_design_work(tmp_path, small_mapping, monkeypatch):
    """Every audit runs this analysis: on a benchmark without variants it must return at once,
    before a design is made or any test is run."""
    from benchcert.tasks.perturbation import analysis

    db = tmp_path / "s.duckdb"
    assert ingest_file(db, SMALL_CSV, benchmark="small", mapping=small_mapping).status == "ingested"
    called = []
    for name in ("run_design", "default_design", "make_design"):
        monkeypatch.setattr(analysis, name, lambda *a, _name=name, **k: called.append(_name))
    m = _matrices(db, "small")
    out = analyze(m, AuditConfig())
    assert called == []
    assert not isinstance(m, VariantMatrices) and out == AnalysisOutput(name="perturbation")


def test_two_variants_and_non_binary_scores(tmp_path):
    db = ingested_text(tmp_path / "v.duckdb", tmp_path / "v.csv", "model,item_id,variant,replicate,score\n"
                       "a,1,,0,1\na,1,,1,0\na,1,x,0,1\na,1,x,1,1\n")
    assert analyze(_matrices(db, "b", ""), AuditConfig()) == AnalysisOutput(name="perturbation")
    ingested_text(db, tmp_path / "w.csv", "model,item_id,variant,replicate,score\n"
                  "a,1,y,0,0.5\na,1,y,1,1\na,1,z,0,1\na,1,z,1,0\n")
    items = analyze(_matrices(db, "b", ""), AuditConfig()).tables["perturbation_items"]
    y = items.filter(pl.col("variant") == "y").row(0, named=True)
    # fractional scores are tested (mean scores; energy test against the base), here without power
    assert y["scores"] == "fractional" and y["status"] == "no_power" and y["classical_method"] == "energy_distance"
    assert y["test_rate"] == 0.75


def test_energy_test_at_two_plus_two_replicates_says_no_power():
    """Fractional scores with 2 replicates per variant: the energy test's smallest attainable p-value is
    1/3 (6 splits, the observed one and its mirror image), so it cannot reject at 0.05 even when the
    tested variant scores 1 and the base 0 on every item. Before, each item read "not significant"
    and the variant's classical share was 0%; now the items are classical no_power and the share is
    not given."""
    n = 20
    rows = {"model": [], "item_id": [], "variant": [], "k": [], "r": [], "binary": [], "s": [], "scores": []}
    for item in range(n):
        for variant, sc in (("base", [0.0, 0.25]), ("n1", [0.5, 0.25]), ("n2", [0.75, 0.25]), ("t", [1.0, 1.0])):
            for key, val in (("model", "m"), ("item_id", str(item)), ("variant", variant), ("k", round(sum(sc))),
                             ("r", 2), ("binary", False), ("s", sum(sc)), ("scores", sc)):
                rows[key].append(val)
    counts = pl.DataFrame(rows).cast({"k": pl.Int64, "r": pl.Int64})
    design = make_design(["base", "n1", "n2", "t"], base="base", null=["n1", "n2"], test=["t"])
    audit = run_design(counts, design, alpha=ALPHA)
    items = audit.items
    assert (items["classical_method"] == "energy_distance").all()
    assert (items["classical_status"] == "no_power").all() and items["classical_p"].is_null().all()
    assert items["classical_min_p"].to_list() == pytest.approx([1 / 3] * n)
    (v,) = audit.variants.iter_rows(named=True)
    assert v["classical_tested"] == 0 and v["classical_share"] is None and v["classical_share_bh"] is None
    assert v["n_classical_no_power"] == n and "cannot reject at alpha = 0.05" in v["classical_no_power"]
    assert "0.333" in v["classical_no_power"] and "2 tested and 2 base replicates" in v["classical_no_power"]
    assert any("classical test(s) no_power" in note for note in audit.notes)
    # one more replicate pair (3 + 3: 20 splits, smallest p 1/10) still has none; 4 + 4 (2/70) has power
    from benchcert.stats.two_sample import energy_min_p, energy_test

    assert energy_min_p(3, 3) == pytest.approx(0.1) and energy_min_p(4, 4) == pytest.approx(2 / 70)
    e = energy_test([1.0] * 4, [0.0] * 4, alpha=ALPHA, rng=np.random.default_rng(0))
    assert e.exact and e.p_value == pytest.approx(2 / 70) and e.reject


def _fractional_counts(rng, n_items, n_var, r, shift=None):
    """Scores on {0, 0.25, ..., 1}: each item has its own score distribution; ``shift`` moves the
    tested variant 'v01' (None: every variant draws from the item's distribution - H0 exactly)."""
    rows = []
    grid = np.linspace(0, 1, 5)
    for item in range(n_items):
        w = rng.dirichlet(np.ones(5))
        for j in range(n_var):
            ww = w
            if shift is not None and j == 1:
                ww = np.roll(w, shift)
            x = rng.choice(grid, size=r, p=ww)
            rows.append({"model": "m", "item_id": str(item), "variant": f"v{j:02d}", "k": int(round(x.sum())),
                         "r": r, "binary": False, "s": float(x.sum()), "scores": x.tolist()})
    return pl.DataFrame(rows, schema={"model": pl.String, "item_id": pl.String, "variant": pl.String,
                                      "k": pl.Int64, "r": pl.Int64, "binary": pl.Boolean, "s": pl.Float64,
                                      "scores": pl.List(pl.Float64)})


def test_fractional_scores_keep_the_level_per_item():
    """Issue #13 item 6: fractional scores reach the energy test (classical contrast, per item) and the
    widened-range test on mean scores; under H0 (all variants draw from one item-specific
    distribution on {0, 0.25, ..., 1}) each rejects at most alpha of items (95% Clopper-Pearson upper
    bound <= alpha + 0.01 over 600 item tests)."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(31)
    counts = _fractional_counts(rng, 200, 4, 12)
    design = make_design(counts["variant"].unique().to_list(), base="v00", null=None, test=["v01", "v02", "v03"])
    audit = run_design(counts, design, alpha=ALPHA)
    items = audit.items
    assert (items["classical_method"] == "energy_distance").all() and (items["scores"] == "fractional").all()
    for col in ("classical_reject", "reject"):
        x, n = int(items[col].fill_null(False).sum()), items.height
        assert binomtest(x, n).proportion_ci(0.95).high <= ALPHA + 0.01, (col, x, n)
    # and the energy test does see a change in the tested variant's score distribution
    shifted = run_design(_fractional_counts(np.random.default_rng(32), 60, 4, 12, shift=2), design, alpha=ALPHA)
    v01 = shifted.variants.filter(pl.col("variant") == "v01").row(0, named=True)
    assert v01["classical_share"] > 0.3


def test_hostile_variant_names_are_escaped(tmp_path):
    rows = ["model,item_id,variant,replicate,score"]
    for item in range(4):
        for j, v in enumerate(["", "<script>alert(1)</script>", "a&b", 'q"t']):
            for rep in range(5):
                rows.append(f"<img src=x>,{item},\"{v.replace(chr(34), chr(34) * 2)}\",{rep},{(item + j + rep) % 2}")
    db = ingested_text(tmp_path / "h.duckdb", tmp_path / "h.csv", "\n".join(rows) + "\n", benchmark="h")
    out = analyze(_matrices(db, "h", ""), AuditConfig())
    html = render_report(title="t", meta={}, sections=out.sections, generated_at="now")
    assert "<script>alert" not in html and "<img src=x>" not in html and "&lt;script&gt;" in html
