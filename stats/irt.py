r"""The two-parameter logistic (2PL) item response model fitted across models by marginal maximum
likelihood (Bock & Aitkin 1981), with weak normal priors on the item parameters.

:func:`fit_2pl` - per item a slope (discrimination) and a difficulty on the ability scale of the
models, :math:`P(x_{ij} = 1 \mid \theta_j) = \sigma(a_i(\theta_j - b_i))`, abilities integrated
out against :math:`N(0, 1)` by Gauss-Hermite quadrature.

Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp

from ._blas import loop_blas_threads
from .validation import check_positive_int, check_scores

__all__ = ["MIN_MODELS", "IrtFit", "fit_2pl"]

#: Fewest models an item needs for its 2PL parameters to be reported (the issue's "about 20").
MIN_MODELS = 20


@dataclass(frozen=True)
class IrtFit:
    """A 2PL fit: per item (shape (n_items,)) slope ``a``, difficulty ``b`` (NaN where not fitted),
    per model the posterior mean ability ``theta``; ``fitted`` marks the items fitted,
    ``iterations`` and ``converged`` the EM, ``log_likelihood`` the marginal log-likelihood."""

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    fitted: np.ndarray
    iterations: int
    converged: bool
    log_likelihood: float
    prior_sd: float
    method: str
    assumptions: tuple[str, ...]


def _fit_2pl_iv(scores, prior_sd, max_iter, tol, n_quadrature):
    s = check_scores(scores, "scores", ndim=2, allow_nan=True)
    if not (np.isnan(s) | (s == 0) | (s == 1)).all():
        raise ValueError("scores must be 0/1 (or NaN) for the 2PL model; got fractional scores")
    if not (isinstance(prior_sd, (int, float)) and prior_sd > 0):
        raise ValueError(f"prior_sd must be > 0; got {prior_sd!r}")
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"tol must be > 0; got {tol!r}")
    return s, float(prior_sd), check_positive_int(max_iter, "max_iter"), float(tol), \
        check_positive_int(n_quadrature, "n_quadrature")


def _newton(a, c, r, n, nodes, prior_var):
    """One Newton step of every item's expected complete-data log posterior in (slope, intercept)."""
    z = a[:, None] * nodes[None, :] + c[:, None]
    p = expit(z)
    resid = r - n * p
    w = n * p * (1.0 - p)
    ga = resid @ nodes - a / prior_var
    gc = resid.sum(axis=1) - c / prior_var
    haa = -(w @ (nodes * nodes)) - 1.0 / prior_var
    hac = -(w @ nodes)
    hcc = -w.sum(axis=1) - 1.0 / prior_var
    det = haa * hcc - hac * hac
    da = (hcc * ga - hac * gc) / det
    dc = (haa * gc - hac * ga) / det
    # a damped step: an item all but one model passes has a flat likelihood ridge
    step = np.minimum(1.0, 2.0 / np.maximum(np.abs(da), np.abs(dc)).clip(min=1e-12))
    return a - step * da, c - step * dc


def _em(X, A, a, c, nodes, log_pi, prior_var, max_iter, tol):
    """Bock-Aitkin EM iterations from (a, c); returns the parameters, the last posterior weights,
    the iterations, whether it converged and the marginal log-likelihood."""
    converged, it, ll = False, 0, float("nan")
    XT, BT = np.ascontiguousarray(X.T), np.ascontiguousarray((A - X).T)
    for it in range(1, max_iter + 1):
        z = a[:, None] * nodes[None, :] + c[:, None]
        log_p = -np.logaddexp(0.0, -z)
        log_q = -np.logaddexp(0.0, z)
        log_l = XT @ log_p + BT @ log_q + log_pi[None, :]       # (models, nodes)
        norm = logsumexp(log_l, axis=1, keepdims=True)
        ll = float(norm.sum())
        w = np.exp(log_l - norm)
        r = X @ w
        n = A @ w
        a_new, c_new = _newton(a, c, r, n, nodes, prior_var)
        change = max(float(np.abs(a_new - a).max()), float(np.abs(c_new - c).max()))
        a, c = a_new, c_new
        if change < tol:
            converged = True
            break
    return a, c, w, it, converged, ll


def fit_2pl(scores, *, prior_sd=2.0, max_iter=200, tol=1e-4, n_quadrature=31) -> IrtFit:
    r"""Fit the 2PL model to every non-inert item answered by at least :data:`MIN_MODELS` models.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        0/1 scores; NaN = not answered (left out of the likelihood).
    prior_sd : float, keyword-only
        SD of the N(0, prior_sd^2) priors on each item's slope and intercept.
    max_iter, tol : keyword-only
        EM iterations at most, and the largest parameter change that stops it.
    n_quadrature : int, keyword-only
        Gauss-Hermite nodes of the N(0, 1) ability distribution.

    Returns
    -------
    IrtFit

    Notes
    -----
    Bock & Aitkin's (1981) EM: with nodes :math:`\theta_q` and weights :math:`\pi_q` of
    :math:`N(0, 1)`, the E-step forms each model's posterior over the nodes,
    :math:`w_{jq} \propto \pi_q \prod_i P_{iq}^{x_{ij}}(1-P_{iq})^{1-x_{ij}}` (answered items),
    and the expected counts :math:`r_{iq} = \sum_j x_{ij} w_{jq}`, :math:`n_{iq} = \sum_j w_{jq}`
    (models that answered i); the M-step takes a Newton step of each item's
    :math:`\sum_q r_{iq}\log P_{iq} + (n_{iq} - r_{iq})\log(1 - P_{iq})` in the slope-intercept
    form :math:`\sigma(a\theta + c)`, :math:`b = -c/a`. Deliberate departure from pure maximum
    likelihood: the weak priors :math:`a, c \sim N(0, \text{prior\_sd}^2)` (marginal maximum a
    posteriori, Mislevy 1986) keep finite the items that the models separate perfectly, which
    with a few dozen models are many. The prior on the slope is centred at 0, so it does not
    push a slope's sign either way. Abilities are identified by :math:`\theta \sim N(0, 1)`.
    """
    s, prior_sd, max_iter, tol, n_q = _fit_2pl_iv(scores, prior_sd, max_iter, tol, n_quadrature)
    answered = ~np.isnan(s)
    x = np.where(answered, s, 0.0)
    n_ans = answered.sum(axis=1)
    k = x.sum(axis=1)
    fitted = (n_ans >= MIN_MODELS) & (k > 0) & (k < n_ans)
    idx = np.flatnonzero(fitted)
    n_items, n_models = s.shape
    a_out = np.full(n_items, np.nan)
    b_out = np.full(n_items, np.nan)
    if idx.size == 0:
        return IrtFit(a_out, b_out, np.full(n_models, np.nan), fitted, 0, True, float("nan"), prior_sd,
                      "2pl_marginal_map_em", ("no item answered by enough models with both outcomes",))
    X = x[idx]
    A = answered[idx].astype(float)
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_q)
    log_pi = np.log(weights / weights.sum())
    # start: slope 1, intercept from the item's share correct
    share = np.clip(k[idx] / n_ans[idx], 0.02, 0.98)
    a = np.ones(idx.size)
    c = np.log(share / (1.0 - share))
    with loop_blas_threads():  # small products in a loop (stats/_blas.py)
        a, c, w, it, converged, ll = _em(X, A, a, c, nodes, log_pi, prior_sd * prior_sd, max_iter, tol)
    theta = w @ nodes
    a_out[idx] = a
    with np.errstate(divide="ignore", invalid="ignore"):
        b_out[idx] = np.where(np.abs(a) > 1e-3, -c / a, np.nan)
    return IrtFit(a_out, b_out, theta, fitted, it, converged, ll, prior_sd, "2pl_marginal_map_em",
                  ("2PL: no guessing parameter; abilities N(0, 1)", "models are the respondents, "
                   "assumed a sample from one ability distribution",
                   f"weak N(0, {prior_sd:g}^2) priors on slope and intercept (marginal MAP)",
                   f"items answered by >= {MIN_MODELS} models with both outcomes"))
