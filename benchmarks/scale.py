#!/usr/bin/env python
"""Leaderboard-scale timings and peak memory of ingest and audit (``make bench``; docs/scale.md).

For each shape (models x items; binary scores; subjects = min(200, items / 2) in
min(10, subjects) domains) a synthetic log is generated as Parquet files (500 models per
file, not timed), then, each in a fresh child process:

* **ingest**: plain ``ingest_file`` of every file into a fresh DuckDB store;
* **audit**: the audit as ``benchcert audit`` runs it (``--mode in_process``, the default without
  a Prefect API) or as a Prefect flow run with an embedded API (``--mode prefect``), with wall time, CPU seconds and peak RSS per
  analysis (the peak is reset before each analysis through /proc/self/clear_refs, so each
  figure is that analysis' own high-water mark; the step's peak is the maximum of all).

Printed per step: wall s, CPU s (user + system, all threads: compare it across noisy runs),
peak RSS, and the 1-minute load average before and after (the machine may be shared).

    .venv/bin/python benchmarks/scale.py                 # every shape of docs/scale.md (long)
    .venv/bin/python benchmarks/scale.py --quick         # three small shapes (~2 min)
    .venv/bin/python benchmarks/scale.py --shape 4000x20000 --json out.json
    .venv/bin/python benchmarks/scale.py --shape 1000x20000 --dask-workers 2 --dask-block-models 250

With ``--dask-workers N`` the audit runs on a LocalCluster of N worker processes (the store
exported to Parquet first, as ``benchcert audit --dask-workers`` does), and the output adds
each worker's CPU seconds and peak, and per kind of task (hierarchical-block, comparisons-block,
split-half, analysis:NAME) the number of tasks and their wall and CPU seconds: the per-block
costs docs/scale.md extrapolates from.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GiB = 1 << 30
BENCH = "synthetic"
MODELS_PER_FILE = 500

FULL_SHAPES = ["100x10000", "500x20000", "1000x20000", "2000x20000", "4000x20000", "3000x20", "5000x20"]
QUICK_SHAPES = ["100x2000", "300x5000", "1000x20"]

PREFECT_ENV_DEFAULTS = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                        "PREFECT_SERVER_UI_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
                        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset this process' VmHWM to its current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _load() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------------------
# children


def child_ingest(args) -> dict:
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    db = Path(args.db)
    files = sorted(Path(args.data).glob("*.parquet"))
    mapping = parse_mapping()
    load0, cpu0, t0 = _load(), _cpu(), time.perf_counter()
    rows = 0
    for f in files:
        rep = ingest_file(db, f, benchmark=BENCH, mapping=mapping)
        if rep.status != "ingested":
            raise SystemExit(f"ingest of {f} failed: {rep.message}")
        rows += rep.rows_added
    wal = db.with_name(db.name + ".wal")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - cpu0, "peak_rss": _status("VmHWM"),
            "rows": rows, "files": len(files), "load_before": load0, "load_after": _load(),
            "db_bytes": db.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
            "data_bytes": sum(f.stat().st_size for f in files)}


SCAN_SQL = """SELECT sum(r.score) FROM response_codes r JOIN models m ON m.model_id = r.model_id
               JOIN variants v ON v.variant_id = r.variant_id WHERE m.benchmark = ? AND v.variant = ?"""


def _timed(fn) -> tuple[float, float, object]:
    cpu, t = _cpu(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t, _cpu() - cpu, out


def read_against_scan(db: str, rounds: int = 3) -> dict:
    """The store read (``load_matrices``: what the audit's read_store step does, without the
    source list and variant counts) against DuckDB summing the same rows' scores, alternated
    ``rounds`` times in this process. The issue's target is read <= 3 x scan; the ratios are of
    the best rounds and of the medians. The first round is reported apart: it pays for loading
    the columns (both) and, when the read takes the compiled loops (a benchmark of 2^26 cells or
    more, as in an audit's one read), for starting numba; the rounds use the same loops."""
    import gc
    import statistics

    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import load_matrices

    from benchcert.tasks.store import dense_read

    scans, reads = [], []
    with open_store(db, write=False) as con:
        for k in range(rounds + 1):
            scans.append(_timed(lambda: con.execute(SCAN_SQL, [BENCH, ""]).fetchall())[:2])
            w, c, m = _timed(lambda: load_matrices(con, BENCH))
            reads.append((w, c))
            del m
            gc.collect()
            if k == 0:
                # The rounds use the loops an audit's one read of this benchmark uses (the process
                # rule would start the compiled ones in a later round as the cells read add up).
                loops = "compiled" if dense_read._process["compiled"] else "numpy"
                if loops == "numpy":
                    dense_read.COMPILED_MIN_CELLS = dense_read.COMPILED_WARM_MIN_CELLS = 1 << 62
    first_scan, first_read = scans.pop(0), reads.pop(0)
    best, med = {}, {}
    for name, got in (("scan", scans), ("read", reads)):
        for i, unit in ((0, "wall"), (1, "cpu")):
            best[f"{name}_{unit}_s"] = min(x[i] for x in got)
            med[f"{name}_{unit}_s"] = statistics.median(x[i] for x in got)
    return {**best, "ratio_wall": best["read_wall_s"] / best["scan_wall_s"],
            "ratio_cpu": best["read_cpu_s"] / best["scan_cpu_s"],
            "median_ratio_wall": med["read_wall_s"] / med["scan_wall_s"],
            "median_ratio_cpu": med["read_cpu_s"] / med["scan_cpu_s"],
            "first_scan": first_scan, "first_read": first_read, "rounds": rounds, "loops": loops,
            "scans": scans, "reads": reads, "load": _load()}


def scan_only(db: str, rounds: int = 3) -> dict:
    """The DuckDB scan of the benchmark's rows alone (``SCAN_SQL``), a first round then ``rounds`` more:
    the reference of an out-of-core audit, whose store read is not ``load_matrices`` (the matrix is never
    held, so ``read_against_scan`` would measure a read the audit does not do and hold it in memory)."""
    import statistics

    from benchcert.tasks.store.connection import open_store

    with open_store(db, write=False) as con:
        scans = [_timed(lambda: con.execute(SCAN_SQL, [BENCH, ""]).fetchall())[:2] for _ in range(rounds + 1)]
    first = scans.pop(0)
    return {"scan_wall_s": min(x[0] for x in scans), "scan_cpu_s": min(x[1] for x in scans),
            "median_scan_wall_s": statistics.median(x[0] for x in scans),
            "median_scan_cpu_s": statistics.median(x[1] for x in scans),
            "first_scan": first, "rounds": rounds, "scans": scans, "load": _load()}


def child_audit(args) -> dict:
    import benchcert.tasks.audit.analyses as pt
    from benchcert.flows.audit import audit_flow
    from benchcert.tasks.audit.request import AuditRequest

    per: dict[str, dict] = {}
    peaks = [_status("VmHWM") or 0]
    original = pt.run_analysis

    def measured(name, fn, matrices, config):
        peaks.append(_status("VmHWM") or 0)  # the peak so far, before the reset
        resettable = _reset_peak()
        cpu, t = _cpu(), time.perf_counter()
        try:
            return original(name, fn, matrices, config)
        finally:
            peak = _status("VmHWM") if resettable else None
            per[name] = {"wall_s": time.perf_counter() - t, "cpu_s": _cpu() - cpu, "peak_rss": peak}
            peaks.append(peak or 0)

    peaks[0] = _status("VmHWM") or 0
    pt.run_analysis = measured  # instrumentation only: tasks/audit/steps.py looks the name up at call time
    load0, cpu0, t0 = _load(), _cpu(), time.perf_counter()
    dask = None
    if args.dask_workers:
        out, dask = _dask_audit(args, audit_flow)
    elif args.mode == "prefect":
        out = audit_flow(AuditRequest(db=args.db, benchmark=BENCH, artifacts_root=args.artifacts,
                                      all_pairs=args.all_pairs))
    else:
        from benchcert.flows.runs import run_audit

        out = run_audit("in_process", AuditRequest(db=args.db, benchmark=BENCH, artifacts_root=args.artifacts,
                                                   all_pairs=args.all_pairs, out_of_core=args.out_of_core,
                                                   dask_block_models=args.dask_block_models if args.out_of_core
                                                   else None))
    wall = time.perf_counter() - t0
    peaks.append(_status("VmHWM") or 0)
    run_dir = Path(out["run_dir"])
    sizes = {p.name: p.stat().st_size for p in run_dir.rglob("*") if p.is_file()}
    timings = out["timings_s"]
    return {"wall_s": wall, "cpu_s": _cpu() - cpu0, "peak_rss": max(peaks), "load_before": load0,
            "load_after": _load(), "analyses": per, "timings_s": timings, "dask": dask,
            # on Dask the analyses overlap: their step's wall (analyses_on_cluster) is the work
            "work_s": sum(v for k, v in timings.items() if k not in ("flow_wall", "prefect_overhead")
                          and not ("analyses_on_cluster" in timings and k.startswith("analysis:"))),
            "n_models": out["n_models"], "n_items": out["n_items"], "artifact_bytes": sizes}


def _worker_stats() -> dict:
    from benchcert.tasks.audit.distributed import BLOCK_COSTS

    return {"cpu_s": _cpu(), "peak_rss": _status("VmHWM"), "tasks": list(BLOCK_COSTS)}


def _dask_audit(args, audit_flow):
    """The audit on a LocalCluster of ``--dask-workers`` processes (export first, as the CLI does), with
    what the workers spent: CPU s and peak RSS per worker process, and wall / CPU s of every task."""
    from distributed import Client

    from benchcert.tasks.audit.distributed import dask_cluster, dask_task_runner
    from benchcert.tasks.audit.request import AuditRequest
    from benchcert.tasks.store.export import export_parquet

    export = Path(args.artifacts).parent / "export"
    t = time.perf_counter()
    export_parquet(args.db, export)
    export_s = time.perf_counter() - t
    with dask_cluster(workers=args.dask_workers) as address:
        with Client(address) as client:
            before = client.run(_worker_stats)
            flow = audit_flow.with_options(task_runner=dask_task_runner(address=address))
            out = flow(AuditRequest(db=args.db, benchmark=BENCH, artifacts_root=args.artifacts,
                                    all_pairs=args.all_pairs, export_dir=str(export),
                                    dask_block_models=args.dask_block_models, out_of_core=args.out_of_core))
            after = client.run(_worker_stats)
    workers = {w: {"cpu_s": after[w]["cpu_s"] - before[w]["cpu_s"], "peak_rss": after[w]["peak_rss"]} for w in after}
    tasks = [c for w in after for c in after[w]["tasks"]]
    by_kind: dict[str, dict] = {}
    for c in tasks:
        k = by_kind.setdefault(c["kind"], {"n": 0, "wall_s": 0.0, "cpu_s": 0.0, "max_wall_s": 0.0})
        k["n"] += 1
        k["wall_s"] += c["wall_s"]
        k["cpu_s"] += c["cpu_s"]
        k["max_wall_s"] = max(k["max_wall_s"], c["wall_s"])
    return out, {"workers": workers, "tasks": by_kind, "export_s": export_s, "n_workers": args.dask_workers,
                 "block_models": args.dask_block_models}


# --------------------------------------------------------------------------------------
# parent


def parse_shape(text: str) -> tuple[int, int]:
    m, _, n = text.lower().partition("x")
    return int(m), int(n)


def generate(dest: Path, n_models: int, n_items: int, seed: int, shuffled_ids: bool = False) -> dict:
    """Parquet files of binary scores, MODELS_PER_FILE models each; p[model, subject] ~ Beta.

    ``shuffled_ids``: item ids in an order unrelated to their subjects (as in real logs, where a
    question's id does not follow its subject), so that the store's item codes are not in the
    matrix's (domain, subject, item_id) row order."""
    import numpy as np
    import polars as pl

    n_subjects = max(1, min(200, n_items // 2))
    n_domains = max(1, min(10, n_subjects))
    dest.mkdir(parents=True, exist_ok=True)
    done = dest / "done.json"
    info = {"n_models": n_models, "n_items": n_items, "n_subjects": n_subjects, "n_domains": n_domains,
            "rows": n_models * n_items, "seed": seed, "shuffled_ids": shuffled_ids}
    if done.exists() and json.loads(done.read_text()) == info:
        return info
    for f in dest.glob("*.parquet"):
        f.unlink()
    rng = np.random.default_rng(seed)
    hardness = rng.normal(0.0, 0.7, n_subjects)
    item_subject = (np.arange(n_items) * n_subjects) // n_items
    subject_domain = (np.arange(n_subjects) * n_domains) // n_subjects
    order = np.random.default_rng(seed + 1).permutation(n_items) if shuffled_ids else np.arange(n_items)
    item_ids = pl.Series([f"item-{order[i]:06d}" for i in range(n_items)])
    subj_names = pl.Series([f"subject-{s:03d}" for s in item_subject])
    dom_names = pl.Series([f"domain-{subject_domain[s]:02d}" for s in item_subject])
    for lo in range(0, n_models, MODELS_PER_FILE):
        m = min(MODELS_PER_FILE, n_models - lo)
        ability = rng.normal(0.0, 1.0, m)
        mean = 1.0 / (1.0 + np.exp(-(ability[:, None] - hardness[None, :])))
        p = rng.beta(mean * 30.0, (1.0 - mean) * 30.0)
        scores = (rng.random((m, n_items), dtype=np.float32) < p[:, item_subject]).astype(np.int8)
        frame = pl.DataFrame({
            "model": pl.Series([f"model-{lo + j:05d}" for j in range(m)]).gather(np.repeat(np.arange(m), n_items)),
            "item_id": pl.concat([item_ids] * m), "subject": pl.concat([subj_names] * m),
            "domain": pl.concat([dom_names] * m), "score": scores.ravel()})
        frame.write_parquet(dest / f"part-{lo // MODELS_PER_FILE:04d}.parquet")
        del frame, scores
    done.write_text(json.dumps(info))
    return info


def run_child(kind: str, out: Path, timeout: float, **kw) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_" + kind, "--out", str(out)]
    for k, v in kw.items():
        if v is True:
            cmd.append(f"--{k.replace('_', '-')}")
        elif v not in (None, False):
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"child {kind} failed (exit {proc.returncode}): {' '.join(cmd)}")
    res = json.loads(out.read_text())
    res["child_wall_s"] = time.perf_counter() - t
    return res


def _read_scan_line(n_models: int, n_items: int, rs: dict) -> str:
    return (f"Store read vs DuckDB scan, {n_models:,} x {n_items:,} (best of {rs['rounds']} after a first, "
            f"load {rs['load']:.1f}): read {rs['read_wall_s']:.2f} s wall / {rs['read_cpu_s']:.2f} CPU s; "
            f"SELECT sum(score) {rs['scan_wall_s']:.2f} s / {rs['scan_cpu_s']:.2f} CPU s; ratio "
            f"{rs['ratio_wall']:.1f}x wall, {rs['ratio_cpu']:.1f}x CPU (target <= 3x)"
            + (f"; medians {rs['median_ratio_wall']:.1f}x / {rs['median_ratio_cpu']:.1f}x; first read "
               f"{rs['first_read'][0]:.2f} s / {rs['first_read'][1]:.2f} CPU s against a first scan "
               f"{rs['first_scan'][0]:.2f} s (columns loaded" + (", numba started)" if rs.get("loops") == "compiled" else ")")
               + f"; {rs.get('loops', '?')} loops" if "median_ratio_wall" in rs else ""))


def _audit_scan_line(a: dict, rs: dict) -> str:
    """The audit and each analysis as multiples of the DuckDB scan of the same rows (issue #40's target: the
    audit within 50x), CPU s over CPU s and wall over wall."""
    # A scan under the CPU clock's tick (10 ms; small shapes) has no CPU ratio.
    scan_c = rs["scan_cpu_s"] if rs["scan_cpu_s"] >= 0.01 else float("nan")
    scan_w = max(rs["scan_wall_s"], 1e-9)

    def x(v: float) -> str:
        return "-" if v != v else f"{v:.0f}x" if v >= 10 else f"{v:.1f}x"

    per = ", ".join(f"{k} {x(v['cpu_s'] / scan_c)} / {x(v['wall_s'] / scan_w)}"
                    for k, v in sorted(a["analyses"].items(), key=lambda kv: -kv[1]["cpu_s"]))
    return (f"Audit / scan (CPU / wall; load {a['load_before']:.1f} / {a['load_after']:.1f}): audit "
            f"{x(a['cpu_s'] / scan_c)} / {x(a['wall_s'] / scan_w)} (target <= 50x); per analysis: {per}")


def _ingest_line(r: dict) -> str:
    """Ingest CPU per million responses and the store's bytes on disk per response (issue #40: at most
    0.6 CPU s and 6 bytes), beside the Parquet input's bytes per response."""
    i, rows = r["ingest"], max(r["rows"], 1)
    return (f"Ingest {r['n_models']:,} x {r['n_items']:,} ({rows / 1e6:g}M responses, load {i['load_before']:.1f} / "
            f"{i['load_after']:.1f}): {i['cpu_s'] / rows * 1e6:.3f} CPU s per million responses (target <= 0.6), "
            f"{i['wall_s']:.1f} wall s / {i['cpu_s']:.1f} CPU s / peak {_gib(i['peak_rss'])}; store on disk "
            f"{i['db_bytes'] / GiB:.2f} GiB = {i['db_bytes'] / rows:.2f} bytes per response (target <= 6)"
            + (f"; the Parquet input {i['data_bytes'] / GiB:.2f} GiB = {i['data_bytes'] / rows:.2f} bytes per response"
               if i.get("data_bytes") else ""))


def _scan_line(n_models: int, n_items: int, sc: dict) -> str:
    return (f"DuckDB scan of the same rows, {n_models:,} x {n_items:,} (best of {sc['rounds']} after a first, load "
            f"{sc['load']:.1f}): SELECT sum(score) {sc['scan_wall_s']:.2f} s / {sc['scan_cpu_s']:.2f} CPU s "
            f"(medians {sc['median_scan_wall_s']:.2f} / {sc['median_scan_cpu_s']:.2f}; first "
            f"{sc['first_scan'][0]:.2f} / {sc['first_scan'][1]:.2f})")


def _gib(b) -> str:
    return "-" if not b else f"{b / GiB:.2f} GiB"


def render(results: list[dict]) -> str:
    lines = ["| models x items (rows) | ingest wall s / cpu s / peak | audit wall s / cpu s / peak | "
             "load 1-min (audit start/end) | slowest analyses (wall s / peak) | report.html / all artifacts |",
             "|---|---|---|---|---|---|"]
    for r in results:
        i, a = r["ingest"], r["audit"]
        slow = sorted(a["analyses"].items(), key=lambda kv: -kv[1]["wall_s"])[:3]
        slow_txt = "; ".join(f"{k} {v['wall_s']:.1f} / {_gib(v['peak_rss'])}" for k, v in slow)
        arts = a["artifact_bytes"]
        lines.append(
            f"| {r['n_models']:,} x {r['n_items']:,} ({r['rows'] / 1e6:g}M){', ' + r['label'] if r.get('label') else ''}"
            f" | {i['wall_s']:.1f} / {i['cpu_s']:.1f} / "
            f"{_gib(i['peak_rss'])} | {a['wall_s']:.1f} / {a['cpu_s']:.1f} / {_gib(a['peak_rss'])} | "
            f"{a['load_before']:.1f} / {a['load_after']:.1f} | {slow_txt} | "
            f"{arts.get('report.html', 0) / 2**20:.2f} MiB / {sum(arts.values()) / 2**20:.1f} MiB |")
    for r in results:
        lines.append("")
        lines.append(_ingest_line(r))
        rs = r["audit"].get("read_scan")
        if rs:
            lines.append(_read_scan_line(r["n_models"], r["n_items"], rs))
        sc = rs or r["audit"].get("scan")
        if sc:
            if not rs:
                lines.append(_scan_line(r["n_models"], r["n_items"], sc))
            lines.append(_audit_scan_line(r["audit"], sc) + (f" [{r['label']}]" if r.get("label") else ""))
    for r in results:
        d = r["audit"].get("dask")
        if not d:
            continue
        lines.append("")
        together = (r["audit"]["peak_rss"] or 0) + sum(v["peak_rss"] or 0 for v in d["workers"].values())
        lines.append(f"Dask ({d['n_workers']} local worker processes, blocks of {d['block_models'] or 'default'} models; "
                     f"export {d['export_s']:.1f} s, flow process {r['audit']['cpu_s']:.1f} CPU s / "
                     f"{_gib(r['audit']['peak_rss'])}): workers "
                     + ", ".join(f"{v['cpu_s']:.1f} CPU s / {_gib(v['peak_rss'])}" for v in d["workers"].values())
                     + f"; the peaks summed {_gib(together)} (at most what the processes held together)")
        for kind, v in sorted(d["tasks"].items()):
            lines.append(f"  {kind}: {v['n']} task(s), {v['wall_s']:.1f} wall s / {v['cpu_s']:.1f} CPU s in all, "
                         f"{v['cpu_s'] / v['n']:.2f} CPU s per task, slowest {v['max_wall_s']:.1f} s")
    lines.append("")
    lines.append("Per analysis (audit child; wall s / CPU s / peak RSS):")
    for r in results:
        a = r["audit"]
        lines.append(f"  {r['n_models']} x {r['n_items']}: " + ", ".join(
            f"{k} {v['wall_s']:.1f}/{v['cpu_s']:.1f}/{_gib(v['peak_rss'])}" for k, v in a["analyses"].items())
            + f"; read_store {a['timings_s'].get('read_store', 0):.1f}, collate_and_report "
              f"{a['timings_s'].get('collate_and_report', 0):.1f}, write_artifacts "
              f"{a['timings_s'].get('write_artifacts', 0):.1f}, record_run {a['timings_s'].get('record_run', 0):.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("_ingest", "_audit", "_readscan", "_scan"):
        ap = argparse.ArgumentParser()
        ap.add_argument("kind")
        ap.add_argument("--out", required=True)
        ap.add_argument("--db", required=True)
        ap.add_argument("--data")
        ap.add_argument("--artifacts")
        ap.add_argument("--all-pairs", action="store_true")
        ap.add_argument("--mode", default="in_process")
        ap.add_argument("--dask-workers", type=int)
        ap.add_argument("--dask-block-models", type=int)
        ap.add_argument("--out-of-core", action="store_true")
        a = ap.parse_args(argv)
        res = {"_ingest": child_ingest, "_audit": child_audit,
               "_readscan": lambda a: read_against_scan(a.db), "_scan": lambda a: scan_only(a.db)}[a.kind](a)
        Path(a.out).write_text(json.dumps(res, indent=2, default=str))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"small shapes only: {', '.join(QUICK_SHAPES)}")
    ap.add_argument("--shape", action="append", metavar="MxN", help="models x items (repeatable)")
    ap.add_argument("--keep", metavar="DIR", help="keep (and reuse) generated data and stores in DIR")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--seed", type=int, default=20251126)
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds each child (ingest, audit, scan) may take (default 3600; the billion: make bench-1b)")
    ap.add_argument("--all-pairs", action="store_true", help="audit with every pair of models compared")
    ap.add_argument("--mode", choices=["in_process", "prefect"], default="in_process",
                    help="audit as benchcert audit runs it without a Prefect API (default), or as a Prefect flow "
                         "run with an embedded API")
    ap.add_argument("--dask-workers", type=int, metavar="N",
                    help="audit on a LocalCluster of N worker processes (export first; Prefect flow run), with the "
                         "workers' CPU s and peak and the cost of every block task")
    ap.add_argument("--dask-block-models", type=int, metavar="N",
                    help="models per block on Dask, or read at a time with --out-of-core (default 500)")
    ap.add_argument("--out-of-core", action="store_true",
                    help="audit without holding the score matrix (benchcert audit --out-of-core)")
    ap.add_argument("--shuffle-item-ids", action="store_true",
                    help="item ids in an order unrelated to their subjects, as in real logs (the store's item codes "
                         "are then not in the matrix's row order)")
    ap.add_argument("--read-only", action="store_true",
                    help="ingest, then only the store read against the DuckDB scan (no audit)")
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        print(f"scale.py: ignoring options it does not know: {' '.join(unknown)}", file=sys.stderr)
    for k, v in PREFECT_ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    tmp_home = None
    if not os.environ.get("PREFECT_HOME"):
        tmp_home = tempfile.mkdtemp(prefix="benchcert-prefect-home-")
        os.environ["PREFECT_HOME"] = tmp_home
    shapes = args.shape or (QUICK_SHAPES if args.quick else FULL_SHAPES)
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="benchcert-scale-"))
    results, reads = [], []  # audits; with --read-only, the reads
    try:
        print(f"scale benchmark: audit mode {args.mode}; {os.cpu_count()} CPUs, load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
              file=sys.stderr)
        for shape in shapes:
            n_models, n_items = parse_shape(shape)
            d = work / (f"{n_models}x{n_items}" + ("-shuffled" if args.shuffle_item_ids else ""))
            t = time.perf_counter()
            info = generate(d / "data", n_models, n_items, args.seed, shuffled_ids=args.shuffle_item_ids)
            print(f"[{shape}] data ready ({time.perf_counter() - t:.0f} s, not timed); ingest ...", file=sys.stderr)
            db = d / "store.duckdb"
            for p in (db, db.with_name(db.name + ".wal"), d / "artifacts"):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            ing = run_child("ingest", d / "ingest.json", args.timeout, db=db, data=d / "data")
            print(f"[{shape}] " + _ingest_line({**info, "ingest": ing}), file=sys.stderr)
            print(f"[{shape}] ingest {ing['wall_s']:.1f} s, peak {_gib(ing['peak_rss'])}; "
                  + ("the read ..." if args.read_only else "audit ..."), file=sys.stderr)
            # Every audit asked for runs on the one ingest: --out-of-core and --dask-workers together
            # give two rows (make bench's 320M), neither gives the in-memory audit.
            modes = [("out of core", {"out_of_core": True})] if args.out_of_core else []
            if args.dask_workers:
                modes.append((f"Dask, {args.dask_workers} workers" + (", out of core" if args.out_of_core else ""),
                              {"dask_workers": args.dask_workers, "out_of_core": args.out_of_core}))
            if args.read_only:
                rs = run_child("readscan", d / "readscan.json", args.timeout, db=db)
                reads.append({**info, "ingest": ing, "read_scan": rs})
                print(_read_scan_line(info["n_models"], info["n_items"], rs)
                      + (" (item ids shuffled: the store's item codes are not in row order)"
                         if args.shuffle_item_ids else ""))
                modes = []
            else:
                modes = modes or [("", {})]
            for label, how in modes:
                aud = run_child("audit", d / f"audit{len(results)}.json", args.timeout, db=db,
                                artifacts=d / "artifacts", all_pairs=args.all_pairs, mode=args.mode,
                                dask_block_models=args.dask_block_models, **how)
                print(f"[{shape}] audit {label} {aud['wall_s']:.1f} s, peak {_gib(aud['peak_rss'])}", file=sys.stderr)
                if not how:
                    # In a process of its own, after the audit: the audit's read is then a cold one, as
                    # in a user's run (DuckDB's buffers empty, numba not started).
                    aud["read_scan"] = run_child("readscan", d / "readscan.json", args.timeout, db=db)
                else:  # the scan alone, in the same run (the out-of-core audit never holds the matrix)
                    aud["scan"] = run_child("scan", d / f"scan{len(results)}.json", args.timeout, db=db)
                results.append({**info, "ingest": ing, "audit": aud, "label": label})
                print(render(results[-1:]).splitlines()[2], file=sys.stderr)
            if args.json:  # written after every shape, so a long run keeps what it measured
                Path(args.json).write_text(json.dumps(reads if args.read_only else results, indent=2, default=str) + "\n")
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        if tmp_home:
            shutil.rmtree(tmp_home, ignore_errors=True)
    if results:
        print(render(results))
    print(f"load average at end {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(reads if args.read_only else results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
