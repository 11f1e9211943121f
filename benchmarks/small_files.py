#!/usr/bin/env python
"""A folder of many small CSV files against one file holding the same rows.

What it measures (``make bench`` runs it with no arguments):

1. Generates ``--files`` CSV files (default 200) of ``--rows`` rows each (default 100; columns
   model,item_id,subject,domain,score; ``--models`` models, default 4) in one folder, and one
   CSV file holding the same rows in the same order (default 20,000 rows).
2. ``benchcert ingest FOLDER --db NEW --benchmark b`` and ``benchcert ingest ONE.csv --db NEW
   --benchmark b``, each into a fresh store, each in a fresh process as a user types it (no
   Prefect API: the in-process mode; ``--prefect`` runs the flow instead), ``--runs`` times
   (default 3), alternating.  Prints min / median wall and median CPU seconds (user + system
   of the child, all threads) of each, the ratio folder / one file of the medians (wall and
   CPU), and the 1-minute load average before and after.  Target: wall ratio <= 3 (issue #27).
   A busy machine inflates wall time but not CPU time: compare CPU seconds across noisy runs.
3. ``--profile FILE``: the folder ingest once more in this process under cProfile (stats
   written to FILE, the top 25 by cumulative time printed), for finding per-file costs.

Both stores are checked to hold the same number of rows (the same rows, in fact: the oracle
is tests/tasks/ingest/test_many_files.py).
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

BIN = Path(sys.executable).parent
TARGET_RATIO = 3.0


def generate(folder: Path, one: Path, *, files: int, rows: int, models: int, seed: int = 0) -> int:
    """Write ``files`` CSVs of ``rows`` rows under ``folder`` and the same rows, in order, to ``one``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = files * rows
    n_items = -(-n // models)
    header = "model,item_id,subject,domain,score\n"
    lines = []
    for i in range(n):
        item, model = divmod(i, models)  # each item answered by every model, rows ordered by item
        subject = item % 37
        lines.append(f"model_{model},q{item:06d},subject_{subject:02d},domain_{subject % 5},"
                     f"{int(rng.random() < 0.3 + 0.1 * model)}\n")
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        (folder / f"run_{f:04d}.csv").write_text(header + "".join(lines[f * rows:(f + 1) * rows]))
    one.write_text(header + "".join(lines))
    return n_items


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_UI_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING")
    return env


def run_ingest(target: Path, db: Path, env: dict, prefect: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one ``benchcert ingest`` in a fresh process into a fresh store."""
    for p in (db, db.with_name(db.name + ".lock"), db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    argv = [str(BIN / "benchcert"), "ingest", str(target), "--db", str(db), "--benchmark", "b", "--json"]
    argv += ["--prefect"] if prefect else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def stored_rows(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT count(*) FROM response_codes").fetchall()[0][0]


def profile(folder: Path, db: Path, out: Path) -> None:
    """The folder ingest in this process under cProfile (as the CLI runs it in-process)."""
    import cProfile
    import pstats

    from benchcert.flows.runs import IN_PROCESS, run_ingest as run
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.sources import expand_sources

    db.unlink(missing_ok=True)
    files, _ = expand_sources([str(folder)])
    mapping = parse_mapping([], None, None)
    prof = cProfile.Profile()
    start, cpu = time.perf_counter(), time.process_time()
    prof.enable()
    reports = run(IN_PROCESS, files, str(db), "b", mapping)
    prof.disable()
    print(f"in-process folder ingest: {time.perf_counter() - start:.2f} s wall, {time.process_time() - cpu:.2f} CPU s "
          f"(under cProfile), {sum(r.rows_added for r in reports)} rows")
    prof.dump_stats(str(out))
    pstats.Stats(str(out)).sort_stats("cumulative").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rows", type=int, default=100, help="rows per file")
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prefect", action="store_true", help="run the ingest as a Prefect flow (--prefect)")
    ap.add_argument("--profile", type=Path, metavar="FILE", help="also profile the folder ingest in-process")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="benchcert-small-files-"))
    work.mkdir(parents=True, exist_ok=True)
    folder, one = work / "folder", work / "one.csv"
    try:
        if folder.exists():
            shutil.rmtree(folder)
        generate(folder, one, files=args.files, rows=args.rows, models=args.models)
        env = _env(Path(os.environ.get("PREFECT_HOME") or work / ".prefect"))
        load0 = os.getloadavg()[0]
        # One untimed run of each: byte-code compiled, files in the page cache.
        run_ingest(one, work / "warm.duckdb", env, args.prefect)
        samples: dict[str, list[tuple[float, float]]] = {"folder": [], "one": []}
        for _ in range(args.runs):
            samples["folder"].append(run_ingest(folder, work / "folder.duckdb", env, args.prefect))
            samples["one"].append(run_ingest(one, work / "one.duckdb", env, args.prefect))
        load1 = os.getloadavg()[0]
        n_folder, n_one = stored_rows(work / "folder.duckdb"), stored_rows(work / "one.duckdb")
        if n_folder != n_one or n_one != args.files * args.rows:
            raise SystemExit(f"stored rows differ: folder {n_folder}, one file {n_one}, "
                             f"expected {args.files * args.rows}")
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in samples.items()}
        mode = "prefect flow" if args.prefect else "in-process"
        print(f"small files: {args.files} files x {args.rows} rows vs one file of {args.files * args.rows} rows "
              f"({args.models} models; {args.runs} runs each, fresh process and store, {mode})")
        print(f"  load average (1 min): {load0:.2f} before, {load1:.2f} after; {os.cpu_count()} CPUs")
        for key, label in (("folder", f"folder of {args.files} files"), ("one", "one file")):
            walls = [w for w, _ in samples[key]]
            print(f"  {label:<22} wall median {med[key][0]:6.2f} s (min {min(walls):.2f}), "
                  f"CPU median {med[key][1]:6.2f} s")
        ratio_wall, ratio_cpu = med["folder"][0] / med["one"][0], med["folder"][1] / med["one"][1]
        verdict = "meets" if ratio_wall <= TARGET_RATIO else "misses"
        print(f"  ratio folder / one file: wall {ratio_wall:.2f}, CPU {ratio_cpu:.2f} "
              f"({verdict} the target <= {TARGET_RATIO:g}); per extra file "
              f"{(med['folder'][0] - med['one'][0]) / max(args.files - 1, 1) * 1000:.1f} ms wall")
        if args.profile:
            profile(folder, work / "profile.duckdb", args.profile)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
