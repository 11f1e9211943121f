"""The trigamma function psi_1, vectorised for the beta likelihoods' Newton steps: an exact
form (bit for bit the former series) and a rougher, cheaper one for the profile search; each in
numpy and, once a process has fits enough (:func:`prepare_compiled`), compiled by numba
(:mod:`.compiled`: the same operations, so the same bits, in one pass)."""

from __future__ import annotations

import sys

import numpy as np

#: Cells (fits x subjects) of the fitting calls of a process from which they start the compiled kernels
#: when numba is not yet running in it: starting numba and loading the cached kernels costs about
#: 0.6 CPU s, and the kernels save about 1.5 us a cell (30 us a fit of 20 subjects, and most of the
#: joint bound's knapsack; issue #40). Once numba runs (the store read of a large audit starts it)
#: loading them costs about 0.1 CPU s, and they start from _COMPILED_WARM_CELLS. The cells add up
#: over the calls (an out-of-core audit fits blocks of models, one call each).
_COMPILED_MIN_CELLS = 1 << 19
_COMPILED_WARM_CELLS = 1 << 16
#: The compiled kernels once loaded ("module"), or why they cannot be ("unavailable"); the cells so far.
_kernels: dict = {"module": None, "unavailable": None, "cells": 0}


def prepare_compiled(cells: int) -> bool:
    """Load the compiled kernels (:mod:`.compiled`) once the fitting calls of this process, this one of
    ``cells`` cells included, pay for them (see :data:`_COMPILED_MIN_CELLS`); True when they are in use. Every later call of :func:`_trigamma`,
    :func:`_trigamma_rough` and of the joint bound's knapsack in the process takes them: they give the
    numpy forms' bits, so only the cost depends on which form runs."""
    if _kernels["module"] is not None:
        return True
    if _kernels["unavailable"] is not None:
        return False
    _kernels["cells"] += cells
    if _kernels["cells"] < (_COMPILED_WARM_CELLS if "numba" in sys.modules else _COMPILED_MIN_CELLS):
        return False
    try:
        from . import compiled

        compiled.trigamma(np.ones(1))  # compiled (or loaded from numba's cache) here, not mid-fit
        compiled.trigamma_rough(np.ones(1))
        compiled.knapsack_best(np.zeros((1, 1, 1), dtype=np.int64), np.ones((1, 1, 1), dtype=bool),
                               np.ones((1, 1), dtype=bool), np.ones((1, 1)), np.ones(1), 1)
        for fn in (compiled.GAMMALN, compiled.PSI):
            compiled.colsum_shifted(fn, np.ones((1, 1)), np.ones(1), 1)
        one, yes = np.ones((1, 1)), np.ones((1, 1), dtype=bool)
        compiled.bb_loglik_rows(compiled.GAMMALN, one, one, one, yes, np.ones(1), np.ones(1))
        compiled.bb_deriv_rows(compiled.PSI, one, one, one, yes, np.ones(1), np.ones(1))
    except Exception as exc:  # noqa: BLE001 - numba cannot compile or cache here: numpy's forms, same bits
        _kernels["unavailable"] = f"{type(exc).__name__}: {exc}"
        return False
    _kernels["module"] = compiled
    return True


def _trigamma_lift(x, floor: int):
    """(z, acc): x lifted to >= ``floor`` by the recurrence psi1(x) = 1/x^2 + psi1(x + 1), and the
    terms 1/x^2 taken on the way (entries below ``floor`` only; any x > 0 needs at most ``floor`` steps)."""
    z = np.array(x, dtype=float, copy=True, order="C")  # C order: the flat views below must be views
    acc = np.zeros_like(z)
    zf, af = z.reshape(-1), acc.reshape(-1)
    low = np.flatnonzero(zf < floor)
    if low.size:
        zs = zf[low]
        accs = np.zeros_like(zs)
        for _ in range(floor):
            small = zs < floor
            if not small.any():
                break
            accs += np.where(small, 1.0 / (zs * zs), 0.0)
            zs += small
        zf[low], af[low] = zs, accs
    return z, acc


def _trigamma(x):
    """Trigamma function, about 10x faster than scipy's polygamma(1, x) (its Hessians are
    the fit's main cost).

    Recurrence psi1(x) = 1/x^2 + psi1(x + 1) lifts x to >= 10, then the asymptotic series
    psi1(z) ~ 1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1) (Abramowitz and Stegun 6.4.12) to
    z^-11; the truncation error is below 3e-14 relative (the tests compare with polygamma).
    The recurrence runs on the entries below 10 only (most counts Y_k + a are larger).
    """
    if _kernels["module"] is not None:
        return _kernels["module"].trigamma(x)
    z, acc = _trigamma_lift(x, 10)
    # r + r^2 / 2 + r^3 (1/6 + r^2 (-1/30 + r^2 (1/42 + r^2 (-1/30 + r^2 5/66)))), in place
    r = np.divide(1.0, z, out=z)
    r2 = r * r
    poly = r2 * 5.0
    poly /= 66
    for c in (-1.0 / 30, 1.0 / 42, -1.0 / 30):
        poly += c
        poly *= r2
    poly += 1.0 / 6
    poly *= r * r2
    r2 *= 0.5
    r2 += r
    r2 += poly
    acc += r2
    return acc


def _trigamma_rough(x):
    """Trigamma to about 2e-8 relative, for Newton's step sizes in the profile search only (a step
    from a Hessian off by 1e-8 converges as fast, and the stopping rules read the gradient, which is
    exact): the recurrence lifts x to >= 6, then the asymptotic series to z^-7 (truncation error
    below 1/(30 z^9))."""
    if _kernels["module"] is not None:
        return _kernels["module"].trigamma_rough(x)
    z, acc = _trigamma_lift(x, 6)
    r = np.divide(1.0, z, out=z)
    r2 = r * r
    poly = r2 / 42.0
    poly -= 1.0 / 30
    poly *= r2
    poly += 1.0 / 6
    poly *= r
    poly += 0.5
    poly *= r2
    poly += r
    acc += poly
    return acc
