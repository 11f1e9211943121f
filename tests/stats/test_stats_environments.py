"""Chi-square radius, its dual certificate and Example 4's bounds (certifying-capabilities paper,
section 3.1.1, eq. 1, Example 4, Proposition 3.7; Theorem 3.8's cover)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize

from benchcert.stats.environments import (chi2_divergences, chi2_radius, chi2_radius_bounds, round_to_grid,
                                          tv_cover)


def _disjoint(m, atoms_each, rng):
    """m environments on disjoint blocks of atoms, random weights inside each block."""
    P = np.zeros((m, m * atoms_each))
    for i in range(m):
        P[i, i * atoms_each:(i + 1) * atoms_each] = rng.dirichlet(np.ones(atoms_each))
    return P


@pytest.mark.parametrize("m", [1, 2, 3, 5, 14])
def test_disjoint_environments_have_radius_m_minus_1(m):
    # Paper section 3.1.1 (the Remark 3.2 regime): m disjoint environments need V = m - 1.
    rng = np.random.default_rng(m)
    r = chi2_radius(_disjoint(m, 3, rng))
    assert r.converged
    assert r.lower <= m - 1 + 1e-9 and r.value >= m - 1 - 1e-9
    assert r.value == pytest.approx(m - 1, rel=1e-6, abs=1e-9)
    assert r.gap <= r.tol * (1 + r.lower) + 1e-12


def test_half_set_family_of_proposition_3_7_has_radius_at_most_1():
    # Proposition 3.7: p_A uniform on a half-set A of [D], q uniform: chi2 = 1, so V <= 1.
    D = 8
    fam = []
    for A in itertools.combinations(range(D), D // 2):
        p = np.zeros(D)
        p[list(A)] = 2.0 / D
        fam.append(p)
    r = chi2_radius(np.array(fam))
    assert r.value <= 1 + 1e-7
    # All 70 half-sets: the uniform dual weights give g = 2 too, so V = 1 exactly, q* uniform.
    assert r.lower == pytest.approx(1.0, abs=1e-7)
    np.testing.assert_allclose(r.proposal, np.full(D, 1 / D), atol=1e-6)
    # A few half-sets only: still <= 1 (q uniform is feasible), here m = 5 >> V + 1.
    rng = np.random.default_rng(0)
    sub = np.array(fam)[rng.choice(len(fam), size=5, replace=False)]
    assert chi2_radius(sub).value <= 1 + 1e-7


def _direct_min_over_q(P):
    """Oracle: min over q of max_i chi2(p_i || q), as an epigraph problem for SLSQP (no dual used)."""
    m, K = P.shape
    W2 = P ** 2

    def cons(x):
        t, q = x[0], x[1:]
        return t - (W2 / q).sum(axis=1)

    best = math.inf
    for start in (P.mean(axis=0), np.full(K, 1.0 / K), P.max(axis=0) / P.max(axis=0).sum()):
        q0 = np.clip(start, 1e-3, None)
        q0 /= q0.sum()
        x0 = np.concatenate([[(W2 / q0).sum(axis=1).max()], q0])
        res = optimize.minimize(lambda x: x[0], x0, method="SLSQP",
                                bounds=[(0, None)] + [(1e-9, 1)] * K,
                                constraints=[{"type": "ineq", "fun": cons},
                                             {"type": "eq", "fun": lambda x: x[1:].sum() - 1}],
                                options={"maxiter": 2000, "ftol": 1e-14})
        q = np.clip(res.x[1:], 1e-12, None)
        q /= q.sum()
        best = min(best, chi2_divergences(P, q).max())
    return best


def test_dual_optimum_matches_direct_minimisation_over_q():
    # Oracle test: the dual's certified value equals a direct primal minimisation on random small
    # families (full support so the primal solver's box 1e-9 <= q is harmless).
    rng = np.random.default_rng(2024)
    for _ in range(25):
        K, m = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        P = rng.dirichlet(np.full(K, rng.choice([0.3, 1.0, 3.0])), size=m)
        r = chi2_radius(P)
        direct = _direct_min_over_q(P)
        assert r.lower <= direct + 1e-6          # weak duality: no q beats the dual bound
        assert r.value == pytest.approx(direct, rel=1e-4, abs=1e-6)


def test_certificate_and_optimal_proposal_formula():
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.full(10, 0.4), size=6)
    r = chi2_radius(P, tol=1e-8)
    assert r.converged and r.lower <= r.value and r.gap <= 1e-8 * (1 + r.lower) + 1e-12
    a = np.sqrt(r.weights @ P ** 2)
    np.testing.assert_allclose(r.proposal, a / a.sum(), rtol=1e-12)
    np.testing.assert_allclose(r.divergences, chi2_divergences(P, r.proposal), rtol=1e-9, atol=1e-12)
    # KKT: environments with real dual weight are the binding ones.
    binding = r.weights > 1e-3
    np.testing.assert_allclose(r.divergences[binding], r.value, rtol=1e-5)


def test_example_4_bounds_hold_and_are_attained():
    rng = np.random.default_rng(11)
    for _ in range(30):
        K, m = int(rng.integers(2, 9)), int(rng.integers(1, 6))
        P = rng.dirichlet(np.full(K, rng.choice([0.2, 1.0])), size=m)
        sizes = rng.integers(1, 50, size=K)
        V = chi2_radius(P).value
        b = chi2_radius_bounds(P, sizes=sizes)
        for value, closed in ((b.mixture_value, b.mixture_closed_form), (b.uniform_value, b.uniform_closed_form),
                              (b.shtarkov_value, b.shtarkov_closed_form)):
            assert V <= value + 1e-7 and value <= closed + 1e-9
        assert b.mixture_value <= m - 1 + 1e-9     # the sharper m - 1 (the paper states m)
        assert b.uniform_value <= sizes.sum() - 1 + 1e-9
    # Attained: disjoint environments give V = m - 1 = S - 1 at the mixture and NML proposals.
    P = _disjoint(4, 2, rng)
    b = chi2_radius_bounds(P)
    assert b.mixture_value == pytest.approx(3) and b.shtarkov_value == pytest.approx(3)
    assert b.shtarkov_closed_form == pytest.approx(3) and chi2_radius(P).value == pytest.approx(3, rel=1e-6)
    # Uniform over |Z| items: a point mass on one item attains |Z| - 1 (atoms of size 1).
    pm = np.zeros((1, 6))
    pm[0, 2] = 1
    assert chi2_radius_bounds(pm).uniform_value == pytest.approx(5)
    # With atoms of many items, "uniform over items" weighs atoms by size: one environment on a
    # 10-item atom of a 100-item benchmark has chi2 = 100/10 - 1 = 9.
    assert chi2_radius_bounds(np.array([[1.0, 0.0]]), sizes=[10, 90]).uniform_value == pytest.approx(9)


def test_invalid_input_names_the_parameter():
    with pytest.raises(ValueError, match="rows must sum to 1"):
        chi2_radius([[0.5, 0.4]])
    with pytest.raises(ValueError, match="non-negative"):
        chi2_radius([[1.5, -0.5]])
    with pytest.raises(ValueError, match="tol"):
        chi2_radius([[1.0]], tol=0)
    with pytest.raises(ValueError, match="sizes"):
        chi2_radius_bounds([[1.0, 0.0]], sizes=[0, 3])
    assert chi2_divergences([[0.5, 0.5]], [1.0, 0.0])[0] == math.inf


@pytest.mark.parametrize("k,eps", [(2, 0.1), (3, 0.2), (4, 0.3), (5, 0.05)])
def test_tv_cover_radius_and_size(k, eps):
    cov = tv_cover(k, eps)
    assert cov.radius <= eps / 2 + 1e-12
    r = cov.resolution
    if r <= 40:  # count the grid by enumeration
        count = sum(1 for c in itertools.product(range(r + 1), repeat=k - 1) if sum(c) <= r)
        assert cov.size == count
    assert cov.log_size == pytest.approx(math.log(math.comb(r + k - 1, k - 1)))
    rng = np.random.default_rng(k)
    worst = 0.0
    for theta in rng.dirichlet(np.full(k, 0.3), size=2000):
        g = round_to_grid(theta, r)
        assert np.all(np.isclose(g * r, np.round(g * r))) and g.sum() == pytest.approx(1)
        worst = max(worst, 0.5 * np.abs(g - theta).sum())
    assert worst <= cov.radius + 1e-12


def test_an_unconverged_solve_warns_and_still_brackets_the_radius():
    from benchcert.stats.degenerate import DegenerateDataWarning

    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.full(8, 0.3), size=6)
    with pytest.warns(DegenerateDataWarning, match="duality gap"):
        r = chi2_radius(P, tol=1e-15, max_iter=1)
    exact = chi2_radius(P)
    assert not r.converged and r.lower <= exact.value + 1e-9 and exact.lower <= r.value + 1e-9
