"""Plan a prompt-perturbation study (``benchcert plan perturbation``): the service around
:func:`benchcert.stats.perturbation.design_search` (Algorithm C of the composite-null paper).

The null range comes from the user (a_hat, b_hat) or from pilot null variants' response rates
(:func:`pilot_range`, Algorithm B, bias-corrected); the statistics' warnings are kept with the
plan, to be shown beside it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from benchcert.tasks.errors import UsageError


@dataclass(frozen=True)
class PerturbationPlan:
    """A study design and what planning it said.

    Attributes
    ----------
    design : Design
        :func:`benchcert.stats.perturbation.design_search`'s result (``valid`` False: no design
        under the budget).
    warnings : tuple of str
        The design search's warnings.
    pilot_range : dict or None
        The null range estimated from pilot rates (:func:`pilot_range`), if it came from them.
    """

    design: object
    warnings: tuple[str, ...]
    pilot_range: dict | None = None

    def as_dict(self) -> dict:
        out = self.design.as_dict()
        out["warnings"] = list(self.warnings)
        if self.pilot_range is not None:
            out["pilot_range"] = self.pilot_range
        return out


def pilot_range(rates: list[float]) -> dict:
    """The null range estimated from pilot null variants' response rates (Algorithm B).

    Returns
    -------
    dict
        ``a_hat``, ``b_hat``, ``raw_min``, ``raw_max``, ``method`` and the estimate's ``warnings``.

    Raises
    ------
    UsageError
        ``"--pilot-rates: <why>"``: rates that cannot be used (stats' validator names the problem).
    """
    from benchcert.stats.perturbation import estimate_range

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est = estimate_range(rates)
        except ValueError as exc:  # stats' validator: the rates are the user's option
            raise UsageError(f"--pilot-rates: {exc}") from None
    return {"a_hat": est.a_hat, "b_hat": est.b_hat, "raw_min": est.raw_min, "raw_max": est.raw_max,
            "method": est.method, "warnings": [str(w.message) for w in caught]}


def plan_perturbation(a_hat: float, b_hat: float, budget: int, *, pilot: dict | None = None,
                      **search) -> PerturbationPlan:
    """The (eps, m, r) design that maximises the average-power bound at level alpha within ``budget``.

    Parameters
    ----------
    a_hat, b_hat : float
        The null range.
    budget : int
        Total model calls, pilot included.
    pilot : dict, optional
        The :func:`pilot_range` the null range came from, kept with the plan.
    **search
        Keywords of :func:`benchcert.stats.perturbation.design_search` (alpha, pilot_m, pilot_r,
        eps_step, eps_max_rule, method).

    Raises
    ------
    UsageError
        Options the design search cannot use (stats' validators name them).
    """
    from benchcert.stats.perturbation import design_search

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            design = design_search(a_hat, b_hat, budget, **search)
        except ValueError as exc:  # stats' validators of the range, budget and grid: the user's options
            raise UsageError(str(exc)) from None
    return PerturbationPlan(design=design, warnings=tuple(str(w.message) for w in caught), pilot_range=pilot)


#: Replicates per variant tried by :func:`plan_replicates`, in order (the first with enough power wins).
REPLICATE_GRID = (2, 5, 10, 20, 50, 100, 200, 400, 800)
#: Null-variant counts tried besides the study's own.
NULL_VARIANT_OPTIONS = (8, 16)


@dataclass(frozen=True)
class ReplicatePlan:
    """Replicates per variant (and null variants) that give the default test its power.

    ``replicates_per_variant`` / ``calls`` are None when no design on :data:`REPLICATE_GRID` reaches
    the target.  ``calls`` counts every tested item once: (null variants + tested variants) x
    replicates per item.  ``spread`` names the null ranges the power is computed over: ``"per item"``
    (each item's own range, :func:`benchcert.stats.perturbation.spread.item_ranges`; ``power`` is the
    average over the items) or ``"benchmark"`` (one range as wide as the benchmark-level rates' spread,
    used only when no item's spread can be estimated: one replicate per variant).  ``power_now`` is
    the power the same computation gives the current design (its null variants, its median replicate
    count).
    """

    model: str
    variant: str
    pilot_rates: tuple[float, ...]
    a_hat: float | None                 # the benchmark-level range (None: per-item ranges were used)
    b_hat: float | None
    detect: float
    target_power: float
    alpha: float
    n_items: int
    replicates_per_variant: int | None
    null_variants: int
    calls: int | None
    power: float | None
    method: str = "calibrated"
    spread: str = "per item"
    median_item_width: float | None = None
    n_items_spread: int = 0
    replicates_now: int | None = None
    power_now: float | None = None

    def as_dict(self) -> dict:
        from dataclasses import asdict

        out = asdict(self)
        out["pilot_rates"] = list(self.pilot_rates)
        return out

    def _spread_text(self) -> str:
        if self.spread == "per item":
            return (f"each item's null range (the items' root-mean-square spread {self.median_item_width:.3g}, "
                    f"from {self.n_items_spread} items, around each item's own rate)")
        return (f"the benchmark-level null range [{self.a_hat:.3g}, {self.b_hat:.3g}] (items' own spreads cannot "
                "be estimated with one replicate per variant; where they are wider, the power is lower)")

    def sentence(self) -> str:
        now = ("" if self.power_now is None else
               f"; the current design ({self.replicates_now} replicates) has power {self.power_now:.2f}")
        if self.replicates_per_variant is None:
            return (f"plan: more than {REPLICATE_GRID[-1]} replicates per variant would be needed for power "
                    f"{self.target_power:g} against a change of {self.detect:g} beyond {self._spread_text()}{now}")
        return (f"plan: {self.replicates_per_variant} replicates per variant with {self.null_variants} null variants "
                f"give power {self.power:.2f} to detect a change of {self.detect:g} beyond {self._spread_text()}; "
                f"cost {self.calls:,} calls{now}")


def _noise_free_power(m: int, gap: float, alpha: float, n: int = 400) -> float:
    """P((1 + c) Y - c X < 1 + gap) for X, Y the min and max of m Unif(0, 1): the calibrated test's
    power with the rates observed without noise, the tested rate ``gap`` range-widths beyond the
    range (midpoint rule on the joint density m (m - 1) (y - x)^(m - 2) of min and max)."""
    import numpy as np

    values, weights = _noise_free_table(int(m), float(alpha), int(n))
    return float(weights[np.searchsorted(values, 1.0 + gap, side="left")])


@lru_cache(maxsize=64)
def _noise_free_table(m: int, alpha: float, n: int):
    """(sorted values of (1 + c) y - c x on the grid, their cumulative weights from 0)."""
    import numpy as np

    c = alpha ** (-1.0 / (m - 1)) - 1.0
    g = (np.arange(n) + 0.5) / n
    x, y = np.meshgrid(g, g, indexing="ij")
    dens = np.where(y > x, m * (m - 1) * np.clip(y - x, 0.0, None) ** (m - 2), 0.0).ravel() / n**2
    d = ((1.0 + c) * y - c * x).ravel()
    order = np.argsort(d, kind="stable")
    return d[order], np.r_[0.0, np.cumsum(dens[order])]


def _ceiling(m, widths, detect, alpha) -> float:
    """The average noise-free power over the items' widths: no replicate count gives more."""
    import numpy as np

    w = np.asarray(widths, dtype=float)
    pos = w[w > 1e-9]
    ratios = np.round(detect / pos, 2)
    vals = {q: _noise_free_power(m, float(q), alpha) for q in np.unique(ratios)}
    return float((np.sum([vals[q] for q in ratios]) + (w.size - pos.size)) / max(w.size, 1))


def plan_replicates(pilot_rates, *, m_now: int, n_items: int, n_tested: int = 1, detect: float = 0.1,
                    target_power: float = 0.8, alpha: float = 0.05, model: str = "", variant: str = "",
                    item_counts=None, item_replicates=None, r_now: int | None = None) -> ReplicatePlan:
    r"""Smallest replicates per variant giving the calibrated test power ``target_power`` (exact).

    With ``item_counts`` / ``item_replicates`` (per item, its null variants' successes and
    replicates) each item's own null range is estimated
    (:func:`benchcert.stats.perturbation.spread.item_ranges`, moments without the binomial noise)
    and the power is the calibrated test's exact power averaged over those ranges
    (:func:`benchcert.stats.perturbation.spread.average_power`), the tested rate ``detect`` beyond
    each item's range.  Without them, or when no item has two null variants with two replicates,
    the pilot is the null variants' benchmark-level rates: Algorithm B's bias-corrected range gives
    one width, centred at 1/2 (where binomial noise is largest), and the plan says so (the
    benchmark-level spread averages the items' spreads away: it overstates the power wherever the
    items' own ranges are wider).  The study's own number of null variants, 8 and 16 are tried,
    each with the smallest replicate count on :data:`REPLICATE_GRID` that reaches the target
    (bisection: power rises with r); the cheapest design in calls wins.  A number of null variants
    whose noise-free power (:func:`_noise_free_power`, averaged over the items) misses the target
    is skipped: replicates only add noise to that.
    """
    from benchcert.stats.perturbation import estimate_range
    from benchcert.stats.perturbation.spread import average_power, item_ranges

    rates = [float(x) for x in pilot_rates]
    ranges = item_ranges(item_counts, item_replicates) if item_counts is not None else None
    if ranges is not None and ranges.n_estimable > 0:
        a_s, b_s, widths, spread = ranges.a, ranges.b, ranges.width, "per item"
    else:
        est = estimate_range(rates) if len(rates) >= 2 else None
        width = 0.0 if est is None else est.b_hat - est.a_hat
        width = min(width, 1.0 - 2.0 * detect) if detect < 0.5 else 0.0
        a_s, b_s, widths, spread = [0.5 - width / 2.0], [0.5 + width / 2.0], [width], "benchmark"

    def power(m, r):
        return average_power(a_s, b_s, m=m, r=r, detect=detect, alpha=alpha)

    best = None
    for m in sorted({max(2, m_now), *NULL_VARIANT_OPTIONS}, reverse=True):
        if _ceiling(m, widths, detect, alpha) < target_power:
            continue                    # not even infinitely many replicates would reach the target
        found = _smallest_r(lambda r, m=m: power(m, r), target_power)
        if found is not None:
            r, pw = found
            calls = n_items * (m + n_tested) * r
            if best is None or calls < best[2]:
                best = (r, m, calls, pw)
    r, m, calls, pw = best if best is not None else (None, max(2, m_now), None, None)
    now = power(max(2, m_now), int(r_now)) if r_now and r_now >= 1 else None
    return ReplicatePlan(model=model, variant=variant, pilot_rates=tuple(rates),
                         a_hat=float(np.min(a_s)) if spread == "benchmark" else None,
                         b_hat=float(np.max(b_s)) if spread == "benchmark" else None, detect=detect,
                         target_power=target_power, alpha=alpha, n_items=n_items, replicates_per_variant=r,
                         null_variants=m, calls=calls, power=pw, spread=spread,
                         median_item_width=float(np.median(widths)), n_items_spread=len(widths),
                         replicates_now=None if now is None else int(r_now), power_now=now)


def _smallest_r(power, target) -> tuple[int, float] | None:
    """The smallest r on :data:`REPLICATE_GRID` with power(r) >= target, by bisection (None: none).

    Power rises with r, so the largest counts (the costliest to calibrate) are only tried when the
    smaller ones fall short.
    """
    lo, hi, best = -1, len(REPLICATE_GRID), None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        pw = power(REPLICATE_GRID[mid])
        if pw >= target:
            hi, best = mid, pw
        else:
            lo = mid
    return None if best is None else (REPLICATE_GRID[hi], best)


def plans_for_audit(audit, *, detect: float = 0.1, target_power: float = 0.8, only_no_power: bool = False):
    """One :class:`ReplicatePlan` per model and tested variant of a perturbation audit, over the
    items' own null ranges (their null variants' counts in ``audit.counts``)."""
    import polars as pl

    from benchcert.tasks.perturbation.tables import design_tables

    with design_tables():
        return _plans(audit, detect, target_power, only_no_power, pl)


def _plans(audit, detect, target_power, only_no_power, pl):
    rates = audit.null_rates
    counts = audit.counts
    out = []
    for row in audit.variants.iter_rows(named=True):
        if only_no_power and not row["no_power"]:
            continue
        nulls = audit.design.null_for(row["variant"])
        pilot = rates.filter((rates["model"] == row["model"]) & rates["variant"].is_in(list(nulls)))["accuracy"]
        part = (counts.filter((pl.col("model") == row["model"]) & pl.col("variant").is_in(list(nulls)))
                .group_by("item_id").agg("k", "r"))
        r_now = int(np.median(part["r"].explode().to_numpy())) if part.height else None
        out.append(plan_replicates(pilot.to_list(), m_now=len(nulls), n_items=int(row["n_items"]), n_tested=1,
                                   detect=detect, target_power=target_power, alpha=audit.alpha,
                                   model=row["model"], variant=row["variant"], item_counts=part["k"].to_list(),
                                   item_replicates=part["r"].to_list(), r_now=r_now))
    return out
