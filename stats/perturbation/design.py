"""Algorithm C (the budgeted design search, Theorems 2 and 4 or the exact calibration) and the minimal budget."""

from __future__ import annotations

import math

import numpy as np

from ..bisection import smallest_passing
from ..degenerate import warn_degenerate
from ..validation import check_alpha, check_unit_interval
from ._checks import (_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _MAX_EXACT_R, _PLUG_IN, _REPLICATES, EPS_MAX_RULES,
                      METHODS, _choice, _int, _range_iv, _real)
from .bounds import _lemma2, _power_bound, _size_bound
from .exact import _exact_power_core, _exact_size_core
from .results import BudgetResult, PerturbationDesign


def _eps_max(a, b, rule):
    w = b - a
    c = min(a, w, 1.0 - b)
    if rule == "algorithm_c":
        return c, "min(a_hat, b_hat - a_hat, 1 - b_hat) (Algorithm C, line 3)"
    if rule == "width":
        return w, "b_hat - a_hat (the paper's section 5.2 experiment)"
    if c > 0:
        return c, "min(a_hat, b_hat - a_hat, 1 - b_hat) (Algorithm C, line 3)"
    edge = "a_hat = 0" if a <= 0 else "b_hat = 1"
    return w, (f"b_hat - a_hat, because {edge} makes Algorithm C's min(a_hat, b_hat - a_hat, 1 - b_hat) zero "
               "(the paper's section 5.2 experiment used the width then; Theorem 2 holds for any "
               "eps <= b - a)")


def _eps_grid(eps_max, step):
    n = int(math.floor(eps_max / step + 1e-9))
    grid = step * np.arange(1, n + 1)
    return grid[grid < eps_max - 1e-12]


def _design_iv(a_hat, b_hat, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method):
    a, b = _range_iv(a_hat, b_hat, ("a_hat", "b_hat"))
    budget = _int(budget, "budget", lo=1)
    alpha = check_alpha(alpha)
    pilot_m = _int(pilot_m, "pilot_m", lo=0)
    pilot_r = _int(pilot_r, "pilot_r", lo=0)
    eps_step = check_unit_interval("eps_step", eps_step, closed="right")
    eps_max_rule = _choice(eps_max_rule, "eps_max_rule", EPS_MAX_RULES)
    method = _choice(method, "method", METHODS)
    if pilot_m * pilot_r > budget:
        raise ValueError(f"budget must exceed the pilot cost pilot_m * pilot_r = {pilot_m * pilot_r}; got {budget}")
    return a, b, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method


_DESIGN_NOTES = {
    "union": ("validity: Theorem 2 bound (1 - (eps - s_r)/w)^m + 2m/sqrt(r) <= alpha (not Algorithm C line 8's "
              "misprinted 2m/r)",
              "objective: Theorem 4 average-power bound with 2/(1 - w) (not section 3.1's 2/(b - a))",
              "m = max(ceil(|log alpha| / |log(1 - eps/w)|), m~) (Lemma 2), r = floor((nu - m~ r~) / m)"),
    "exact": ("validity: exact size under Assumption 2 (uniform-binomial mixture) <= alpha, beyond the paper",
              "objective: exact average power under Assumptions 2 and 3",
              "m = the smallest m >= max(Lemma 2's m, m~) whose exact size is <= alpha; r = floor((nu - m~ r~) / m)"),
}


def design_search(a_hat, b_hat, budget, *, alpha, pilot_m=0, pilot_r=0, eps_step=0.001,
                  eps_max_rule="auto", method="union") -> PerturbationDesign:
    r"""Algorithm C: choose (eps, m, r) under a sampling budget nu.

    Parameters
    ----------
    a_hat, b_hat : float
        Plug-in null range (from :func:`estimate_range` on a pilot, or given).
    budget : int
        Total budget :math:`\nu` in model calls, pilot included.
    alpha : float, keyword-only
    pilot_m, pilot_r : int, keyword-only
        Pilot size :math:`\tilde m, \tilde r`; the pilot cost is subtracted from nu and m is at
        least :math:`\tilde m` (Algorithm C lines 2 and 6).
    eps_step : float, keyword-only
        Grid step :math:`\eta_\epsilon`; thresholds :math:`\eta, 2\eta, \dots < \epsilon_{max}`.
    eps_max_rule : {"auto", "algorithm_c", "width"}, keyword-only
        ``"algorithm_c"``: :math:`\min(\hat a, \hat b - \hat a, 1 - \hat b)` (line 3);
        ``"width"``: :math:`\hat b - \hat a` (what the paper's experiment used when
        :math:`\hat b = 1`); ``"auto"`` (default): Algorithm C's rule unless it is zero, then the
        width.  The rule applied is stated in the result.
    method : {"union", "exact"}, keyword-only
        ``"union"``: the paper's Theorem 2 constraint and Theorem 4 objective.  ``"exact"``: the
        exact size and exact average power under Assumption 2 (slower; use a coarser eps_step).

    Returns
    -------
    PerturbationDesign
        When no triple is valid, ``min_budget`` gives the smallest nu that would admit one.

    Notes
    -----
    With :math:`w = \hat b - \hat a`, :math:`s_r = \sqrt{\log r / r}`, for each eps on the grid:

    .. math::

        m = \max\left(\left\lceil \frac{|\log\alpha|}{|\log(1 - \epsilon/w)|}\right\rceil,
                      \tilde m\right),\quad r = \left\lfloor \frac{\nu - \tilde m\tilde r}{m}
                      \right\rfloor,

    valid iff :math:`(1 - (\epsilon - s_r)/w)^m + 2m/\sqrt r \le \alpha` (Theorem 2), and the
    valid triple maximising
    :math:`H = \frac{2}{1-w}\{(1 - (\epsilon + s_r)/w)^m - 1\}(\epsilon + s_r) + 1 - 2m/\sqrt r`
    (Theorem 4) is chosen.  Errata: Algorithm C line 8 prints 2m/r, section 3.1
    misplaces a parenthesis in the constraint, and line 10 / section 3.1 disagree on the factor
    2/(1 - w) vs 2/(b - a); Theorems 2 and 4 are what is proven and are implemented.  The
    paper's worked example (0.898, 1), nu = 5e6, alpha = 0.1 -> (26, 192307, 0.085) violates
    Theorem 2 and is not reproduced.

    Degenerate ranges: w = 0 (all pilot rates equal) or w = 1 admit no design (warned).
    """
    a, b, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method = _design_iv(
        a_hat, b_hat, budget, alpha, pilot_m, pilot_r, eps_step, eps_max_rule, method)
    w = b - a
    pilot_cost = pilot_m * pilot_r
    eps_max, rule = _eps_max(a, b, eps_max_rule)
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _ASSUMPTION_3, _REPLICATES, _PLUG_IN)
    notes = list(_DESIGN_NOTES[method])
    common = dict(alpha=alpha, budget=budget, pilot_m=pilot_m, pilot_r=pilot_r, pilot_cost=pilot_cost,
                  a_hat=a, b_hat=b, width=w, eps_max=eps_max, eps_max_rule=rule, eps_step=eps_step,
                  method="union_bound (Theorems 2 and 4)" if method == "union" else "exact_mixture (beyond the paper)",
                  assumptions=assumptions)
    if w <= 0 or w >= 1:
        warn_degenerate(f"design_search: the null range has width {w:g}; "
                        + ("all pilot rates are equal, so Lemma 2 needs infinitely many variants"
                           if w <= 0 else "[0, 1] leaves no alternative to detect"))
        return PerturbationDesign(valid=False, eps=None, m=None, r=None, size_bound=None, power_bound=None,
                                  exact_size=None, exact_power=None, objective=None, n_candidates=0, n_valid=0,
                                  min_budget=None, notes=tuple(notes + ["degenerate null range: no design"]),
                                  **common)
    grid = _eps_grid(eps_max, eps_step)
    spend = budget - pilot_cost
    best = None
    n_valid = 0
    if grid.size:
        ms = np.maximum(_lemma2(grid, w, alpha), pilot_m)
        rs = spend // ms
        if method == "union":
            ok = rs >= 1
            size = np.where(ok, _size_bound(grid, ms, np.maximum(rs, 1), w), np.inf)
            power = np.where(ok, _power_bound(grid, ms, np.maximum(rs, 1), w), -np.inf)
            valid = ok & (size <= alpha)
            n_valid = int(valid.sum())
            if n_valid:
                i = int(np.flatnonzero(valid)[np.argmax(power[valid])])
                best = dict(eps=float(grid[i]), m=int(ms[i]), r=int(rs[i]), objective=float(power[i]),
                            exact_size=None, exact_power=None)
        else:
            best, n_valid = _exact_search(grid, ms, spend, a, b, alpha)
            notes.append(f"exact: {n_valid} valid of the thresholds evaluated (a coarse pass of at most "
                         f"{_EXACT_COARSE} over the grid, then finer passes around the best)")
    if best is None:
        mb = minimal_budget(a, b, alpha=alpha, pilot_m=pilot_m, pilot_r=pilot_r, eps_step=eps_step,
                            eps_max_rule=eps_max_rule, method=method)
        notes.append("no valid (eps, m, r) under this budget"
                     + (f"; the smallest budget that gives one is {mb.budget}" if mb.budget else
                        "; no budget gives one on this eps grid"))
        return PerturbationDesign(valid=False, eps=None, m=None, r=None, size_bound=None, power_bound=None,
                                  exact_size=None, exact_power=None, objective=None, n_candidates=int(grid.size),
                                  n_valid=0, min_budget=mb.budget, notes=tuple(notes), **common)
    sb = float(_size_bound(best["eps"], best["m"], best["r"], w))
    pb = float(_power_bound(best["eps"], best["m"], best["r"], w))
    return PerturbationDesign(valid=True, eps=best["eps"], m=best["m"], r=best["r"], size_bound=sb,
                              power_bound=pb, exact_size=best["exact_size"], exact_power=best["exact_power"],
                              objective=best["objective"], n_candidates=int(grid.size), n_valid=n_valid,
                              min_budget=None, notes=tuple(notes), **common)


_EXACT_COARSE = 12


def _exact_search(grid, ms, spend, a, b, alpha):
    """(best, n_valid): the exact-power argmax over the eps grid, coarse to fine.

    Each threshold costs an exact size and power computation; instead of all of them, at most
    _EXACT_COARSE evenly spaced grid points, then the same number between the best one's neighbours,
    until neighbours are adjacent (the average power is a smooth, single-peaked function of eps on
    the grids met here; a second peak narrower than the coarse spacing could be missed).
    """
    seen: dict[int, dict | None] = {}

    def run(i):
        if i not in seen:
            found = _exact_smallest_m(float(grid[i]), int(ms[i]), spend, a, b, alpha)
            if found is None:
                seen[i] = None
            else:
                m, r, size = found
                pw = _exact_power_core(float(grid[i]), m, r, a, b)
                seen[i] = dict(eps=float(grid[i]), m=m, r=r, objective=pw, exact_size=size, exact_power=pw)
        return seen[i]

    lo, hi = 0, grid.size - 1
    while True:
        idx = np.unique(np.linspace(lo, hi, min(_EXACT_COARSE, hi - lo + 1)).round().astype(int))
        for i in idx:
            run(int(i))
        valid = {i: v for i, v in seen.items() if v is not None}
        if not valid:
            return None, 0
        top = max(valid, key=lambda i: (valid[i]["objective"], -i))
        pos = int(np.searchsorted(idx, top))
        if pos >= idx.size or idx[pos] != top:
            break
        new_lo = int(idx[pos - 1]) if pos > 0 else top
        new_hi = int(idx[pos + 1]) if pos + 1 < idx.size else top
        if new_hi - new_lo <= 2:
            for i in range(new_lo, new_hi + 1):
                run(i)
            break
        lo, hi = new_lo, new_hi
    valid = {i: v for i, v in seen.items() if v is not None}
    top = max(valid, key=lambda i: (valid[i]["objective"], -i))
    return valid[top], len(valid)


def _exact_smallest_m(eps, m0, spend, a, b, alpha, extra=6):
    """Smallest m in [m0, m0 + extra] with exact size <= alpha at r = spend // m (None if none)."""
    for m in range(m0, m0 + extra + 1):
        r = spend // m
        if r < 1:
            return None
        if r > _MAX_EXACT_R:
            continue
        size = _exact_size_core(eps, np.full(m, r), r, a, b)[0]
        if size <= alpha:
            return m, r, size
    return None


def _ideal_average_power(eps, m, a, b):
    """Lemma 3 averaged over p' ~ Unif((0, a) U (b, 1)): the r -> infinity limit of the average power."""
    w = b - a
    total = 0.0
    for side in (a, 1.0 - b):
        near = min(eps, side)
        u_hi = max(0.0, (w + near - eps) / w)
        u_lo = max(0.0, (w - eps) / w)
        total += (side - near) + w / (m + 1) * (u_hi ** (m + 1) - u_lo ** (m + 1))
    return total / (1.0 - w)


def _min_r(valid, r_cap):
    """Smallest r in [1, r_cap] with valid(r), assuming validity is monotone in r (None if none)."""
    if valid(1):
        return 1
    if r_cap < 2:
        return None
    hi = 2
    while not valid(hi):
        if hi >= r_cap:
            return None
        hi = min(hi * 2, r_cap)
    return smallest_passing(valid, hi // 2, hi)


def minimal_budget(a_hat, b_hat, *, alpha, power=None, eps=None, pilot_m=0, pilot_r=0, eps_step=0.001,
                   eps_max_rule="auto", method="union", m_max=None) -> BudgetResult:
    r"""Smallest budget :math:`\nu = m r + \tilde m \tilde r` that admits a valid design.

    Parameters
    ----------
    a_hat, b_hat : float
    alpha : float, keyword-only
    power : float, optional, keyword-only
        Also require a guaranteed average power of at least this much: Theorem 4's bound H for
        ``"union"``, the exact average power (:func:`exact_power`) for ``"exact"``.  Without it
        any valid design counts - including useless ones (e.g. r = 1 with the exact size, whose
        size and power are both near 0), which is what Algorithm C's "smallest budget that gives
        a valid triple" means.
    eps : float, optional, keyword-only
        Fix the threshold and let m vary from Lemma 2's m upward.  Without it, Algorithm C's
        rules apply: eps on the grid below eps_max, m from Lemma 2 (at least the pilot's m~) for
        ``"union"``, and for ``"exact"`` the first of Lemma 2's m and the next three whose exact
        size fits (the exact grid is thinned to at most 25 thresholds).
    pilot_m, pilot_r, eps_step, eps_max_rule : keyword-only
        As in :func:`design_search`.
    method : {"union", "exact"}, keyword-only
    m_max : int, optional, keyword-only
        Largest m tried when ``eps`` is given (default 4 * Lemma 2's m + 20 for ``"union"``,
        Lemma 2's m + 3 for ``"exact"``).

    Returns
    -------
    BudgetResult

    Notes
    -----
    For fixed (eps, m) the Theorem 2 bound falls and the Theorem 4 bound rises with r (r >= 3),
    so the smallest adequate r is found by doubling and bisection.  The exact size and power are
    not strictly monotone in r (lattice effects); the bisection only ever returns an r at which
    both requirements were computed to hold, so the returned design is valid, though a slightly
    smaller r could exist.  Exact r is capped at 2e7.
    """
    a, b = _range_iv(a_hat, b_hat, ("a_hat", "b_hat"))
    alpha = check_alpha(alpha)
    method = _choice(method, "method", METHODS)
    power = None if power is None else check_unit_interval("power", power)
    pilot_m = _int(pilot_m, "pilot_m", lo=0)
    pilot_r = _int(pilot_r, "pilot_r", lo=0)
    eps_step = check_unit_interval("eps_step", eps_step, closed="right")
    eps_max_rule = _choice(eps_max_rule, "eps_max_rule", EPS_MAX_RULES)
    m_max = None if m_max is None else _int(m_max, "m_max", lo=1)
    w = b - a
    if eps is not None:
        eps = _real(eps, "eps", lo=0.0, lo_open=True)
        if w > 0 and eps >= w:
            raise ValueError(f"eps must be < b_hat - a_hat = {w:g}; got {eps!r}")
    pilot_cost = pilot_m * pilot_r
    assumptions = (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES) + ((_ASSUMPTION_3,) if power else ())
    name = "union_bound (Theorems 2 and 4)" if method == "union" else "exact_mixture (beyond the paper)"
    target = () if power is None else (f"guaranteed average power >= {power:g}",)
    if w <= 0 or w >= 1:
        warn_degenerate(f"minimal_budget: the null range has width {w:g}; no design exists")
        return BudgetResult(budget=None, eps=None, m=None, r=None, size=None, power=None, alpha=alpha, a=a, b=b,
                            pilot_cost=pilot_cost, method=name, assumptions=assumptions,
                            notes=("degenerate null range",))
    r_cap = 10**15 if method == "union" else _MAX_EXACT_R

    def evaluate(e, m, r):
        if method == "union":
            return float(_size_bound(e, m, r, w)), float(_power_bound(e, m, r, w))
        size = _exact_size_core(e, np.full(m, r), r, a, b)[0]
        if size > alpha or power is None:
            return size, None
        return size, _exact_power_core(e, m, r, a, b)

    def adequate(e, m, r):
        size, pw = evaluate(e, m, r)
        return size <= alpha and (power is None or pw >= power)

    best = None
    ceiling = None
    if method == "exact":
        # Theorem 2 and 4 bound the exact size and power, so the union method's answer is adequate
        # for the exact criteria too: no exact design needs more, which caps the (costly) search.
        union = minimal_budget(a, b, alpha=alpha, power=power, eps=eps, pilot_m=pilot_m, pilot_r=pilot_r,
                               eps_step=eps_step, eps_max_rule=eps_max_rule, method="union", m_max=m_max)
        if union.budget is not None:
            ceiling = (union.budget - pilot_cost, union.eps, union.m, union.r)

    def consider(e, m):
        nonlocal best
        if method == "exact" and power is not None and _ideal_average_power(e, m, a, b) < power:
            # even r = infinity (the ideal test, Lemma 3) would not reach the target
            return None
        # No r above what the best design so far costs can win: capping prunes most of the search.
        bound = best if best is not None else ceiling
        cap = r_cap if bound is None else min(r_cap, (bound[0] - 1) // m)
        if cap < 1:
            return None
        r = _min_r(lambda rr: adequate(e, m, rr), cap)
        if r is not None and (best is None or m * r < best[0]):
            best = (m * r, float(e), m, r)
        return r

    if eps is not None:
        m0 = max(int(_lemma2(eps, w, alpha)), pilot_m, 1)
        top = m_max if m_max is not None else (4 * m0 + 20 if method == "union" else m0 + 3)
        since_best = 0
        for m in range(m0, top + 1):
            before = best
            consider(eps, m)
            since_best = 0 if best is not before else since_best + 1
            if since_best >= 5:
                break
        notes = (f"eps fixed at {eps:g}; m searched from Lemma 2's {m0} to at most {top}",) + target
    else:
        eps_max, rule = _eps_max(a, b, eps_max_rule)
        grid = _eps_grid(eps_max, eps_step)
        if method == "exact" and grid.size > 25:
            grid = grid[np.unique(np.linspace(0, grid.size - 1, 25).round().astype(int))]
        # Large thresholds need few variants and are cheap to evaluate: visit them first so the
        # cost cap prunes the expensive small-eps end.
        for e in grid[::-1]:
            m0 = max(int(_lemma2(e, w, alpha)), pilot_m, 1)
            for m in ([m0] if method == "union" else range(m0, m0 + 4)):
                consider(float(e), m)
        notes = (f"Algorithm C rules; eps_max = {eps_max:g} ({rule})",) + target
    if best is None and ceiling is not None and ceiling[3] <= _MAX_EXACT_R:
        best = ceiling
        notes = notes + ("no cheaper exact design than the union-bound one",)
    if best is None:
        return BudgetResult(budget=None, eps=None, m=None, r=None, size=None, power=None, alpha=alpha, a=a, b=b,
                            pilot_cost=pilot_cost, method=name, assumptions=assumptions,
                            notes=notes + ("no adequate design found",))
    cost, e, m, r = best
    size, pw = evaluate(e, m, r)
    if method == "exact" and pw is None:
        pw = _exact_power_core(e, m, r, a, b)
    return BudgetResult(budget=int(cost + pilot_cost), eps=e, m=m, r=r, size=size, power=pw, alpha=alpha,
                        a=a, b=b, pilot_cost=pilot_cost, method=name, assumptions=assumptions, notes=notes)
