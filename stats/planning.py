"""Evaluation-cost planning: how many items answer a question at a given accuracy (docs/methods.md, section 5;
Hardt, *Detecting differences*, sections 3.3-3.5; the exchangeable-bounds paper, Theorem 5.2).

Each planner returns a :class:`Plan` holding one :class:`PlanAnswer` per method, so users
see the distribution-free, finite-population and exact answers side by side, each with the
formula used and its cost as a fraction of a full run (n/N):

* :func:`plan_one_model` - items for +/- eps on one model's score;
* :func:`plan_k_models` - the same for k models at once (Bonferroni, the log k price);
* :func:`plan_two_models` - items to tell apart two models whose accuracies differ by eps
  (Hardt's Hellinger lower bound, a sufficient paired test, and a normal power analysis);
* :func:`plan_zero_failure` - items with no failure that certify a failure rate below eps
  (the one case where 1/eps, not 1/eps^2, suffices);
* :func:`plan_budget` - the reverse: the half-widths a budget of n items buys.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .comparisons.power import power_sample_size
from .bisection import smallest_passing
from .validation import check_alpha, check_power, check_unit_interval
from .subsample import (
    WORST_CASE_ASSUMPTIONS,
    barber_halfwidth,
    serfling_halfwidth,
    theorem_5_2_halfwidth,
    worst_case_halfwidth,
)
from .subsample.worst_case import _worst_case_one

__all__ = [
    "PlanAnswer",
    "Plan",
    "plan_one_model",
    "plan_k_models",
    "plan_two_models",
    "plan_zero_failure",
    "plan_budget",
]


@dataclass(frozen=True)
class PlanAnswer:
    """One method's answer to a planning question.

    Attributes
    ----------
    method : str
        E.g. ``"hoeffding"``, ``"theorem_5_2"``, ``"exact_worst_case"``.
    kind : str
        ``"sufficient"`` (n items achieve the target), ``"necessary"`` (fewer cannot) or
        ``"approximate"`` (a normal approximation, no guarantee).
    n : int
        Items needed (or the budget, for :func:`plan_budget`).
    N : int or None
        Full benchmark size when known.
    cost_fraction : float or None
        n / N: the cost relative to a full run (> 1 means more items than the benchmark has).
    feasible : bool
        False when N is known and n > N.
    eps : float or None
        The target half-width / gap / failure rate.
    alpha : float
        Error probability.
    half_width : float or None
        What n items achieve under this method (<= eps for sufficient answers).
    formula : str
        The formula used, in plain text.
    assumptions : tuple of str
        What must hold.
    """

    method: str
    kind: str
    n: int
    N: int | None
    cost_fraction: float | None
    feasible: bool
    eps: float | None
    alpha: float
    half_width: float | None
    formula: str
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["assumptions"] = list(self.assumptions)
        return d


@dataclass(frozen=True)
class Plan:
    """Answers of every applicable method to one planning question.

    Attributes
    ----------
    question : str
        ``"one_model"``, ``"k_models"``, ``"two_models"``, ``"zero_failure"`` or ``"budget"``.
    answers : tuple of PlanAnswer
        One per method.
    alpha : float
        Error probability.
    N : int or None
        Full benchmark size when known.
    inputs : dict
        The question's other inputs (eps, k, power, ...).
    notes : tuple of str
        Caveats that apply to the whole question (e.g. an erratum in a source).
    """

    question: str
    answers: tuple[PlanAnswer, ...]
    alpha: float
    N: int | None
    inputs: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def answer(self, method: str) -> PlanAnswer:
        """The answer of one method (KeyError naming the available ones otherwise)."""
        for a in self.answers:
            if a.method == method:
                return a
        raise KeyError(f"no answer by method {method!r}; methods: {[a.method for a in self.answers]}")

    def to_dict(self) -> dict:
        return {"question": self.question, "alpha": self.alpha, "N": self.N, "inputs": dict(self.inputs),
                "answers": [a.to_dict() for a in self.answers], "notes": list(self.notes)}


# --------------------------------------------------------------------------------------
# input checks


def _eps(eps, name: str = "eps", *, upper_inclusive: bool = False) -> float:
    return check_unit_interval(name, eps, closed="right" if upper_inclusive else False)


def _N(N) -> int | None:
    if N is None:
        return None
    if isinstance(N, (bool, np.bool_)) or not isinstance(N, numbers.Integral) or int(N) < 1:
        raise ValueError(f"N must be a positive integer number of items (or None); got {N!r}")
    return int(N)


def _k(k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise ValueError(f"k must be a positive integer number of models; got {k!r}")
    return int(k)


# --------------------------------------------------------------------------------------
# helpers


def _ceil(x: float) -> int:
    # Values like 4611.000000000001 from rounding must not cost an extra item, nor
    # 4610.999999 one too few: callers re-check the target at the returned n.
    return max(1, math.ceil(x - 1e-9))


def _answer(method, kind, n, N, eps, alpha, half_width, formula, assumptions) -> PlanAnswer:
    n = int(n)
    # A finite-population bound that misses eps even at n = N is reported at n = N, infeasible.
    reached = half_width is None or eps is None or float(half_width) <= eps
    return PlanAnswer(method=method, kind=kind, n=n, N=N, cost_fraction=(n / N if N else None),
                      feasible=(N is None or n <= N) and reached, eps=eps, alpha=alpha,
                      half_width=(None if half_width is None else float(half_width)), formula=formula,
                      assumptions=tuple(assumptions))


_HOEFFDING_ASSUMPTIONS = ("items are independent draws from an item population (or a random subset of a much "
                          "larger benchmark); scores in [0, 1]", "Hoeffding (1963); Hardt, ch. 3, Theorem 2")
_FINITE_ASSUMPTIONS = ("a uniformly random n-subset of the N benchmark items; the target is the full-benchmark "
                       "score", "Theorem 5.2 assumes infinitely exchangeable scores (exchangeable-bounds paper)")
_EXACT_ASSUMPTIONS = ("binary scores; a uniformly random n-subset of the N items; holds for every response "
                      "vector (worst case over the number of correct answers)",
                      "h*(n) is not exactly monotone in n (lattice effects): n is where bisection finds "
                      "h*(n) <= eps with h*(n - 1) > eps")


def _hoeffding_n(eps: float, log_term: float) -> tuple[int, float]:
    n = _ceil(log_term / (2.0 * eps * eps))
    while n > 1 and math.sqrt(log_term / (2.0 * (n - 1))) <= eps:
        n -= 1
    while math.sqrt(log_term / (2.0 * n)) > eps:
        n += 1
    return n, math.sqrt(log_term / (2.0 * n))


def _closed_form_n(hw: Callable[[int], float], eps: float, N: int) -> int:
    """Smallest n with hw(n) <= eps (hw decreasing); N when even N items miss eps."""
    if hw(1) <= eps:
        return 1
    if hw(N) > eps:
        return N
    return smallest_passing(lambda n: hw(n) <= eps, 1, N)


def _exact_n(eps: float, N: int, alpha: float, start: int) -> tuple[int, float]:
    """Smallest n (by bisection) with h*(n, N, alpha) <= eps; start = Theorem 5.2's n.

    The search runs on a lower bound of h* - the maximum over the central counts
    K in [0.3 N, 0.5 N], where the worst case lies in practice - and every candidate is then
    checked with the full maximum over all K (moving up until it holds). So the n returned
    satisfies h*(n) <= eps exactly, and h*(n - 1) >= the lower bound at n - 1 > eps, at
    about a third of the cost of bisecting on the full h*.
    """
    k_from = int(0.3 * N)

    def h(m: int, full: bool) -> float:
        D, _, _ = _worst_case_one(m, N, alpha, 0 if full else k_from)
        return D / (m * N)

    if h(1, True) <= eps:
        return 1, h(1, True)
    hi = max(2, min(start, N))
    while hi < N and h(hi, False) > eps:
        hi = min(N, 2 * hi)
    lo = max(1, hi // 3)
    while lo > 1 and h(lo, False) <= eps:
        hi, lo = lo, max(1, lo // 3)
    while True:
        n = smallest_passing(lambda m: h(m, False) <= eps, lo, hi)
        full = h(n, True)
        if full <= eps or n >= N:
            return n, full
        # A count outside the central band is worse at n: continue the search above n.
        lo, hi = n, n + 1
        while hi < N and h(hi, True) > eps:
            lo, hi = hi, min(N, hi + max(1, hi // 20))
        n = smallest_passing(lambda m: h(m, True) <= eps, lo, hi)
        return n, h(n, True)


def _one_model_answers(eps: float, alpha: float, N: int | None, log_term: float, label: str,
                       exact: bool) -> list[PlanAnswer]:
    out = []
    n, hw = _hoeffding_n(eps, log_term)
    out.append(_answer("hoeffding", "sufficient", n, N, eps, alpha, hw,
                       f"n >= log({label})/(2 eps^2) (= Barber's non-negative-weight form)", _HOEFFDING_ASSUMPTIONS))
    if N is None:
        return out
    a_eff = 2.0 / math.exp(log_term)
    thm = lambda m: float(theorem_5_2_halfwidth(m, N, alpha=a_eff).half_width)  # noqa: E731
    n52 = _closed_form_n(thm, eps, N)
    out.append(_answer("theorem_5_2", "sufficient", n52, N, eps, alpha, thm(n52),
                       f"sqrt((N - n)/(2 n N) log({label})) <= eps, i.e. n >= N L/(2 eps^2 N + L), L = log({label})",
                       _FINITE_ASSUMPTIONS))
    ser = lambda m: float(serfling_halfwidth(m, N, alpha=a_eff).half_width)  # noqa: E731
    ns = _closed_form_n(ser, eps, N)
    out.append(_answer("serfling", "sufficient", ns, N, eps, alpha, ser(ns),
                       f"sqrt((1 - (n - 1)/N) log({label})/(2 n)) <= eps (Serfling 1974)",
                       ("any fixed population of N scores in [0, 1]; a uniformly random n-subset",)))
    bs = lambda m: float(barber_halfwidth(m, N, alpha=a_eff, signed=True).half_width)  # noqa: E731
    nb = _closed_form_n(bs, eps, N)
    out.append(_answer("barber_signed", "sufficient", nb, N, eps, alpha, bs(nb),
                       f"sqrt((1 + eps_N)(N - n)/(2 n N) log({label})) <= eps, eps_N = (H_N - 1)/(N - H_N)",
                       ("the N scores are exchangeable (finite); a uniformly random n-subset", "Barber (2024)")))
    if exact:
        ne, he = _exact_n(eps, N, a_eff, n52)
        out.append(_answer("exact_worst_case", "sufficient", ne, N, eps, alpha, he,
                           f"h*(n, N, {'alpha/k' if 'k' in label else 'alpha'}) <= eps: the exact hypergeometric "
                           "worst case over all counts of correct answers", _EXACT_ASSUMPTIONS))
    return out


# --------------------------------------------------------------------------------------
# B8 questions


def _plan_one_model_iv(eps, alpha, N, exact):
    if not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True or False; got {exact!r}")
    alpha = check_alpha(alpha)
    eps = _eps(eps)
    N = _N(N)
    return eps, alpha, N, bool(exact)


def plan_one_model(eps, *, alpha=0.05, N=None, exact=True) -> Plan:
    r"""Items needed so that one model's subset score is within +/- eps of its target.

    Parameters
    ----------
    eps : float
        Target half-width in (0, 1) (0.02 = 2 percentage points).
    alpha : float, keyword-only
        Error probability in (0, 1).
    N : int, optional, keyword-only
        Full benchmark size; enables the finite-population answers (cost = n/N).
    exact : bool, keyword-only
        Also compute the exact worst-case answer (needs N; costs ~0.1-0.5 s per bisection
        step at N ~ 10^4).

    Returns
    -------
    Plan
        ``question="one_model"`` with answers ``hoeffding`` and, given N,
        ``theorem_5_2``, ``serfling``, ``barber_signed``, ``exact_worst_case``.

    Notes
    -----
    * Hoeffding (Hardt ch. 3, Theorem 2): :math:`2\exp(-2n\varepsilon^2) \le \alpha \iff
      n \ge \log(2/\alpha)/(2\varepsilon^2)` (iid items, or the non-negative Barber form);
    * Theorem 5.2 (target = the full benchmark score):
      :math:`\sqrt{(N-n)\log(2/\alpha)/(2nN)} \le \varepsilon \iff
      n \ge NL/(2\varepsilon^2 N + L)`, :math:`L = \log(2/\alpha)`;
    * Serfling and Barber signed: the same inversion of their half-widths;
    * exact: the smallest n (by bisection) with :math:`h^*(n, N, \alpha) \le \varepsilon`
      (:func:`benchcert.stats.subsample.worst_case_halfwidth`).

    Closed forms are solved by integer bisection on the half-width itself, so the n
    returned always satisfies the target (no off-by-one from rounding).
    """
    eps, alpha, N, exact = _plan_one_model_iv(eps, alpha, N, exact)
    answers = _one_model_answers(eps, alpha, N, math.log(2.0 / alpha), "2/alpha", exact)
    return Plan(question="one_model", answers=tuple(answers), alpha=alpha, N=N, inputs={"eps": eps})


def _plan_k_models_iv(eps, k, alpha, N, exact):
    eps, alpha, N, exact = _plan_one_model_iv(eps, alpha, N, exact)
    return eps, _k(k), alpha, N, exact


def plan_k_models(eps, k, *, alpha=0.05, N=None, exact=True) -> Plan:
    r"""Items needed so that k models' scores are all within +/- eps at once.

    Parameters
    ----------
    eps : float
        Target half-width in (0, 1).
    k : int
        Number of models estimated simultaneously.
    alpha, N, exact : keyword-only
        As in :func:`plan_one_model`.

    Returns
    -------
    Plan
        ``question="k_models"``; the methods of :func:`plan_one_model` at level alpha/k.

    Notes
    -----
    Union (Bonferroni) bound over k models (Hardt ch. 3, "Multiple model evaluations"):
    :math:`2k\exp(-2n\varepsilon^2) \le \alpha \iff n \ge \log(2k/\alpha)/(2\varepsilon^2)`;
    the price of k models is only :math:`\log k`. The finite-population and exact answers
    use alpha/k per model in the same way.
    """
    eps, k, alpha, N, exact = _plan_k_models_iv(eps, k, alpha, N, exact)
    answers = _one_model_answers(eps, alpha, N, math.log(2.0 * k / alpha), "2k/alpha", exact)
    answers = [a if k == 1 else replace(a, method=f"{a.method}_bonferroni") for a in answers]
    return Plan(question="k_models", answers=tuple(answers), alpha=alpha, N=N, inputs={"eps": eps, "k": k})


def _plan_two_models_iv(eps, alpha, power, var_d, N):
    alpha = check_alpha(alpha)
    eps = _eps(eps, upper_inclusive=True)
    check_power(power)
    if var_d is not None:
        if isinstance(var_d, (bool, np.bool_)) or not isinstance(var_d, numbers.Real) or not 0.0 < float(var_d) <= 1.0:
            raise ValueError(f"var_d must be the variance of a paired difference in (0, 1]; got {var_d!r}")
        var_d = float(var_d)
    return eps, alpha, float(power), var_d, _N(N)


def plan_two_models(eps, *, alpha=0.05, power=0.8, var_d=None, N=None) -> Plan:
    r"""Items needed to tell apart two models whose accuracies differ by eps.

    Parameters
    ----------
    eps : float
        Accuracy gap in (0, 1] (0.02 = 2 percentage points).
    alpha : float, keyword-only
        Error probability (test size) in (0, 1).
    power : float, keyword-only
        Target power for the normal power analysis (default 0.8).
    var_d : float, optional, keyword-only
        Per-item variance of the paired difference D = X_B - X_A; for binary scores
        Var(D) = (discordance rate) - gap^2. Default: the worst case 1 - eps^2 (every item
        discordant).
    N : int, optional, keyword-only
        Benchmark size; adds the finite-population (Theorem 5.2, R = 2) answer.

    Returns
    -------
    Plan
        ``question="two_models"``: ``hellinger_lower_bound`` (necessary),
        ``hoeffding_paired`` (sufficient), ``theorem_5_2_paired`` (sufficient, needs N)
        and ``paired_power`` (approximate).

    Notes
    -----
    * Necessary (Hardt ch. 3.4, Le Cam): with accuracies 1/2 and 1/2 + eps (Hardt's coin
      with bias (1 + 2 eps)/2), Claim 1 gives :math:`H^2 \le (2\varepsilon)^2/4 =
      \varepsilon^2` per item, so :math:`n \le 1/(8\varepsilon^2)` keeps
      :math:`TV(P^n, Q^n) \le \sqrt{2nH^2} \le 1/2`: no test errs with total probability
      < 1/2. Hence :math:`n > 1/(8\varepsilon^2)` is necessary.
      ERRATUM: Hardt's text (sections 3.4-3.5) states the bound as :math:`1/(2\varepsilon^2)`
      for models whose accuracies differ by eps; but his coin Q
      has bias :math:`(1+\varepsilon)/2`, an accuracy gap of eps/2. In accuracy units the
      argument gives :math:`1/(8\varepsilon^2)`; :math:`1/(2\varepsilon^2)` is not
      necessary (exactly, TV(Bin(n, 1/2), Bin(n, 1/2 + eps)) > 1/2 already at
      :math:`n = 1/(2\varepsilon^2)`; the tests check this).
    * Sufficient (Hoeffding on D in [-1, 1], range 2): picking the model with the higher
      mean on n shared items is wrong with probability
      :math:`\le \exp(-2n\varepsilon^2/4)`, so :math:`n \ge 2\log(1/\alpha)/\varepsilon^2`.
      With N known (the gap on the benchmark itself, a random subset): Theorem 5.2 with
      R = 2, one-sided: :math:`\exp(-2\varepsilon^2 nN/(4(N-n))) \le \alpha`.
    * Approximate (the paired normal power analysis):
      :math:`n = (z_{1-\alpha/2} + z_{power})^2\,\mathrm{Var}(D)/\varepsilon^2`.

    Necessary and sufficient agree up to constants: about :math:`1/\varepsilon^2` items
    (Hardt's main lesson).
    """
    eps, alpha, power, var_d, N = _plan_two_models_iv(eps, alpha, power, var_d, N)
    answers = []
    # Exact rational arithmetic: in floats 1/(8 * 0.05**2) is 49.999..., which would give 50, not 51.
    from fractions import Fraction

    n_nec = math.floor(1 / (8 * Fraction(eps).limit_denominator(10**12) ** 2)) + 1
    answers.append(_answer("hellinger_lower_bound", "necessary", n_nec, N, eps, alpha, None,
                           "n > 1/(8 eps^2): with fewer items TV(P^n, Q^n) <= 1/2 for accuracies 1/2 vs 1/2 + eps",
                           ("iid items; no test of any kind can do better (Le Cam; Hardt ch. 3.4 Claim 1, with "
                            "the accuracy gap eps = twice Hardt's coin bias)",)))
    L = math.log(1.0 / alpha)
    n_suf = _ceil(2.0 * L / (eps * eps))
    while n_suf > 1 and math.exp(-(n_suf - 1) * eps * eps / 2.0) <= alpha:
        n_suf -= 1
    while math.exp(-n_suf * eps * eps / 2.0) > alpha:
        n_suf += 1
    answers.append(_answer("hoeffding_paired", "sufficient", n_suf, N, eps, alpha, None,
                           "n >= 2 log(1/alpha)/eps^2: P(the worse model scores higher) <= exp(-n eps^2/2)",
                           ("items independent (iid from an item population); paired: both models answer the same "
                            "items; D = X_B - X_A in [-1, 1]", "Hoeffding (1963) with range 2")))
    if N is not None:
        def tail(m):
            return 0.0 if m >= N else math.exp(-2.0 * eps * eps * m * N / (4.0 * (N - m)))
        n52 = 1 if tail(1) <= alpha else smallest_passing(lambda m: tail(m) <= alpha, 1, N)
        answers.append(_answer("theorem_5_2_paired", "sufficient", n52, N, eps, alpha, None,
                               "exp(-2 eps^2 n N/(R^2 (N - n))) <= alpha with R = 2 (one-sided Theorem 5.2 on D)",
                               ("a uniformly random n-subset of the N items, both models evaluated on it; the gap "
                                "is the full-benchmark gap", "Remark 7.2: D is a zero-sum contrast, "
                                "Theorem 5.2 with R = 2")))
    vd = var_d if var_d is not None else 1.0 - eps * eps
    # the one power rule (also the MDE's inverse and "more items needed"): stats/comparisons/power.py
    n_pow = max(1, int(power_sample_size(eps, vd, alpha=alpha, power=power)))
    answers.append(_answer("paired_power", "approximate", n_pow, N, eps, alpha, None,
                           f"n = (z_(1-alpha/2) + z_power)^2 Var(D)/eps^2 with Var(D) = {vd:.6g}"
                           + ("" if var_d is not None else " (worst case 1 - eps^2)"),
                           ("normal approximation to the paired mean difference; two-sided level alpha, power "
                            f"{power:g} at gap eps", "Var(D) known (or its worst case)")))
    notes = ("Hardt ch. 3 states the Hellinger lower bound as 1/(2 eps^2) for an accuracy gap eps; his biased "
             "coin (1 + eps)/2 has accuracy gap eps/2, so in accuracy units the bound is 1/(8 eps^2) (erratum, "
             "see docs/methods.md, section 5).",)
    return Plan(question="two_models", answers=tuple(answers), alpha=alpha, N=N,
                inputs={"eps": eps, "power": power, "var_d": var_d}, notes=notes)


def _plan_zero_failure_iv(eps, alpha, N):
    return _eps(eps), check_alpha(alpha), _N(N)


def plan_zero_failure(eps, *, alpha=0.05, N=None) -> Plan:
    r"""Items with zero failures that certify a failure rate below eps.

    Parameters
    ----------
    eps : float
        Failure rate to rule out, in (0, 1).
    alpha : float, keyword-only
        Error probability in (0, 1).
    N : int, optional, keyword-only
        Benchmark size: adds the exact finite-population answer.

    Returns
    -------
    Plan
        ``question="zero_failure"``: ``zero_failure_exponential`` (Hardt section 3.5: ln(1/alpha)/eps),
        ``zero_failure_binomial`` (exact, iid) and, given N, ``zero_failure_hypergeometric``.

    Notes
    -----
    If the failure rate were :math:`\ge\varepsilon`, n independent items would all pass with
    probability :math:`(1-\varepsilon)^n \le e^{-n\varepsilon}`; requiring this
    :math:`\le\alpha` gives :math:`n \ge \ln(1/\alpha)/\varepsilon` (Hardt ch. 3.5: 1/eps,
    not 1/eps^2, suffices here). The exact binomial answer is the smallest n with
    :math:`(1-\varepsilon)^n \le \alpha`. On a benchmark of N items with
    :math:`F \ge \lceil\varepsilon N\rceil` failures, a random n-subset has none with
    probability :math:`\prod_{i<n}(N-F-i)/(N-i)`; the smallest n making it :math:`\le\alpha`
    certifies that fewer than eps N of the benchmark's items fail.
    """
    eps, alpha, N = _plan_zero_failure_iv(eps, alpha, N)
    L = math.log(1.0 / alpha)
    answers = [_answer("zero_failure_exponential", "sufficient", _ceil(L / eps), N, eps, alpha, None,
                       "n >= ln(1/alpha)/eps, from (1 - eps)^n <= exp(-n eps)",
                       ("items independent; every one of the n items passes",))]
    nb = _ceil(math.log(alpha) / math.log1p(-eps))
    while nb > 1 and (nb - 1) * math.log1p(-eps) <= math.log(alpha):
        nb -= 1
    while nb * math.log1p(-eps) > math.log(alpha):
        nb += 1
    answers.append(_answer("zero_failure_binomial", "sufficient", nb, N, eps, alpha, None,
                           "smallest n with (1 - eps)^n <= alpha", ("items independent; every one passes",)))
    if N is not None:
        F = math.ceil(eps * N - 1e-9)
        i = np.arange(N)
        with np.errstate(divide="ignore"):
            logp = np.cumsum(np.log(np.maximum(N - F - i, 0) / (N - i)))
        hit = np.flatnonzero(logp <= math.log(alpha))
        nh = int(hit[0]) + 1 if hit.size else N
        answers.append(_answer("zero_failure_hypergeometric", "sufficient", nh, N, eps, alpha, None,
                               f"smallest n with C(N - F, n)/C(N, n) <= alpha, F = ceil(eps N) = {F}",
                               ("a uniformly random n-subset of the N benchmark items; every one passes",
                                "certifies that fewer than eps N items of this benchmark fail")))
    return Plan(question="zero_failure", answers=tuple(answers), alpha=alpha, N=N, inputs={"eps": eps},
                notes=("Certifies a failure *rate*, never 'no failures at all': black-box testing cannot "
                       "certify correctness on every item (certifying-capabilities paper, Theorem 3.10).",))


def _plan_budget_iv(n, N, alpha, exact):
    if not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True or False; got {exact!r}")
    N = _N(N)
    if N is None:
        raise ValueError("N must be a positive integer number of items; got None")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise ValueError(f"n must be an integer number of items; got {n!r}")
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1 (a subset needs at least one item); got {n}")
    if n > N:
        raise ValueError(f"n must be <= N = {N} (a subset cannot exceed the benchmark); got {n}")
    return n, N, check_alpha(alpha), bool(exact)


def plan_budget(n, N, *, alpha=0.05, exact=True, worst_case=None) -> Plan:
    r"""Half-widths a budget of n random items buys for the full-benchmark score.

    Parameters
    ----------
    n : int
        Items to evaluate, 1 <= n <= N.
    N : int
        Full benchmark size.
    alpha : float, keyword-only
        Error probability in (0, 1).
    exact : bool, keyword-only
        Include the exact worst case h*(n, N, alpha).
    worst_case : callable, keyword-only
        ``worst_case(n, N, alpha) -> (half_width, worst_K)`` in place of
        :func:`~benchcert.stats.subsample.worst_case_halfwidth` (e.g. the h* cache beside a
        store, tasks/subsample/hstar_cache.py); it must return that function's values.

    Returns
    -------
    Plan
        ``question="budget"``: ``theorem_5_2``, ``barber_nonnegative``, ``barber_signed``,
        ``serfling``, ``exact_worst_case`` and ``theorem_5_2_paired`` (R = 2, for a gap
        between two models), each with ``half_width`` and cost n/N.

    Notes
    -----
    Formulas in :mod:`benchcert.stats.subsample`. Example (paper Table 4): n = 250,
    N = 14,042, alpha = 0.05 gives Theorem 5.2 8.51 pp, Barber non-negative 8.59 pp,
    Serfling 8.51 pp and the exact worst case 6.20 pp, at 1.8% of a full run.
    """
    n, N, alpha, exact = _plan_budget_iv(n, N, alpha, exact)
    rows = [
        ("theorem_5_2", theorem_5_2_halfwidth(n, N, alpha=alpha), "R sqrt((N - n)/(2 n N) log(2/alpha))"),
        ("barber_nonnegative", barber_halfwidth(n, N, alpha=alpha), "R sqrt(log(2/alpha)/(2 n))"),
        ("barber_signed", barber_halfwidth(n, N, alpha=alpha, signed=True),
         "R sqrt((1 + eps_N)(N - n)/(2 n N) log(2/alpha))"),
        ("serfling", serfling_halfwidth(n, N, alpha=alpha), "R sqrt((1 - (n - 1)/N) log(2/alpha)/(2 n))"),
    ]
    answers = [_answer(m, "sufficient", n, N, None, alpha, r.half_width, f, r.assumptions) for m, r, f in rows]
    if exact:
        if worst_case is None:
            w = worst_case_halfwidth(n, N, alpha=alpha)
            hw, worst_K = w.half_width, w.worst_K
        else:
            hw, worst_K = worst_case(n, N, alpha)
        answers.append(_answer("exact_worst_case", "sufficient", n, N, None, alpha, hw,
                               f"min h: max_K P(|H/n - K/N| > h) <= alpha (worst K = {worst_K})",
                               WORST_CASE_ASSUMPTIONS))
    paired = theorem_5_2_halfwidth(n, N, alpha=alpha, R=2.0)
    answers.append(_answer("theorem_5_2_paired", "sufficient", n, N, None, alpha, paired.half_width,
                           "2 sqrt((N - n)/(2 n N) log(2/alpha)): the gap between two models (R = 2)",
                           paired.assumptions))
    return Plan(question="budget", answers=tuple(answers), alpha=alpha, N=N, inputs={"n": n})
