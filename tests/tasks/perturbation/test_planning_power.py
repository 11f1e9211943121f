"""Issue #36 finding 7: the replicate planner (`plan perturbation --db`, the plans under `perturb`'s
"no power" lines) states the power its design has.

Before, it took the null range's width from the spread of the benchmark-level rates of the null
variants, which averages the items' own spreads away (0.036 against about 0.21 per item on
temperature data), so its "80% power" plan had about 58%.  Now the width is the items' own
root-mean-square spread (moments per item, without the binomial noise; stats/perturbation/spread.py)
around each item's own rate.  Here: 200 items with null ranges of width Unif[0.1, 0.3] centred in
[0.25, 0.75], a pilot of 8 null variants x 10 replicates; the planned design is then run on fresh
items (null rates i.i.d. on each item's true range, the tested rate 0.1 beyond it) with the
calibrated test, 20,000 items; 99% Clopper-Pearson interval (tests/simcheck.py ``rate_ci``).
"""

from __future__ import annotations

import numpy as np
import pytest
from simcheck import rate_ci

from benchcert.stats.perturbation.calibrated import reject_many
from benchcert.tasks.perturbation import tables
from benchcert.tasks.perturbation.planning import plan_replicates

DETECT = 0.1
N_ITEMS, M0, R0 = 200, 8, 10


def _population(rng):
    w = rng.uniform(0.1, 0.3, N_ITEMS)
    mid = rng.uniform(0.25, 0.75, N_ITEMS)
    return mid - w / 2.0, mid + w / 2.0


def _simulated_power(rng, a, b, m, r, n=20_000):
    i = rng.integers(0, a.size, n)
    lo, hi = a[i], b[i]
    k = rng.binomial(r, rng.uniform(lo[:, None], hi[:, None], (n, m)))
    pt = np.where(1.0 - hi >= lo, np.minimum(hi + DETECT, 1.0), np.maximum(lo - DETECT, 0.0))
    kt = rng.binomial(r, pt)
    return rate_ci(int(reject_many(k, r, kt, r).sum()), n)


@pytest.mark.montecarlo
def test_the_planned_design_has_its_stated_power():
    tables.load()                   # the shipped calibrations (16 null variants, 400 replicates: minutes)
    rng = np.random.default_rng(36)
    a, b = _population(rng)
    k = rng.binomial(R0, rng.uniform(a[:, None], b[:, None], (N_ITEMS, M0)))
    bench = list(k.mean(axis=0) / R0)
    plan = plan_replicates(bench, m_now=M0, n_items=N_ITEMS, detect=DETECT, item_counts=list(k),
                           item_replicates=[np.full(M0, R0)] * N_ITEMS, r_now=R0)
    assert plan.spread == "per item" and plan.replicates_per_variant is not None
    assert 0.15 <= plan.median_item_width <= 0.26                  # true root-mean-square width 0.208
    rate, low, high = _simulated_power(rng, a, b, plan.null_variants, plan.replicates_per_variant)
    assert plan.power >= 0.8 and plan.power - 0.04 <= low and high <= plan.power + 0.04, (plan, rate, low, high)
    assert "root-mean-square spread" in plan.sentence() and "the current design (10 replicates)" in plan.sentence()
    now, low_now, high_now = _simulated_power(rng, a, b, M0, R0)
    assert plan.power_now - 0.04 <= low_now and high_now <= plan.power_now + 0.04, (plan.power_now, now)
    # the benchmark-level spread (the former rule, kept only for one replicate per variant) overstates
    old = plan_replicates(bench, m_now=M0, n_items=N_ITEMS, detect=DETECT)
    assert old.spread == "benchmark"
    _, _, old_high = _simulated_power(rng, a, b, old.null_variants, old.replicates_per_variant)
    assert old.power > old_high, (old.power, old_high)
