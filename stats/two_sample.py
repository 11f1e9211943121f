"""Two-sample tests: Fisher's exact test of two binomial rates and the energy-distance permutation test."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ._common import unwrap_scalar
from .validation import check_alpha

__all__ = ["FisherResult", "EnergyTestResult", "fisher_contrast", "fisher_min_p", "energy_test", "energy_min_p"]


_ENERGY_ASSUMPTIONS = ("responses i.i.d. within each prompt; embedding fixed in advance",
                       "simple null F_x = F_y (not the composite null)")
_REPLICATES = "replicates of one variant are i.i.d. Bernoulli(p) (binary scores, independent runs)"


def _int_array(x, name: str, *, lo: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise ValueError(f"{name} must hold integers; got {x!r}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < lo:
        raise ValueError(f"{name} must be >= {lo}; got {int(arr.min())}")
    return arr


def _positive_int(x, name: str) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {x!r}")
    return int(x)


_out = unwrap_scalar  # 0-d results as Python scalars (stats/_common.py)


@dataclass(frozen=True)
class FisherResult:
    """Classical simple-null contrast: Fisher's exact test of p_a = p_b (two-sided)."""

    p_value: np.ndarray | float
    reject: np.ndarray | bool
    rate_a: np.ndarray | float
    rate_b: np.ndarray | float
    difference: np.ndarray | float
    alpha: float
    n: np.ndarray | int
    method: str
    assumptions: tuple[str, ...]



@dataclass(frozen=True)
class EnergyTestResult:
    """Szekely-Rizzo two-sample energy test with a permutation p-value."""

    statistic: float
    energy_distance: float
    p_value: float
    reject: bool | None
    alpha: float | None
    n_x: int
    n_y: int
    n_permutations: int
    method: str
    assumptions: tuple[str, ...]
    exact: bool = False
    min_attainable_p: float | None = None



def _fisher_p(k1, n1, k2, n2) -> float:
    from scipy.stats import fisher_exact  # here: importing scipy.stats costs ~0.5 s

    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)



def _fisher_iv(count_a, reps_a, count_b, reps_b, alpha):
    ka = _int_array(count_a, "count_a", lo=0)
    na = _int_array(reps_a, "reps_a", lo=1)
    kb = _int_array(count_b, "count_b", lo=0)
    nb = _int_array(reps_b, "reps_b", lo=1)
    try:
        ka, na, kb, nb = np.broadcast_arrays(ka, na, kb, nb)
    except ValueError:
        raise ValueError(f"count_a, reps_a, count_b, reps_b must broadcast; got shapes "
                         f"{ka.shape}, {na.shape}, {kb.shape}, {nb.shape}") from None
    if np.any(ka > na) or np.any(kb > nb):
        raise ValueError("counts must not exceed their replicates; got count_a > reps_a or count_b > reps_b")
    return ka, na, kb, nb, check_alpha(alpha)


def fisher_contrast(count_a, reps_a, count_b, reps_b, *, alpha=0.05) -> FisherResult:
    r"""Classical simple-null test :math:`H_0: p_a = p_b` (Fisher's exact test, two-sided).

    This is the test of the paper's Figure 1 (section 1): it treats the base prompt as the
    whole null, so any semantically irrelevant rewording whose response probability differs at
    all is rejected once r is large.  Reported beside the composite decision.  Vectorised over
    broadcast arrays of counts; the p-value conditions on the margins (hypergeometric), so it
    is valid at every r.
    """
    ka, na, kb, nb, alpha = _fisher_iv(count_a, reps_a, count_b, reps_b, alpha)
    p = np.array([_fisher_p(int(x1), int(n1), int(x2), int(n2))
                  for x1, n1, x2, n2 in zip(ka.ravel(), na.ravel(), kb.ravel(), nb.ravel())]).reshape(ka.shape)
    ra, rb = ka / na, kb / nb
    return FisherResult(p_value=_out(p), reject=_out(p <= alpha), rate_a=_out(ra), rate_b=_out(rb),
                        difference=_out(ra - rb), alpha=alpha, n=_out(na + nb),
                        method="fisher_exact (two-sided)",
                        assumptions=(_REPLICATES, "simple null: the base prompt alone defines H0"))


def fisher_min_p(reps_a: int, reps_b: int) -> float:
    r"""Smallest two-sided Fisher p-value any outcome can give with ``reps_a`` and ``reps_b`` trials.

    Notes
    -----
    Given the success total s, the count of the first sample is hypergeometric and the two-sided
    p-value of a table is the total probability of the tables no more likely than it; the
    smallest over all s and tables is found by enumeration (:math:`O(N^2)` for N = reps_a +
    reps_b <= 400). For N > 400 it returns the p-value of the most extreme table
    (:math:`k_a = n_a, k_b = 0`), an upper bound of the minimum that is far below any level in
    use there. With one replicate each the minimum is 1, with 2 + 2 it is 1/3 and with 3 + 3
    1/10: no outcome can reject at alpha = 0.05 before 4 + 4 (2/70).
    """
    return _fisher_min_p(_positive_int(reps_a, "reps_a"), _positive_int(reps_b, "reps_b"))


@lru_cache(maxsize=4096)
def _fisher_min_p(na: int, nb: int) -> float:
    from scipy.stats import hypergeom  # here: importing scipy.stats costs ~0.5 s
    N = na + nb
    if N > 400:
        return _fisher_p(na, na, 0, nb)
    best = 1.0
    for s in range(1, N):
        k = np.arange(max(0, s - nb), min(s, na) + 1)
        pmf = hypergeom.pmf(k, N, na, s)
        # scipy's fisher_exact counts tables with probability <= the observed one (relative tolerance 1e-7)
        p = (pmf[None, :] <= pmf[:, None] * (1 + 1e-7)) @ pmf
        best = min(best, float(p.min()))
    return min(best, 1.0)


def energy_min_p(n_x: int, n_y: int, n_permutations: int = 999) -> float:
    r"""Smallest p-value :func:`energy_test` can return for samples of sizes n_x and n_y.

    Exact enumeration (when :math:`\binom{N}{n_x} \le` ``n_permutations``): the observed split
    always counts, and with n_x = n_y so does its mirror image (the statistic is symmetric), so
    the minimum is :math:`1/\binom{N}{n_x}` or :math:`2/\binom{N}{n_x}`; 2 + 2 scores give 1/3.
    Random permutations: :math:`1/(1 + B)`.
    """
    n_x, n_y = _positive_int(n_x, "n_x"), _positive_int(n_y, "n_y")
    B = _positive_int(n_permutations, "n_permutations")
    total = math.comb(n_x + n_y, n_x)
    if total <= B:
        return (2.0 if n_x == n_y else 1.0) / total
    return 1.0 / (1.0 + B)


def _energy_iv(x, y, n_permutations, alpha, rng):
    def arr(v, name):
        a = np.asarray(v, dtype=float)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] < 2:
            raise ValueError(f"{name} must be (n, d) with n >= 2 (or 1-D); got shape {np.shape(v)}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite")
        return a

    xa, ya = arr(x, "x"), arr(y, "y")
    if xa.shape[1] != ya.shape[1]:
        raise ValueError(f"x and y must have the same dimension; got {xa.shape[1]} and {ya.shape[1]}")
    n_permutations = _positive_int(n_permutations, "n_permutations")
    alpha = None if alpha is None else check_alpha(alpha)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    return xa, ya, n_permutations, alpha


def energy_test(x, y, *, n_permutations=999, alpha=None, rng) -> EnergyTestResult:
    r"""Two-sample energy test of :math:`F_x = F_y` on embedded responses (section 6).

    Parameters
    ----------
    x, y : array_like, shape (n, d) and (n', d) (1-D means d = 1)
        Embedded responses to two prompts.
    n_permutations : int, keyword-only
    alpha : float, optional, keyword-only
        When given, ``reject = p_value <= alpha``.
    rng : numpy.random.Generator, keyword-only

    Notes
    -----
    Szekely & Rizzo (2004): with Euclidean distances,

    .. math::

        \mathcal E = 2\,\overline{|X - Y|} - \overline{|X - X'|} - \overline{|Y - Y'|},\qquad
        T = \frac{n n'}{n + n'}\,\mathcal E

    (V-statistic means over all pairs, including i = j), and the permutation p-value
    :math:`(1 + \#\{T^{(b)} \ge T\})/(1 + B)` over B random relabellings of the pooled sample,
    exact in level for exchangeable samples under :math:`H_0`. When there are no more distinct
    splits than B (:math:`\binom{N}{n} \le B`, small samples) every split is enumerated instead
    and :math:`p = \#\{\text{splits with } T^{(s)} \ge T\}/\binom{N}{n}`, the exact permutation
    p-value (``exact=True``). ``min_attainable_p`` (:func:`energy_min_p`) is the smallest p-value
    any data of these sizes could give: above alpha, the test has no power.  This is the simple-null test
    of the paper's section 6 (Figure 5); a composite version for non-binary responses is
    open research (the paper's Discussion).  One pairwise-distance matrix serves every
    permutation: block sums are quadratic forms in the group indicator.
    """
    xa, ya, n_permutations, alpha = _energy_iv(x, y, n_permutations, alpha, rng)
    z = np.vstack([xa, ya])
    n, n2 = xa.shape[0], ya.shape[0]
    N = n + n2
    sq = np.sum(z * z, axis=1)
    d = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0, None))
    total = d.sum()

    def stat(ind):
        # ind: (B, N) 0/1 indicators of the x-group
        dx = ind @ d
        sxx = np.einsum("bn,bn->b", dx, ind)
        row = d.sum(axis=1)
        sxy = ind @ row - sxx
        syy = total - 2.0 * sxy - sxx
        e = 2.0 * sxy / (n * n2) - sxx / n**2 - syy / n2**2
        return e

    obs_ind = np.zeros((1, N))
    obs_ind[0, :n] = 1.0
    e_obs = float(stat(obs_ind)[0])
    t_obs = n * n2 / N * e_obs
    tol = 1e-12 * max(abs(t_obs), 1.0)   # splits equal to the observed one must count as >=
    min_p = energy_min_p(n, n2, n_permutations)
    if math.comb(N, n) <= n_permutations:
        splits = np.zeros((math.comb(N, n), N))
        for row, idx in enumerate(itertools.combinations(range(N), n)):
            splits[row, list(idx)] = 1.0
        e = stat(splits)
        p = float(np.sum(n * n2 / N * e >= t_obs - tol)) / splits.shape[0]
        return EnergyTestResult(statistic=t_obs, energy_distance=e_obs, p_value=p,
                                reject=None if alpha is None else bool(p <= alpha), alpha=alpha, n_x=n, n_y=n2,
                                n_permutations=splits.shape[0],
                                method="energy_distance_permutation (Szekely-Rizzo 2004; all splits)",
                                assumptions=_ENERGY_ASSUMPTIONS, exact=True, min_attainable_p=min_p)
    count = 0
    chunk = max(1, min(n_permutations, 2_000_000 // max(N * N, 1) + 1))
    done = 0
    while done < n_permutations:
        bsz = min(chunk, n_permutations - done)
        perm = np.argsort(rng.random((bsz, N)), axis=1)
        ind = (perm < n).astype(float)
        e = stat(ind)
        count += int(np.sum(n * n2 / N * e >= t_obs - tol))
        done += bsz
    p = (1 + count) / (1 + n_permutations)
    return EnergyTestResult(statistic=t_obs, energy_distance=e_obs, p_value=p,
                            reject=None if alpha is None else bool(p <= alpha), alpha=alpha, n_x=n, n_y=n2,
                            n_permutations=n_permutations, method="energy_distance_permutation (Szekely-Rizzo 2004)",
                            assumptions=_ENERGY_ASSUMPTIONS, min_attainable_p=min_p)
