"""The audit's failure-rate table from the shared per-subject counts (issue #27) equals, to the last
bit, the former table: failure_bound called on each model's column (kept here verbatim)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.certify.analysis import FAILURE_SCHEMA, failure_table
from benchcert.tasks.store.matrices import BenchmarkMatrices


def _former_failure_table(m: BenchmarkMatrices, alpha: float) -> pl.DataFrame:
    """tasks/certify/analysis.py failure_table before issue #27, verbatim."""
    from benchcert.tasks.certify.service import failure_bound

    rows = []
    # (domain, subject) pairs: a subject name reused in two domains is two subjects
    subjects = np.unique((m.items["domain"].cast(pl.String).fill_null("") + "\x00"
                          + m.items["subject"].cast(pl.String).fill_null("")).to_numpy(), return_inverse=True)[1]
    for j, model in enumerate(m.models):
        x = m.scores[:, j]
        ok = ~np.isnan(x)
        x = x[ok]
        if x.size == 0:
            continue
        fr = failure_bound(x, alpha, "uniform over the benchmark's answered items", subjects=subjects[ok])
        rows.append({"model": model, "items": fr["n"], "failures": fr["failures"], "failure_rate": fr["estimate"],
                     "upper": fr["upper"], "alpha": alpha, "method": fr["method"], "question": fr["question"],
                     "failure_rate_new_subjects": fr["estimate_new_subjects"],
                     "upper_new_subjects": fr["upper_new_subjects"], "effective_subjects": fr["effective_subjects"]})
    return pl.DataFrame(rows, schema=FAILURE_SCHEMA)


def _matrices(rng, n_items: int, n_models: int, n_subjects: int, *, binary: bool) -> BenchmarkMatrices:
    subj = rng.integers(0, n_subjects, n_items)
    items = pl.DataFrame({"item_id": [f"q{i}" for i in range(n_items)],
                          "subject": [f"s{s % 7}" for s in subj],           # a subject name in two domains
                          "domain": [f"d{s // 7}" for s in subj]})
    p = rng.random(n_models)
    s = (rng.random((n_items, n_models)) < p).astype(float)
    if not binary:
        frac = rng.random((n_items, n_models)) < 0.3
        s[frac] = rng.random(frac.sum())
    s[rng.random(s.shape) < 0.1] = np.nan
    s[:, 0] = 1.0                       # never fails: closed form at rate 0
    s[:, 1] = 0.0                       # always fails: bound 1
    s[subj == 2, 2] = np.nan            # skipped a whole subject
    s[:, 3] = np.nan                    # answered nothing: no row
    s[: n_items // 2, 4] = np.nan
    return BenchmarkMatrices("t", "", items=items, models=[f"m{j}" for j in range(n_models)], scores=s,
                             n_replicates=(~np.isnan(s)).astype(np.uint32))


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_failure_table_from_counts_is_the_per_model_table(binary, alpha):
    rng = np.random.default_rng(7 if binary else 8)
    m = _matrices(rng, 900, 40, 20, binary=binary)
    new = failure_table(m, alpha)
    old = _former_failure_table(m, alpha)
    assert new.schema == old.schema and new.height == old.height == 39
    for c in new.columns:
        assert new[c].equals(old[c], null_equal=True), c
