#!/usr/bin/env python
"""CPU time and peak memory of each audit analysis alone, and of the collation, at leaderboard scale.

Builds the synthetic binary matrix of benchmarks/scale.py (models x items, subjects =
min(200, items / 2) in min(10, subjects) domains; benchmarks/hierarchical_fit.py's ``matrix``)
once, saves it under ``--dir`` (reused by later runs), then runs each analysis of the audit's
registry (``tasks/audit/analyses.py`` ``ANALYSES``) through ``run_analysis`` in a fresh child
process that loads the matrix first, so that each figure is that analysis' own: wall s, CPU s
(user + system, all threads), the peak RSS during the analysis (VmHWM reset before it through
/proc/self/clear_refs), and that peak above the RSS before it (the matrix, its replicate
counts and the imports), with the 1-minute load average. ``collate`` times the summary and the
report (``build_summary``, ``build_report``) after every analysis has run; ``subject_counts`` the
per-subject counts the analyses share (``BenchmarkMatrices.subject_counts``: computed by the
audit's first analysis, scores, and here before every other one, outside its figures).

    .venv/bin/python benchmarks/audit_analyses.py                                  # 300 x 20,000
    .venv/bin/python benchmarks/audit_analyses.py --shape 1000x20000 --dir /tmp/m --only scores
    .venv/bin/python benchmarks/audit_analyses.py --shape 1000x20000 --dir /tmp/m --save before.pkl
    .venv/bin/python benchmarks/audit_analyses.py --shape 1000x20000 --dir /tmp/m --compare before.pkl

``--save FILE`` writes every analysis' tables, intervals, report sections and warnings, and
``--compare FILE`` checks them against such a file (another version of the code): frames equal
to the last bit, sections and warnings equal as text.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _meters import cpu_seconds  # noqa: E402  (the meters the scripts share)
from hierarchical_fit import _reset_peak, matrix  # noqa: E402  (the same matrix and peak reset)
GiB = 1 << 30
COLLATE = "collate"
COUNTS = "subject_counts"


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def prepare(shape: str, folder: Path, seed: int) -> Path:
    """The matrix of ``shape`` saved under ``folder`` (kept: later runs load it)."""
    import numpy as np

    n_models, n_items = (int(v) for v in shape.lower().split("x"))
    dest = folder / f"{n_models}x{n_items}-{seed}"
    if (dest / "done").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    scores, item_subject, subject_domain = matrix(n_models, n_items, seed)
    np.save(dest / "scores.npy", scores)
    np.save(dest / "item_subject.npy", item_subject)
    np.save(dest / "subject_domain.npy", subject_domain)
    (dest / "done").write_text(shape)
    return dest


def load(dest: Path):
    """BenchmarkMatrices of the saved matrix, its derived arrays built (as the store read does)."""
    import numpy as np
    import polars as pl

    from benchcert.tasks.store.matrices import BenchmarkMatrices

    scores = np.load(dest / "scores.npy")
    item_subject = np.load(dest / "item_subject.npy")
    subject_domain = np.load(dest / "subject_domain.npy")
    n_items, n_models = scores.shape
    items = pl.DataFrame({"item_id": [f"item-{i:06d}" for i in range(n_items)],
                          "subject": [f"subject-{s:03d}" for s in item_subject],
                          "domain": [f"domain-{subject_domain[s]:02d}" for s in item_subject]})
    m = BenchmarkMatrices("synthetic", "", items=items, models=[f"model-{j:05d}" for j in range(n_models)],
                          scores=scores, n_replicates=(~np.isnan(scores)).astype(np.uint32))
    _ = (m.scores, m.item_subject, m.subject_domain)
    return m


def child(name: str, dest: Path, save: Path | None) -> dict:
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
    from benchcert.tasks.audit.contract import AuditConfig

    m = load(dest)
    config = AuditConfig()
    outputs = []
    if name != COUNTS and name != "scores" and hasattr(type(m), "subject_counts"):
        _ = m.subject_counts  # in an audit the first analysis (scores) computes them for all
    if name == COLLATE:
        outputs = [run_analysis(n, fn, m, config) for n, fn in ANALYSES.items()]
    base = _status("VmRSS")
    _reset_peak()
    load0, cpu, t = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
    if name == COUNTS:
        kept = {"n": m.subject_counts.n}
    elif name == COLLATE:
        import polars as pl

        from benchcert.tasks.audit import results

        summary = results.build_summary(run_id="r", created_at="2026-01-01T00:00:00Z", matrices=m, config=config,
                                        outputs=outputs)
        report = results.build_report(summary, outputs, sources=pl.DataFrame({"source": ["synthetic"]}))
        kept = {"summary": summary.model_dump_json(), "report": report}
    else:
        out = run_analysis(name, ANALYSES[name], m, config)
        kept = {"tables": out.tables, "intervals": out.intervals, "sections": [(s.title, s.html) for s in out.sections],
                "warnings": out.warnings}
    res = {"name": name, "wall_s": time.perf_counter() - t, "cpu_s": cpu_seconds() - cpu, "peak": _status("VmHWM"),
           "base": base, "load": load0}
    if save is not None:
        save.write_bytes(pickle.dumps(kept))
    return res


def _same(a, b, where: str) -> list[str]:
    import polars as pl

    if isinstance(a, pl.DataFrame) or isinstance(b, pl.DataFrame):
        if not (isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)):
            return [f"{where}: one is not a frame"]
        if a.schema != b.schema or a.shape != b.shape:
            return [f"{where}: schema/shape {a.schema}/{a.shape} != {b.schema}/{b.shape}"]
        bad = [c for c in a.columns if not a[c].equals(b[c], check_names=True, null_equal=True)]
        return [f"{where}: columns differ: {bad}"] if bad else []
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in _same(a[k], b[k], f"{where}.{k}")]
    if a != b:
        return [f"{where}: differs"]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="300x20000", help="MODELSxITEMS (default 300x20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, help="keep (and reuse) the matrix here (default: a temporary folder)")
    ap.add_argument("--only", action="append", help=f"an analysis name or {COLLATE!r} (repeatable; default all)")
    ap.add_argument("--save", type=Path, help="write every analysis' outputs to this file")
    ap.add_argument("--compare", type=Path, help="compare every analysis' outputs with a file written by --save")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    ap.add_argument("--_out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        res = child(args._child, args.dir, args._out)
        print(json.dumps(res))
        return 0
    import tempfile

    folder = args.dir or Path(tempfile.mkdtemp(prefix="benchcert-analyses-"))
    dest = prepare(args.shape, folder, args.seed)
    from benchcert.tasks.audit.analyses import ANALYSES

    names = args.only or [COUNTS, *ANALYSES, COLLATE]
    saved, diffs = {}, []
    print(f"{args.shape}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'analysis':22s} {'wall s':>7s} {'CPU s':>7s} {'peak GiB':>9s} {'above GiB':>10s} {'load':>5s}")
    for name in names:
        out = dest / f"out-{name}.pkl"
        proc = subprocess.run([sys.executable, __file__, "--_child", name, "--dir", str(dest), "--_out", str(out)],
                              capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name:22s} {r['wall_s']:7.2f} {r['cpu_s']:7.2f} {r['peak'] / GiB:9.2f} "
              f"{(r['peak'] - r['base']) / GiB:10.2f} {r['load']:5.2f}", flush=True)
        saved[name] = pickle.loads(out.read_bytes())
        out.unlink()
    if args.save:
        args.save.write_bytes(pickle.dumps(saved))
    if args.compare:
        other = pickle.loads(args.compare.read_bytes())
        for name in names:
            if name in other:
                diffs += _same(saved[name], other[name], name)
        print("outputs identical to " + str(args.compare) if not diffs else "\n".join(["DIFFERENCES:", *diffs]))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
