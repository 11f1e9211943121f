"""Plan a prompt-perturbation study (``benchcert plan perturbation``): the service around
:func:`benchcert.stats.perturbation.design_search` (Algorithm C of the composite-null paper).

The null range comes from the user (a_hat, b_hat) or from pilot null variants' response rates
(:func:`pilot_range`, Algorithm B, bias-corrected); the statistics' warnings are kept with the
plan, to be shown beside it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass


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
    ValueError
        Rates that cannot be used (stats' validator names the problem).
    """
    from benchcert.stats.perturbation import estimate_range

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimate_range(rates)
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
    ValueError
        Options the design search cannot use.
    """
    from benchcert.stats.perturbation import design_search

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        design = design_search(a_hat, b_hat, budget, **search)
    return PerturbationPlan(design=design, warnings=tuple(str(w.message) for w in caught), pilot_range=pilot)
