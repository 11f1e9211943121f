#!/usr/bin/env python
"""BLAS threads for loops of small matrix products: default threads vs one (``make bench``).

Times the two loops that run one small product per subject (stats/_blas.py):

1. the per-subject Gram matrices of the pairwise comparisons (O^T O, O^T X, X^T X,
   O^T X^2 for a subject's items x models block), here 200 subjects of 100 items at
   ``--models`` models (the 20,000-item shapes of benchmarks/scale.py);
2. the shuffled split-half (non-binary scores), whose loop multiplies a (splits x items)
   indicator by a subject's (items x models) scores.

Each runs with BLAS left at its default number of threads and limited to one
(threadpoolctl), alternating, ``--repeat`` times; the median wall and CPU seconds are
printed with the load average, since on a shared machine the default threads compete
with every other process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from _meters import cpu_seconds


def gram_loop(o: np.ndarray, x: np.ndarray, subjects: int) -> float:
    rows = np.array_split(np.arange(o.shape[0]), subjects)
    acc = 0.0
    for r in rows:
        ob, xb = o[r], x[r]
        acc += (ob.T @ ob)[0, 0] + (ob.T @ xb)[0, 0] + (xb.T @ xb)[0, 0] + (ob.T @ (xb * xb))[0, 0]
    return acc


def shuffle_split_half(scores, subjects, splits):
    # The loop itself (split_half wraps it in one BLAS thread, which would hide the difference).
    from benchcert.stats.split_half import _shuffle_half_sums

    return _shuffle_half_sums(scores, subjects, int(subjects.max()) + 1, splits, np.random.default_rng(0))


def timed(fn, threads):
    ctx = threadpool_limits(limits=threads, user_api="blas") if threads else _Null()
    with ctx:
        c, t = cpu_seconds(), time.perf_counter()
        fn()
        return time.perf_counter() - t, cpu_seconds() - c


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="300 models x 4,000 items")
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        print(f"blas_threads.py: ignoring options it does not know: {' '.join(unknown)}", file=sys.stderr)
    if args.quick:
        args.models, args.items = 300, 4000
    rng = np.random.default_rng(1)
    x = (rng.random((args.items, args.models)) < 0.6).astype(float)
    o = np.ones_like(x)
    subjects = (np.arange(args.items) * 200) // args.items
    frac = np.round(rng.random((args.items, 50)), 2)  # non-binary scores: the shuffle path
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    default_threads = blas[0]["num_threads"] if blas else None
    print(f"BLAS: {blas[0]['internal_api'] if blas else '?'} {blas[0].get('version') if blas else ''}, "
          f"default threads {default_threads}, {os.cpu_count()} CPUs; load average at start "
          f"{'/'.join(f'{v:.2f}' for v in os.getloadavg())}")
    cases = [(f"pairwise Gram loop, {args.models} models x {args.items:,} items, 200 subjects",
              lambda: gram_loop(o, x, 200)),
             (f"split_half shuffle, 50 models x {args.items:,} items, 20 splits",
              lambda: shuffle_split_half(frac, subjects, 20))]
    print(f"{'case':<66} {'threads':>8} {'wall s':>8} {'cpu s':>8}")
    for name, fn in cases:
        res = {None: [], 1: []}
        for _ in range(args.repeat):
            for th in (None, 1):
                res[th].append(timed(fn, th))
        for th in (None, 1):
            wall = statistics.median(r[0] for r in res[th])
            cpu = statistics.median(r[1] for r in res[th])
            label = f"default ({default_threads})" if th is None else "1"
            print(f"{name:<66} {label:>8} {wall:>8.2f} {cpu:>8.2f}")
    print(f"load average at end {'/'.join(f'{v:.2f}' for v in os.getloadavg())} (median of {args.repeat} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
