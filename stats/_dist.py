"""The few scipy.stats distribution methods the audit calls, without importing scipy.stats.

Importing :mod:`scipy.stats` costs about half a second of CPU (it builds the docstrings of
hundreds of distributions at import time), more than most analyses of an audit take, and a
command typed at a terminal pays it every time.  The audit needs only Student t tail probabilities and
quantiles, normal upper quantiles, binomial tail probabilities, and beta quantiles
(Clopper-Pearson bounds). Each is one :mod:`scipy.special` call, the very call scipy.stats makes for
it (``t``: ``stdtr``/``stdtrit``; ``norm``: ``ndtri``; ``binom``: the Boost-based
``_binom_cdf``/``_binom_sf`` ufuncs; ``beta``: ``_beta_ppf``), wrapped here with scipy.stats'
own handling of arguments: invalid shape parameters and NaN give NaN, the ends of the support
give 0, 1 or +-inf, arrays broadcast, and a scalar comes back as a NumPy scalar.
tests/stats/test_dist_shim.py checks, value for value, that every method returns what scipy.stats
returns on a grid that includes those edge cases (scipy is pinned; the test guards upgrades).

Any other attribute (``hypergeom``, ``beta.pdf``, ``norm.cdf``, a keyword such as ``loc=``) is scipy.stats
itself, imported on first use, so ``from benchcert.stats import _dist as st`` can stand in
for ``from scipy import stats as st``.
"""

from __future__ import annotations

import numpy as np
import scipy.special as _sc
import scipy.special._ufuncs as _scu

__all__ = ["beta", "binom", "norm", "t"]


def _scipy_stats():
    import scipy.stats

    return scipy.stats


def _out(output: np.ndarray):
    return output[()] if output.ndim == 0 else output


def _continuous(core_fn, kind: str, x, *shape, support=(-np.inf, np.inf)):
    """rv_continuous.{cdf,sf,ppf,isf} with loc=0, scale=1 on ``support``.

    ``shape`` holds the shape parameters, valid where all are > 0 (rv_continuous._argcheck).
    """
    lo, hi = support
    x = np.asarray(x)
    shape = tuple(np.asarray(a) for a in shape)
    valid = np.ones((), dtype=bool)
    for a in shape:
        valid = valid & (a > 0)
    if kind in ("cdf", "sf"):
        x = np.asarray(x, dtype=np.promote_types(x.dtype, np.float64))
        inside = (lo < x) & (x < hi)
        cond = valid & inside
        output = np.zeros(np.broadcast(cond, x, *shape).shape, x.dtype)
        np.place(output, np.broadcast_to((~valid) | np.isnan(x), output.shape), np.nan)
        # cdf is 1 at +inf, sf is 1 at -inf
        end = (x >= hi) if kind == "cdf" else (x <= lo)
        np.place(output, np.broadcast_to(valid & end, output.shape), 1.0)
    else:
        inside = (0 < x) & (x < 1)
        cond = valid & inside
        output = np.full(np.broadcast(cond, x, *shape).shape, np.nan)
        low, high = (lo, hi) if kind == "ppf" else (hi, lo)
        np.place(output, np.broadcast_to(valid & (x == 0), output.shape), low)
        np.place(output, np.broadcast_to(valid & (x == 1), output.shape), high)
    cond = np.broadcast_to(cond, output.shape)
    if np.any(cond):
        args = [np.broadcast_to(a, output.shape)[cond] for a in (x, *shape)]
        np.place(output, cond, core_fn(*args))
    return _out(output)


class _T:
    """Student t with ``df`` degrees of freedom (scipy.stats.t, loc 0, scale 1)."""

    def cdf(self, x, df, **kw):
        if kw:
            return _scipy_stats().t.cdf(x, df, **kw)
        return _continuous(lambda x, df: _sc.stdtr(df, x), "cdf", x, df)

    def sf(self, x, df, **kw):
        if kw:
            return _scipy_stats().t.sf(x, df, **kw)
        return _continuous(lambda x, df: _sc.stdtr(df, -x), "sf", x, df)

    def ppf(self, q, df, **kw):
        if kw:
            return _scipy_stats().t.ppf(q, df, **kw)
        return _continuous(lambda q, df: _sc.stdtrit(df, q) * 1.0 + 0.0, "ppf", q, df)

    def isf(self, q, df, **kw):
        if kw:
            return _scipy_stats().t.isf(q, df, **kw)
        return _continuous(lambda q, df: -_sc.stdtrit(df, q) * 1.0 + 0.0, "isf", q, df)

    def __getattr__(self, name):
        return getattr(_scipy_stats().t, name)


class _Norm:
    """The standard normal distribution's upper quantiles (scipy.stats.norm.isf, loc 0, scale 1)."""

    def isf(self, q, **kw):
        if kw:
            return _scipy_stats().norm.isf(q, **kw)
        return _continuous(lambda q: -_sc.ndtri(q) * 1.0 + 0.0, "isf", q)

    def __getattr__(self, name):
        return getattr(_scipy_stats().norm, name)


def _binom_tail(core_fn, kind: str, k, n, p):
    """rv_discrete.{cdf,sf} of binom(n, p) with loc 0: support 0..n."""
    k, n, p = np.asarray(k), np.asarray(n), np.asarray(p)
    valid = (n >= 0) & (n == np.round(n)) & (p >= 0) & (p <= 1)  # binom._argcheck
    k = np.asarray(k - 0)
    inside = (k >= 0) & (k < n)
    cond = valid & inside & np.isfinite(k)
    shape = np.broadcast(cond, k, n, p).shape
    if kind == "cdf":
        output = np.zeros(shape, "d")
        np.place(output, np.broadcast_to((k >= n) * (valid == valid), shape), 1.0)
        np.place(output, np.broadcast_to(np.isneginf(k) * (valid == valid), shape), 0.0)
    else:
        output = np.zeros(shape, "d")
        np.place(output, np.broadcast_to(((k < 0) & valid) * (valid == valid), shape), 1.0)
    np.place(output, np.broadcast_to((1 - valid) + np.isnan(k), shape), np.nan)
    cond = np.broadcast_to(cond, shape)
    if np.any(cond):
        args = [np.broadcast_to(a, shape)[cond] for a in (k, n, p)]
        np.place(output, cond, np.clip(core_fn(np.floor(args[0]), args[1], args[2]), 0, 1))
    return _out(output)


class _Binom:
    """The binomial distribution (scipy.stats.binom, loc 0)."""

    def cdf(self, k, n, p, **kw):
        if kw:
            return _scipy_stats().binom.cdf(k, n, p, **kw)
        return _binom_tail(_scu._binom_cdf, "cdf", k, n, p)

    def sf(self, k, n, p, **kw):
        if kw:
            return _scipy_stats().binom.sf(k, n, p, **kw)
        return _binom_tail(_scu._binom_sf, "sf", k, n, p)

    def __getattr__(self, name):
        return getattr(_scipy_stats().binom, name)


class _Beta:
    """The beta distribution's quantiles (scipy.stats.beta.ppf, loc 0, scale 1): Clopper-Pearson bounds."""

    def ppf(self, q, a, b, **kw):
        if kw:
            return _scipy_stats().beta.ppf(q, a, b, **kw)
        return _continuous(lambda q, a, b: _scu._beta_ppf(q, a, b) * 1.0 + 0.0, "ppf", q, a, b, support=(0.0, 1.0))

    def __getattr__(self, name):
        return getattr(_scipy_stats().beta, name)


t = _T()
norm = _Norm()
binom = _Binom()
beta = _Beta()


def __getattr__(name: str):
    """Everything else is scipy.stats' own (imported on first use)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_scipy_stats(), name)
