"""Monte-Carlo simulator of the realistic test (binomial counts), used only by the tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchcert.stats.perturbation._checks import (_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES, _choice, _int,
                                                   _range_iv, _real)
from benchcert.stats.perturbation.statistic import _close_limit


@dataclass(frozen=True)
class SimulationResult:
    """Monte-Carlo rejection rate of the realistic test (binomial counts, never Bernoulli draws)."""

    rate: float
    rejections: int
    n_sim: int
    eps: float
    m: int
    r: int
    a: float
    b: float
    p_prime: str
    method: str
    assumptions: tuple[str, ...]


def simulate_rejection(eps, *, m, r, a, b, p_prime, n_sim, rng, chunk=None) -> SimulationResult:
    r"""Monte-Carlo rejection rate of :math:`T_{m,r} > \epsilon` under Assumption 2.

    Parameters
    ----------
    eps : float
    m, r : int, keyword-only
    a, b : float, keyword-only
        True null range: :math:`p_j \sim \mathrm{Unif}[a, b]` i.i.d., fresh each replication.
    p_prime : float or {"null", "alternative"}, keyword-only
        A fixed p'; ``"null"`` draws :math:`p' \sim \mathrm{Unif}[a, b]` (the paper's Figure 3
        size curve); ``"alternative"`` draws :math:`p' \sim \mathrm{Unif}((0, a) \cup (b, 1))`
        (Assumption 3, the Figure 3 average-power curve).
    n_sim : int, keyword-only
    rng : numpy.random.Generator, keyword-only

    Notes
    -----
    Each variant's r replicates are simulated as one Binomial(r, p) count - the sufficient
    statistic - never as r Bernoulli draws.  The paper's Figure 3 repeats 100 null draws for
    each of 1000 p'; drawing a fresh p' per replication estimates the same average.
    """
    eps = _real(eps, "eps", lo=0.0)
    m = _int(m, "m", lo=1)
    r = _int(r, "r", lo=1)
    a, b = _range_iv(a, b)
    n_sim = _int(n_sim, "n_sim", lo=1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    if isinstance(p_prime, str):
        _choice(p_prime, "p_prime", ("null", "alternative"))
        label = p_prime
    else:
        label = f"{_real(p_prime, 'p_prime', lo=0.0, hi=1.0):g}"
    chunk = chunk or max(1, 4_000_000 // (m + 1))
    rejections = 0
    done = 0
    while done < n_sim:
        n = min(chunk, n_sim - done)
        if p_prime == "null":
            pp = rng.uniform(a, b, n)
        elif p_prime == "alternative":
            u = rng.uniform(0.0, a + 1.0 - b, n)
            pp = np.where(u < a, u, u - a + b)
        else:
            pp = np.full(n, float(p_prime))
        kt = rng.binomial(r, pp)
        k = rng.binomial(r, rng.uniform(a, b, (n, m)))
        # T > eps iff every |K_j - K'| r > floor(eps r r) (integers, as the exact calibration decides)
        limit = _close_limit(eps, r, r)
        rejections += int(np.sum(np.min(np.abs(k - kt[:, None]) * r, axis=1) > limit))
        done += n
    return SimulationResult(rate=rejections / n_sim, rejections=rejections, n_sim=n_sim, eps=eps, m=m, r=r, a=a,
                            b=b, p_prime=label, method="monte_carlo_binomial_counts",
                            assumptions=(_ASSUMPTION_1, _ASSUMPTION_2, _REPLICATES))


def simulate_item_tests(*, m, r, a, b, p_prime, n_sim, rng, alpha=0.05, method="interval", r_test=None,
                        null_probs=None):
    """Rejection count of the per-item test under p_j ~ Unif[a, b] (or fixed ``null_probs``) and a fixed p'.

    Counts are binomial draws; ``"interval"`` uses the vectorised decision of the real test
    (:func:`reject_many`), the plug-in methods loop over :func:`composite_test`.
    """
    import warnings

    from benchcert.stats.degenerate import DegenerateDataWarning
    from benchcert.stats.perturbation import composite_test
    from benchcert.stats.perturbation.item_test import reject_many

    r_test = r if r_test is None else r_test
    probs = (rng.uniform(a, b, (n_sim, m)) if null_probs is None
             else np.broadcast_to(np.asarray(null_probs, dtype=float), (n_sim, m)))
    k = rng.binomial(r, probs)
    kt = rng.binomial(r_test, p_prime, n_sim)
    if method == "interval":
        return int(np.sum(reject_many(k, r, kt, r_test, alpha=alpha)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return int(sum(composite_test(k[i], r, int(kt[i]), r_test, alpha=alpha, method=method).reject
                       for i in range(n_sim)))


def power_table(*, ranges=((0.4, 0.6), (0.45, 0.55)), ms=(2, 3, 5, 8), rs=(10, 50, 100, 200, 400, 2000),
                n_widened=20_000, n_plugin=150, alpha=0.05, plugin_ranges=((0.4, 0.6),), seed=2026):
    """Size (tested rate at a) and power (tested rate a - 0.75 (b - a) and a - 1.5 (b - a)) of the
    widened-range test and of the plug-in exact test over the issue #13 grid: a list of dicts.
    The plug-in test costs up to 0.4 s per item at r = 2000, hence far fewer replications."""
    rows = []
    for (a, b) in ranges:
        for m in ms:
            for r in rs:
                w = b - a
                row = {"a": a, "b": b, "m": m, "r": r}
                for name, pp in (("size", a), ("power_075", a - 0.75 * w), ("power_150", a - 1.5 * w)):
                    rng = np.random.default_rng([seed, m, r, int(a * 100), len(name)])
                    row[f"widened_{name}"] = simulate_item_tests(m=m, r=r, a=a, b=b, p_prime=pp, n_sim=n_widened,
                                                                 rng=rng, alpha=alpha) / n_widened
                    if (a, b) in plugin_ranges and n_plugin:
                        row[f"plugin_{name}"] = simulate_item_tests(m=m, r=r, a=a, b=b, p_prime=pp, n_sim=n_plugin,
                                                                    rng=rng, alpha=alpha,
                                                                    method="plugin_exact") / n_plugin
                rows.append(row)
    return rows
