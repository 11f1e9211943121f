#!/usr/bin/env python
"""Exact worst-case subsample half-width h*(n, N, alpha): fast vectorised computation vs a naive scan.

What it measures (``make bench`` runs it with no arguments):

1. The full exact worst-case curve for N = 14,042 (MMLU size in the exchangeable-bounds
   paper) at the six n of the paper's Table 4 (250 ... 10,000), alpha = 0.05, with
   ``benchcert.stats.subsample.worst_case_halfwidth`` - every K in 0..N (by symmetry K <= N/2),
   the per-K exact quantile found by bisection over the integer lattice, all K at once.
   Target: under 5 s of work in total.
2. The naive method in the same run: for each K separately, bisection over h with
   scipy.stats.hypergeom.cdf / .sf at the two thresholds (what one writes first). It is
   timed on a slice of K values around N/2 for each n and extrapolated to all N + 1 counts;
   on the slice its quantiles are checked against the fast ones (they must be identical).
3. The ratio naive / fast, and PASS/FAIL of the target.
4. The same six sizes as the audit computes them, spread over the machine's cores by threads
   (``tasks/subsample/hstar_cache.worst_cases``), against the one-thread time of step 1.

Options: ``--N``, ``--alpha``, ``--slice`` (K values timed for the naive method per n).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
from scipy import stats

from benchcert.stats.subsample import subsample_error_distribution, theorem_5_2_halfwidth, worst_case_halfwidth

PAPER_N = (250, 500, 1000, 2000, 5000, 10000)
TARGET_S = 5.0


def naive_quantile(K: int, n: int, N: int, alpha: float, iters: int = 60) -> float:
    """Per-K bisection over h with scipy's hypergeometric cdf and sf (two calls per step)."""
    lo, hi = 0.0, 1.0
    for _ in range(iters):
        h = (lo + hi) / 2
        # P(H/n < K/N - h) + P(H/n > K/N + h)
        left = stats.hypergeom.cdf(math.ceil(n * (K / N - h)) - 1, N, K, n)
        right = stats.hypergeom.sf(math.floor(n * (K / N + h)), N, K, n)
        if left + right <= alpha:
            hi = h
        else:
            lo = h
    return hi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=14042)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--slice", type=int, default=20, help="K values timed for the naive method per n")
    args = ap.parse_args(argv)
    N, alpha = args.N, args.alpha
    ns = [n for n in PAPER_N if n < N]
    cpu = platform.processor() or platform.machine()
    print(f"exact worst-case half-width h*(n, N = {N:,}, alpha = {alpha}) on {cpu}, Python {platform.python_version()}")

    t0 = time.perf_counter()
    per_n = []
    for n in ns:
        t = time.perf_counter()
        w = worst_case_halfwidth(n, N, alpha=alpha)
        per_n.append((n, float(w.half_width), int(w.worst_K), time.perf_counter() - t))
    fast_total = time.perf_counter() - t0

    print(f"\n{'n':>6} {'cost':>7} {'Thm 5.2 pp':>11} {'h* pp':>7} {'worst K':>8} {'fast s':>8} "
          f"{'naive s/K':>10} {'naive s (all K)':>16} {'ratio':>7}")
    naive_total = 0.0
    for n, h, wk, secs in per_n:
        Ks = np.unique(np.clip(np.arange(N // 2 - args.slice // 2, N // 2 + args.slice // 2), 0, N))
        t = time.perf_counter()
        naive = [naive_quantile(int(K), n, N, alpha) for K in Ks]
        per_K = (time.perf_counter() - t) / Ks.size
        exact = subsample_error_distribution(Ks, n, N, alpha=alpha).error_quantile
        # The naive bisection converges to the lattice value from above, within its float tolerance.
        assert np.allclose(naive, exact, atol=1e-9), "naive and fast quantiles disagree"
        naive_all = per_K * (N + 1)
        naive_total += naive_all
        thm = float(theorem_5_2_halfwidth(n, N, alpha=alpha).half_width)
        print(f"{n:>6,} {100 * n / N:>6.2f}% {100 * thm:>11.2f} {100 * h:>7.2f} {wk:>8,} {secs:>8.3f} "
              f"{per_K:>10.4f} {naive_all:>16.1f} {naive_all / secs:>7.0f}x")
    print(f"\nfast, all six n: {fast_total:.2f} s of work (target < {TARGET_S:g} s)")
    print(f"naive, all six n (extrapolated from {args.slice} K per n): {naive_total:.0f} s "
          f"= {naive_total / 60:.1f} min; ratio naive/fast = {naive_total / fast_total:.0f}x")
    # The audit spreads the six sizes over the cores (tasks/subsample/analysis.py); same work.
    from benchcert.tasks.subsample.analysis import _worst_case
    from benchcert.tasks.subsample.hstar_cache import worst_cases

    _worst_case.cache_clear()
    t = time.perf_counter()
    threaded = worst_cases(ns, N, alpha, one=_worst_case)
    threaded_s = time.perf_counter() - t
    assert all(abs(threaded[n][0] - h) < 1e-15 and threaded[n][1] == wk for n, h, wk, _ in per_n)
    print(f"as the audit runs it, the six n spread over {os.cpu_count()} core(s): {threaded_s:.2f} s "
          f"({fast_total / threaded_s:.1f}x the one-thread time, identical h*)")
    ok = fast_total < TARGET_S
    print(f"[{'PASS' if ok else 'FAIL'}] exact worst-case curve at the six n in {fast_total:.2f} s < {TARGET_S:g} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
