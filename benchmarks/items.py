#!/usr/bin/env python
"""What the item analysis (issue #38) costs: on the bundled MMLU-Pro data (29 x 12,032) and on
benchmarks/scale.py's synthetic matrix at a leaderboard shape.

For each matrix: wall and CPU seconds of the whole analysis (``tasks/items/service.py``'s
``analyze_items``) and of its parts - item statistics, the broken-key test, the 2PL fit, the
resolution, reliability and the reduced set - with the 1-minute load average beside them, and the
audit's other analyses' seconds on the same matrix (every registered analysis through
``run_analysis``, items off) as the reference the 10%-of-the-audit rule is judged against.

    .venv/bin/python benchmarks/items.py                      # MMLU-Pro
    .venv/bin/python benchmarks/items.py --shape 1000x20000   # synthetic (scale.py's matrix)
    .venv/bin/python benchmarks/items.py --shape 4000x20000 --no-irt --parts-only
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _meters import cpu_seconds  # noqa: E402  (the meters the scripts share)
from hierarchical_fit import matrix  # noqa: E402  (the same synthetic matrix)


def mmlu_pro():
    import polars as pl

    from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices

    path = HERE.parent / "data" / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
    long = (pl.read_csv(path, schema_overrides={"question_id": pl.String})
            .select(pl.col("model"), pl.col("question_id").alias("item_id"), pl.col("src").alias("subject"),
                    pl.col("category").alias("domain"), pl.col("correct").cast(pl.Float64).alias("score"),
                    pl.lit(1, dtype=pl.UInt32).alias("n_replicates")))
    return BenchmarkMatrices("mmlu_pro", "", long)


def synthetic(shape: str, seed: int):
    import numpy as np
    import polars as pl

    from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices

    n_models, n_items = (int(v) for v in shape.lower().split("x"))
    scores, item_subject, subject_domain = matrix(n_models, n_items, seed)
    items = pl.DataFrame({"item_id": [f"item-{i:06d}" for i in range(n_items)],
                          "subject": [f"subject-{s:03d}" for s in item_subject],
                          "domain": [f"domain-{subject_domain[s]:02d}" for s in item_subject]})
    return BenchmarkMatrices("synthetic", "", items=items, models=[f"model-{j:05d}" for j in range(n_models)],
                             scores=np.ascontiguousarray(scores))


def timed(label: str, fn):
    load, cpu, t = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
    out = fn()
    print(f"{label:28s} {time.perf_counter() - t:8.2f} {cpu_seconds() - cpu:8.2f} {load:6.2f}", flush=True)
    return out, time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", help="MODELSxITEMS of the synthetic matrix (default: the bundled MMLU-Pro data)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-irt", action="store_true", help="leave the 2PL fit out")
    ap.add_argument("--parts-only", action="store_true", help="time the parts, not the whole analysis nor the audit")
    args = ap.parse_args(argv)
    import numpy as np

    from benchcert.stats.irt import fit_2pl
    from benchcert.stats.items import broken_key_test, item_statistics, reliability
    from benchcert.stats.resolution import neighbour_resolution
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.items.reduce import reduced_set
    from benchcert.tasks.items.service import ItemsSettings, analyze_items

    m = mmlu_pro() if args.shape is None else synthetic(args.shape, args.seed)
    s = m.scores
    _ = (m.item_subject, m.subject_counts)
    print(f"{m.benchmark}: {len(m.models)} models x {m.n_items} items; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'step':28s} {'wall s':>8s} {'CPU s':>8s} {'load':>6s}")
    warnings.simplefilter("ignore")
    st, _ = timed("item statistics", lambda: item_statistics(s))
    timed("broken-key test", lambda: broken_key_test(s, level=0.1, rng=np.random.default_rng(0)))
    if not args.no_irt:
        timed("2PL fit", lambda: fit_2pl(s))
    timed("resolution (neighbours)", lambda: neighbour_resolution(s, m.item_subject))
    timed("reliability", lambda: reliability(s))
    timed("reduced set", lambda: reduced_set(m, st.inert, tolerance=0.02, alpha=0.05, seed=0))
    if args.parts_only:
        return 0
    _, whole = timed("items analysis (whole)", lambda: analyze_items(m, ItemsSettings(irt=not args.no_irt)))
    config = AuditConfig()
    audit = 0.0
    for name, fn in ANALYSES.items():
        _, sec = timed(f"audit: {name}", lambda fn=fn, name=name: run_analysis(name, fn, m, config))
        audit += sec
    print(f"the audit's analyses (items off): {audit:.2f} s wall; items analysis {whole:.2f} s = "
          f"{100 * whole / audit:.0f}% of them; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
