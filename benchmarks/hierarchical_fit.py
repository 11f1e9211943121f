#!/usr/bin/env python
"""CPU time and peak memory of the hierarchical analysis alone at leaderboard scale (docs/scale.md).

Builds the synthetic binary matrix of benchmarks/scale.py (models x items, subjects =
min(200, items / 2) in min(10, subjects) domains, p[model, subject] from a Beta around a
logistic ability - hardness model) and calls ``fit_domains(..., proxy_alpha=alpha / 2)`` and
``hierarchical_bound`` (macro and pooled weights, joint subject bound) directly, in this
process. Printed: wall s, CPU s (user + system), per-model CPU ms, the peak RSS during the
analysis (VmHWM reset before it through /proc/self/clear_refs) and the 1-minute load average.

    .venv/bin/python benchmarks/hierarchical_fit.py --shape 500x20000
    .venv/bin/python benchmarks/hierarchical_fit.py --shape 1000x20000 --save fits.npz

``--save`` writes the fits and half-widths, to compare two versions of the code
(``--compare other.npz`` prints the largest relative difference of each array).

``--analysis`` times the whole hierarchical analysis of the audit instead
(tasks/hierarchical/analysis.py on the same matrix, default settings): CPU and wall seconds of its
three steps (the per-model block: fits, bounds, comparator and same-subjects intervals; the
split-half diagnostic; the tables and report sections), the peak above the matrix and the load;
the per-subject counts the audit's analyses share are computed (and timed) before, as the
audit's first analysis does:

    .venv/bin/python benchmarks/hierarchical_fit.py --shape 1000x20000 --analysis

``--no-compiled`` runs numpy's forms of the trigamma functions and of the joint bound's knapsack
instead of their numba kernels (stats/hierarchical/compiled.py; the same bits): run it with and
without to see what the kernels save.

``--fixed-reference`` (with ``--analysis``) also times the split-half at the former fixed 500 splits
(no sequential stopping) on the same matrix and prints how far the audit's sequential estimates are
from it, in units of their joint Monte-Carlo standard error.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from _meters import cpu_seconds
from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.hierarchical import PROXY_SHARE, fit_domains, hierarchical_bound


def matrix(n_models: int, n_items: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n_subjects = max(1, min(200, n_items // 2))
    n_domains = max(1, min(10, n_subjects))
    hardness = rng.normal(0.0, 0.7, n_subjects)
    item_subject = (np.arange(n_items) * n_subjects) // n_items
    subject_domain = (np.arange(n_subjects) * n_domains) // n_subjects
    ability = rng.normal(0.0, 1.0, n_models)
    mean = 1.0 / (1.0 + np.exp(-(ability[:, None] - hardness[None, :])))
    p = rng.beta(mean * 30.0, (1.0 - mean) * 30.0)
    scores = np.empty((n_items, n_models))
    for lo in range(0, n_models, 500):
        hi = min(n_models, lo + 500)
        scores[:, lo:hi] = (rng.random((hi - lo, n_items), dtype=np.float32)
                            < p[lo:hi, item_subject]).T
    return scores, item_subject, subject_domain


def _hwm() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def analysis(n_models: int, n_items: int, seed: int, fixed: bool = False) -> None:
    """Per-step CPU and wall seconds of the audit's hierarchical analysis (``--analysis``)."""
    import polars as pl

    from benchcert.tasks.hierarchical import analysis as H
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.store.matrices import BenchmarkMatrices

    scores, subj, doms = matrix(n_models, n_items, seed)
    items = pl.DataFrame({"item_id": [f"item-{i:06d}" for i in range(n_items)],
                          "subject": [f"subject-{k:03d}" for k in subj],
                          "domain": [f"domain-{doms[k]:02d}" for k in subj]})
    m = BenchmarkMatrices("synthetic", "default", items=items, models=[f"model-{j:05d}" for j in range(n_models)],
                          scores=scores, n_replicates=np.ones(scores.shape, dtype=np.int8))
    m.item_subject, m.subject_domain  # noqa: B018 (cached before timing, as the store read leaves them)
    c, t = cpu_seconds(), time.perf_counter()
    if hasattr(type(m), "subject_counts"):  # shared by the audit's analyses: the first one computes them
        m.subject_counts  # noqa: B018
    counts = (cpu_seconds() - c, time.perf_counter() - t)
    config = AuditConfig()
    _reset_peak()
    base = _hwm()
    load0 = os.getloadavg()[0]
    steps = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, t = cpu_seconds(), time.perf_counter()
        block = H.model_block(m, config)
        steps.append(("model_block", cpu_seconds() - c, time.perf_counter() - t))
        c, t = cpu_seconds(), time.perf_counter()
        split = H.split_part(m, config, block.fits)
        steps.append(("split_half", cpu_seconds() - c, time.perf_counter() - t))
        c, t = cpu_seconds(), time.perf_counter()
        H.assemble(m, config, [block], split)
        steps.append(("assemble", cpu_seconds() - c, time.perf_counter() - t))
    peak = _hwm()
    cpu, wall = sum(s[1] for s in steps), sum(s[2] for s in steps)
    print(f"{n_models} x {n_items} hierarchical analysis: CPU {cpu:.2f} s, wall {wall:.2f} s ("
          + ", ".join(f"{name} {c:.2f} / {w:.2f}" for name, c, w in steps)
          + f" CPU / wall s; the shared per-subject counts before it {counts[0]:.2f} / {counts[1]:.2f})"
          + f"; peak {(peak - base) / 2**30:.2f} GiB above the matrix and inputs "
          f"({base / 2**30:.2f} GiB); load {load0:.1f} / {os.getloadavg()[0]:.1f}")
    if fixed:
        _fixed_reference(m, config, block.fits, split[0], load0)


def _fixed_reference(m, config, fits, seq, load0) -> None:
    """The split-half at the former fixed count (every model N_SPLITS splits, no stopping), timed in the
    same process, and how far the sequential estimates are from it in units of their joint Monte-Carlo error."""
    from benchcert.stats.split_half import split_half
    from benchcert.tasks.hierarchical import analysis as H
    from benchcert.tasks.hierarchical.settings import N_SPLITS, SPLIT_SEED

    doms, _ = H._domains(m, tuple(config.hierarchy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, t = cpu_seconds(), time.perf_counter()
        ref = split_half(None, m.item_subject, doms, n_splits=N_SPLITS, rng=np.random.default_rng(SPLIT_SEED),
                         fits=fits)
        cpu, wall = cpu_seconds() - c, time.perf_counter() - t
    ok = ref.defined & seq.defined
    z = np.abs(seq.corr[ok] - ref.corr[ok]) / np.sqrt(seq.mc_se[ok] ** 2 + ref.mc_se[ok] ** 2)
    drawn = seq.splits_drawn
    print(f"  reference: split_half at a fixed {N_SPLITS} splits {cpu:.2f} / {wall:.2f} CPU / wall s; sequential "
          f"(mc_tol {seq.mc_tol}) drew {drawn.sum() / (N_SPLITS * drawn.size):.1%} of those splits (per model "
          f"min {drawn.min()}, median {int(np.median(drawn))}, max {drawn.max()}); max mc_se "
          f"{np.nanmax(seq.mc_se):.4f}; |sequential - fixed| / joint MC error: median {np.median(z):.2f}, "
          f"max {z.max():.2f} over {z.size} cells; load {load0:.1f} / {os.getloadavg()[0]:.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="500x20000", help="MODELSxITEMS (default 500x20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, help="write fits and half-widths to this .npz")
    ap.add_argument("--compare", type=Path, help="compare with a .npz written by --save")
    ap.add_argument("--analysis", action="store_true",
                    help="time the audit's whole hierarchical analysis per step instead")
    ap.add_argument("--no-compiled", action="store_true",
                    help="numpy's forms of the trigamma and the knapsack (the same bits), not numba's kernels")
    ap.add_argument("--fixed-reference", action="store_true",
                    help="with --analysis: also time the split-half at the former fixed 500 splits and compare")
    args = ap.parse_args(argv)
    n_models, n_items = (int(v) for v in args.shape.lower().split("x"))
    if args.no_compiled:
        from benchcert.stats.hierarchical import special

        special._kernels["unavailable"] = "--no-compiled"
    if args.analysis:
        analysis(n_models, n_items, args.seed, fixed=args.fixed_reference)
        return 0
    scores, subj, doms = matrix(n_models, n_items, args.seed)
    alpha = 0.05
    _reset_peak()
    base = _hwm()
    load0, c0, t0 = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fits = fit_domains(scores, subj, doms, proxy_alpha=PROXY_SHARE * alpha)
        c1 = cpu_seconds()
        means = fits.total / np.maximum(fits.n, 1)
        hw = {w: hierarchical_bound(means, fits.n, doms, fits.s2_upper, weights=w, alpha=alpha,
                                    proxy_alpha=PROXY_SHARE * alpha, profile=fits.profile).half_width
              for w in ("macro", "pooled")}
    c2, t2, load1 = cpu_seconds(), time.perf_counter(), os.getloadavg()[0]
    peak = _hwm()
    print(f"{n_models} x {n_items}: wall {t2 - t0:.1f} s, CPU {c2 - c0:.1f} s "
          f"(fit_domains {c1 - c0:.1f}, joint bounds {c2 - c1:.1f}), {1000 * (c2 - c0) / n_models:.1f} ms CPU/model; "
          f"peak {peak / 2**30:.2f} GiB (matrix and inputs {base / 2**30:.2f} GiB before); "
          f"load {load0:.1f} / {load1:.1f}")
    out = {"a": fits.a, "b": fits.b, "nu": fits.nu, "loglik": fits.loglik, "nu_lower": fits.nu_lower,
           "s2_upper": fits.s2_upper, "profile": fits.profile, "hw_macro": hw["macro"], "hw_pooled": hw["pooled"]}
    if args.save:
        np.savez(args.save, **out)
    if args.compare:
        ref = np.load(args.compare)
        for k, v in out.items():
            r = ref[k]
            fin = np.isfinite(r) & np.isfinite(v)
            same_inf = np.array_equal(np.isfinite(r), np.isfinite(v))
            diff = np.abs(v[fin] - r[fin])
            rel = np.max(diff / np.maximum(np.abs(r[fin]), 1e-300)) if fin.any() else 0.0
            print(f"  {k}: max rel diff {rel:.2e}, max abs diff {diff.max() if fin.any() else 0.0:.2e}; "
                  f"same non-finite cells: {same_inf}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
