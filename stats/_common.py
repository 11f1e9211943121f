"""Private helpers shared inside ``benchcert.stats`` only: index lists in messages, 0-d results
as scalars, the CR2 variance of a clustered mean.

The public pieces that once lived here have their own modules: :mod:`.degenerate` (the
degenerate-data warning, :class:`Ref`), :mod:`.validation` (input checks) and
:mod:`.segments` (block sums, :class:`Grouping`); import them from there. Nothing in tasks/ or
flows/ imports this module (tests/project/test_layout_stats.py).

Everything here is pure numpy; nothing performs I/O.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cr2_mean", "unwrap_scalar"]


def unwrap_scalar(x):
    """0-d results as plain Python scalars (``x.item()``), arrays as they are: what a function
    given scalars returns."""
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


def _short(values, limit: int = 8) -> str:
    """Render the first few entries of an index list for an error or warning message."""
    values = [int(v) if isinstance(v, (np.integer, int)) else v for v in values]
    if len(values) <= limit:
        return str(values)
    return str(values[:limit])[:-1] + f", ... ({len(values)} in all)]"


def cr2_mean(n_c, r_c, rho=0.0):
    r"""CR2 cluster-robust variance of a mean over clustered items and its Bell-McCaffrey df.

    Parameters
    ----------
    n_c : ndarray, shape (C, P)
        Items per cluster (0 = cluster absent for that column).
    r_c : ndarray, shape (C, P)
        Per-cluster residual sums :math:`r_c = \sum_{i \in c}(D_i - \bar D)`.
    rho : float or ndarray of shape (P,)
        Working intraclass correlation for the degrees of freedom (0 = independent items).

    Returns
    -------
    (var, df) : ndarrays of shape (P,)

    Notes
    -----
    For the intercept-only regression :math:`D_i = \mu + e_i` the hat-matrix block of cluster
    c is :math:`H_{cc} = J_{n_c}/N`, so the CR2 adjustment :math:`A_c = (I - H_{cc})^{-1/2}`
    maps the residual sum to :math:`r_c/\sqrt{1 - f_c}`, :math:`f_c = n_c/N`, and (Bell and
    McCaffrey 2002; Pustejovsky and Tipton 2018, Eq. 6)

    .. math:: V_{CR2} = \frac{1}{N^2}\sum_c \frac{r_c^2}{1 - f_c}.

    Bell-McCaffrey degrees of freedom: :math:`(\sum_j\lambda_j)^2/\sum_j\lambda_j^2`, with
    :math:`\lambda` the eigenvalues of :math:`G^\top\Omega G`, G's column c being
    :math:`w_c(1_c - f)`, :math:`w_c = (1 - f_c)^{-1/2}/N`, and :math:`\Omega` the working
    covariance: exchangeable within clusters with correlation rho (Imbens and Kolesar 2016,
    sec. 5, who estimate rho from the data). With :math:`q_c = (1-\rho)n_c + \rho n_c^2`,
    :math:`Q = \sum q_c`, :math:`a = Wq`, :math:`b = Wf`, the trace and the Frobenius norm
    give the two sums without an eigendecomposition:
    :math:`\sum\lambda = \sum_c w_c^2(q_c - 2f_cq_c + f_c^2Q)` and
    :math:`\sum\lambda^2 = \sum_c w_c^4q_c^2 + 2\sum_c w_c^4q_c(Qf_c^2 - 2q_cf_c)
    + 2(a\cdot b)^2 + 2|a|^2|b|^2 - 4Q(a\cdot b)|b|^2 + Q^2|b|^4`.
    With equal cluster sizes the df are C - 1; with unequal sizes fewer. The comparisons use
    rho = 0 (the usual working model): on MMLU-Pro's subject sizes (17-1,003 items) the size at
    alpha = 5% is 4.8-5.6% for between-subject SDs of the gap of 0-0.13 (CR1 with C - 1 df:
    6.3%); with rho estimated from the data (Imbens and Kolesar's choice) it was 3.6-3.8%,
    conservative enough to cost power (tests/stats/comparisons/test_stats_comparisons.py). The comparator
    intervals (stats/intervals.py) use the same correction for a model's pooled score.
    """
    n_c = np.asarray(n_c, dtype=float)
    big_n = n_c.sum(axis=0)
    present = n_c > 0
    f = np.where(present, n_c / big_n, 0.0)
    keep = np.where(present & (f < 1), 1.0 - f, 1.0)
    use = present & (f < 1)
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.sum(np.where(use, r_c * r_c / keep, 0.0), axis=0) / (big_n * big_n)
        w2 = np.where(use, 1.0 / (keep * big_n * big_n), 0.0)
        q = (1.0 - rho) * n_c + rho * n_c * n_c
        big_q = np.sum(np.where(present, q, 0.0), axis=0)
        s1 = np.sum(w2 * (q - 2.0 * f * q + f * f * big_q), axis=0)
        ab = np.sum(w2 * q * f, axis=0)
        aa = np.sum(w2 * q * q, axis=0)
        bb = np.sum(w2 * f * f, axis=0)
        s2 = (np.sum(w2 * w2 * q * q, axis=0) + 2.0 * np.sum(w2 * w2 * q * (big_q * f * f - 2.0 * q * f), axis=0)
              + 2.0 * ab * ab + 2.0 * aa * bb - 4.0 * big_q * ab * bb + big_q * big_q * bb * bb)
        df = s1 * s1 / s2
    c = present.sum(axis=0)
    df = np.where(np.isfinite(df) & (df > 0), np.minimum(df, np.maximum(c - 1.0, 1.0)), 1.0)
    return var, df
