#!/usr/bin/env python
"""How long a person waits for the command line: each command in a fresh process, as typed.

What it measures (``make bench`` runs it with no arguments):

1. ``python -c "import polars, duckdb, numpy, scipy"``: the floor any command pays for its
   libraries, measured in the same run so every figure can be read as a ratio to it.
2. ``benchcert --help``.
3. ``benchcert ingest`` of a 4-line CSV (header + 3 rows) into a new store.
4. ``benchcert audit`` of that store.
5. ``benchcert audit`` of MMLU-Pro (29 models x 12,032 items, ingested once beforehand, not
   timed); ``--json``'s ``timings_s`` gives the work inside the run (reading the store,
   analyses, report, artifacts), so overhead = wall - work.  The first audit of a store
   computes the exact worst-case subsample values h* and keeps them beside it; it is run and
   reported once ("cold"), then the timed runs read them ("warm", and the script checks that
   the h* file did not change).
6. The small questions (issue #40): ``benchcert.audit`` (the Python API) of the bundled MMLU-Pro
   DataFrame in memory, the call timed alone in a fresh process, as a multiple of step 5's
   audit (target at most 2x), and ``benchcert compare`` of two MMLU-Pro models, beyond
   ``python -c pass`` (target at most 1 s).

Steps 2-6 run without a Prefect API (the in-process mode).  Then, unless ``--no-server``, a
local ``prefect server start`` is started on a free loopback port and steps 3-5 run again
against it (``PREFECT_API_URL`` set: real Prefect flow runs).  There the audits' overhead is
again wall - work (as the issue measured it; the part Prefect adds to the in-process run of the
same step is printed beside it), and the ingest's, which reports no work figure, is its wall
minus the in-process wall of the same step.

The commands run as installed: PYTHONDONTWRITEBYTECODE is removed from their environment (unless
``--no-bytecode-cache``) so that Python keeps benchcert's compiled byte-code as it keeps the
libraries', and one untimed ingest and audit in each mode compiles it and fills the page cache
before the timed runs.

Each step runs ``--runs`` times (default 5), each in a fresh process; min / median / max wall,
median CPU seconds of the child (user + system, all threads) and the ratio of the median to
the import floor are printed, with the load average before and after.  Targets on an idle
2-core machine: small ingest <= 1.5 s; MMLU-Pro audit <= work + 1 s without a Prefect API;
with a running server, overhead <= 2 s.  A busy machine inflates wall time but not CPU time:
compare CPU seconds across noisy runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MMLU_CSV = ROOT / "data" / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
MMLU_MAP = ROOT / "data" / "mmlu_pro" / "mapping.toml"
SMALL = "model,item_id,subject,score\nm1,q1,s1,1\nm1,q2,s1,0\nm1,q3,s2,1\n"
TARGETS = {"ingest_small": 1.5}


#: Set by --no-bytecode-cache: keep PYTHONDONTWRITEBYTECODE from the caller's environment.
KEEP_NO_BYTECODE = False


def _env(api_url: str | None, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    if not KEEP_NO_BYTECODE:
        # As installed: Python keeps compiled byte-code (.pyc) of benchcert's modules, as it does for
        # the libraries'.  With PYTHONDONTWRITEBYTECODE=1 (set in some shells and CI images) every
        # run compiles benchcert's ~80 modules again: 0.3-1.1 CPU s more per command, in both modes.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_UI_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING")
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def _run(argv: list[str], env: dict, cwd: Path, expect: int = 0) -> tuple[float, float, str]:
    """Wall seconds, child CPU seconds and stdout of one fresh process that exits ``expect``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout


def _stats(samples: list[tuple[float, float]]) -> dict:
    walls = [w for w, _ in samples]
    return {"min": min(walls), "median": statistics.median(walls), "max": max(walls),
            "cpu_median": statistics.median(c for _, c in samples), "runs": len(walls)}


def _work(out: str) -> float:
    t = json.loads(out)["timings_s"]
    return sum(v for k, v in t.items() if k not in ("flow_wall", "prefect_overhead"))


#: --help, --version and usage errors import nothing heavy: at most this beyond `python -c pass` (issue #27).
HELP_TARGET = 0.3


def measure(work: Path, runs: int, env: dict, mmlu_db: Path, tag: str, log) -> dict:
    bc = str(BIN / "benchcert")
    res: dict = {}
    small = work / "small.csv"
    small.write_text(SMALL)
    # One untimed run of the commands first: byte-code compiled once, files in the page cache, as
    # for any command typed a second time.
    warm = work / f"{tag}-warm.duckdb"
    _run([bc, "ingest", str(small), "--db", str(warm), "--benchmark", "small"], env, work)
    _run([bc, "audit", "--db", str(warm), "--benchmark", "small", "--artifacts", str(work / f"{tag}-arts-warm"),
          "--json"], env, work)

    if tag == "in_process":
        log("import floor: python -c 'import polars, duckdb, numpy, scipy'")
        res["import_floor"] = _stats([_run([sys.executable, "-c", "import polars, duckdb, numpy, scipy"], env, work)[:2]
                                      for _ in range(runs)])
        log("python -c pass; benchcert --help, --version and a usage error")
        res["python_pass"] = _stats([_run([sys.executable, "-c", "pass"], env, work)[:2] for _ in range(runs)])
        res["help"] = _stats([_run([bc, "--help"], env, work)[:2] for _ in range(runs)])
        res["version"] = _stats([_run([bc, "--version"], env, work)[:2] for _ in range(runs)])
        res["usage_error"] = _stats([_run([bc, "compare"], env, work, expect=2)[:2] for _ in range(runs)])

    log(f"[{tag}] ingest of a 4-line CSV into a new store")
    samples, stores = [], []
    for i in range(runs):
        db = work / f"{tag}-small-{i}.duckdb"
        w, c, _ = _run([bc, "ingest", str(small), "--db", str(db), "--benchmark", "small"], env, work)
        samples.append((w, c))
        stores.append(db)
    res["ingest_small"] = _stats(samples)

    log(f"[{tag}] audit of that store")
    samples, works = [], []
    for i, db in enumerate(stores):
        w, c, out = _run([bc, "audit", "--db", str(db), "--benchmark", "small", "--artifacts",
                          str(work / f"{tag}-arts-small-{i}"), "--json"], env, work)
        samples.append((w, c))
        works.append(_work(out))
    res["audit_small"] = {**_stats(samples), "work_median": statistics.median(works),
                          "run_mode": json.loads(out)["run_mode"]}

    hstar = Path(str(mmlu_db) + ".cache") / "worst_case.json"
    if tag == "in_process":
        log(f"[{tag}] audit of MMLU-Pro, first run (computes and keeps h*)")
        w, c, out = _run([bc, "audit", "--db", str(mmlu_db), "--benchmark", "mmlu_pro", "--artifacts",
                          str(work / f"{tag}-arts-mmlu-cold"), "--json"], env, work)
        res["audit_mmlu_cold"] = {"wall": w, "cpu": c, "work": _work(out),
                                  "subsample_s": json.loads(out)["timings_s"].get("analysis:subsample")}
    kept = hstar.read_bytes() if hstar.exists() else None
    log(f"[{tag}] audit of MMLU-Pro x{runs} (h* kept beside the store)")
    samples, works, subs = [], [], []
    for i in range(runs):
        w, c, out = _run([bc, "audit", "--db", str(mmlu_db), "--benchmark", "mmlu_pro", "--artifacts",
                          str(work / f"{tag}-arts-mmlu-{i}"), "--json"], env, work)
        samples.append((w, c))
        works.append(_work(out))
        subs.append(json.loads(out)["timings_s"].get("analysis:subsample"))
    res["audit_mmlu"] = {**_stats(samples), "work_median": statistics.median(works),
                         "subsample_s_median": statistics.median(subs), "run_mode": json.loads(out)["run_mode"],
                         "hstar_unchanged": kept is not None and hstar.read_bytes() == kept}
    if tag == "in_process":
        res.update(small_questions(work, runs, env, mmlu_db, log))
    return res


#: The Python API's audit of the bundled MMLU-Pro frame in memory, in a fresh process: the frame is
#: read first (not timed), then ``benchcert.audit`` timed alone; printed as JSON.
API_AUDIT = """
import json, os, sys, time
import polars as pl
import benchcert as bc
frame = pl.read_csv(open(sys.argv[1], "rb").read())  # (gzip: decompressed by polars, as docs/python.md reads it)
t = os.times(); c0, w0 = t.user + t.system, time.perf_counter()
result = bc.audit(frame, model="model", item="question_id", subject="src", domain="category",
                  score="correct", benchmark="mmlu_pro")
t = os.times()
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": t.user + t.system - c0, "models": result.n_models}))
"""
#: Two models of MMLU-Pro compared (``benchcert compare A B``), as typed (issue #40).
COMPARE_MODELS = ("gemini-1.5-pro-002", "gemini-1.5-flash-002")
#: Issue #40's targets for the small questions: the API's audit at most this multiple of the CLI's
#: in-process audit of the same data; ``compare`` of two models at most this beyond ``python -c pass``.
API_AUDIT_RATIO, COMPARE_BEYOND = 2.0, 1.0


def small_questions(work: Path, runs: int, env: dict, mmlu_db: Path, log) -> dict:
    """The small questions of issue #40, each in a fresh process: ``benchcert.audit`` of the bundled
    MMLU-Pro DataFrame in memory (29 models x 12,032 items; its throw-away store computes h* as
    a first audit does) and ``benchcert compare`` of two MMLU-Pro models on the kept store."""
    script = work / "api_audit.py"
    script.write_text(API_AUDIT)
    log("[in_process] Python API: benchcert.audit of the bundled MMLU-Pro DataFrame")
    calls, procs = [], []
    for _ in range(runs):
        w, c, out = _run([sys.executable, str(script), str(MMLU_CSV)], env, work)
        got = json.loads(out)
        calls.append((got["wall"], got["cpu"]))
        procs.append((w, c))
    log("[in_process] benchcert compare of two MMLU-Pro models")
    bc = str(BIN / "benchcert")
    compare = _stats([_run([bc, "compare", *COMPARE_MODELS, "--db", str(mmlu_db), "--benchmark", "mmlu_pro"],
                           env, work)[:2] for _ in range(runs)])
    return {"api_audit_call": _stats(calls), "api_audit_process": _stats(procs), "compare_mmlu": compare}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, log) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = _env(None, home)
    logf = (home / "server.log").open("w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    log(f"starting a Prefect server on 127.0.0.1:{port}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(1)
        if proc.poll() is not None:
            raise SystemExit(f"prefect server exited:\n{(home / 'server.log').read_text()[-3000:]}")
    raise SystemExit("prefect server did not become healthy in 300 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def report(res: dict, load: tuple, runs: int) -> str:
    floor = res["in_process"]["import_floor"]["median"]
    L = [f"CLI latency: each command in a fresh process, {runs} runs; wall s min / median / max, CPU s (median, "
         "child user+sys), ratio = median / import floor",
         f"load average before {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}, after "
         f"{load[1][0]:.2f} {load[1][1]:.2f} {load[1][2]:.2f}; {os.cpu_count()} CPUs; byte-code cache "
         f"{'on' if res.get('bytecode_cache', True) else 'off (PYTHONDONTWRITEBYTECODE)'}", ""]
    L.append(f"  {'step':<44} {'min':>6} {'median':>7} {'max':>6} {'cpu':>6} {'ratio':>6}  note")

    def row(label, s, note=""):
        L.append(f"  {label:<44} {s['min']:6.2f} {s['median']:7.2f} {s['max']:6.2f} {s['cpu_median']:6.2f} "
                 f"{s['median'] / floor:6.2f}  {note}")

    ip = res["in_process"]
    row("python -c 'import polars, duckdb, numpy, scipy'", ip["import_floor"], "the floor")
    row("python -c pass", ip["python_pass"], "the interpreter alone")
    for key, label in (("help", "benchcert --help"), ("version", "benchcert --version"),
                       ("usage_error", "benchcert compare (usage error)")):
        beyond = ip[key]["median"] - ip["python_pass"]["median"]
        row(label, ip[key], f"{beyond:.2f} s beyond python -c pass: target <= {HELP_TARGET} s: "
                            f"{'PASS' if beyond <= HELP_TARGET else 'FAIL'}")
    t = TARGETS["ingest_small"]
    row("ingest 4-line CSV, new store (in-process)", ip["ingest_small"],
        f"target <= {t} s: {'PASS' if ip['ingest_small']['median'] <= t else 'FAIL'}")
    row("audit of that store (in-process)", ip["audit_small"], f"work {ip['audit_small']['work_median']:.2f} s")
    a = ip["audit_mmlu"]
    over = a["median"] - a["work_median"]
    row("audit MMLU-Pro (in-process, h* kept)", a,
        f"work {a['work_median']:.2f} s, overhead {over:.2f} s, target <= work + 1 s: "
        f"{'PASS' if over <= 1.0 else 'FAIL'}; h* file unchanged: {a['hstar_unchanged']}")
    cold = ip["audit_mmlu_cold"]
    L.append(f"  {'audit MMLU-Pro, first run (computes h*)':<44} {cold['wall']:6.2f} {'':>7} {'':>6} "
             f"{cold['cpu']:6.2f} {'':>6}  work {cold['work']:.2f} s, subsample step {cold['subsample_s']:.2f} s "
             f"(warm: {a['subsample_s_median']:.2f} s)")
    api, py = ip["api_audit_call"], ip["python_pass"]
    ratio, ratio_cold = api["median"] / a["median"], api["median"] / cold["wall"]
    row("Python API: benchcert.audit(frame), the call", api,
        f"{ratio:.2f}x the CLI audit above (target <= {API_AUDIT_RATIO}x: {'PASS' if ratio <= API_AUDIT_RATIO else 'FAIL'}; "
        f"CPU {api['cpu_median'] / a['cpu_median']:.2f}x); {ratio_cold:.2f}x its first run (h* computed, as the "
        "API's throw-away store does)")
    row("Python API: the same, whole process", ip["api_audit_process"],
        f"import, frame read from the CSV, audit: {ip['api_audit_process']['median'] / a['median']:.2f}x the CLI "
        f"audit (CPU {ip['api_audit_process']['cpu_median'] / a['cpu_median']:.2f}x)")
    cmp = ip["compare_mmlu"]
    beyond = cmp["median"] - py["median"]
    row(f"benchcert compare {' '.join(COMPARE_MODELS)}", cmp,
        f"{beyond:.2f} s beyond python -c pass (CPU {cmp['cpu_median'] - py['cpu_median']:.2f} s): target <= "
        f"{COMPARE_BEYOND} s: {'PASS' if beyond <= COMPARE_BEYOND else 'FAIL'}")
    if "prefect_server" in res:
        ps = res["prefect_server"]
        for key, label in (("ingest_small", "ingest 4-line CSV (Prefect server)"),
                           ("audit_small", "audit of that store (Prefect server)"),
                           ("audit_mmlu", "audit MMLU-Pro (Prefect server)")):
            o = ps[key]["median"] - ip[key]["median"]
            oc = ps[key]["cpu_median"] - ip[key]["cpu_median"]
            if "work_median" in ps[key]:
                # As issue 19 measured it ("overhead 3.4-4.0 s" = wall - work against a server): the
                # target applies to wall - work, not only to the part Prefect adds to the in-process run.
                ow = ps[key]["median"] - ps[key]["work_median"]
                row(label, ps[key], f"work {ps[key]['work_median']:.2f} s, overhead {ow:.2f} s (vs in-process "
                                    f"{o:+.2f} s wall, {oc:+.2f} CPU s), target <= work + 2 s: "
                                    f"{'PASS' if ow <= 2 else 'FAIL'}")
            else:  # ingest reports no work figure: the in-process run of the same command stands for it
                row(label, ps[key], f"overhead vs in-process {o:+.2f} s wall ({oc:+.2f} CPU s), target <= 2 s: "
                                    f"{'PASS' if o <= 2 else 'FAIL'}")
    return "\n".join(L)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-server", action="store_true", help="skip the runs against a local Prefect server")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary folder, removed)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE if set (default: unset it for the commands, as installed)")
    args = ap.parse_args()
    global KEEP_NO_BYTECODE
    KEEP_NO_BYTECODE = args.no_bytecode_cache

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    work = args.keep or Path(tempfile.mkdtemp(prefix="benchcert-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "prefect-home"
    home.mkdir(exist_ok=True)
    load0 = os.getloadavg()
    res: dict = {}
    server = None
    try:
        mmlu_db = work / "mmlu.duckdb"
        if not mmlu_db.exists():
            log("ingesting MMLU-Pro once (not timed)")
            _run([str(BIN / "benchcert"), "ingest", str(MMLU_CSV), "--db", str(mmlu_db), "--benchmark", "mmlu_pro",
                  "--config", str(MMLU_MAP)], _env(None, home), work)
        res["in_process"] = measure(work, args.runs, _env(None, home), mmlu_db, "in_process", log)
        if not args.no_server:
            server, url = start_server(home, log)
            res["prefect_server"] = measure(work, args.runs, _env(url, home), mmlu_db, "prefect", log)
    finally:
        if server is not None:
            stop_server(server)
        load1 = os.getloadavg()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    res["load_average"] = {"before": load0, "after": load1}
    res["bytecode_cache"] = not (KEEP_NO_BYTECODE and os.environ.get("PYTHONDONTWRITEBYTECODE"))
    print(report(res, (load0, load1), args.runs))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
