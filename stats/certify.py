r"""Certifying a model's score in many deployment environments at once, and what cannot be certified.

Certifying-capabilities paper, section 3. Three protocols estimate the mean score
:math:`\mu_i = E_{z\sim p_i}[x(z)]` (x in [0, 1]; the paper's risk is 1 - score, and every
bound here is symmetric) of every environment :math:`p_i` so that all m estimates are within
their half-widths *simultaneously* with probability >= 1 - delta:

* ``theorem_3_4``: i.i.d. draws from one proposal q, importance weights p_i/q, median of
  block means (Theorem 3.4). Needs (1 + V) times more draws per block than a single mean, but
  the blocks are shared by all environments.
* ``per_environment``: i.i.d. draws from each environment separately, Hoeffding and a union
  bound (Remark 3.2). m times the one-environment cost.
* ``stratified``: a uniform sample without replacement from every atom (domain or subject)
  any environment uses, per-atom Serfling intervals at delta/K combined linearly. Because an
  environment's mean is :math:`\sum_a w_{ia}\mu_a`, the K atom intervals cover *every* mix of
  those atoms at once (any finite family, simplex or convex region), not just the m named.

And Theorem 3.10's lesson: under random sampling a failure *rate* can be bounded, but "correct
on every instance" cannot be certified by black-box testing; those bounds, and the exact binomial
bounds the per-atom intervals here use, are :mod:`benchcert.stats.failure_rates`.

Pure numpy/scipy; randomness only from the ``rng`` passed in.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from benchcert.stats import _dist as stats  # scipy.stats, imported only when beta is used

from benchcert.stats.degenerate import warn_degenerate
from benchcert.stats.failure_rates import _kl_bounds, _subject_means, clopper_pearson
from benchcert.stats.validation import check_alpha, check_positive_int, check_unit_interval
from benchcert.stats.subsample import serfling_halfwidth

__all__ = [
    "MOM_C",
    "Budget",
    "EnvironmentBounds",
    "mom_blocks",
    "mom_block_failure",
    "theorem_3_4_budget",
    "per_environment_budget",
    "stratified_budget",
    "importance_mom",
    "per_environment_means",
    "stratified_means",
    "draw_from_atoms",
    "draw_stratified",
]

#: Theorem 3.4's block constant: B = ceil(MOM_C * log(2m/delta)), MOM_C = 1/kl(1/2 || 1/8).
MOM_C = 2.0 / math.log(16.0 / 7.0)

#: Per-block failure probability Theorem 3.4 plans for (Chebyshev with s >= 8(1+V)/eps^2).
PLANNED_BLOCK_FAILURE = 1.0 / 8.0


def _eps(epsilon, name: str = "epsilon") -> float:
    return check_unit_interval(name, epsilon)


def _radius(V, name: str = "V") -> float:
    if isinstance(V, (bool, np.bool_)) or not isinstance(V, numbers.Real) or not (V >= 0) or not math.isfinite(V):
        raise ValueError(f"{name} must be a finite chi-square radius >= 0; got {V!r}")
    return float(V)


# --------------------------------------------------------------------------------------
# budgets


@dataclass(frozen=True)
class Budget:
    """Items (draws) a protocol needs for +/- epsilon on every environment at once w.p. 1 - delta.

    ``n`` is the total; ``allocation`` how it splits (blocks x block size, per environment or
    per atom); ``formula`` the rule in words.
    """

    protocol: str
    n: int
    epsilon: float
    delta: float
    m: int
    allocation: dict = field(default_factory=dict)
    formula: str = ""
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"protocol": self.protocol, "n": self.n, "epsilon": self.epsilon, "delta": self.delta, "m": self.m,
                "allocation": self.allocation, "formula": self.formula}


def mom_blocks(m: int, delta: float) -> int:
    r"""Theorem 3.4's number of blocks, :math:`B = \lceil c \log(2m/\delta)\rceil`, c = MOM_C.

    Notes
    -----
    Derivation (the constant the paper leaves as c). Each block mean fails
    (:math:`|\bar Y_b - \mu_i| > \varepsilon`) with probability at most 1/8 (see
    :func:`theorem_3_4_budget`), independently across blocks. The median of B block means
    (the mean of the two middle ones for even B) can fail only if at least B/2 blocks fail:
    otherwise more than half the values lie in :math:`[\mu_i-\varepsilon, \mu_i+\varepsilon]`
    and so do both middle order statistics. By the Chernoff bound in relative-entropy form,

    .. math:: P(\mathrm{Bin}(B, 1/8) \ge B/2) \le e^{-B\,\mathrm{kl}(1/2\|1/8)},\qquad
              \mathrm{kl}(1/2\|1/8) = \tfrac12\log\tfrac{16}{7} \approx 0.4133,

    which is <= delta/m once :math:`B \ge c\log(m/\delta)` with
    :math:`c = 2/\log(16/7) \approx 2.419`. The paper's :math:`\log(2m/\delta)` is kept (the
    factor 2 is slack: Chebyshev is already two-sided), so the union bound over the m
    environments gives failure probability <= delta/2 <= delta.
    """
    m = check_positive_int(m, "m")
    delta = check_alpha(delta)
    return max(1, math.ceil(MOM_C * math.log(2.0 * m / delta) - 1e-12))


def mom_block_failure(blocks: int, m: int, delta: float) -> float:
    r"""Largest per-block failure probability :math:`\pi` that B blocks tolerate at delta/m.

    The exact binomial tail: the largest :math:`\pi < 1/2` with
    :math:`P(\mathrm{Bin}(B,\pi) \ge \lceil B/2\rceil) \le \delta/m` (bisection; the tail
    increases in :math:`\pi`). Used after the fact: a realised block size s then gives the
    half-width :math:`\sqrt{(1+\chi^2_i)/(s\pi)}` by Chebyshev. With B from
    :func:`mom_blocks` it is >= 1/8, so the post-hoc half-width never exceeds the planned one.
    Capped at 1/2 (beyond it the median bound is not useful anyway).
    """
    B = check_positive_int(blocks, "blocks")
    m = check_positive_int(m, "m")
    delta = check_alpha(delta)
    k = math.ceil(B / 2)
    target = delta / m

    def tail(p):
        return float(stats.binom.sf(k - 1, B, p))

    lo, hi = 0.0, 0.5
    if tail(hi) <= target:
        return hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if tail(mid) <= target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return lo


def theorem_3_4_budget(V: float, m: int, epsilon: float, *, delta: float) -> Budget:
    r"""Theorem 3.4's sample size with explicit constants: n = B s.

    Parameters
    ----------
    V : float
        Chi-square radius of the family at the proposal used (``Chi2Radius.value``).
    m : int
        Number of environments (for a convex family: its vertices; see stats/environments.py).
    epsilon : float
        Half-width wanted for every environment's mean.
    delta : float, keyword-only
        Probability that any of the m estimates is further off.

    Notes
    -----
    Draw :math:`Z_t \sim q` i.i.d., set :math:`Y^{(i)}_t = x(Z_t)\,p_i(Z_t)/q(Z_t)`. Then
    :math:`E Y^{(i)} = \mu_i` and, as :math:`x\in[0,1]`,
    :math:`\mathrm{Var}\,Y^{(i)} \le E_q[(p_i/q)^2] = 1+\chi^2(p_i\|q) \le 1+V`.
    A block mean of s draws fails with probability at most :math:`(1+V)/(s\varepsilon^2)`
    (Chebyshev), i.e. at most 1/8 when

    .. math:: s = \lceil 8(1+V)/\varepsilon^2 \rceil,

    and :func:`mom_blocks` gives :math:`B = \lceil c\log(2m/\delta)\rceil` with
    :math:`c = 2/\log(16/7)`. These constants are large: Chebyshev and the median trade a
    factor of about 8 c log(2m/delta) / (log(2m/delta)/2) ~ 39 against Hoeffding, so the
    per-environment protocol is cheaper unless m is large compared with 1 + V.
    """
    V = _radius(V)
    m = check_positive_int(m, "m")
    epsilon = _eps(epsilon)
    delta = check_alpha(delta)
    B = mom_blocks(m, delta)
    s = math.ceil(8.0 * (1.0 + V) / epsilon ** 2 - 1e-9)
    return Budget(protocol="theorem_3_4", n=B * s, epsilon=epsilon, delta=delta, m=m,
                  allocation={"blocks": B, "block_size": s, "chi2_radius": V, "c": MOM_C},
                  formula="B s, B = ceil(c log(2m/delta)), c = 2/log(16/7), s = ceil(8 (1 + V) / eps^2)",
                  assumptions=("i.i.d. draws from the proposal q with p_i << q for every environment",
                               "scores in [0, 1]"))


def per_environment_budget(m: int, epsilon: float, *, delta: float) -> Budget:
    r"""Remark 3.2: :math:`n_i = \lceil\log(2m/\delta)/(2\varepsilon^2)\rceil` draws from each environment.

    Hoeffding's two-sided bound for a mean of n i.i.d. values in [0, 1] at level delta/m,
    and a union bound over the m environments.
    """
    m = check_positive_int(m, "m")
    epsilon = _eps(epsilon)
    delta = check_alpha(delta)
    n_i = math.ceil(math.log(2.0 * m / delta) / (2.0 * epsilon ** 2) - 1e-9)
    return Budget(protocol="per_environment", n=m * n_i, epsilon=epsilon, delta=delta, m=m,
                  allocation={"per_environment": n_i},
                  formula="m ceil(log(2m/delta) / (2 eps^2)) (Hoeffding + union bound)",
                  assumptions=("i.i.d. draws from each environment", "scores in [0, 1]"))


def _serfling_n(N: int, epsilon: float, alpha: float) -> int:
    """Smallest n <= N whose Serfling half-width at alpha is <= epsilon; N (the whole atom) if none."""
    lo, hi = 1, N
    if serfling_halfwidth(N, N, alpha=alpha).half_width > epsilon:
        return N
    while lo < hi:
        mid = (lo + hi) // 2
        if serfling_halfwidth(mid, N, alpha=alpha).half_width <= epsilon:
            hi = mid
        else:
            lo = mid + 1
    return lo


def stratified_budget(sizes, epsilon: float, *, delta: float) -> Budget:
    r"""Exact stratified design: per-atom samples so every atom's mean is within epsilon at delta/K.

    Parameters
    ----------
    sizes : sequence of int
        Items in each atom (domain or subject) that some environment or family uses.

    Notes
    -----
    Atom a gets the smallest :math:`n_a \le N_a` with Serfling's half-width
    :math:`\sqrt{(1-(n_a-1)/N_a)\log(2K/\delta)/(2n_a)} \le \varepsilon` (sampling without
    replacement, union over the K atoms); when none is small enough the whole atom is
    evaluated (its mean is then known exactly). Any environment :math:`\sum_a w_a \mu_a`
    is then within :math:`\sum_a w_a h_a \le \varepsilon` -- simultaneously for every mix,
    so the cost does not grow with the number of environments.
    """
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 1):
        raise ValueError(f"sizes must be a non-empty list of positive item counts; got {sizes!r}")
    epsilon = _eps(epsilon)
    delta = check_alpha(delta)
    K = arr.size
    alloc = [_serfling_n(int(N), epsilon, delta / K) for N in arr]
    return Budget(protocol="stratified", n=int(sum(alloc)), epsilon=epsilon, delta=delta, m=K,
                  allocation={"per_atom": alloc, "atoms": K},
                  formula="sum_a min n_a with Serfling half-width at delta/K <= eps (whole atom if none)",
                  assumptions=("uniform sampling without replacement within each atom",
                               "environments are uniform within atoms", "scores in [0, 1]"))


# --------------------------------------------------------------------------------------
# estimators with uniform bounds


@dataclass(frozen=True)
class EnvironmentBounds:
    """Per-environment estimates with half-widths that hold simultaneously with probability >= 1 - delta.

    ``lower``/``upper`` are clipped to [0, 1] (the means lie there, so clipping keeps
    coverage); ``half_width`` is the unclipped distance.
    """

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    half_width: np.ndarray
    delta: float
    n: int
    method: str
    assumptions: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)


def _bounds(est, hw, delta, n, method, assumptions, details) -> EnvironmentBounds:
    est = np.asarray(est, dtype=float)
    hw = np.asarray(hw, dtype=float)
    return EnvironmentBounds(estimate=np.clip(est, 0.0, 1.0), lower=np.clip(est - hw, 0.0, 1.0),
                             upper=np.clip(est + hw, 0.0, 1.0), half_width=hw, delta=delta, n=int(n), method=method,
                             assumptions=assumptions, details=details)


def importance_mom(scores, atoms, P, q, *, blocks: int, delta: float) -> EnvironmentBounds:
    r"""Theorem 3.4's estimator: importance-weighted median of means, with post-hoc half-widths.

    Parameters
    ----------
    scores : array_like (n,)
        Scores in [0, 1] of the n draws, in draw order.
    atoms : array_like of int (n,)
        Atom of each draw (its importance weight is :math:`P_{i,a}/q_a`).
    P : array_like (m, K)
        Environments over atoms.
    q : array_like (K,)
        The proposal the draws came from (atom probabilities; uniform within atoms).
    blocks : int, keyword-only
        B, fixed before sampling; the first :math:`B\lfloor n/B\rfloor` draws are used.
    delta : float, keyword-only

    Notes
    -----
    Half-width of environment i: :math:`\sqrt{(1+\chi^2(p_i\|q))/(s\,\pi)}` with s the
    block size and :math:`\pi` = :func:`mom_block_failure` (B, m, delta): Chebyshev makes
    each block fail with probability <= pi, the exact binomial tail makes the median fail
    with probability <= delta/m, and a union bound covers all m. An environment not
    absolutely continuous w.r.t. q gets an infinite half-width (no guarantee).
    """
    from benchcert.stats.environments import _check_proposal, check_family

    P = check_family(P)
    m, K = P.shape
    q = _check_proposal(q, K)
    x = np.asarray(scores, dtype=float)
    a = np.asarray(atoms)
    if x.ndim != 1 or a.shape != x.shape:
        raise ValueError(f"scores and atoms must be 1-D of equal length; got {x.shape} and {a.shape}")
    if np.any(~np.isfinite(x)) or np.any(x < 0) or np.any(x > 1):
        raise ValueError("scores must lie in [0, 1]")
    if not np.issubdtype(a.dtype, np.integer) or (a.size and (a.min() < 0 or a.max() >= K)):
        raise ValueError(f"atoms must be integer codes in [0, {K}); got {a[:5].tolist()}...")
    if a.size and np.any(q[a] <= 0):
        raise ValueError("a draw falls on an atom with proposal probability 0: not a draw from q")
    delta = check_alpha(delta)
    B = check_positive_int(blocks, "blocks")
    s = x.size // B
    if s < 1:
        raise ValueError(f"need at least blocks = {B} draws; got {x.size}")
    n = B * s
    if n < x.size:
        warn_degenerate(f"importance_mom: {x.size - n} draw(s) beyond {B} blocks of {s} are not used")
    ratio = np.zeros((m, K))
    pos = q > 0
    ratio[:, pos] = P[:, pos] / q[pos]
    Y = ratio[:, a[:n]] * x[:n]                       # (m, n)
    means = Y.reshape(m, B, s).mean(axis=2)
    est = np.median(means, axis=1)
    from benchcert.stats.environments import chi2_divergences

    chi2 = chi2_divergences(P, q)
    pi = mom_block_failure(B, m, delta)
    hw = np.sqrt((1.0 + chi2) / (s * pi))
    return _bounds(est, hw, delta, n, "theorem_3_4",
                   ("i.i.d. draws from q, drawn before the scores were seen", "scores in [0, 1]",
                    "Chebyshev per block with Var <= 1 + chi2(p_i || q); exact binomial tail for the median; "
                    "union bound over the environments"),
                   {"blocks": B, "block_size": s, "block_failure": pi, "chi2": chi2.tolist(),
                    "draws_unused": int(x.size - n)})


def per_environment_means(samples, *, delta: float) -> EnvironmentBounds:
    r"""Remark 3.2's estimator: each environment's own sample mean, Hoeffding at delta/m.

    ``samples`` is a list of m arrays, the scores of i.i.d. draws from each environment;
    half-width :math:`\sqrt{\log(2m/\delta)/(2n_i)}`.
    """
    delta = check_alpha(delta)
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("samples must be a non-empty list of score arrays, one per environment")
    m = len(samples)
    est, hw, n = [], [], 0
    for i, s in enumerate(samples):
        arr = np.asarray(s, dtype=float)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"samples[{i}] must be a non-empty 1-D score array; got shape {arr.shape}")
        if np.any(~np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
            raise ValueError(f"samples[{i}] must lie in [0, 1]")
        est.append(arr.mean())
        hw.append(math.sqrt(math.log(2.0 * m / delta) / (2.0 * arr.size)))
        n += arr.size
    return _bounds(est, hw, delta, n, "per_environment",
                   ("i.i.d. draws from each environment", "scores in [0, 1]", "Hoeffding + union bound (Remark 3.2)"),
                   {"per_environment": [len(s) for s in samples]})


def stratified_means(samples, sizes, P, *, delta: float, finite_population: bool = True, clusters=None,
                     new_clusters: bool = False) -> EnvironmentBounds:
    r"""Per-atom simultaneous intervals combined linearly: valid for every mix of the atoms at once.

    Parameters
    ----------
    samples : list of K arrays
        Scores of the items sampled from each atom (empty for an atom no row of P uses).
    sizes : sequence of K int
        Items in each atom.
    P : array_like (m, K)
        Environments (or the vertices of a convex family) to report.
    finite_population : bool, keyword-only
        True (default): atoms were sampled uniformly *without replacement* and the target is
        the atom's mean over its N_a items (Serfling; a fully evaluated atom is exact).
        False: a superpopulation target, the question being set by ``clusters`` and
        ``new_clusters`` (see Notes).
    clusters : list of K arrays, optional, keyword-only
        Cluster (subject) label of every score in ``samples`` (same shapes). Only with
        ``finite_population=False``.
    new_clusters : bool, keyword-only
        With ``clusters``: False (default) asks about new items *from the same clusters*;
        True about new items from *new clusters* of the atom.

    Notes
    -----
    With per-atom intervals :math:`[L_a, U_a]` holding jointly w.p. >= 1 - delta (each at
    :math:`\alpha_a = \delta/K`, K = atoms used; a union bound), every mix
    :math:`\sum_a w_a\mu_a` lies in :math:`[\sum_a w_a L_a, \sum_a w_a U_a]` -- for all w at once.
    The per-atom interval depends on the question (``finite_population=False``):

    * *No cluster labels*: the atom's :math:`n_a` items are taken as i.i.d. draws from its task
      distribution, target its mean :math:`\mu_a`: exact two-sided Clopper-Pearson
      (:func:`~benchcert.stats.failure_rates.clopper_pearson`) for binary scores, Hoeffding
      :math:`\sqrt{\log(2/\alpha_a)/(2n_a)}` otherwise. ASSUMPTION: independent items; wrong
      when items cluster (e.g. by subject) and the question is about new clusters.
    * *Same clusters* (``clusters`` given, ``new_clusters=False``): the clusters are fixed and
      items are independent *given* their cluster, with possibly different rates
      :math:`p_j` (items within a subject share its difficulty). Target
      :math:`\mu_a = \sum_j (n_j/n_a) p_j` (item-weighted). The count is a sum of independent
      Bernoulli trials with unequal probabilities, so the exact bounds are widened where the
      binomial ones could miss: :math:`[\min\{L, (k-1)/n_a\},\ \max\{U, (k+1)/n_a\}]`
      (``clopper_pearson(..., unequal_rates=True)``, valid by Hoeffding 1956, Theorem 4; proof
      in its Notes; it differs from the exact interval only at k = 1 and k = n_a - 1);
      fractional scores: Hoeffding, which holds for independent, not identically distributed,
      [0, 1] variables (Hoeffding 1963, Theorem 2).
    * *New clusters* (``new_clusters=True``): the atom's :math:`J_a` clusters are independent
      draws of (size, cluster) from its population of clusters - a cluster's size may depend on
      its difficulty in any way (big easy subjects, small hard ones) - and items within a cluster
      may depend on each other in any way. Target :math:`\mu_a = E[p_J]`, a new cluster's
      expected score (cluster-weighted). Every cluster weighs :math:`1/J_a`: the estimate is
      :math:`\hat\mu_a = J_a^{-1}\sum_j \bar x_j`, the mean of the cluster means
      :math:`\bar x_j \in [0, 1]`, which are independent with :math:`E\bar x_j = E[E(\bar x_j
      \mid n_j, p_j)] = E[p_J] = \mu_a` whatever the sizes. Hoeffding's inequality in its
      relative-entropy form (1963, Theorem 1, for the plain mean of independent variables in
      [0, 1]; applied to :math:`1 - \bar x_j` for the lower tail) gives
      :math:`P(\hat\mu_a \ge \mu_a + t) \le e^{-J_a\,\mathrm{kl}(\mu_a + t\,\|\,\mu_a)}` and
      :math:`P(\hat\mu_a \le \mu_a - t) \le e^{-J_a\,\mathrm{kl}(\mu_a - t\,\|\,\mu_a)}`,
      kl the Bernoulli relative entropy, so each side at :math:`\alpha_a/2`:

      .. math:: U_a = \max\{m \ge \hat\mu_a : J_a\,\mathrm{kl}(\hat\mu_a\|m) \le \log(2/\alpha_a)\},
                \qquad L_a = \min\{m \le \hat\mu_a : J_a\,\mathrm{kl}(\hat\mu_a\|m) \le \log(2/\alpha_a)\}

      (method ``cluster_kl_hoeffding``; proof of the miss probability in
      :func:`~benchcert.stats.failure_rates.failure_rate_upper_new_subjects`, whose bound is
      :math:`U_a` at one side). The weights :math:`1/J_a` are what make this apply: the estimate is then the plain mean of J_a
      independent [0, 1] variables with a common expectation, Theorem 1's setting. By Pinsker
      (:math:`\mathrm{kl}(p\|q) \ge 2(p-q)^2`) the band lies inside Hoeffding's additive one,
      :math:`\hat\mu_a \pm \sqrt{\log(2/\alpha_a)/(2 J_a)}` (Theorem 2, this band before),
      and is much narrower near 0 and 1: when all of 40 subjects score 1 the lower end is
      :math:`(\alpha_a/2)^{1/40}` (0.928 at :math:`\alpha_a = 0.1`) instead of
      :math:`1 - \sqrt{\log(2/\alpha_a)/80}` (0.806). Weighting by items instead
      (:math:`w_j = n_j/n_a`, Hoeffding on Kish's :math:`1/\sum_j w_j^2`) is not valid for this
      target when size tracks difficulty: the weights are random and correlated with the
      cluster means, the weighted mean is biased, and in the seeded simulation of
      tests/stats/test_certify_new_subjects.py such bands covered 71-84% at a nominal 90%. With few
      subjects the band is wide - one subject gives nearly [0, 1] - which is the honest answer: a
      domain's difficulty for new subjects cannot be pinned down from two or three subjects.
      The estimate (``estimate``) is then the cluster-weighted score, which differs from the
      item-weighted score of the other questions when sizes are unequal.

    Coverage is checked by seeded simulation with subject random effects on the logit scale,
    unequal subject sizes, few subjects per domain and boundary rates
    (tests/tasks/certify/test_certify_clustered.py), and with subject sizes (2 to 200 items) that track the
    subjects' difficulty, 5 to 40 subjects and items of a subject moving together
    (tests/stats/test_certify_new_subjects.py). Departure from the certifying-capabilities paper: its
    section 3 draws i.i.d. items from each environment (Remark 3.2) and has no clusters; the
    two clustered questions and their bounds are this project's.
    """
    P, delta, N = _stratified_means_iv(samples, sizes, P, delta, finite_population, clusters, new_clusters)
    K = P.shape[1]
    used = P.max(axis=0) > 0
    Kused = int(used.sum())
    lo = np.zeros(K)
    hi = np.zeros(K)
    mean = np.zeros(K)
    n_eff = np.full(K, np.nan)
    n_tot = 0
    methods = []
    question = _AtomQuestion(finite_population=finite_population, clustered=clusters is not None,
                             new_clusters=bool(new_clusters), alpha=delta / Kused)
    for a in range(K):
        arr = np.asarray(samples[a], dtype=float)  # every atom's, used or not (as before: non-numeric raises)
        if not used[a]:
            continue
        labels = _atom_sample_checked(arr, clusters, a, int(N[a]), finite_population)
        n_tot += arr.size
        mean[a], lo[a], hi[a], n_eff[a], method = _atom_interval(arr, labels, int(N[a]), question)
        methods.append(method)
    if new_clusters:
        # each side at alpha_a / 2: J_a kl(mean || bound) <= log(2 / alpha_a)
        lo[used], hi[used] = _kl_bounds(mean[used], n_eff[used], math.log(2.0 / (delta / Kused)))
    est = P @ mean
    low = P @ np.clip(lo, 0.0, 1.0)
    up = P @ np.clip(hi, 0.0, 1.0)
    return EnvironmentBounds(
        estimate=np.clip(est, 0, 1), lower=np.clip(low, 0, 1), upper=np.clip(up, 0, 1),
        half_width=np.maximum(est - low, up - est), delta=delta, n=n_tot,
        method="stratified" if finite_population else "stratified_superpopulation",
        assumptions=(question.target(), "environments are uniform within atoms",
                     "union bound over the atoms used; linear in the mix"),
        details={"atom_lower": np.clip(lo, 0, 1).tolist(), "atom_upper": np.clip(hi, 0, 1).tolist(),
                 "atom_mean": mean.tolist(), "atom_methods": methods, "atoms_used": Kused,
                 "question": question.name(),
                 **({"atom_effective_subjects": [None if np.isnan(v) else float(v) for v in n_eff]}
                    if new_clusters else {})})


def _stratified_means_iv(samples, sizes, P, delta, finite_population, clusters, new_clusters):
    from benchcert.stats.environments import check_family

    P = check_family(P)
    K = P.shape[1]
    delta = check_alpha(delta)
    N = np.asarray(sizes)
    if N.shape != (K,) or not np.issubdtype(N.dtype, np.integer) or np.any(N < 1):
        raise ValueError(f"sizes must be {K} positive item counts; got {sizes!r}")
    if not isinstance(samples, (list, tuple)) or len(samples) != K:
        raise ValueError(f"samples must be a list of {K} score arrays, one per atom")
    if clusters is not None:
        if finite_population:
            raise ValueError("clusters: only with finite_population=False (a finite-population target needs none)")
        if not isinstance(clusters, (list, tuple)) or len(clusters) != K:
            raise ValueError(f"clusters must be a list of {K} label arrays, one per atom")
    if not isinstance(new_clusters, (bool, np.bool_)):
        raise ValueError(f"new_clusters must be True or False; got {new_clusters!r}")
    if new_clusters and clusters is None:
        raise ValueError("new_clusters=True needs clusters (the cluster label of every score)")
    return P, delta, N


@dataclass(frozen=True)
class _AtomQuestion:
    """Which per-atom interval :func:`stratified_means` computes (its Notes), at level ``alpha`` per atom."""

    finite_population: bool
    clustered: bool
    new_clusters: bool
    alpha: float

    def name(self) -> str:
        if self.finite_population:
            return "finite_population"
        if not self.clustered:
            return "independent_items"
        return "new_subjects" if self.new_clusters else "same_subjects"

    def target(self) -> str:
        """The question and its target, as the result's first assumption."""
        if self.finite_population:
            return "uniform sampling without replacement within each atom; target: the benchmark's items"
        if not self.clustered:
            return ("ASSUMPTION: independent items - each atom's items are an i.i.d. sample of that atom's task "
                    "distribution; target: that distribution")
        if not self.new_clusters:
            return ("question: new items from the same subjects (subjects fixed); items independent given their "
                    "subject, subjects may differ in difficulty; target: the atom's mean over its subjects, "
                    "weighted by their items")
        return ("question: new subjects - the atom's subjects are independent draws (size and difficulty together) "
                "from its subjects, items within a subject may depend on each other; every subject weighs the same, "
                "whatever its size; target: a new subject's expected score (subject-weighted, not item-weighted)")


def _atom_sample_checked(arr, clusters, a: int, size: int, finite_population: bool):
    """Check atom ``a``'s scores; its cluster labels (None without ``clusters``)."""
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"atom {a} has weight in some environment but no sampled scores: no bound")
    if np.any(~np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"samples[{a}] must lie in [0, 1]")
    if finite_population and arr.size > size:
        raise ValueError(f"samples[{a}] has {arr.size} scores but the atom holds {size} items")
    labels = None
    if clusters is not None:
        labels = np.asarray(clusters[a])
        if labels.shape != arr.shape:
            raise ValueError(f"clusters[{a}] must label each of the {arr.size} scores of samples[{a}]; got "
                             f"shape {labels.shape}")
    return labels


def _atom_interval(arr, labels, size: int, question: _AtomQuestion):
    """(mean, lower, upper, effective subjects, method) of one atom. New clusters: the subject-weighted
    mean and J (the bounds are solved for all atoms at once; lower and upper 0 here)."""
    mu = arr.mean()
    alpha_a = question.alpha
    if question.finite_population:
        h = 0.0 if arr.size == size else float(serfling_halfwidth(arr.size, size, alpha=alpha_a).half_width)
        return mu, mu - h, mu + h, np.nan, "exact" if h == 0 else "serfling"
    if question.new_clusters:
        est, J = _subject_means(arr, labels)   # each subject weighs 1/J: the new-subjects estimand
        return est, 0.0, 0.0, J, "cluster_kl_hoeffding"
    if np.all((arr == 0) | (arr == 1)):
        unequal = labels is not None    # same subjects: a Poisson-binomial count
        lo, hi = clopper_pearson(int(arr.sum()), arr.size, alpha=alpha_a, unequal_rates=unequal)
        return mu, lo, hi, np.nan, "clopper_pearson_unequal_rates" if unequal else "clopper_pearson"
    h = math.sqrt(math.log(2.0 / alpha_a) / (2.0 * arr.size))
    return mu, mu - h, mu + h, np.nan, "hoeffding"


# --------------------------------------------------------------------------------------
# drawing items


def _atom_index(item_atoms, K: int):
    a = np.asarray(item_atoms)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= K:
        raise ValueError(f"item_atoms must be a non-empty 1-D array of atom codes in [0, {K})")
    order = np.argsort(a, kind="stable")
    counts = np.bincount(a, minlength=K)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return order, counts, starts


def draw_from_atoms(item_atoms, probs, n: int, *, rng: np.random.Generator) -> np.ndarray:
    """n i.i.d. item indices: an atom from ``probs``, then an item uniformly inside it.

    This is a draw from :math:`q(z) = Q_a/N_a` (Theorem 3.4's proposal) or from an
    environment :math:`p_i(z) = w_{ia}/N_a` (Remark 3.2), with replacement.
    """
    probs = np.asarray(probs, dtype=float)
    K = probs.size
    order, counts, starts = _atom_index(item_atoms, K)
    if np.any(probs < 0) or abs(probs.sum() - 1) > 1e-9:
        raise ValueError(f"probs must be a probability vector over the {K} atoms")
    if np.any((probs > 0) & (counts == 0)):
        raise ValueError("probs puts mass on an atom with no items")
    n = check_positive_int(n, "n")
    atoms = rng.choice(K, size=n, p=probs / probs.sum())
    offset = np.floor(rng.random(n) * counts[atoms]).astype(np.int64)
    return order[starts[atoms] + offset]


def draw_stratified(item_atoms, allocation, *, rng: np.random.Generator) -> np.ndarray:
    """Item indices drawn uniformly without replacement, ``allocation[a]`` from atom a (sorted)."""
    alloc = np.asarray(allocation)
    K = alloc.size
    order, counts, starts = _atom_index(item_atoms, K)
    if not np.issubdtype(alloc.dtype, np.integer) or np.any(alloc < 0) or np.any(alloc > counts):
        raise ValueError(f"allocation must be integers in [0, atom size]; got {alloc.tolist()} for sizes "
                         f"{counts.tolist()}")
    picked = [order[starts[a] + rng.choice(counts[a], size=int(alloc[a]), replace=False)]
              for a in range(K) if alloc[a] > 0]
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)
