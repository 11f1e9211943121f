r"""Multiplicity over a suite of benchmarks: directional Holm decisions and e-value procedures.

A checkpoint judged on a suite of m benchmarks asks m questions at once. These functions turn the
per-benchmark evidence into suite-level claims whose error is controlled over the whole family:

* :func:`directional_holm` - which benchmarks improved and which regressed, with the family-wise
  error of all directional claims at most alpha under ANY dependence between benchmarks: Holm's
  (1979) step-down on each side's one-sided p-values at alpha/2 (the same one-sided budget a
  single benchmark's two-sided level-alpha verdict spends on each side, so a suite of one is
  that benchmark's verdict). "Regressed on some benchmark" is the regressed side's global claim:
  made with probability at most alpha/2 when no benchmark regressed.
* :func:`e_to_anytime_p` - the anytime-valid one-sided p-value of a recorded verdict's
  e-process, with the first-look test's share (union bound; Ville's inequality).
* :func:`e_bh` - the e-Benjamini-Hochberg procedure (Wang and Ramdas 2022, JRSS-B 84, Theorem 2):
  false discovery rate at most alpha under any dependence.

Why Holm on anytime-valid p-values stays valid at every look: Holm's first false rejection needs
some true null's p-value below alpha/m0 (m0 true nulls; Holm 1979); an anytime-valid p-value
(one over the running maximum of an e-process, which only falls over looks) crosses alpha/m0 at
some look with probability at most alpha/m0 (Ville 1939), so the union over the m0 true nulls is
at most alpha over all looks together - whatever the dependence between benchmarks.

Pure numpy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comparisons import adjust_pvalues
from .validation import as_float_array, check_alpha

__all__ = ["DirectionalFamily", "EBH", "directional_holm", "one_sided_p_values", "e_to_anytime_p", "e_bh"]

_HOLM_GUARANTEE = ("family-wise error of the directional claims <= alpha under any dependence between the tests: "
                   "Holm (1979) step-down on each side's one-sided p-values at alpha/2 (each side's false claims "
                   "<= alpha/2)",
                   "each one-sided p-value valid: P(p <= x) <= x when that side's null holds (gap <= 0 for "
                   "improved, gap >= 0 for regressed)")


@dataclass(frozen=True)
class DirectionalFamily:
    """Directional decisions over a family of m gaps (one per benchmark).

    Attributes
    ----------
    improved, regressed : ndarray of bool, shape (m,)
        The Holm decisions of each side at alpha/2.
    p_improved, p_regressed : ndarray, shape (m,)
        One-sided p-values (raw).
    p_improved_adjusted, p_regressed_adjusted : ndarray, shape (m,)
        Holm-adjusted one-sided p-values; a side's claim is made where it is <= alpha/2.
    any_regressed : bool
        The global claim "regressed on some benchmark" (FWER <= alpha/2 when none regressed).
    alpha : float
        Family-wise error of all directional claims together (alpha/2 per side).
    n : int
    method : str
    assumptions : tuple of str
    """

    improved: np.ndarray
    regressed: np.ndarray
    p_improved: np.ndarray
    p_regressed: np.ndarray
    p_improved_adjusted: np.ndarray
    p_regressed_adjusted: np.ndarray
    any_regressed: bool
    alpha: float
    n: int
    method: str
    assumptions: tuple[str, ...]


def _p_vector(p, name: str) -> np.ndarray:
    x = as_float_array(p, name, "numeric")
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one per benchmark); got shape {x.shape}")
    bad = ~((x >= 0) & (x <= 1))
    if bad.any():
        raise ValueError(f"{name} must lie in [0, 1]; got {x[bad][0]!r}")
    return x


def one_sided_p_values(p_two_sided, estimate) -> tuple[np.ndarray, np.ndarray]:
    """(p improved, p regressed) from equal-tailed two-sided p-values and the gaps' signs.

    The side the estimate points to gets p/2, the other side 1 (conservative: its exact value is
    1 - p/2). Valid when the two-sided p-value is twice the smaller one-sided one (the t, z and
    betting tests of the comparison rows).
    """
    p = _p_vector(p_two_sided, "p_two_sided")
    try:
        est = np.asarray(estimate, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError("estimate must be numeric") from exc
    if est.shape != p.shape:
        raise ValueError(f"estimate must have the shape of p_two_sided {p.shape}; got {est.shape}")
    half = p / 2.0
    return np.where(est > 0, half, 1.0), np.where(est < 0, half, 1.0)


def directional_holm(p_improved, p_regressed, *, alpha=0.05) -> DirectionalFamily:
    r"""Holm's step-down on each side at alpha/2: which gaps improved, which regressed.

    Parameters
    ----------
    p_improved, p_regressed : array_like, shape (m,)
        One-sided p-values of each gap (e.g. :func:`one_sided_p_values`, or anytime-valid ones
        from :func:`e_to_anytime_p`).
    alpha : float, keyword-only
        Family-wise error of all directional claims together.

    Returns
    -------
    DirectionalFamily

    Notes
    -----
    With :math:`q_{(1)} \le \dots \le q_{(m)}` one side's p-values, Holm rejects :math:`H_{(i)}`
    while :math:`q_{(j)} \le (\alpha/2)/(m - j + 1)` for all :math:`j \le i`. Each side's family-wise
    error is at most alpha/2 under any dependence (Holm 1979, Theorem), so the directional claims of
    both sides together err with probability at most alpha (union bound). With m = 1 the decision is
    the single test's at one-sided alpha/2: a two-sided level-alpha verdict.
    """
    alpha = check_alpha(alpha)
    up, down = _p_vector(p_improved, "p_improved"), _p_vector(p_regressed, "p_regressed")
    if up.shape != down.shape:
        raise ValueError(f"p_regressed must have the shape of p_improved {up.shape}; got {down.shape}")
    h_up = adjust_pvalues(up, alpha=alpha / 2.0, method="holm")
    h_down = adjust_pvalues(down, alpha=alpha / 2.0, method="holm")
    return DirectionalFamily(improved=np.asarray(h_up.rejected), regressed=np.asarray(h_down.rejected),
                             p_improved=up, p_regressed=down, p_improved_adjusted=np.asarray(h_up.p_adjusted),
                             p_regressed_adjusted=np.asarray(h_down.p_adjusted),
                             any_regressed=bool(np.any(h_down.rejected)), alpha=alpha, n=int(up.size),
                             method="holm_directional", assumptions=_HOLM_GUARANTEE)


def e_to_anytime_p(max_log_e, *, first_p=1.0, first_look_share=0.0) -> float:
    r"""One side's anytime-valid p-value of a recorded verdict: its first-look test and its e-process.

    Parameters
    ----------
    max_log_e : float
        The running maximum over the recorded looks of the side's log e-process (a nonnegative
        supermartingale under the side's null, started at 1).
    first_p : float, keyword-only
        The first look's one-sided p-value for the side (1 when it spoke for the other side).
    first_look_share : float in [0, 1), keyword-only
        The share s of the level the first look spends.

    Returns
    -------
    float
        :math:`\min\{1,\ p_1/s,\ 1/((1 - s)\,\max_t E_t)\}` (the first term only when s > 0).

    Notes
    -----
    Under the side's null :math:`P(p_1/s \le x) \le s x` and, by Ville's inequality,
    :math:`P(\exists t: (1-s) E_t \ge 1/x) \le (1 - s) x`; the union bound gives
    :math:`P(p \le x) \le x` for every x, at every look and over all looks together. It falls
    monotonically over looks. A verdict decided at level a on this side (first look at a s, the
    betting test at a (1 - s)) is exactly :math:`p \le a`.
    """
    for name, x in (("first_p", first_p), ("first_look_share", first_look_share)):
        if not 0.0 <= float(x) <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1]; got {x!r}")
    if float(first_look_share) >= 1.0:
        raise ValueError(f"first_look_share must be < 1; got {first_look_share!r}")
    if not np.isfinite(max_log_e) and max_log_e != np.inf:
        raise ValueError(f"max_log_e must be a number or +inf; got {max_log_e!r}")
    s = float(first_look_share)
    out = 1.0
    if s > 0:
        out = min(out, float(first_p) / s)
    with np.errstate(over="ignore"):
        out = min(out, float(np.exp(-max(float(max_log_e), 0.0))) / (1.0 - s))
    return float(out)


@dataclass(frozen=True)
class EBH:
    """The e-BH procedure's discoveries.

    Attributes
    ----------
    rejected : ndarray of bool
    n_rejected : int
    alpha : float
        The false discovery rate controlled (any dependence).
    method : str
    assumptions : tuple of str
    """

    rejected: np.ndarray
    n_rejected: int
    alpha: float
    method: str
    assumptions: tuple[str, ...]


def e_bh(e_values, *, alpha=0.05) -> EBH:
    r"""The e-Benjamini-Hochberg procedure (Wang and Ramdas 2022, JRSS-B 84(3), Definition 1, Theorem 2).

    Parameters
    ----------
    e_values : array_like, shape (m,)
        One e-value per hypothesis (E >= 0 with expectation <= 1 under its null), e.g. each
        recorded verdict's e-process at a stopping time.
    alpha : float, keyword-only
        The false discovery rate.

    Returns
    -------
    EBH

    Notes
    -----
    With :math:`e_{[1]} \ge \dots \ge e_{[m]}` and
    :math:`k^* = \max\{k: e_{[k]} \ge m/(\alpha k)\}`, reject the :math:`k^*` largest. FDR <=
    alpha under arbitrary dependence between the e-values (no PRDS needed).
    """
    alpha = check_alpha(alpha)
    try:
        e = np.asarray(e_values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError("e_values must be numeric") from exc
    if e.ndim != 1 or e.size == 0 or np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError(f"e_values must be a non-empty 1-D array of values >= 0; got {e_values!r}")
    m = e.size
    order = np.argsort(-e, kind="stable")
    k = np.arange(1, m + 1)
    ok = e[order] >= m / (alpha * k)
    k_star = int(k[ok].max()) if ok.any() else 0
    rejected = np.zeros(m, dtype=bool)
    rejected[order[:k_star]] = True
    return EBH(rejected=rejected, n_rejected=k_star, alpha=alpha, method="e_bh",
               assumptions=("each e-value has expectation <= 1 under its null; FDR <= alpha under any dependence "
                            "(Wang and Ramdas 2022, Theorem 2)",))
