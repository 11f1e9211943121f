"""benchcert.stats._dist returns what scipy.stats returns (the oracle), value for value.

The shim exists so that an audit need not import scipy.stats (about half a second); it is
only allowed to exist if it is indistinguishable from scipy.stats on every argument the
analyses can pass, including invalid and boundary ones.
"""

import itertools
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats as ss

from benchcert.stats import _dist

QS = [0.0, 1e-300, 1e-12, 0.001, 0.025, 0.3, 0.5, 0.7, 0.975, 1 - 1e-12, 1.0, -0.1, 1.1, np.nan]
XS = [-np.inf, -1e6, -40.0, -3.2, -1.0, -0.0, 0.0, 0.4, 1.96, 12.0, 1e6, np.inf, np.nan]
DFS = [0.3, 1.0, 2.0, 2.5, 7.0, 29.0, 1e3, 1e12, np.inf, 0.0, -1.0, np.nan]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)  # exact; NaN where scipy has NaN


def same_scalar_type(a, b):
    assert type(a) is type(b), (type(a), type(b))


@pytest.mark.parametrize("method, points", [("ppf", QS), ("isf", QS), ("cdf", XS), ("sf", XS)])
def test_t(method, points):
    """Quantiles at the probabilities QS, tails at the points XS: scalars, a grid, an array at one df."""
    for x, df in itertools.product(points, DFS):
        got, want = getattr(_dist.t, method)(x, df), getattr(ss.t, method)(x, df)
        same(got, want)
        same_scalar_type(got, want)
    x, df = np.array(points)[:, None], np.array(DFS)[None, :]
    same(getattr(_dist.t, method)(x, df), getattr(ss.t, method)(x, df))
    same(getattr(_dist.t, method)(np.array(points), 5.0), getattr(ss.t, method)(np.array(points), 5.0))


@pytest.mark.parametrize("method", ["ppf", "isf", "cdf", "sf"])
def test_norm(method):
    grid = QS if method in ("ppf", "isf") else XS
    for v in grid:
        got, want = getattr(_dist.norm, method)(v), getattr(ss.norm, method)(v)
        same(got, want)
        same_scalar_type(got, want)
    same(getattr(_dist.norm, method)(np.array(grid)), getattr(ss.norm, method)(np.array(grid)))
    same(getattr(_dist.norm, method)(np.array(grid).reshape(-1, 1)),
         getattr(ss.norm, method)(np.array(grid).reshape(-1, 1)))


@pytest.mark.parametrize("method", ["cdf", "sf"])
def test_binom(method):
    ks = [-np.inf, -1, 0, 0.5, 1, 3, 7, 9.9, 10, 11, 1e9, np.inf, np.nan]
    ns = [0, 1, 10, 10.5, 1000, -1, np.nan]
    ps = [0.0, 0.5, 0.013, 1.0, 1.2, -0.1, np.nan]
    for k, n, p in itertools.product(ks, ns, ps):
        got, want = getattr(_dist.binom, method)(k, n, p), getattr(ss.binom, method)(k, n, p)
        same(got, want)
        same_scalar_type(got, want)
    k = np.arange(0, 60, dtype=float)
    n = np.arange(0, 120, 2, dtype=float)
    same(getattr(_dist.binom, method)(np.minimum(k, n - k), n, 0.5), getattr(ss.binom, method)(np.minimum(k, n - k), n, 0.5))


@pytest.mark.filterwarnings("ignore:Error in function boost")  # scipy warns the same for the same cases
def test_beta_quantiles():
    shapes = [0.5, 1.0, 2.0, 37.0, 1e4, 0.0, -1.0, np.inf, np.nan]
    for q, a, b in itertools.product(QS, shapes, shapes):
        got, want = _dist.beta.ppf(q, a, b), ss.beta.ppf(q, a, b)
        same(got, want)
        same_scalar_type(got, want)
    k = np.arange(1, 40, dtype=float)
    same(_dist.beta.ppf(0.975, k + 1, 60 - k), ss.beta.ppf(0.975, k + 1, 60 - k))


def test_everything_else_is_scipy_stats():
    assert _dist.hypergeom is ss.hypergeom
    assert _dist.t.pdf(0.3, 4) == ss.t.pdf(0.3, 4)
    assert _dist.t.ppf(0.9, 4, loc=1.0, scale=2.0) == ss.t.ppf(0.9, 4, loc=1.0, scale=2.0)
    assert _dist.norm.ppf(0.9, loc=1.0) == ss.norm.ppf(0.9, loc=1.0)


def test_importing_the_shim_does_not_import_scipy_stats():
    code = "import sys, benchcert.stats._dist as d; d.t.ppf(0.975, 3); d.norm.isf(0.05); d.binom.cdf(3, 10, 0.5); d.beta.ppf(0.95, 2, 9); " \
           "print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
