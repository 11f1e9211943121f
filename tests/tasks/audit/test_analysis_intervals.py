"""Comparator-interval analysis: fractional scores and grouped, named warnings (issue 18)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.audit.intervals import analyze

from conftest import matrices_from_scores


def test_fractional_scores_use_the_sample_variance_and_have_no_wilson_row():
    rng = np.random.default_rng(8)
    subjects = np.repeat(np.arange(6), 50)
    frac = {f"judge-{i}": np.round(rng.beta(4, 2, 300), 3) for i in range(3)}
    m = matrices_from_scores({"binary": (rng.random(300) < 0.6).astype(float), **frac}, subjects)
    out = run_analysis("comparator_intervals", analyze, m, AuditConfig())
    t = out.tables["comparator_intervals"]
    wilson = t.filter(pl.col("method") == "wilson")
    assert set(wilson["model"]) == {"binary"}
    row = t.filter((pl.col("model") == "judge-0") & (pl.col("method") == "iid_clt") & (pl.col("metric") == "pooled"))
    x = frac["judge-0"]
    assert row["half_width"][0] == pytest.approx(1.959964 * np.std(x, ddof=1) / math.sqrt(300), rel=1e-5)
    # p(1-p) would be 1.6-2.3x wider for such scores
    p = x.mean()
    assert math.sqrt(p * (1 - p)) / np.std(x, ddof=1) > 1.5
    # one line for the condition, naming the models; no warning names a model by column index
    lines = [w for w in out.warnings if "non-binary" in w]
    assert len(lines) == 1 and all(name in lines[0] for name in frac)
    assert not any("column(s)" in w for w in out.warnings)


def test_degenerate_models_are_named_once_per_condition():
    subjects = np.repeat(np.arange(4), 25)
    m = matrices_from_scores({"all-right": np.ones(100), "all-right-too": np.ones(100),
                   "mixed": np.tile([0.0, 1.0], 50)}, subjects)
    out = run_analysis("comparator_intervals", analyze, m, AuditConfig())
    # the stats layer's own warning, with the score it concerns and the models' names
    zero = [w for w in out.warnings if "iid_clt: zero-width" in w and "pooled score" in w]
    assert len(zero) == 1 and "model(s) 'all-right', 'all-right-too'" in zero[0]
    assert not any("column(s)" in w for w in out.warnings)
