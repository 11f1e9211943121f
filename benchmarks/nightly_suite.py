#!/usr/bin/env python
"""A nightly suite end to end: many benchmarks' new logs through the nightly flow against a real Prefect server.

An inbox of ``--benchmarks`` folders (default 50), each holding one Parquet log of ``--models`` x
``--items`` binary scores (default 100 x 2,000: 10 million responses in all; benchmarks/scale.py's
synthetic matrix, one seed per benchmark; generation not timed), is run through
``nightly_flow`` (flows/nightly.py: ingest of the new files, one audit per benchmark, the
dashboard) as a real flow run of a local ``prefect server start`` on 127.0.0.1, which the script
starts and stops (as benchmarks/cli_latency.py does), in a fresh child process.

The reference, measured in the same run in another fresh child and a fresh store: the same work
by plain functions, no Prefect - each folder's files ingested (``ingest_many``), each benchmark
audited in process (``run_audit("in_process", ...)``), the dashboard built once. Printed:
end-to-end wall and CPU seconds of both (CPU of the child, all threads, plus the Prefect server's
own CPU during the nightly run), the per-benchmark overhead (nightly minus reference, divided by
the number of benchmarks; wall and CPU, and CPU without what the idle server burns over the run's
wall, measured for ``--idle`` seconds before it), and the load average before and after. Targets
(issue #40): the full suite within 60 s end to end on an idle 2-core machine, overhead at most
0.5 s per benchmark. On a busy machine wall time grows with the load; compare CPU seconds.

    .venv/bin/python benchmarks/nightly_suite.py                       # 50 x 100 x 2,000
    .venv/bin/python benchmarks/nightly_suite.py --benchmarks 10       # a fifth of it
    .venv/bin/python benchmarks/nightly_suite.py --processes 2         # the nightly's benchmarks on 2 processes
    .venv/bin/python benchmarks/nightly_suite.py --json out.json --keep /tmp/nightly
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cli_latency  # noqa: E402  (the Prefect server start/stop and child environment of cli_latency.py)
import scale  # noqa: E402  (the synthetic log generator)


def _cpu_self() -> float:
    """CPU seconds of this process and its ended child processes (the nightly's worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _server_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of every process of the server's process group."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def make_inbox(inbox: Path, gen: Path, n_bench: int, n_models: int, n_items: int, seed: int) -> int:
    """One folder per benchmark, each with its Parquet log(s); returns the number of responses."""
    rows = 0
    for i in range(n_bench):
        src = gen / f"bench-{i:03d}"
        info = scale.generate(src, n_models, n_items, seed + i)
        rows += info["rows"]
        dest = inbox / f"bench-{i:03d}"
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.glob("*.parquet")):  # not done.json: the inbox holds logs only
            shutil.copy2(f, dest / f.name)
    return rows


def child(kind: str, inbox: str, db: str, artifacts: str, dashboard: str, processes: int | None = None) -> dict:
    """The nightly flow run (``kind`` "nightly") or the same work by plain functions ("plain")."""
    c0, t0 = _cpu_self(), time.perf_counter()
    if kind == "nightly":
        from benchcert.flows.nightly import nightly_flow

        out = nightly_flow(inbox, db, artifacts, dashboard_dir=dashboard, **({"processes": processes} if processes else {}))
        audited = sum(bool(e.get("audited")) for e in out["benchmarks"].values())
    else:
        from benchcert.flows.runs import run_audit
        from benchcert.tasks.audit.request import AuditRequest
        from benchcert.tasks.audit.steps import ingest_many, rebuild_dashboard
        from benchcert.tasks.ingest.mapping import parse_mapping
        from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT

        audited, parts = 0, {}

        def timed(name, fn, *a):
            c, t = _cpu_self(), time.perf_counter()
            out = fn(*a)
            w, cw = parts.get(name, (0.0, 0.0))
            parts[name] = (w + time.perf_counter() - t, cw + _cpu_self() - c)
            return out

        steps: dict[str, float] = {}
        for folder in sorted(Path(inbox).iterdir()):
            files = sorted(str(f) for f in folder.glob("*.parquet"))
            timed("ingest", ingest_many, db, files, folder.name, parse_mapping(), False, DEFAULT_LOCK_TIMEOUT)
            run = timed("audit", run_audit, "in_process", AuditRequest(db=db, benchmark=folder.name,
                                                                       artifacts_root=artifacts))
            for k, v in run.get("timings_s", {}).items():
                steps[k] = steps.get(k, 0.0) + float(v)
            audited += 1
        timed("dashboard", rebuild_dashboard, artifacts, dashboard)
        return {"wall": time.perf_counter() - t0, "cpu": _cpu_self() - c0, "audited": audited, "parts": parts,
                "audit_steps_wall": steps}
    return {"wall": time.perf_counter() - t0, "cpu": _cpu_self() - c0, "audited": audited}


def run_child(kind: str, work: Path, inbox: Path, env: dict, timeout: float, processes: int | None = None) -> dict:
    sub = work / kind
    if sub.exists():
        shutil.rmtree(sub)
    sub.mkdir(parents=True)
    out = sub / "result.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_child", kind, "--inbox", str(inbox),
                        "--db", str(sub / "store.duckdb"), "--artifacts", str(sub / "artifacts"),
                        "--dashboard", str(sub / "dashboard"), "--out", str(out),
                        *(["--processes", str(processes)] if processes else [])],
                       env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{kind} child failed ({r.returncode}):\n{r.stderr[-4000:]}")
    res = json.loads(out.read_text())
    res.update(process_wall=wall,
               process_cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return res


def report(res: dict) -> str:
    n, rows = res["benchmarks"], res["rows"]
    nightly, plain = res["nightly"], res["plain"]
    over_wall = (nightly["process_wall"] - plain["process_wall"]) / n
    over_cpu = (nightly["process_cpu"] + nightly["server_cpu"] - plain["process_cpu"]) / n
    idle = nightly.get("server_idle_cpu_per_s", 0.0) * nightly["process_wall"]
    over_busy = (nightly["process_cpu"] + max(nightly["server_cpu"] - idle, 0.0) - plain["process_cpu"]) / n
    lines = [
        f"Nightly suite: {n} benchmarks x {res['models']} models x {res['items']:,} items = {rows:,} responses; "
        f"load average {res['load_before']:.1f} before, {res['load_after']:.1f} after ({os.cpu_count()} CPUs); "
        f"nightly on {res.get('processes') or 1} process(es)",
        "  step                                   process wall s   CPU s   (inside: wall s / CPU s)",
        f"  nightly flow, Prefect server           {nightly['process_wall']:14.1f} {nightly['process_cpu']:7.1f}"
        f"   ({nightly['wall']:.1f} / {nightly['cpu']:.1f}); server CPU {nightly['server_cpu']:.1f} s",
        f"  reference: plain functions            {plain['process_wall']:14.1f} {plain['process_cpu']:7.1f}"
        f"   ({plain['wall']:.1f} / {plain['cpu']:.1f}): "
        + ", ".join(f"{k} {w:.1f} / {c:.1f}" for k, (w, c) in plain.get("parts", {}).items()) + " wall / CPU s",
        "    the reference's audits, wall s summed over benchmarks: "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(plain.get("audit_steps_wall", {}).items(), key=lambda kv: -kv[1])
                    if k not in ("flow_wall", "prefect_overhead")),
        f"  per-benchmark overhead (nightly - reference) / {n}: wall {over_wall:.2f} s, CPU {over_cpu:.2f} s "
        f"(target 0.5 s); CPU without the idle server's {nightly.get('server_idle_cpu_per_s', 0.0):.3f} CPU s per "
        f"wall s over the run ({idle:.1f} s): {over_busy:.2f} s",
        f"  end to end {nightly['process_wall']:.1f} s wall (target 60 s for 50 x 100 x 2,000 on an idle machine); "
        f"{nightly['audited']} of {n} benchmarks audited",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        ap = argparse.ArgumentParser()
        ap.add_argument("kind", choices=["nightly", "plain"])
        for name in ("--inbox", "--db", "--artifacts", "--dashboard", "--out"):
            ap.add_argument(name, required=True)
        ap.add_argument("--processes", type=int, default=None)
        a = ap.parse_args(argv[1:])
        res = child(a.kind, a.inbox, a.db, a.artifacts, a.dashboard, a.processes)
        Path(a.out).write_text(json.dumps(res))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmarks", type=int, default=50)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20251128)
    ap.add_argument("--keep", metavar="DIR", help="keep (and reuse) the generated logs, stores and artifacts in DIR")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child run")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds the idle server's CPU is measured first")
    ap.add_argument("--processes", type=int, default=None, metavar="N",
                    help="the nightly flow's benchmarks on N worker processes (nightly_flow(processes=N)); "
                         "the reference stays one process")
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="benchcert-nightly-"))
    work.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        inbox = work / "inbox"
        if inbox.exists():
            shutil.rmtree(inbox)
        rows = make_inbox(inbox, work / "generated", args.benchmarks, args.models, args.items, args.seed)
        home = work / "prefect-home"
        home.mkdir(exist_ok=True)
        load_before = os.getloadavg()[0]
        plain = run_child("plain", work, inbox, cli_latency._env(None, home), args.timeout)
        server, url = cli_latency.start_server(home, lambda msg: print(msg, file=sys.stderr))
        # The server's own loops (its background services) use CPU with no run at all: measured idle first,
        # so that the part of its CPU the runs caused can be told from the part the (load-stretched) wall adds.
        s0, t0 = _server_cpu(server.pid), time.perf_counter()
        time.sleep(args.idle)
        idle_rate = (_server_cpu(server.pid) - s0) / (time.perf_counter() - t0)
        s0 = _server_cpu(server.pid)
        nightly = run_child("nightly", work, inbox, cli_latency._env(url, home), args.timeout, args.processes)
        nightly["server_cpu"] = _server_cpu(server.pid) - s0
        nightly["server_idle_cpu_per_s"] = idle_rate
        res = {"benchmarks": args.benchmarks, "models": args.models, "items": args.items, "rows": rows,
               "processes": args.processes,
               "load_before": load_before, "load_after": os.getloadavg()[0], "nightly": nightly, "plain": plain}
        print(report(res))
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=2))
    finally:
        if server is not None:
            cli_latency.stop_server(server)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
