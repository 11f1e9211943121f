#!/usr/bin/env python
"""Full-scale timings and peak memory of ingest and audit (``make bench``).

What it measures (see benchmarks/README.md):

1. Ingest of the bundled MMLU-Pro log (CSV.gz as shipped, and the same rows as plain CSV
   and as Parquet) into a fresh DuckDB store, through the plain function ``ingest_file``
   (the "work", what the targets are judged on) and through the Prefect flow
   ``ingest_flow`` (so Prefect's overhead = flow wall - work).
2. The audit of MMLU-Pro through ``audit_flow`` in a fresh process: the work (sum of the
   flow's ``timings_s`` without flow_wall/prefect_overhead) against the flow's wall time
   and against Prefect's start-up (process spawn -> first flow running).
3. A generated log (default 10,000,000 rows: 100 models x 100,000 items, 200 subjects,
   10 domains, binary scores drawn from per-model/per-subject Beta probabilities) written
   as Parquet and CSV: ingest rows/s of each, audit work, and the peak memory (VmHWM) of
   each step, every step in a fresh child process.
4. The targets, PASS/FAIL.

Every measured step runs in a fresh child process (this script with a hidden
sub-command), so each peak RSS is that step's own and the parent's memory (data
generation) pollutes nothing.  The embedded Prefect API server is a separate process and
is not part of a step's peak RSS; its own peak is reported for information.
"""

from __future__ import annotations

import time

_T_MODULE = time.time()  # this script's first line ran (process spawn -> here = interpreter start)

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _meters import cpu_seconds, peak_rss_bytes

ROOT = Path(__file__).resolve().parents[1]
MMLU_CSV_GZ = ROOT / "data" / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
MMLU_MAP = ROOT / "data" / "mmlu_pro" / "mapping.toml"
MMLU_BENCH = "mmlu_pro"
SYN_BENCH = "synthetic"

GiB = 1 << 30
MiB = 1 << 20

# The targets (judged on the plain-function work; see _targets()).
TARGET_PARQUET_RPS = 1_000_000
TARGET_CSV_RPS = 300_000
TARGET_MMLU_AUDIT_S = 3.0
TARGET_PEAK_BYTES = 2 * GiB

# The Makefile's Prefect defaults (the caller's settings win).
PREFECT_ENV_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


# --------------------------------------------------------------------------------------
# helpers shared by parent and children
# --------------------------------------------------------------------------------------

def _proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmHWM / VmRSS (bytes) of a process from /proc, {} when unavailable."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def _peak_rss_self() -> int:
    status = _proc_status()
    if "VmHWM" in status:
        return status["VmHWM"]
    return peak_rss_bytes()


def _write_result(path: str, result: dict) -> None:
    Path(path).write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")


def _mapping(config: str | None):
    from benchcert.tasks.ingest.mapping import parse_mapping

    return parse_mapping(config=config) if config else parse_mapping()


class _ServerStartTimer:
    """Times the embedded Prefect API server's start (a subprocess) when it happens."""

    def __init__(self) -> None:
        t = time.perf_counter()
        self.seconds: float | None = None
        self.pids: list[int] = []
        self._patch_start()
        #: What making the timer took: importing the server module, as the client does before starting it.
        self.import_seconds = time.perf_counter() - t

    def _patch_start(self) -> None:
        try:
            from prefect.server.api.server import SubprocessASGIServer
        except Exception:  # pragma: no cover - other Prefect layouts
            return
        original = SubprocessASGIServer.start
        timer = self

        def start(server, *args, **kwargs):
            t = time.perf_counter()
            was_running = server.running
            try:
                return original(server, *args, **kwargs)
            finally:
                if not was_running:
                    timer.seconds = (timer.seconds or 0.0) + time.perf_counter() - t
                    if server.server_process is not None:
                        timer.pids.append(server.server_process.pid)

        SubprocessASGIServer.start = start

    def server_peak_rss(self) -> int | None:
        peaks = [_proc_status(pid).get("VmHWM") for pid in self.pids]
        peaks = [p for p in peaks if p]
        return max(peaks) if peaks else None


def _flow_run_times(flow_run_id) -> dict:
    """created / start_time of a flow run as epoch seconds (server clock = this machine)."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            fr = client.read_flow_run(flow_run_id)
        return {"created": fr.created.timestamp() if fr.created else None,
                "running": fr.start_time.timestamp() if fr.start_time else None}
    except Exception as exc:  # informational only
        return {"error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------------------
# children (hidden sub-commands)
# --------------------------------------------------------------------------------------

def child_ingest(args) -> None:
    """Plain ``ingest_file`` of one file into a fresh store; no Prefect imported."""
    t_imp = time.perf_counter()
    from benchcert.tasks.ingest.service import ingest_file

    mapping = _mapping(args.config)
    import_s = time.perf_counter() - t_imp
    rss_before = _proc_status().get("VmRSS")
    db = Path(args.db)
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    cpu = cpu_seconds()
    t = time.perf_counter()
    report = ingest_file(db, args.file, benchmark=args.benchmark, mapping=mapping)
    seconds = time.perf_counter() - t
    cpu = cpu_seconds() - cpu
    if report.status != "ingested":
        raise SystemExit(f"ingest of {args.file} failed: [{report.status}] {report.message}")
    _write_result(args.out, {
        "file": args.file, "seconds": seconds, "cpu_s": cpu, "rows": report.rows_added, "rows_read": report.rows_read,
        "rows_per_s": report.rows_added / seconds if seconds > 0 else None, "import_s": import_s,
        "rss_before_bytes": rss_before, "peak_rss_bytes": _peak_rss_self(),
        "db_bytes": db.stat().st_size if db.exists() else None,
    })


def child_flow_ingest(args) -> None:
    """``ingest_flow`` over each file into its own fresh store, in one fresh process."""
    t_spawn = args.t_spawn
    t_imp = time.perf_counter()
    import benchcert.tasks.ingest.many as many
    from benchcert.flows.ingest import ingest_flow

    import_s = time.perf_counter() - t_imp
    server = _ServerStartTimer()
    mapping = _mapping(args.config)

    work: list[float] = []
    original = many.ingest_files

    def timed_ingest_file(*a, **kw):
        t = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            work.append(time.perf_counter() - t)

    many.ingest_files = timed_ingest_file  # instrumentation only: the task imports the name at call time
    runs = []
    for path, db in zip(args.files, args.dbs):
        for p in (Path(db), Path(db + ".wal")):
            p.unlink(missing_ok=True)
        work.clear()
        t_call_epoch = time.time()
        t = time.perf_counter()
        state = ingest_flow([path], db, args.benchmark, mapping, return_state=True)
        wall = time.perf_counter() - t
        reports = state.result()
        if not reports or reports[0].status != "ingested":
            raise SystemExit(f"ingest_flow of {path} failed: {reports and reports[0].message}")
        times = _flow_run_times(state.state_details.flow_run_id)
        runs.append({"file": path, "rows": reports[0].rows_added, "work_s": sum(work), "call_wall_s": wall,
                     "t_call": t_call_epoch, "flow_run": times})
    _write_result(args.out, {
        "t_spawn": t_spawn, "t_module": _T_MODULE, "import_s": import_s, "server_import_s": server.import_seconds,
        "server_start_s": server.seconds, "runs": runs,
        "peak_rss_bytes": _peak_rss_self(), "server_peak_rss_bytes": server.server_peak_rss(),
    })


def child_audit(args) -> None:
    """``audit_flow`` (``repeat`` times) in one fresh process; the first pays Prefect's start."""
    t_spawn = args.t_spawn
    t_imp = time.perf_counter()
    from benchcert.flows.audit import audit_flow
    from benchcert.tasks.audit.request import AuditRequest

    import_s = time.perf_counter() - t_imp
    server = _ServerStartTimer()
    rss_before = _proc_status().get("VmRSS")
    runs = []
    for i in range(args.repeat):
        t_call_epoch = time.time()
        cpu = cpu_seconds()
        t = time.perf_counter()
        request = AuditRequest(db=args.db, benchmark=args.benchmark, artifacts_root=str(Path(args.artifacts) / f"run{i}"))
        state = audit_flow(request, return_state=True)
        wall = time.perf_counter() - t
        cpu = cpu_seconds() - cpu
        out = state.result()
        timings = dict(out["timings_s"])
        work = sum(v for k, v in timings.items() if k not in ("flow_wall", "prefect_overhead"))
        runs.append({"timings_s": timings, "work_s": work, "call_wall_s": wall, "call_cpu_s": cpu,
                     "t_call": t_call_epoch,
                     "flow_run": _flow_run_times(state.state_details.flow_run_id),
                     "n_models": out["n_models"], "n_items": out["n_items"],
                     "peak_rss_bytes_so_far": _peak_rss_self()})
    _write_result(args.out, {
        "t_spawn": t_spawn, "t_module": _T_MODULE, "import_s": import_s, "server_import_s": server.import_seconds,
        "server_start_s": server.seconds, "runs": runs,
        "rss_before_bytes": rss_before, "peak_rss_bytes": _peak_rss_self(),
        "server_peak_rss_bytes": server.server_peak_rss(),
    })


# --------------------------------------------------------------------------------------
# parent: data preparation, orchestration, table
# --------------------------------------------------------------------------------------

class Bench:
    def __init__(self, workdir: Path, timeout: float, verbose: bool = True):
        self.workdir = workdir
        self.timeout = timeout
        self.verbose = verbose
        self.n = 0

    def log(self, msg: str) -> None:
        if self.verbose:
            print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def child(self, sub: str, *argv: str) -> dict:
        self.n += 1
        out = self.workdir / f"result-{self.n:02d}-{sub}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), sub, "--out", str(out),
               "--t-spawn", repr(time.time()), *argv]
        t = time.perf_counter()
        proc = subprocess.run(cmd, timeout=self.timeout, cwd=str(ROOT))
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"child {sub} failed (exit {proc.returncode}): {' '.join(cmd)}")
        result = json.loads(out.read_text(encoding="utf-8"))
        result["child_wall_s"] = time.perf_counter() - t
        return result


def prepare_mmlu(dest: Path) -> dict[str, Path]:
    """The shipped CSV.gz, the same bytes unzipped, and the same table as Parquet."""
    import gzip

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    dest.mkdir(parents=True, exist_ok=True)
    csv_path = dest / "mmlu_pro.csv"
    pq_path = dest / "mmlu_pro.parquet"
    if not csv_path.exists():
        with gzip.open(MMLU_CSV_GZ, "rb") as src, open(csv_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    if not pq_path.exists():
        pq.write_table(pacsv.read_csv(csv_path), pq_path)
    return {"csv.gz": MMLU_CSV_GZ, "csv": csv_path, "parquet": pq_path}


def synthetic_shape(rows: int) -> tuple[int, int, int, int]:
    n_models = 100
    n_items = max(rows // n_models, 200)
    return n_models, n_items, 200, 10


def generate_synthetic(dest: Path, rows: int, seed: int, log) -> dict:
    """100 models x rows/100 items; p[model, subject] ~ Beta; scores ~ Bernoulli(p)."""
    import numpy as np
    import polars as pl

    n_models, n_items, n_subjects, n_domains = synthetic_shape(rows)
    stem = f"synthetic_{n_models}x{n_items}_s{seed}"
    pq_path, csv_path = dest / f"{stem}.parquet", dest / f"{stem}.csv"
    info = {"n_models": n_models, "n_items": n_items, "n_subjects": n_subjects, "n_domains": n_domains,
            "rows": n_models * n_items, "seed": seed, "parquet": str(pq_path), "csv": str(csv_path)}
    if pq_path.exists() and csv_path.exists():
        log(f"reusing {pq_path.name} and {csv_path.name}")
        info["generate_s"] = 0.0
    else:
        t = time.perf_counter()
        rng = np.random.default_rng(seed)
        ability = rng.normal(0.0, 1.0, n_models)                     # per model
        hardness = rng.normal(0.0, 0.7, n_subjects)                  # per subject
        mean = 1.0 / (1.0 + np.exp(-(ability[:, None] - hardness[None, :])))
        kappa = 30.0
        p = rng.beta(mean * kappa, (1.0 - mean) * kappa)              # (models, subjects)
        item_subject = (np.arange(n_items) * n_subjects) // n_items  # items grouped by subject
        subject_domain = (np.arange(n_subjects) * n_domains) // n_subjects
        scores = (rng.random((n_models, n_items)) < p[:, item_subject]).astype(np.int8)
        frame = (pl.DataFrame({"m": np.repeat(np.arange(n_models, dtype=np.int32), n_items),
                               "i": np.tile(np.arange(n_items, dtype=np.int32), n_models),
                               "s": np.tile(item_subject.astype(np.int32), n_models),
                               "d": np.tile(subject_domain[item_subject].astype(np.int32), n_models),
                               "score": scores.ravel()})
                 .select(pl.format("model-{}", pl.col("m").cast(pl.String).str.zfill(3)).alias("model"),
                         pl.format("item-{}", pl.col("i").cast(pl.String).str.zfill(6)).alias("item_id"),
                         pl.format("subject-{}", pl.col("s").cast(pl.String).str.zfill(3)).alias("subject"),
                         pl.format("domain-{}", pl.col("d").cast(pl.String).str.zfill(2)).alias("domain"),
                         pl.col("score")))
        del scores
        frame.write_parquet(pq_path)
        frame.write_csv(csv_path)
        info["generate_s"] = time.perf_counter() - t
        del frame
    info["parquet_bytes"] = pq_path.stat().st_size
    info["csv_bytes"] = csv_path.stat().st_size
    return info


def run(args) -> dict:
    for k, v in PREFECT_ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    rows = 1_000_000 if args.quick and args.rows is None else (args.rows or 10_000_000)
    cleanup: list[Path] = []
    prefect_home_tmp = None
    if not os.environ.get("PREFECT_HOME"):
        prefect_home_tmp = Path(tempfile.mkdtemp(prefix="benchcert-prefect-home-"))
        os.environ["PREFECT_HOME"] = str(prefect_home_tmp)
        cleanup.append(prefect_home_tmp)
    if args.keep:
        workdir = Path(args.keep).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="benchcert-bench-"))
        cleanup.append(workdir)
    bench = Bench(workdir, args.timeout, verbose=not args.silent)
    results: dict = {"rows": rows, "quick": bool(args.quick), "workdir": str(workdir),
                     "prefect_home": os.environ["PREFECT_HOME"], "prefect_home_temporary": bool(prefect_home_tmp)}
    try:
        results["env"] = _environment()
        mapping_cfg = str(MMLU_MAP)

        # 1. MMLU-Pro ingest: plain function, then the flow (one fresh process for the flows).
        bench.log("preparing MMLU-Pro as CSV and Parquet")
        files = prepare_mmlu(workdir / "mmlu")
        results["mmlu_files"] = {k: {"path": str(p), "bytes": p.stat().st_size} for k, p in files.items()}
        plain = {}
        for fmt, path in files.items():
            # A sub-second step: one run is at the mercy of whatever else the machine does, so it
            # is repeated in fresh processes and the median run is reported, with the range.
            runs = []
            for r in range(args.small_repeats):
                bench.log(f"MMLU-Pro plain ingest_file: {fmt} (run {r + 1} of {args.small_repeats})")
                runs.append(bench.child("_ingest", "--db", str(workdir / f"mmlu-plain-{fmt}.duckdb"),
                                        "--file", str(path), "--benchmark", MMLU_BENCH, "--config", mapping_cfg))
            ordered = sorted(runs, key=lambda x: x["seconds"])
            plain[fmt] = dict(ordered[(len(ordered) - 1) // 2], runs_seconds=[x["seconds"] for x in runs])
        results["mmlu_ingest_plain"] = plain
        bench.log("MMLU-Pro ingest_flow (fresh process; the first flow starts the embedded Prefect server)")
        fmts = list(files)
        flow_args = ["--benchmark", MMLU_BENCH, "--config", mapping_cfg, "--files",
                     *[str(files[f]) for f in fmts], "--dbs", *[str(workdir / f"mmlu-flow-{f}.duckdb") for f in fmts]]
        flow = bench.child("_flow_ingest", *flow_args)
        flow["formats"] = fmts
        results["mmlu_ingest_flow"] = flow

        # 2. MMLU-Pro audit, fresh process, twice (cold = first flow of the process, warm = second).
        bench.log("MMLU-Pro audit_flow x2 (fresh process)")
        results["mmlu_audit"] = bench.child("_audit", "--db", str(workdir / "mmlu-plain-csv.gz.duckdb"),
                                            "--benchmark", MMLU_BENCH, "--artifacts", str(workdir / "mmlu-artifacts"),
                                            "--repeat", "2")

        # 3. Synthetic log.
        bench.log(f"generating the synthetic log ({rows:,} rows; not timed as part of any step)")
        syn_dir = workdir / "synthetic"
        syn_dir.mkdir(exist_ok=True)
        syn = generate_synthetic(syn_dir, rows, args.seed, bench.log)
        results["synthetic"] = syn
        syn_res = {}
        for fmt in ("parquet", "csv"):
            bench.log(f"synthetic plain ingest_file: {fmt}")
            syn_res[f"ingest_{fmt}"] = bench.child("_ingest", "--db", str(workdir / f"syn-{fmt}.duckdb"),
                                                   "--file", syn[fmt], "--benchmark", SYN_BENCH)
        bench.log("synthetic audit_flow (fresh process)")
        syn_res["audit"] = bench.child("_audit", "--db", str(workdir / "syn-parquet.duckdb"), "--benchmark", SYN_BENCH,
                                       "--artifacts", str(workdir / "syn-artifacts"), "--repeat", "1")
        results["synthetic_results"] = syn_res
        results["targets"] = _targets(results)
        results["loadavg_end"] = _loadavg()
    finally:
        if not args.keep:
            for p in cleanup:
                shutil.rmtree(p, ignore_errors=True)
        elif prefect_home_tmp:
            shutil.rmtree(prefect_home_tmp, ignore_errors=True)
    return results


def _loadavg() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _environment() -> dict:
    import importlib.metadata as md

    mem = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(fh.readline().split()[1]) * 1024
    except OSError:
        pass
    versions = {}
    for pkg in ("benchcert", "prefect", "duckdb", "polars", "pyarrow", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "mem_bytes": mem, "loadavg": _loadavg(),
            "machine": platform.machine(), "versions": versions}


# --------------------------------------------------------------------------------------
# derived figures and the printed table
# --------------------------------------------------------------------------------------

def _audit_run_figures(child: dict, i: int) -> dict:
    r = child["runs"][i]
    t = r["timings_s"]
    fr = r.get("flow_run") or {}
    out = {"work_s": r["work_s"], "flow_wall_s": t.get("flow_wall"), "in_flow_overhead_s": t.get("prefect_overhead"),
           "call_wall_s": r["call_wall_s"], "call_cpu_s": r.get("call_cpu_s"), "timings_s": t,
           "call_to_running_s": (fr["running"] - r["t_call"]) if fr.get("running") else None}
    out["outside_flow_overhead_s"] = r["call_wall_s"] - (t.get("flow_wall") or 0.0)
    return out


def _targets(res: dict) -> list[dict]:
    syn = res["synthetic_results"]
    plain = res["mmlu_ingest_plain"]
    rows = res["synthetic"]["rows"]
    tag = f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows:,}"
    audit = _audit_run_figures(res["mmlu_audit"], 0)
    t = []

    def add(name, value, limit, ok, unit):
        t.append({"target": name, "value": value, "limit": limit, "pass": bool(ok), "unit": unit})

    add(f"Parquet ingest, synthetic {tag}", syn["ingest_parquet"]["rows_per_s"], TARGET_PARQUET_RPS,
        syn["ingest_parquet"]["rows_per_s"] >= TARGET_PARQUET_RPS, "rows/s>=")
    add(f"CSV ingest, synthetic {tag}", syn["ingest_csv"]["rows_per_s"], TARGET_CSV_RPS,
        syn["ingest_csv"]["rows_per_s"] >= TARGET_CSV_RPS, "rows/s>=")
    add("Parquet ingest, MMLU-Pro", plain["parquet"]["rows_per_s"], TARGET_PARQUET_RPS,
        plain["parquet"]["rows_per_s"] >= TARGET_PARQUET_RPS, "rows/s>=")
    add("CSV ingest, MMLU-Pro (plain CSV)", plain["csv"]["rows_per_s"], TARGET_CSV_RPS,
        plain["csv"]["rows_per_s"] >= TARGET_CSV_RPS, "rows/s>=")
    add("CSV ingest, MMLU-Pro (CSV.gz as shipped)", plain["csv.gz"]["rows_per_s"], TARGET_CSV_RPS,
        plain["csv.gz"]["rows_per_s"] >= TARGET_CSV_RPS, "rows/s>=")
    add("MMLU-Pro audit work (first audit of process)", audit["work_s"], TARGET_MMLU_AUDIT_S,
        audit["work_s"] < TARGET_MMLU_AUDIT_S, "s<")
    for key, label in (("ingest_parquet", "ingest Parquet"), ("ingest_csv", "ingest CSV"), ("audit", "audit")):
        peak = syn[key]["peak_rss_bytes"]
        add(f"Peak memory, {label}, synthetic {tag}", peak, TARGET_PEAK_BYTES, peak < TARGET_PEAK_BYTES, "bytes<")
    return t


def _mb(b) -> str:
    if b is None:
        return "-"
    if b >= GiB:
        return f"{b / GiB:.2f} GiB"
    if b >= 100 * MiB:
        return f"{b / MiB:.0f} MiB"
    if b >= MiB:
        return f"{b / MiB:.1f} MiB"
    return f"{b / 1024:.0f} KiB"


def _s(x, w: int = 8) -> str:
    return f"{'-':>{w}}" if x is None else f"{x:>{w}.2f}"


def _rate(x, w: int = 11) -> str:
    return f"{'-':>{w}}" if x is None else f"{x:>{w},.0f}"


def render(res: dict) -> str:
    L: list[str] = []
    env = res["env"]
    v = env["versions"]
    L.append(f"benchcert ingest/audit benchmark   ({env['cpus']} CPUs, {_mb(env['mem_bytes'])} RAM, "
             f"Python {env['python']}; prefect {v['prefect']}, duckdb {v['duckdb']}, polars {v['polars']}, "
             f"pyarrow {v['pyarrow']})")
    L.append(f"PREFECT_HOME={res['prefect_home']}" + (" (temporary)" if res["prefect_home_temporary"] else ""))
    la0, la1 = env.get("loadavg"), res.get("loadavg_end")
    if la0 and la1:
        L.append(f"load average (1/5/15 min) at start {la0[0]:.2f}/{la0[1]:.2f}/{la0[2]:.2f}, at end "
                 f"{la1[0]:.2f}/{la1[1]:.2f}/{la1[2]:.2f}"
                 + ("  (other processes were busy: timings are pessimistic)" if la0[0] > 0.5 else ""))
    L.append("")

    # 1. MMLU-Pro ingest
    plain, flow = res["mmlu_ingest_plain"], res["mmlu_ingest_flow"]
    n = plain["csv.gz"]["rows"]
    L.append(f"1. Ingest MMLU-Pro ({n:,} rows) into a fresh DuckDB store")
    head = (f"   {'format':<8} {'file':>9} {'work s':>8} {'cpu s':>7} {'rows/s':>11} {'peak RSS':>9} | "
            f"{'flow wall s':>11} {'work s':>8} {'overhead s':>10}")
    L.append(head)
    L.append("   " + "-" * (len(head) - 3))
    for i, fmt in enumerate(flow["formats"]):
        p = plain[fmt]
        fr = flow["runs"][i]
        note = "  (*)" if i == 0 else ""
        L.append(f"   {fmt:<8} {_mb(res['mmlu_files'][fmt]['bytes']):>9} {_s(p['seconds'])} {_s(p.get('cpu_s'), 7)} "
                 f"{_rate(p['rows_per_s'])} "
                 f"{_mb(p['peak_rss_bytes']):>9} | {_s(fr['call_wall_s'], 11)} {_s(fr['work_s'])} "
                 f"{_s(fr['call_wall_s'] - fr['work_s'], 10)}{note}")
    runs = plain["parquet"].get("runs_seconds", [])
    if len(runs) > 1:
        spread = ", ".join(f"{fmt} {min(plain[fmt]['runs_seconds']):.2f}-{max(plain[fmt]['runs_seconds']):.2f}"
                           for fmt in flow["formats"])
        L.append(f"   left: plain ingest_file, median of {len(runs)} runs, each in a fresh process (work s range: "
                 f"{spread});")
        L.append("   work = what the targets judge; cpu s =")
    else:
        L.append("   left: plain ingest_file, one fresh process per file (work = what the targets judge; cpu s =")
    L.append("   user+system CPU of the step, all threads: less sensitive to other load than wall time);")
    L.append("   right: ingest_flow, all three in one fresh process; overhead = flow wall - work.")
    if flow.get("server_start_s") is not None:
        L.append(f"   (*) the first flow of the process includes starting the embedded Prefect server "
                 f"({flow['server_start_s']:.2f} s)")
    L.append("")

    # 2. MMLU-Pro audit
    audit = res["mmlu_audit"]
    a0, a1 = _audit_run_figures(audit, 0), _audit_run_figures(audit, 1)
    L.append(f"2. Audit MMLU-Pro ({audit['runs'][0]['n_models']} models x {audit['runs'][0]['n_items']:,} items), "
             "audit_flow in a fresh process")
    L.append(f"   {'step':<34} {'1st run s':>10} {'2nd run s':>10}")
    L.append("   " + "-" * 56)
    keys = [k for k in dict.fromkeys([*a0["timings_s"], *a1["timings_s"]]) if k not in ("flow_wall", "prefect_overhead")]
    for k in keys:
        L.append(f"   {k:<34} {_s(a0['timings_s'].get(k), 10)} {_s(a1['timings_s'].get(k), 10)}")
    L.append(f"   {'= work (sum of the above)':<34} {_s(a0['work_s'], 10)} {_s(a1['work_s'], 10)}")
    L.append(f"   {'flow_wall (inside the flow body)':<34} {_s(a0['flow_wall_s'], 10)} {_s(a1['flow_wall_s'], 10)}")
    L.append(f"   {'prefect_overhead (in flow body)':<34} {_s(a0['in_flow_overhead_s'], 10)} "
             f"{_s(a1['in_flow_overhead_s'], 10)}")
    L.append(f"   {'call wall (audit_flow() returns)':<34} {_s(a0['call_wall_s'], 10)} {_s(a1['call_wall_s'], 10)}")
    L.append(f"   {'  of which call -> flow Running':<34} {_s(a0['call_to_running_s'], 10)} "
             f"{_s(a1['call_to_running_s'], 10)}")
    L.append(f"   {'Prefect total (call wall - work)':<34} {_s(a0['call_wall_s'] - a0['work_s'], 10)} "
             f"{_s(a1['call_wall_s'] - a1['work_s'], 10)}")
    L.append(f"   {'CPU s of the call (this process)':<34} {_s(a0['call_cpu_s'], 10)} {_s(a1['call_cpu_s'], 10)}")
    L.append(f"   peak RSS of the audit process: {_mb(audit['peak_rss_bytes'])} "
             f"(after imports: {_mb(audit.get('rss_before_bytes'))}); "
             f"Prefect server process: {_mb(audit.get('server_peak_rss_bytes'))}")
    L.append("")

    # Prefect start-up
    L.append("   Prefect start-up, fresh process (process spawn -> first flow Running):")
    for label, child in (("ingest_flow process", flow), ("audit_flow process", audit)):
        fr = child["runs"][0].get("flow_run") or {}
        total = (fr["running"] - child["t_spawn"]) if fr.get("running") else None
        interp = child["t_module"] - child["t_spawn"]
        server_s = child.get("server_start_s") or 0.0
        imports = child["import_s"] + child["server_import_s"]
        rest = total - interp - imports - server_s if total is not None else None
        L.append(f"     {label:<20} {_s(total, 5)} s = interpreter {interp:.2f} + imports {child['import_s']:.2f} "
                 f"(+ server module {child['server_import_s']:.2f}) + embedded server start {server_s:.2f} "
                 f"+ flow/task run setup {_s(rest, 4).strip()}")
    L.append("")

    # 3. Synthetic
    syn, sr = res["synthetic"], res["synthetic_results"]
    L.append(f"3. Synthetic log: {syn['rows']:,} rows ({syn['n_models']} models x {syn['n_items']:,} items, "
             f"{syn['n_subjects']} subjects, {syn['n_domains']} domains; seed {syn['seed']}; "
             f"generated in {syn['generate_s']:.1f} s, not counted)")
    head = (f"   {'step':<26} {'file':>9} {'work s':>8} {'cpu s':>7} {'rows/s':>11} {'peak RSS':>10} "
            f"{'RSS after import':>17}")
    L.append(head)
    L.append("   " + "-" * (len(head) - 3))
    for fmt in ("parquet", "csv"):
        r = sr[f"ingest_{fmt}"]
        L.append(f"   {'ingest_file ' + fmt:<26} {_mb(syn[fmt + '_bytes']):>9} {_s(r['seconds'])} "
                 f"{_s(r.get('cpu_s'), 7)} {_rate(r['rows_per_s'])} {_mb(r['peak_rss_bytes']):>10} {_mb(r.get('rss_before_bytes')):>17}")
    a = _audit_run_figures(sr["audit"], 0)
    L.append(f"   {'audit (work)':<26} {'':>9} {_s(a['work_s'])} {_s(a.get('call_cpu_s'), 7)} {'':>11} "
             f"{_mb(sr['audit']['peak_rss_bytes']):>10} "
             f"{_mb(sr['audit'].get('rss_before_bytes')):>17}")
    L.append("   audit steps: " + ", ".join(f"{k} {v:.2f}" for k, v in a["timings_s"].items()
                                               if k not in ("flow_wall", "prefect_overhead")))
    L.append(f"   audit flow_wall {a['flow_wall_s']:.2f} s, call wall {a['call_wall_s']:.2f} s "
             f"(Prefect total {a['call_wall_s'] - a['work_s']:.2f} s, incl. server start "
             f"{(sr['audit'].get('server_start_s') or 0):.2f} s); "
             f"Prefect server peak RSS {_mb(sr['audit'].get('server_peak_rss_bytes'))} (not counted)")
    L.append("")

    # 4. Targets
    L.append("4. Targets")
    head = f"   {'target':<46} {'measured':>14} {'limit':>16}  result"
    L.append(head)
    L.append("   " + "-" * (len(head) - 3))
    for t in res["targets"]:
        if t["unit"].startswith("rows/s"):
            val, lim = f"{t['value']:,.0f} rows/s", f">= {t['limit']:,.0f}"
        elif t["unit"] == "s<":
            val, lim = f"{t['value']:.2f} s", f"< {t['limit']:g} s"
        else:
            val, lim = _mb(t["value"]), f"< {_mb(t['limit'])}"
        L.append(f"   {t['target']:<46} {val:>14} {lim:>16}  {'PASS' if t['pass'] else 'FAIL'}")
    if res["quick"]:
        L.append("   (--quick: the synthetic figures are for a smaller log than the 10M-row targets assume)")
    return "\n".join(L)


# --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("_"):
        return _child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=None, help="rows of the synthetic log (default 10,000,000)")
    ap.add_argument("--quick", action="store_true", help="smoke run: a 1,000,000-row synthetic log")
    ap.add_argument("--keep", metavar="DIR", help="keep the generated files and stores in DIR (and reuse the "
                                                  "synthetic files found there)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    ap.add_argument("--seed", type=int, default=20240601, help="seed of the synthetic log")
    ap.add_argument("--small-repeats", type=int, default=5, metavar="N",
                    help="fresh-process runs of each MMLU-Pro ingest; the median is reported (default 5)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds allowed per measured step")
    ap.add_argument("--silent", action="store_true", help="no progress lines on stderr")
    # `make bench` hands the same BENCH_ARGS to every benchmarks/*.py: warn about the others' options.
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        print(f"ingest_audit.py: ignoring options it does not know: {' '.join(unknown)}", file=sys.stderr)
    if args.rows is not None and args.rows < 20_000:
        ap.error("--rows must be at least 20,000 (100 models x 200 subjects)")
    t = time.perf_counter()
    res = run(args)
    res["bench_wall_s"] = time.perf_counter() - t
    print(render(res))
    print(f"\n(benchmark wall time {res['bench_wall_s']:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


def _child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="ingest_audit.py (child)")
    ap.add_argument("sub", choices=["_ingest", "_flow_ingest", "_audit"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--t-spawn", type=float, required=True)
    ap.add_argument("--db")
    ap.add_argument("--file")
    ap.add_argument("--files", nargs="+")
    ap.add_argument("--dbs", nargs="+")
    ap.add_argument("--benchmark")
    ap.add_argument("--config")
    ap.add_argument("--artifacts")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    {"_ingest": child_ingest, "_flow_ingest": child_flow_ingest, "_audit": child_audit}[args.sub](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
