"""Plan a prompt-perturbation study (``benchcert plan perturbation``): the service around
:func:`benchcert.stats.perturbation.design_search` (Algorithm C of the composite-null paper).

The null range comes from the user (a_hat, b_hat) or from pilot null variants' response rates
(:func:`pilot_range`, Algorithm B, bias-corrected); the statistics' warnings are kept with the
plan, to be shown beside it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

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
    replicates per item.
    """

    model: str
    variant: str
    pilot_rates: tuple[float, ...]
    a_hat: float
    b_hat: float
    detect: float
    target_power: float
    alpha: float
    n_items: int
    replicates_per_variant: int | None
    null_variants: int
    calls: int | None
    power: float | None
    method: str = "calibrated"

    def as_dict(self) -> dict:
        from dataclasses import asdict

        out = asdict(self)
        out["pilot_rates"] = list(self.pilot_rates)
        return out

    def sentence(self) -> str:
        if self.replicates_per_variant is None:
            return (f"plan: more than {REPLICATE_GRID[-1]} replicates per variant would be needed for power "
                    f"{self.target_power:g} against a change of {self.detect:g} beyond the null range")
        return (f"plan: {self.replicates_per_variant} replicates per variant with {self.null_variants} null variants "
                f"give power {self.power:.2f} to detect a change of {self.detect:g} beyond the null range "
                f"(pilot range [{self.a_hat:.3g}, {self.b_hat:.3g}]); cost {self.calls:,} calls")


def _noise_free_power(m: int, gap: float, alpha: float, n: int = 400) -> float:
    """P((1 + c) Y - c X < 1 + gap) for X, Y the min and max of m Unif(0, 1): the calibrated test's
    power with the rates observed without noise, the tested rate ``gap`` range-widths beyond the
    range (midpoint rule on the joint density m (m - 1) (y - x)^(m - 2) of min and max)."""
    import numpy as np

    c = alpha ** (-1.0 / (m - 1)) - 1.0
    g = (np.arange(n) + 0.5) / n
    x, y = np.meshgrid(g, g, indexing="ij")
    dens = np.where(y > x, m * (m - 1) * np.clip(y - x, 0.0, None) ** (m - 2), 0.0)
    return float(np.sum(dens * ((1.0 + c) * y - c * x < 1.0 + gap)) / n**2)


def plan_replicates(pilot_rates, *, m_now: int, n_items: int, n_tested: int = 1, detect: float = 0.1,
                    target_power: float = 0.8, alpha: float = 0.05, model: str = "", variant: str = "") -> ReplicatePlan:
    r"""Smallest replicates per variant giving the calibrated test power ``target_power`` (exact).

    The pilot is the null variants' observed rates (benchmark level): Algorithm B's bias-corrected
    range gives the width w of the null range.  Each item's null range is taken to have that width,
    centred at 1/2 (where binomial noise is largest: the conservative placement), and the tested
    rate to lie ``detect`` beyond its upper end; the power is
    :func:`benchcert.stats.perturbation.calibrated_power` (exact over null rates i.i.d.
    Unif[a, b]).  The study's own number of null variants, 8 and 16 are tried, each with the smallest
    replicate count on :data:`REPLICATE_GRID` that reaches the target; the cheapest design in calls
    wins.  A number of null variants whose noise-free power (:func:`_noise_free_power`) misses the
    target is skipped: replicates only add noise to that.
    """
    from benchcert.stats.perturbation import calibrated_power, estimate_range

    rates = [float(x) for x in pilot_rates]
    if len(rates) >= 2:
        est = estimate_range(rates)
        width = est.b_hat - est.a_hat
    else:
        width = 0.0
    width = min(width, 1.0 - 2.0 * detect) if detect < 0.5 else 0.0
    a, b = 0.5 - width / 2.0, 0.5 + width / 2.0
    best = None
    # most null variants first (most power per replicate); a design only counts if it is cheaper than the
    # best so far, so replicate counts that cost more are never calibrated
    for m in sorted({max(2, m_now), *NULL_VARIANT_OPTIONS}, reverse=True):
        if width > 0 and _noise_free_power(m, detect / width, alpha) < target_power:
            continue                    # not even infinitely many replicates would reach the target
        for r in REPLICATE_GRID:
            calls = n_items * (m + n_tested) * r
            if best is not None and calls >= best[2]:
                break
            pw = calibrated_power(min(b + detect, 1.0), m=m, r=r, a=a, b=b, alpha=alpha)
            if pw >= target_power:
                best = (r, m, calls, pw)
                break
    r, m, calls, pw = best if best is not None else (None, max(2, m_now), None, None)
    return ReplicatePlan(model=model, variant=variant, pilot_rates=tuple(rates), a_hat=a, b_hat=b, detect=detect,
                         target_power=target_power, alpha=alpha, n_items=n_items, replicates_per_variant=r,
                         null_variants=m, calls=calls, power=pw)


def plans_for_audit(audit, *, detect: float = 0.1, target_power: float = 0.8, only_no_power: bool = False):
    """One :class:`ReplicatePlan` per model and tested variant of a perturbation audit."""
    rates = audit.null_rates
    out = []
    for row in audit.variants.iter_rows(named=True):
        if only_no_power and not row["no_power"]:
            continue
        nulls = audit.design.null_for(row["variant"])
        pilot = rates.filter((rates["model"] == row["model"]) & rates["variant"].is_in(list(nulls)))["accuracy"]
        out.append(plan_replicates(pilot.to_list(), m_now=len(nulls), n_items=int(row["n_items"]), n_tested=1,
                                   detect=detect, target_power=target_power, alpha=audit.alpha,
                                   model=row["model"], variant=row["variant"]))
    return out
