#!/usr/bin/env python
"""The item analysis' simulation study (issue #38's acceptance), with its figures printed.

* ``broken``: the 2PL benchmark (60 models, abilities N(0, 1); 4,000 items, slopes LogNormal(0,
  0.3), difficulties N(0, 1); 20 discriminating items, slope 1.5-2.5, |difficulty| < 1, with the
  key swapped): the broken-key flag's mean false discovery proportion (with a normal 95% interval),
  its mean share of the swapped keys found; and, without a swapped key, the share of runs with any
  flag (Clopper-Pearson 95%).
* ``resolution``: pairs of models whose true gap equals the stated resolution (the paired test's
  MDE at 80% power from a pilot of the same design): the share called different (75-85% asked).
* ``reduced``: the reduced set's guarantee over repeated draws on one 2PL benchmark: the share of
  draws with every score and every gap within the stated bounds.

    .venv/bin/python benchmarks/items_study.py broken --runs 200
    .venv/bin/python benchmarks/items_study.py all --runs 200
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from item_sim import two_pl  # noqa: E402  (the simulation the tests draw)


def _cp(k: int, n: int) -> str:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k}/{n} = {k / n:.3f} (95% CI {ci.low:.3f}-{ci.high:.3f})"


def broken(runs: int, seed: int, level: float = 0.10) -> None:
    from benchcert.stats.items import broken_key_test

    rng = np.random.default_rng(seed)
    fdp, recall, n_flag = [], [], []
    for _ in range(runs):
        x, swapped, *_ = two_pl(rng, n_models=60, n_items=4000, n_swapped=20)
        f = broken_key_test(x, level=level, rng=rng).flagged
        fdp.append((f & ~swapped).sum() / max(1, f.sum()))
        recall.append((f & swapped).sum() / swapped.sum())
        n_flag.append(int(f.sum()))
    fdp, recall = np.array(fdp), np.array(recall)
    se = fdp.std(ddof=1) / np.sqrt(runs)
    print(f"broken keys, {runs} runs, FDR level {level:g}: mean FDP {fdp.mean():.4f} (95% CI "
          f"{max(0.0, fdp.mean() - 1.96 * se):.4f}-{fdp.mean() + 1.96 * se:.4f}); mean recall {recall.mean():.3f} "
          f"(min {recall.min():.2f}); flags per run {np.mean(n_flag):.1f}", flush=True)
    any_flag = 0
    for _ in range(runs):
        x, *_ = two_pl(rng, n_models=60, n_items=4000, n_swapped=0)
        any_flag += int(broken_key_test(x, level=level, rng=rng).flagged.any())
    print(f"no swapped key: runs with any flag {_cp(any_flag, runs)}", flush=True)


def resolution(runs: int, seed: int) -> None:
    from benchcert.stats.comparisons import pairwise_comparisons
    from benchcert.stats.resolution import neighbour_resolution

    rng = np.random.default_rng(seed)
    n, subjects = 2000, np.repeat(np.arange(40), 50)

    def pair(acc, gap, r):
        p10, p01 = (r - gap) / 2, (r + gap) / 2
        u = rng.choice(4, size=n, p=[1 - p10 - p01 - (acc - p10), p01, p10, acc - p10])
        return np.column_stack([np.isin(u, [2, 3]), np.isin(u, [1, 3])]).astype(float)

    warnings.simplefilter("ignore")
    for acc, r, subj, label in ((0.6, 0.30, subjects, "clustered by subject"), (0.85, 0.12, None, "paired CLT")):
        stated = float(neighbour_resolution(pair(acc, 0.0, r), subj).mde[0])
        hits = sum(int(np.atleast_1d(pairwise_comparisons(pair(acc, stated, r), subj, pairs=np.array([[0, 1]]))
                                     .verdict)[0] != "inconclusive") for _ in range(runs))
        print(f"resolution ({label}, accuracy {acc}, discordance {r}): stated {100 * stated:.2f} pp; called "
              f"different {_cp(hits, runs)}", flush=True)


def reduced(runs: int, seed: int) -> None:
    import polars as pl

    from benchcert.tasks.items.reduce import reduced_set
    from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices

    rng = np.random.default_rng(seed)
    x, *_ = two_pl(rng, n_models=8, n_items=3000, n_swapped=0)
    items = pl.DataFrame({"item_id": [f"i{i}" for i in range(3000)], "subject": [f"s{i % 30}" for i in range(3000)],
                          "domain": ["d"] * 3000})
    m = BenchmarkMatrices("b", "", items=items, models=[f"m{j}" for j in range(8)], scores=x)
    inert = np.nanmax(x, axis=1) == np.nanmin(x, axis=1)
    held = 0
    for s in range(runs):
        red = reduced_set(m, inert, tolerance=0.06, alpha=0.05, seed=s)
        held += int(red.max_score_error <= red.score_bound and red.max_gap_error <= red.gap_bound)
    print(f"reduced set (8 models, 3,000 items, tolerance 6 pp, n = {red.n_evaluated}): every score and gap within "
          f"the bounds {_cp(held, runs)}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", choices=("broken", "resolution", "reduced", "all"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=38)
    args = ap.parse_args(argv)
    t, load = time.perf_counter(), os.getloadavg()[0]
    for name, fn in (("broken", broken), ("resolution", resolution), ("reduced", reduced)):
        if args.study in (name, "all"):
            fn(args.runs, args.seed)
    print(f"{time.perf_counter() - t:.0f} s wall, load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
