r"""The chi-square radius of a family of deployment environments and its optimal proposal.

An *environment* is a probability distribution over a benchmark's items (a deployment mix).
The certifying-capabilities paper (section 3.1.1, eq. 1) measures how hard it is to certify a
model on a finite family :math:`\mathcal P = \{p_1, \dots, p_m\}` at once by its chi-square
radius

.. math:: V(\mathcal P) = \min_q \max_i \chi^2(p_i \,\|\, q), \qquad
          \chi^2(p\,\|\,q) = \sum_z p(z)^2 / q(z) - 1,

and Theorem 3.4 samples from the minimising proposal :math:`q^*`. Everything here works on
*atoms* (domains or subjects): an environment puts weight :math:`w_{ia}` on atom ``a`` and is
uniform over the :math:`N_a` items inside it, :math:`p_i(z) = w_{ia}/N_a`. For a proposal that
is uniform within atoms too, :math:`q(z) = Q_a/N_a`, the item-level divergence equals the
atom-level one, :math:`\chi^2(p_i\|q) = \sum_a w_{ia}^2/Q_a - 1`; and the minimiser is uniform
within atoms (the objective is convex and invariant under permuting an atom's items), so
solving on atoms is exact, not an approximation.

All functions are pure numpy/scipy and draw no randomness.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln

from benchcert.stats.degenerate import warn_degenerate
from benchcert.stats.validation import check_unit_interval

__all__ = [
    "Chi2Radius",
    "Chi2RadiusBounds",
    "TVCover",
    "check_family",
    "chi2_divergences",
    "chi2_radius",
    "chi2_radius_bounds",
    "tv_cover",
    "round_to_grid",
]


# --------------------------------------------------------------------------------------
# input checks


def check_family(P, name: str = "P") -> np.ndarray:
    """Validate an (m, K) array of environments over K atoms (rows are probability vectors).

    Raises
    ------
    ValueError
        Naming ``name`` and the offending row when an entry is negative or not finite, or a
        row does not sum to 1 (tolerance 1e-9).
    """
    try:
        arr = np.array(P, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (m, K) array; got {type(P).__name__}") from exc
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (m, K) array; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        row = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise ValueError(f"{name} must be finite; row {row} is {arr[row].tolist()}")
    if np.any(arr < 0):
        row = int(np.flatnonzero((arr < 0).any(axis=1))[0])
        raise ValueError(f"{name} must be non-negative; row {row} is {arr[row].tolist()}")
    sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > 1e-9)
    if bad.size:
        raise ValueError(f"{name} rows must sum to 1; row {int(bad[0])} sums to {sums[bad[0]]!r}")
    return arr / sums[:, None]


def _check_proposal(q, K: int, name: str = "q") -> np.ndarray:
    arr = np.asarray(q, dtype=float)
    if arr.shape != (K,):
        raise ValueError(f"{name} must have one entry per atom (shape ({K},)); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must be a probability vector (non-negative, sums to 1); got {arr.tolist()}")
    return arr


def _check_sizes(sizes, K: int) -> np.ndarray:
    arr = np.asarray(sizes)
    if arr.shape != (K,) or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 1):
        raise ValueError(f"sizes must be {K} positive integer item counts, one per atom; got {sizes!r}")
    return arr.astype(np.int64)


# --------------------------------------------------------------------------------------
# divergences and the radius


def chi2_divergences(P, q) -> np.ndarray:
    r""":math:`\chi^2(p_i\|q) = \sum_a p_{ia}^2/q_a - 1` for every row of ``P``.

    ``inf`` where a row puts mass on an atom that ``q`` does not (``p_i`` not absolutely
    continuous with respect to ``q``).
    """
    P = check_family(P)
    q = _check_proposal(q, P.shape[1])
    pos = q > 0
    out = (P[:, pos] ** 2 / q[pos]).sum(axis=1) - 1.0
    uncovered = (P[:, ~pos] > 0).any(axis=1)
    out[uncovered] = np.inf
    return np.maximum(out, 0.0)  # rounding can leave -1e-16 for p = q


@dataclass(frozen=True)
class Chi2Radius:
    r"""The chi-square radius of a finite family, sandwiched by a duality-gap certificate.

    Attributes
    ----------
    value : float
        :math:`\max_i \chi^2(p_i\|q)` at the returned proposal: an upper bound on V, and the
        quantity Theorem 3.4's variance bound actually uses for that proposal.
    lower : float
        The dual objective minus 1 at the returned weights: a lower bound on V.
    gap : float
        ``value - lower`` (>= 0); the solver stops when it is <= ``tol * (1 + lower)``.
    proposal : ndarray (K,)
        :math:`q^*_a \propto \sqrt{\sum_i \lambda_i p_{ia}^2}`.
    weights : ndarray (m,)
        The dual weights :math:`\lambda` (environments that bind get weight, others ~0).
    divergences : ndarray (m,)
        :math:`\chi^2(p_i\|q^*)` per environment.
    """

    value: float
    lower: float
    gap: float
    proposal: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    divergences: np.ndarray = field(repr=False)
    tol: float = 1e-9
    iterations: int = 0
    converged: bool = True
    method: str = "dual_multiplicative_ascent"
    assumptions: tuple[str, ...] = ()


def _dual(W2: np.ndarray, lam: np.ndarray):
    a = lam @ W2
    r = np.sqrt(a)
    S = float(r.sum())
    q = r / S
    pos = q > 0
    grad = (W2[:, pos] / q[pos]).sum(axis=1)  # = 1 + chi2(p_i || q(lam)) = d g / d lam_i
    uncovered = (W2[:, ~pos] > 0).any(axis=1)
    grad[uncovered] = np.inf
    return S * S, q, grad


def _slsqp_start(W2: np.ndarray) -> np.ndarray:
    """Dual weights from SLSQP on sqrt(g) (same maximiser, smoother), as a warm start.

    Only a starting point: the ascent below accepts it only through its own checks, and the
    certificate is computed from whatever weights it ends with.
    """
    m = W2.shape[0]
    lam0 = np.full(m, 1.0 / m)
    if m == 1:
        return lam0

    def neg_h(lam):
        a = np.maximum(lam @ W2, 1e-300)
        return -float(np.sqrt(a).sum()), -(W2 / (2.0 * np.sqrt(a))).sum(axis=1)

    from scipy import optimize  # here, not at import: scipy.optimize costs every command ~0.1 s

    with np.errstate(all="ignore"):
        res = optimize.minimize(neg_h, lam0, jac=True, method="SLSQP", bounds=[(0.0, 1.0)] * m,
                                constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0,
                                              "jac": lambda x: np.ones_like(x)}],
                                options={"maxiter": 500, "ftol": 1e-15})
    lam = np.clip(np.nan_to_num(res.x, nan=0.0), 1e-12, None)
    lam = lam / lam.sum()
    # Keep the warm start only if it is at least as good as the uniform weights.
    return lam if _dual(W2, lam)[0] >= _dual(W2, lam0)[0] else lam0


def chi2_radius(P, *, tol: float = 1e-7, max_iter: int = 20_000) -> Chi2Radius:
    r"""Chi-square radius :math:`V(\mathcal P)` (paper eq. 1) and the optimal proposal.

    Parameters
    ----------
    P : array_like, shape (m, K)
        Environments over K atoms; rows are probability vectors.
    tol : float, keyword-only
        Relative duality-gap tolerance: stop when
        :math:`\max_i(1+\chi^2(p_i\|q)) - g(\lambda) \le \mathrm{tol}\cdot g(\lambda)`.
    max_iter : int, keyword-only
        Iteration cap; if reached, ``converged`` is False and ``value`` is still a valid
        upper bound (with ``lower`` a valid lower bound).

    Returns
    -------
    Chi2Radius

    Notes
    -----
    Dual (section 3.1.1): for any proposal q and weights :math:`\lambda` in the simplex,

    .. math:: 1 + \max_i \chi^2(p_i\|q) \ge \sum_i \lambda_i \sum_a p_{ia}^2/q_a
              \ge \min_q \sum_a \frac{A_a(\lambda)}{q_a} = \Big(\sum_a \sqrt{A_a(\lambda)}\Big)^2
              =: g(\lambda), \qquad A_a(\lambda) = \sum_i \lambda_i p_{ia}^2,

    (the inner minimum by Cauchy-Schwarz, at :math:`q_a \propto \sqrt{A_a}`), and the minimax
    theorem gives :math:`V + 1 = \max_\lambda g(\lambda)`; g is concave. So every iterate
    yields the certified sandwich ``lower = g(lambda) - 1 <= V <= value``.

    Algorithm: a warm start from SLSQP on :math:`\sqrt{g}`, then multiplicative (mirror)
    ascent on the simplex. The gradient is
    :math:`\partial g/\partial\lambda_i = 1 + \chi^2(p_i\|q(\lambda))` and
    :math:`\sum_i \lambda_i \partial_i g = g`, so the step
    :math:`\lambda_i \leftarrow \lambda_i (\partial_i g/g)^t / Z` is accepted when it does
    not decrease g (t doubled after a success, halved after a failure). At a fixed point
    every environment with positive weight has :math:`1 + \chi^2 = g` and the others less,
    which is exactly a zero duality gap.
    """
    P = check_family(P)
    check_unit_interval("tol", tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}")
    m = P.shape[0]
    W2 = P ** 2
    lam = _slsqp_start(W2)
    g, q, grad = _dual(W2, lam)
    t, it, converged = 1.0, 0, False
    for it in range(1, max_iter + 1):
        if grad.max() - g <= tol * g:
            converged = True
            break
        while True:
            step = lam * np.exp(t * (np.log(grad) - np.log(g)))
            new = step / step.sum()
            g_new, q_new, grad_new = _dual(W2, new)
            if g_new >= g or t < 1e-12:
                break
            t /= 2.0
        if g_new < g:  # no ascent possible at machine precision: the gap is what it is
            break
        lam, g, q, grad = new, g_new, q_new, grad_new
        t = min(2.0 * t, 64.0)
    div = np.maximum(grad - 1.0, 0.0)
    value = float(div.max())
    lower = max(g - 1.0, 0.0)
    if not converged:
        warn_degenerate(f"chi2_radius: duality gap {value - lower:.3g} above tol * (1 + V) after {it} iterations; "
                        "value is still a valid upper bound on V (and lower a lower bound)")
    return Chi2Radius(
        value=value, lower=float(lower), gap=float(max(value - lower, 0.0)), proposal=q, weights=lam,
        divergences=div, tol=float(tol), iterations=it, converged=converged,
        assumptions=("environments are uniform over the items inside each atom (domain or subject)",
                     "certified by weak duality: lower = g(lambda) - 1 <= V <= value = max_i chi2(p_i || q*)"))


# --------------------------------------------------------------------------------------
# Example 4's upper bounds


@dataclass(frozen=True)
class Chi2RadiusBounds:
    r"""Example 4's three proposals and the upper bounds on V they give.

    For each proposal, ``*_value`` is :math:`\max_i\chi^2(p_i\|q)` at that proposal (an upper
    bound on V) and ``*_closed_form`` the paper's closed-form bound, which it never exceeds:

    * mixture :math:`q = \frac1m\sum_i p_i`: paper V <= m; in fact <= m - 1, because
      :math:`p_i/q \le m` gives :math:`\sum_z p_i^2/q \le m`;
    * uniform over the items :math:`\mathcal Z`: paper V <= |Z|; in fact <= |Z| - 1;
    * Shtarkov/NML :math:`q(z) = \sup_i p_i(z)/S`: V <= S - 1 (as in the paper).
    """

    mixture_value: float
    mixture_closed_form: float
    uniform_value: float
    uniform_closed_form: float
    shtarkov_value: float
    shtarkov_closed_form: float
    shtarkov_sum: float
    proposals: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict:
        return {"mixture": self.mixture_value, "uniform": self.uniform_value, "shtarkov": self.shtarkov_value}


def chi2_radius_bounds(P, *, sizes=None) -> Chi2RadiusBounds:
    r"""Example 4 of the certifying-capabilities paper: three explicit upper bounds on V.

    Parameters
    ----------
    P : array_like, shape (m, K)
        Environments over K atoms.
    sizes : array_like of int, shape (K,), keyword-only
        Items per atom. When given, the uniform proposal is uniform over the items
        (:math:`Q_a = N_a/N`, :math:`|\mathcal Z| = N`); otherwise atoms are the items.

    Notes
    -----
    The Shtarkov sum over items equals the atom-level one: an atom's :math:`N_a` items each
    have :math:`\sup_i p_i(z) = \max_i w_{ia}/N_a`, summing to :math:`\max_i w_{ia}`. The
    closed forms are attained: the mixture and Shtarkov bounds by m disjoint environments
    (V = m - 1 = S - 1), the uniform one by a point mass on one item (V = |Z| - 1).
    """
    P = check_family(P)
    m, K = P.shape
    if sizes is None:
        sizes_arr = np.ones(K, dtype=np.int64)
    else:
        sizes_arr = _check_sizes(sizes, K)
    mix = P.mean(axis=0)
    uni = sizes_arr / sizes_arr.sum()
    S = float(P.max(axis=0).sum())
    nml = P.max(axis=0) / S
    return Chi2RadiusBounds(
        mixture_value=float(chi2_divergences(P, mix).max()), mixture_closed_form=float(m),
        uniform_value=float(chi2_divergences(P, uni).max()), uniform_closed_form=float(sizes_arr.sum()),
        shtarkov_value=float(chi2_divergences(P, nml).max()), shtarkov_closed_form=S - 1.0, shtarkov_sum=S,
        proposals={"mixture": mix, "uniform": uni, "shtarkov": nml})


# --------------------------------------------------------------------------------------
# Theorem 3.8: a total-variation cover of a convex hull of mixes


@dataclass(frozen=True)
class TVCover:
    r"""A grid cover of the convex hull of k vertex environments (Theorem 3.8).

    Points :math:`\sum_j (c_j/r) v_j` with non-negative integers :math:`\sum_j c_j = r`
    (``resolution`` r). ``size`` is :math:`\binom{r+k-1}{k-1}` (``log_size`` its natural log,
    exact even when the size is astronomically large) and ``radius`` an upper bound on
    :math:`\sup_p \min_\nu \mathrm{TV}(p, \nu)`.
    """

    vertices: int
    epsilon: float
    resolution: int
    size: float
    log_size: float
    radius: float
    method: str = "simplex_grid_largest_remainder"


def tv_cover(vertices: int, epsilon: float) -> TVCover:
    r"""Grid cover of radius <= epsilon/2 in total variation of the hull of ``vertices`` mixes.

    Notes
    -----
    For mixtures :math:`p_\theta = \sum_j \theta_j v_j` of environments,
    :math:`\mathrm{TV}(p_\theta, p_{\theta'}) \le \tfrac12\|\theta-\theta'\|_1`. Rounding
    :math:`r\theta` to integers by largest remainders (:func:`round_to_grid`) moves every
    coordinate by less than 1/r and keeps the sum, so the positive and negative parts of
    :math:`\theta'-\theta` each have mass below :math:`\min(u, k-u)/r \le \lfloor k/2\rfloor/r`
    (u = coordinates rounded up). Hence TV < floor(k/2)/r, and
    :math:`r = \lceil 2\lfloor k/2\rfloor/\varepsilon\rceil` gives radius <= epsilon/2, as
    Theorem 3.8 asks.
    """
    if isinstance(vertices, bool) or not isinstance(vertices, numbers.Integral) or vertices < 1:
        raise ValueError(f"vertices must be a positive integer; got {vertices!r}")
    check_unit_interval("epsilon", epsilon)
    k = int(vertices)
    half = k // 2
    if half == 0:
        return TVCover(vertices=1, epsilon=float(epsilon), resolution=1, size=1.0, log_size=0.0, radius=0.0)
    r = max(1, math.ceil(2 * half / epsilon - 1e-12))
    log_size = float(gammaln(r + k) - gammaln(r + 1) - gammaln(k))
    size = float(math.comb(r + k - 1, k - 1)) if log_size < 700 else math.inf
    return TVCover(vertices=k, epsilon=float(epsilon), resolution=r, size=size, log_size=log_size,
                   radius=half / r)


def round_to_grid(theta, resolution: int) -> np.ndarray:
    """Largest-remainder rounding of a point of the simplex to the grid with denominator ``resolution``."""
    th = np.asarray(theta, dtype=float)
    if th.ndim != 1 or np.any(th < 0) or abs(th.sum() - 1) > 1e-9:
        raise ValueError(f"theta must be a probability vector; got {theta!r}")
    if isinstance(resolution, bool) or not isinstance(resolution, numbers.Integral) or resolution < 1:
        raise ValueError(f"resolution must be a positive integer; got {resolution!r}")
    x = th * resolution
    c = np.floor(x).astype(np.int64)
    short = int(resolution - c.sum())
    if short > 0:
        c[np.argsort(-(x - c), kind="stable")[:short]] += 1
    return c / resolution
