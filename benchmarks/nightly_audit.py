#!/usr/bin/env python
"""CPU seconds of the nightly's per-benchmark audit: in-process audits of one 100 x 2,000 benchmark, several in one process.

The nightly suite (benchmarks/nightly_suite.py) audits each benchmark of 100 models x 2,000 items
in process; this script times that audit alone. One benchmark (benchmarks/scale.py's synthetic
log, seed 20251128) is ingested into a store under ``--dir`` (kept and reused), then a child
process runs ``--audits`` audits of it after one untimed audit (imports, numba's compiled kernels
and first-call costs excluded, as in a nightly that audits many benchmarks), with CPU seconds
(user + system, all threads) per audit and per step (the read, each analysis, the collation and
report, the artifacts, the run record), and the 1-minute load average.

``--reference PYTHON`` times the same audits with another installation's interpreter (e.g. a
checkout of the main branch, ``OTHER_CHECKOUT/.venv/bin/python``: it imports that installation's
benchcert) in the same run, alternating with this one ``--rounds`` times, and prints the ratio;
``--compare`` (only with ``--reference``) then also checks the two installations' last runs with
tools/compare_runs.py.

    .venv/bin/python benchmarks/nightly_audit.py                        # 4 audits, this checkout
    .venv/bin/python benchmarks/nightly_audit.py --reference OTHER_CHECKOUT/.venv/bin/python --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = "bench-000"


def _child(db: str, artifacts: str, audits: int) -> dict:
    """Run in a fresh process: one untimed audit, then ``audits`` timed ones, CPU per step."""
    from benchcert.flows import bodies
    from benchcert.flows.runs import run_audit
    from benchcert.tasks.audit import steps
    from benchcert.tasks.audit.request import AuditRequest

    acc: dict[str, float] = defaultdict(float)

    def wrap(mod, name):
        fn = getattr(mod, name)

        def timed(*a, **k):
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                acc[name + (f":{a[0]}" if name == "analysis" else "")] += time.process_time() - c
        setattr(mod, name, timed)

    for name in ("analysis", "read_benchmark", "write_run_artifacts", "record_run"):
        wrap(steps, name)
    wrap(bodies, "_collate")
    req = AuditRequest(db=db, benchmark=BENCH, artifacts_root=artifacts)
    run_audit("in_process", req)
    acc.clear()
    load0, c0, t0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
    per = []
    last = None
    for _ in range(audits):
        c = time.process_time()
        last = run_audit("in_process", req)
        per.append(time.process_time() - c)
    return {"cpu": (time.process_time() - c0) / audits, "wall": (time.perf_counter() - t0) / audits, "per": per,
            "steps": {k: v / audits for k, v in acc.items()}, "load": [load0, os.getloadavg()[0]],
            "run_dir": last["run_dir"]}


def _prepare(folder: Path) -> Path:
    """The store of one 100 x 2,000 synthetic benchmark under ``folder`` (made once, then reused)."""
    db = folder / "store.duckdb"
    if db.exists():
        return db
    sys.path.insert(0, str(HERE))
    import scale

    from benchcert.tasks.audit.steps import ingest_many
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT

    gen = folder / "generated"
    scale.generate(gen, 100, 2000, 20251128)
    ingest_many(str(db), sorted(str(f) for f in gen.glob("*.parquet")), BENCH, parse_mapping(), False,
                DEFAULT_LOCK_TIMEOUT)
    return db


def _run(python: str, db: Path, artifacts: Path, audits: int) -> dict:
    out = subprocess.run([python, str(Path(__file__).resolve()), "_child", str(db), str(artifacts), str(audits)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{python} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _line(label: str, r: dict) -> str:
    steps = ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["steps"].items(), key=lambda kv: -kv[1]) if v >= 0.005)
    return (f"  {label:<10} {r['cpu']:.3f} CPU s / {r['wall']:.3f} s wall per audit "
            f"(each: {', '.join(f'{c:.2f}' for c in r['per'])}; load {r['load'][0]:.1f} -> {r['load'][1]:.1f})\n"
            f"             {steps}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        print(json.dumps(_child(argv[1], argv[2], int(argv[3]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="keep (and reuse) the store here (default: a temporary folder)")
    ap.add_argument("--audits", type=int, default=4, help="timed audits per process (default 4)")
    ap.add_argument("--reference", metavar="PYTHON", help="another installation's interpreter, timed alike")
    ap.add_argument("--rounds", type=int, default=1, help="alternations of this and the reference (default 1)")
    ap.add_argument("--compare", action="store_true",
                    help="compare the last runs of this and --reference with tools/compare_runs.py")
    args = ap.parse_args(argv)
    if args.compare and not args.reference:
        ap.error("--compare compares against the --reference installation's runs: give --reference PYTHON")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="benchcert-nightly-audit-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        db = _prepare(folder)
        runs: dict[str, list[dict]] = {"this": [], "reference": []}
        for _ in range(max(1, args.rounds)):
            runs["this"].append(_run(sys.executable, db, folder / "artifacts-this", args.audits))
            if args.reference:
                runs["reference"].append(_run(args.reference, db, folder / "artifacts-reference", args.audits))
        print(f"In-process audit of 100 models x 2,000 items ({os.cpu_count()} CPUs), {args.audits} audits per "
              "process after one untimed; CPU s per audit (all threads) and per step:")
        for label, rs in runs.items():
            for r in rs:
                print(_line(label, r))
        if runs["reference"]:
            mine = sum(r["cpu"] for r in runs["this"]) / len(runs["this"])
            ref = sum(r["cpu"] for r in runs["reference"]) / len(runs["reference"])
            print(f"  this / reference: {mine:.3f} / {ref:.3f} CPU s = {mine / ref:.2f}")
            if args.compare:
                sys.path.insert(0, str(HERE.parent / "tools"))
                from compare_runs import compare_runs

                diffs = compare_runs(Path(runs["this"][-1]["run_dir"]), Path(runs["reference"][-1]["run_dir"]))
                print("  artifacts: " + ("identical apart from run ids and times" if not diffs else "; ".join(diffs)))
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
