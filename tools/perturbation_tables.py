"""Make the perturbation test's shipped design table (tasks/perturbation/calibrations.json).

The table holds the calibrations (stats/perturbation/calibrated.py ``calibration``) of the common
designs - m in 2..9 and 16 null variants with r = r' on the replicate planner's grid up to 400 (800
for m = 8 and 16), the (m, r, r') grid
of the size study, each at alpha = 0.05 and its p-value ladder's 0.01 - and every calibration and
smallest detectable gap that ``benchcert perturb`` and ``benchcert plan perturbation --db`` compute
on the bundled data/llm_stability benchmarks.  Nothing is read from a cache: every entry is
computed here.  Run it whenever ``CALIBRATION_VERSION`` changes (about 20 CPU minutes):

    .venv/bin/python tools/perturbation_tables.py [--out PATH] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tasks" / "perturbation" / "calibrations.json"
#: The size study's grid (tests/stats/perturbation/test_calibrated_size_grid.py).
STUDY = [(m, r, rt) for m in (2, 3, 5, 8) for r in (10, 50, 400) for rt in sorted({3, 10, r})]
ALPHAS = (0.05, 0.01)


def common_designs(quick: bool = False) -> list[tuple[int, int, int, float]]:
    from benchcert.tasks.perturbation.planning import NULL_VARIANT_OPTIONS, REPLICATE_GRID

    ms = sorted({*range(2, 10), *NULL_VARIANT_OPTIONS})
    reps = [r for r in REPLICATE_GRID if r <= (400 if not quick else 20)]
    out = [(m, r, r, 0.05) for m in ms for r in reps]
    out += [] if quick else [(m, REPLICATE_GRID[-1], REPLICATE_GRID[-1], 0.05) for m in NULL_VARIANT_OPTIONS]
    out += [(m, r, rt, a) for m, r, rt in STUDY for a in ALPHAS]
    return list(dict.fromkeys(out))


def bundled_runs() -> None:
    """perturb and plan perturbation --db on the bundled llm_stability benchmarks (service functions)."""
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.perturbation.planning import plans_for_audit
    from benchcert.tasks.perturbation.service import audit_stored

    data = ROOT / "data" / "llm_stability"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.duckdb"
        for name in ("grice_college_mathematics.csv.gz", "stochastic_noise.csv.gz"):
            ingest_file(db, data / name, benchmark=None, mapping=parse_mapping())
        runs = [("llm_stability_grice_college_mathematics", "0")] + [
            (f"llm_stability_noise_{t}", "runs_mod3_0") for t in ("college_mathematics", "navigate", "ruin_names")]
        for bench, base in runs:
            audit = audit_stored(db, bench, base=base)
            plans_for_audit(audit)
            plans_for_audit(audit, only_no_power=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--quick", action="store_true", help="fewer replicate counts (a trial run)")
    args = ap.parse_args(argv)
    os.environ["BENCHCERT_CACHE_DIR"] = "off"          # compute everything; write nothing but --out
    os.environ["BENCHCERT_SHIPPED_TABLES"] = "0"
    from benchcert.stats.perturbation.calibrated import CALIBRATION_VERSION, calibration, computed_calibrations
    from benchcert.stats.perturbation.item_test import computed_min_gaps

    t0 = time.process_time()

    def write():
        def js(x):
            return None if x == float("inf") else x

        table = {"version": CALIBRATION_VERSION, "made_by": "tools/perturbation_tables.py",
                 "calibrations": sorted([m, r, rt, a, js(z)] for m, r, rt, a, z in computed_calibrations()),
                 "min_gaps": sorted([list(reps), rt, a, s, js(g)] for reps, rt, a, s, g in computed_min_gaps())}
        args.out.write_text(json.dumps(table, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"{len(table['calibrations'])} calibrations, {len(table['min_gaps'])} gaps -> {args.out} "
              f"({time.process_time() - t0:.0f} CPU s)", file=sys.stderr, flush=True)

    bundled_runs()
    write()                       # the bundled data's designs first: the table is usable from here on
    for m, r, rt, a in common_designs(args.quick):
        calibration(m, r, rt, a)
        print(f"m={m} r={r} r'={rt} alpha={a}: {time.process_time() - t0:.0f} CPU s", file=sys.stderr, flush=True)
        write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
