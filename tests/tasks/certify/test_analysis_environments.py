"""The audit's environments analysis: failure-rate bounds in every audit, environment_risks with
audit --environments (certifying-capabilities paper, section 3 and Theorem 3.10)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from benchcert.stats.failure_rates import BLACK_BOX_SENTENCE, failure_rate_upper
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.certify.analysis import analyze
from benchcert.tasks.certify.service import parse_environments
from benchcert.tasks.store.matrices import BenchmarkMatrices


def _matrices():
    rows = []
    for model, acc in (("a", [1, 1, 1, 1, 1, 1]), ("b", [1, 0, 1, 0.5, 0, 1])):
        for i, s in enumerate(acc):
            rows.append({"model": model, "item_id": f"q{i}", "subject": "s1" if i < 3 else "s2",
                         "domain": "stem" if i < 3 else "arts", "score": float(s), "n_replicates": 1})
    return BenchmarkMatrices("t", "", pl.DataFrame(rows).with_columns(pl.col("n_replicates").cast(pl.UInt32)))


def test_every_audit_states_the_failure_rate_bound_and_the_black_box_sentence():
    out = analyze(_matrices(), AuditConfig())
    assert set(out.tables) == {"failure_rate_bounds"}
    f = {r["model"]: r for r in out.tables["failure_rate_bounds"].iter_rows(named=True)}
    assert f["a"]["failures"] == 0 and f["a"]["upper"] == pytest.approx(1 - 0.05 ** (1 / 6))
    assert f["b"]["failures"] == 3 and f["b"]["upper"] == pytest.approx(failure_rate_upper(3, 6).upper)  # 0.5 fails
    # Both questions named: same subjects (u* = max(u, (k+1)/n) = u here: 4/6 < u(3, 6)) and new
    # subjects (two subjects of 3 items: J_eff = 2; Hoeffding's relative-entropy bound, the m with
    # 2 kl(est || m) = log(20): at est = 1/2, m(1 - m) = 1/80; at est = 0, 1 - 0.05^(1/2)).
    assert {r["question"] for r in f.values()} == {"same_subjects"}
    h = math.sqrt(math.log(1 / 0.05) / (2 * 2))
    assert f["b"]["upper_new_subjects"] == pytest.approx((1 + math.sqrt(1 - 4 / 80)) / 2) and 0.5 + h > 1.0
    assert f["a"]["upper_new_subjects"] == pytest.approx(1 - 0.05 ** (1 / 2)) and 1 - 0.05 ** (1 / 2) < h
    assert f["a"]["effective_subjects"] == 2.0
    assert "new items from the same subjects" in out.sections[0].html and "new subjects" in out.sections[0].html
    assert "cannot be certified by black-box testing" in out.sections[0].html
    assert BLACK_BOX_SENTENCE.split(":")[0] in out.sections[0].html


def test_environment_risks_are_linear_in_the_mix_and_bands_hold_the_worst_mix():
    spec = parse_environments({"environments": {"mostly_stem": {"weights": {"stem": 0.75, "arts": 0.25}}},
                               "family": {"simplex": ["stem", "arts"]}}, "e.toml")
    out = analyze(_matrices(), AuditConfig(environments=spec.to_dict()))
    r = out.tables["environment_risks"]
    b = {(x["model"], x["environment"]): x for x in r.iter_rows(named=True)}
    assert b[("b", "mostly_stem")]["score"] == pytest.approx(0.75 * (2 / 3) + 0.25 * 0.5)
    assert b[("b", "mostly_stem")]["risk"] == pytest.approx(1 - b[("b", "mostly_stem")]["score"])
    for model in ("a", "b"):
        worst = b[(model, "family (worst mix)")]
        assert worst["lower"] == min(b[(model, "family:stem")]["lower"], b[(model, "family:arts")]["lower"])
        # the named environment's band is the same mix of the vertex bands
        mix = 0.75 * b[(model, "family:stem")]["lower"] + 0.25 * b[(model, "family:arts")]["lower"]
        assert b[(model, "mostly_stem")]["lower"] == pytest.approx(mix)
    assert (r["lower"] <= r["score"]).all() and (r["score"] <= r["upper"]).all()
    assert 'class="environment-profiles"' in out.sections[0].html


def test_hull_family_worst_mix_is_one_of_its_environments():
    spec = parse_environments({"environments": {"s": {"weights": {"stem": 1.0}}, "m": {"weights": {"stem": 0.5,
                                                                                                   "arts": 0.5}}},
                               "family": {"name": "between", "hull": ["s", "m"]}}, "h.toml")
    assert [r[0] for r in spec.rows()] == ["s", "m"]          # the hull adds no new environment
    r = analyze(_matrices(), AuditConfig(environments=spec.to_dict())).tables["environment_risks"]
    for model in ("a", "b"):
        sub = {x["environment"]: x for x in r.filter(pl.col("model") == model).iter_rows(named=True)}
        assert sub["between (worst mix)"]["lower"] == min(sub["s"]["lower"], sub["m"]["lower"])


def test_the_failure_table_is_the_certificates_failure_bound():
    # one computation (tasks/environments.failure_bound) behind the audit table and the certificates
    from benchcert.tasks.certify.service import certify_scores

    m = _matrices()
    spec = parse_environments({"environments": {"all": {"weights": {"stem": 0.5, "arts": 0.5}}}}, "e.toml")
    _, failure, _ = certify_scores(spec, m.items, m.models, m.scores, delta=0.1)
    table = {r["model"]: r for r in analyze(m, AuditConfig(alpha=0.1)).tables["failure_rate_bounds"].iter_rows(named=True)}
    for model, f in failure.items():
        row = table[model]
        assert (row["items"], row["failures"], row["failure_rate"], row["upper"], row["alpha"], row["method"]) == (
            f["n"], f["failures"], f["estimate"], f["upper"], f["alpha"], f["method"])


def test_a_file_weighing_a_domain_the_audited_variant_lacks_skips_the_analysis_by_name():
    """The command checks the file against all the benchmark's items; the variant audited may lack
    a domain it weighs: NotAnalysableError, which run_analysis records as skipped (issue #34)."""
    from benchcert.tasks.audit.analyses import run_analysis
    from benchcert.tasks.errors import NotAnalysableError

    spec = parse_environments({"level": "domain", "environments": {"law": {"weights": {"law": 1.0}}}}, "envs.toml")
    config = AuditConfig(environments=spec.to_dict())
    with pytest.raises(NotAnalysableError, match="envs.toml.*unknown domain 'law'"):
        analyze(_matrices(), config)
    out = run_analysis("environments", analyze, _matrices(), config)
    (w,) = [w for w in out.warnings if "skipped" in w]
    assert "NotAnalysableError" in w and "unknown domain 'law'" in w and not out.tables
