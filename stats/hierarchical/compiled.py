"""Compiled by numba: the trigamma functions of :mod:`.special` (one pass over the array instead of
about twenty array operations and their temporaries) and the knapsack of
:func:`.profile.joint_subject_bound` (one model at a time, its budget row in cache, instead of a
gathered (models, bins) window per domain and grid interval); and the sums of log-gammas and
digammas of the beta-binomial likelihood (:class:`.likelihood._BetaBinomialLik`) and of its profile's
subject form (:class:`.profile._SubjectProfile`), one pass per row or column instead of an array per
term (issue #40: at a billion responses, 500,000 fits).

Each kernel takes, element by element, the same IEEE operations in the same order as its numpy
form (the trigammas': the lift by the recurrence, at most ``floor`` steps, then the series, with
the same constants; the sums': scipy's own gammaln and psi, the C functions its ufuncs call, then
the additions in the order ``_colsum`` or numpy's pairwise row sum makes them): numba compiles
without fast-math, so no operation is fused or reordered and the results are **the same bits**
(tests/stats/hierarchical/test_compiled.py checks it on every range and special value). So
whether a call takes the compiled or the numpy form changes nothing but its cost, and the callers
may choose either for any call.

Compiled with ``cache=True`` (once per machine, in ``__pycache__`` or numba's user cache), like the
store read's loops (tasks/store/dense_kernels.py); this module is imported only when a process has
fits enough to pay numba's start (:func:`benchcert.stats.hierarchical.special.prepare_compiled`).
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from numba.extending import get_cython_function_address

# scipy's own log-gamma and digamma (the C functions its ufuncs gammaln and psi call, so the same
# bits), passed to the kernels below as arguments: a compiled function that held their addresses
# could not be cached (the addresses change from process to process).
_DOUBLE_FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
GAMMALN = _DOUBLE_FN(get_cython_function_address("scipy.special.cython_special", "gammaln"))
PSI = _DOUBLE_FN(get_cython_function_address("scipy.special.cython_special", "__pyx_fuse_1psi"))

# The series' coefficients, computed as in special.py (the same doubles).
_M30 = -1.0 / 30
_P30 = 1.0 / 30
_P42 = 1.0 / 42
_P6 = 1.0 / 6


@numba.njit(cache=True)
def _lift(x, floor):  # pragma: no cover - compiled
    """(1 / z, acc): :func:`benchcert.stats.hierarchical.special._trigamma_lift` of one value (x lifted
    to >= floor in at most floor steps of the recurrence, acc the terms 1/x^2 taken on the way)."""
    z = x
    acc = 0.0
    steps = 0
    while steps < floor and z < floor:
        acc += 1.0 / (z * z)
        z += 1.0
        steps += 1
    return 1.0 / z, acc


@numba.vectorize(["float64(float64)"], cache=True)
def trigamma(x):  # pragma: no cover - compiled; tested against special._trigamma's numpy form
    """:func:`benchcert.stats.hierarchical.special._trigamma`, element by element."""
    r, acc = _lift(x, 10.0)
    r2 = r * r
    poly = r2 * 5.0
    poly = poly / 66
    poly = (poly + _M30) * r2
    poly = (poly + _P42) * r2
    poly = (poly + _M30) * r2
    poly = poly + _P6
    poly = poly * (r * r2)
    head = r2 * 0.5
    head = head + r
    head = head + poly
    return acc + head


@numba.vectorize(["float64(float64)"], cache=True)
def trigamma_rough(x):  # pragma: no cover - compiled; tested against special._trigamma_rough's numpy form
    """:func:`benchcert.stats.hierarchical.special._trigamma_rough`, element by element."""
    r, acc = _lift(x, 6.0)
    r2 = r * r
    poly = r2 / 42.0
    poly = poly - _P30
    poly = poly * r2
    poly = poly + _P6
    poly = poly * r
    poly = poly + 0.5
    poly = poly * r2
    poly = poly + r
    return acc + poly



@numba.njit(cache=True)
def knapsack_best(cost, useful, use, a, s2j, nb):  # pragma: no cover - compiled; tested against the numpy loop
    """``best[m, nb]`` of :func:`benchcert.stats.hierarchical.profile._joint_block`'s knapsack per model m:
    the same additions best[b - c] + a s2j and maxima, domain after domain (no NaN in ``a`` or ``s2j``:
    numpy's maximum and this comparison agree only without NaN, which the caller checks)."""
    d, mdl, gi = cost.shape
    out = np.empty(mdl)
    best = np.empty(nb + 1)
    new = np.empty(nb + 1)
    for m in range(mdl):
        best[:] = 0.0
        for dd in range(d):
            if not use[dd, m]:
                continue
            new[:] = -np.inf
            for j in range(gi):
                if not useful[dd, m, j]:
                    continue
                c = cost[dd, m, j]
                v = a[dd, m] * s2j[j]
                for b in range(c, nb + 1):
                    x = best[b - c] + v
                    if x > new[b]:
                        new[b] = x
            best[:] = new
        out[m] = best[nb]
    return out


@numba.njit(cache=True)
def colsum_shifted(fn, x, a, sign):  # pragma: no cover - compiled; tested against profile._SubjectProfile's numpy forms
    """Per column j of the (K, F) array ``x`` (K >= 1): the running sum over its rows, row after row
    as :func:`benchcert.stats.hierarchical.profile._colsum` adds them, of fn(x[k, j] + a[j]) - fn(a[j])
    (``sign`` 1), or of fn(a[j]) - fn(x[k, j] + a[j]) (``sign`` -1): one pass, no temporaries."""
    k, f = x.shape
    base = np.empty(f)
    out = np.empty(f)
    for j in range(f):
        base[j] = fn(a[j])
    for j in range(f):
        v = fn(x[0, j] + a[j])
        out[j] = v - base[j] if sign > 0 else base[j] - v
    for r in range(1, k):
        for j in range(f):
            v = fn(x[r, j] + a[j])
            out[j] += v - base[j] if sign > 0 else base[j] - v
    return out


#: Longest row the likelihood kernels sum (numpy halves longer rows recursively; they take numpy's forms).
PAIRWISE_MAX = 128


@numba.njit(cache=True)
def _pairwise(v, n):  # pragma: no cover - compiled
    """numpy's pairwise sum of v[:n], n <= PAIRWISE_MAX (``np.sum`` along a row: eight running sums
    from 8 values on, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), the rest added
    after), so that a row's sum is numpy's to the last bit (tested)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += v[i]
        return res
    r0, r1, r2, r3, r4, r5, r6, r7 = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
    i = 8
    while i < n - n % 8:
        r0 += v[i]
        r1 += v[i + 1]
        r2 += v[i + 2]
        r3 += v[i + 3]
        r4 += v[i + 4]
        r5 += v[i + 5]
        r6 += v[i + 6]
        r7 += v[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += v[i]
        i += 1
    return res


@numba.njit(cache=True)
def bb_loglik_rows(gammaln, y, f, m, mask, a, b):  # pragma: no cover - compiled; tested against likelihood's numpy form
    """Per row i of the padded (F, K) counts: numpy's ``np.sum`` of the masked terms
    gammaln(y + a_i) + gammaln(f + b_i) - gammaln(m + a_i + b_i) (0 where not ``mask``), the row sum of
    :meth:`benchcert.stats.hierarchical.likelihood._BetaBinomialLik.loglik` before its betaln parts."""
    n_rows, k = y.shape
    out = np.empty(n_rows)
    buf = np.empty(k)
    for i in range(n_rows):
        nu = a[i] + b[i]
        for j in range(k):
            t = gammaln(y[i, j] + a[i])
            t += gammaln(f[i, j] + b[i])
            t -= gammaln(m[i, j] + nu)
            buf[j] = t if mask[i, j] else 0.0
        out[i] = _pairwise(buf, k)
    return out


@numba.njit(cache=True)
def bb_deriv_rows(psi, y, f, m, mask, a, b):  # pragma: no cover - compiled; tested against likelihood's numpy form
    """Per row of the padded (F, K) counts, numpy's row sums (:func:`_pairwise`) of the masked psi(y + a)
    - psi(m + nu), psi(f + b) - psi(m + nu), trigamma(m + nu), trigamma(y + a) and trigamma(f + b):
    the sums of :meth:`benchcert.stats.hierarchical.likelihood._BetaBinomialLik.derivs`, (5, F)."""
    n_rows, k = y.shape
    out = np.empty((5, n_rows))
    buf = np.empty((5, k))
    for i in range(n_rows):
        nu = a[i] + b[i]
        for j in range(k):
            if mask[i, j]:
                ya = y[i, j] + a[i]
                fb = f[i, j] + b[i]
                mn = m[i, j] + nu
                p_mn = psi(mn)
                buf[0, j] = psi(ya) - p_mn
                buf[1, j] = psi(fb) - p_mn
                buf[2, j] = trigamma(mn)
                buf[3, j] = trigamma(ya)
                buf[4, j] = trigamma(fb)
            else:
                for s in range(5):
                    buf[s, j] = 0.0
        for s in range(5):
            out[s, i] = _pairwise(buf[s], k)
    return out
