#!/usr/bin/env python
"""How long `benchcert perturb` and `benchcert plan perturbation --db` take on the bundled data.

Issue #36 (finding 7): on data/llm_stability `perturb` took 52 CPU s and `plan perturbation` 40
CPU s, because the calibrated test's calibration and the widened test's smallest detectable gap
were computed in every run (kept per process only).  They depend on the design alone and are now
looked up in the table shipped with the package and in the user's cache folder
(tasks/perturbation/tables.py).  Target: at most 5 s each.

Both data files are ingested once into a new store (not timed).  Each command then runs in a fresh
process, as typed, in three states measured in the same run:

* ``uncached``: no shipped table (BENCHCERT_SHIPPED_TABLES=0) and an empty cache folder - what
  every run cost before; run once (it takes tens of seconds);
* ``shipped``: the package's table, an empty cache folder (a new user's first run);
* ``cached``: the package's table and the cache folder the ``uncached`` run filled.

Commands: ``perturb`` on llm_stability_grice_college_mathematics (``--base 0``) and on
llm_stability_noise_college_mathematics (``--base runs_mod3_0``), ``plan perturbation --db`` on the
grice benchmark.  Printed per command and state: min / median wall over ``--runs`` runs (default
3), median CPU seconds of the child (user + system), the ratio of the median wall to the
``uncached`` one, and the load average before and after.  A busy machine inflates wall time, not
CPU time: compare CPU seconds across noisy runs.

    .venv/bin/python benchmarks/perturb_latency.py [--runs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DATA = ROOT / "data" / "llm_stability"
TARGET_S = 5.0
GRICE = "llm_stability_grice_college_mathematics"
NOISE = "llm_stability_noise_college_mathematics"


def _commands(db: Path) -> dict[str, list[str]]:
    bc = str(BIN / "benchcert")
    return {"perturb grice": [bc, "perturb", "--db", str(db), "--benchmark", GRICE, "--base", "0"],
            "perturb noise": [bc, "perturb", "--db", str(db), "--benchmark", NOISE, "--base", "runs_mod3_0"],
            "plan perturbation grice": [bc, "plan", "perturbation", "--db", str(db), "--benchmark", GRICE,
                                        "--base", "0"]}


def _run(argv: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Wall and child CPU seconds of one fresh process (exit 0 required)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _env(cache: Path, shipped: bool) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(BENCHCERT_CACHE_DIR=str(cache), BENCHCERT_SHIPPED_TABLES="1" if shipped else "0",
               PREFECT_LOGGING_LEVEL="WARNING", DO_NOT_TRACK="1")
    return env


def _ingest(work: Path) -> Path:
    db = work / "store.duckdb"
    for name in ("grice_college_mathematics.csv.gz", "stochastic_noise.csv.gz"):
        _run([str(BIN / "benchcert"), "ingest", str(DATA / name), "--db", str(db)], _env(work / "none", True), work)
    return db


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="perturb-latency-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
        db = _ingest(work)
        rows = []
        for name, cmd in _commands(db).items():
            filled = work / f"cache-{len(rows)}"
            un = [_run(cmd, _env(filled, False), work)]                  # fills `filled`
            res = {"uncached": un}
            res["shipped"] = [_run(cmd, _env(work / f"empty-{len(rows)}-{i}", True), work) for i in range(args.runs)]
            res["cached"] = [_run(cmd, _env(filled, True), work) for _ in range(args.runs)]
            ref = statistics.median(w for w, _ in un)
            for state, samples in res.items():
                walls = [w for w, _ in samples]
                med = statistics.median(walls)
                cpu = statistics.median(c for _, c in samples)
                flag = "" if state == "uncached" else ("  <= 5 s" if med <= TARGET_S else "  > 5 s (target 5 s)")
                rows.append(f"{name:<26} {state:<9} wall min {min(walls):6.2f} s median {med:6.2f} s  "
                            f"CPU {cpu:6.2f} s  ratio to uncached {med / ref:5.3f}  runs {len(walls)}{flag}")
                print(rows[-1], flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
