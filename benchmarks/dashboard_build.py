#!/usr/bin/env python
"""How long the dashboard takes to build at a team's scale, and how large its overview page is (issue #37).

Writes a synthetic artifacts root (not timed): ``--benchmarks`` benchmarks (default 50) with ``--runs`` runs
each (default 200), every run a summary.json, manifest.json and report.html as an audit writes them, with
``--models`` models (default 10: a baseline, 8 others and one new checkpoint ``org/ckpt@step-N`` per run, so
the training run grows to ``--runs`` checkpoints), each score with four comparator intervals and its headline,
ranks, two recorded checkpoint verdicts per run and a score move every tenth run.  Then it times (wall and CPU
seconds of this process and of the children a cold build forks, tasks/render/site_fork.py; the kernel's share)
``build_site`` twice: a cold build into a new folder (every page
rendered, every run file linked; shared among two processes by default where two cores may be used, as
``dashboard build``; ``--processes 1`` for one), and, after a nightly adds one run to every benchmark (not timed), the
incremental rebuild of that site (the new runs and the cross-run pages rendered, the unchanged run folders
taken over from the previous site, tasks/render/site_cache.py, and the unchanged runs' records read from the
site's kept records instead of their summary.json, tasks/render/record_cache.py).  The reference, measured in the same run:
copying every run's report.html, summary.json and manifest.json into a fresh tree (what a build that copies
the run files could not avoid).  Printed: each build against the target and the reference, the runs reused,
the overview page's size and the whole site's, peak RSS (this process's; a forked child's is
its own) and the load average before and after.

Targets (issue #37): the build at most 10 s and the overview (index.html) under 2 MB for 50 x 200.  A busy
machine inflates wall time but not CPU time; compare CPU seconds across noisy runs.  No test asserts these.

    .venv/bin/python benchmarks/dashboard_build.py                 # 50 benchmarks x 200 runs
    .venv/bin/python benchmarks/dashboard_build.py --benchmarks 5 --runs 20   # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _meters import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]

TARGET_S, TARGET_INDEX_BYTES = 10.0, 2_000_000
METHODS = {"iid_clt": 0.02, "wilson": 0.021, "clustered_subject": 0.035, "hierarchical": 0.06}


def _score(e: float, k: int) -> dict:
    ivs = [{"method": m, "lower": e - w, "upper": e + w, "half_width": w, "alpha": 0.05} for m, w in METHODS.items()]
    return {"estimate": e, "intervals": ivs,
            "headline": {"method": "hierarchical", "question": "new_subjects", "lower": e - 0.06, "upper": e + 0.06,
                         "half_width": 0.06, "beside": None, "note": None}}


def _summary(bench: str, run_id: str, created: str, k: int, models: list[str], prev: str | None) -> dict:
    rows = []
    for j, m in enumerate(models):
        e = 0.4 + 0.04 * j + 0.0005 * k
        rows.append({"model": m, "n_items": 2000, "coverage": 1.0, "n_subjects": 40, "pooled": _score(e, k),
                     "macro": _score(e - 0.01, k), "rank": len(models) - j, "rank_lower": max(1, len(models) - j - 1),
                     "rank_upper": min(len(models), len(models) - j + 1), "tied_groups": [j // 3 + 1]})
    ckpt = models[-1]
    verdicts = [{"kind": "checkpoint", "model": cand, "baseline": models[0], "verdict": word,
                 "detail": {"look": 1, "decided_by": None if word == "inconclusive" else "first_look", "gap": gap,
                            "lower": gap - 0.02, "upper": gap + 0.02, "cs_lower": gap - 0.04, "cs_upper": gap + 0.04,
                            "mde": 0.03, "question_key": "items", "method": "stratified_items"}}
                for cand, word, gap in ((ckpt, "inconclusive", 0.01), (models[1], "improved" if k % 2 else "regressed",
                                                                        0.05 if k % 2 else -0.05))]
    moves = ([{"model": models[2], "metric": "pooled", "method": "hierarchical", "previous": 0.5, "current": 0.4,
               "previous_lower": 0.45, "previous_upper": 0.55, "direction": "down"}] if k % 10 == 9 else [])
    return {"schema_version": "1.2", "run_id": run_id, "benchmark": bench, "created_at": created, "alpha": 0.05,
            "variant": "", "n_items": 2000, "n_models": len(models), "n_subjects": 40, "n_domains": 8,
            "models": rows, "analyses": ["scores"], "warnings": [f"warning {k}"], "verdicts": verdicts,
            "changes": {"previous_run_id": prev, "new_models": [ckpt], "removed_models": [], "moves": moves,
                        "regressions": [m["model"] for m in moves]}}


def _run_id(b: int, k: int) -> tuple[str, str]:
    """Run ``k`` of benchmark ``b``: its id and its finish time (two runs a day)."""
    finished = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=k // 2, hours=b % 12, minutes=k % 2)
    return (f"{finished.strftime('%Y%m%dT%H%M%S000Z')}-{b:03d}{k:03d}",
            finished.isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def _write_run(root: Path, b: int, k: int, n_models: int, report: str) -> None:
    """Run ``k`` of benchmark ``b`` as an audit publishes it (summary.json, manifest.json, report.html)."""
    bench = f"bench{b:02d}"
    run_id, created = _run_id(b, k)
    prev = _run_id(b, k - 1)[0] if k else None
    run_dir = root / bench / run_id
    run_dir.mkdir(parents=True)
    models = ["org/base"] + [f"lab{j}/model-{j}" for j in range(n_models - 2)] + [f"org/ckpt@step-{1000 * (k + 1)}"]
    (run_dir / "summary.json").write_text(json.dumps(_summary(bench, run_id, created, k, models, prev)))
    (run_dir / "manifest.json").write_text(json.dumps({
        "benchcert_version": "bench", "run_id": run_id, "flow_run_id": None, "benchmark": bench,
        "status": "completed", "started_at": created, "finished_at": created, "config": {},
        "sources": [{"path": f"/logs/{bench}/{k}.csv", "sha256": "ab" * 32, "format": "csv",
                     "rows_added": 20000, "ingested_at": created}], "tables": [],
        "files": ["summary.json", "manifest.json", "report.html"], "timings_s": {}}))
    (run_dir / "report.html").write_text(report)


def _report(report_kb: int) -> str:
    return "<!DOCTYPE html><html><body>" + "<p>report text</p>" * (report_kb * 1024 // 18) + "</body></html>"


def write_artifacts(root: Path, n_bench: int, n_runs: int, n_models: int, report_kb: int) -> None:
    from benchcert.tasks.artifacts.runs import refresh_index

    report = _report(report_kb)
    for b in range(n_bench):
        for k in range(n_runs):
            _write_run(root, b, k, n_models, report)
    refresh_index(root)


def add_nightly(root: Path, n_bench: int, k: int, n_models: int, report_kb: int) -> None:
    """What a nightly adds: run ``k`` of every benchmark (and the index listing it)."""
    from benchcert.tasks.artifacts.runs import refresh_index

    report = _report(report_kb)
    for b in range(n_bench):
        _write_run(root, b, k, n_models, report)
    refresh_index(root)


def _copy_reference(root: Path, dest: Path) -> float:
    """Seconds to copy what the build copies (report, summary, manifest of every run) into a new tree."""
    start = time.perf_counter()
    for bench_dir in (p for p in root.iterdir() if p.is_dir()):
        for run_dir in bench_dir.iterdir():
            out = dest / bench_dir.name / run_dir.name
            out.mkdir(parents=True)
            for name in ("report.html", "summary.json", "manifest.json"):
                shutil.copyfile(run_dir / name, out / name)
    return time.perf_counter() - start


def _sys() -> float:
    """Kernel CPU seconds of this process and its reaped children: folders, links and files made (the rest is
    Python)."""
    return sum(resource.getrusage(who).ru_stime for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def _children() -> float:
    """User + system CPU seconds of this process's reaped children: a cold build of many runs forks one per core
    (tasks/render/site_fork.py), and their CPU is the build's."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(what: str, build, ref: float, ref_cpu: float):
    """Run ``build`` once and print its wall and CPU seconds (its forked children's included) against the target
    and the copy reference."""
    cpu0, kids0, sys0, t = cpu_seconds(), _children(), _sys(), time.perf_counter()
    report = build()
    wall, kids, kernel = time.perf_counter() - t, _children() - kids0, _sys() - sys0
    cpu = cpu_seconds() - cpu0 + kids
    print(f"{what}: {wall:.2f} s wall, {cpu:.2f} CPU s ({kids:.2f} of them in forked children, {kernel:.2f} in the "
          f"kernel), {report.pages} pages, {len(report.problems)} problems (target <= {TARGET_S:g} s: "
          f"{'met' if wall <= TARGET_S else 'NOT met'} by wall, {'met' if cpu <= TARGET_S else 'NOT met'} by CPU); "
          f"/ copy reference = {wall / ref:.2f} (wall), {cpu / max(ref_cpu, 1e-9):.2f} (CPU)")
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmarks", type=int, default=50)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--report-kb", type=int, default=20, help="size of each synthetic report.html (default 20 KB)")
    ap.add_argument("--processes", type=int, default=None,
                    help="processes the cold build is shared among (dashboard build --processes; default: as there, "
                         "two where two cores may be used; 1: one process)")
    ap.add_argument("--keep", type=Path, help="write here and keep (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    from benchcert.tasks.render.dashboard import build_site

    work = args.keep or Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    try:
        arts = work / "artifacts"
        t = time.perf_counter()
        write_artifacts(arts, args.benchmarks, args.runs, args.models, args.report_kb)
        print(f"artifacts: {args.benchmarks} benchmarks x {args.runs} runs x {args.models} models written in "
              f"{time.perf_counter() - t:.1f} s (not timed below)")
        load0 = os.getloadavg()
        ref_cpu0 = cpu_seconds()
        ref = _copy_reference(arts, work / "copy-reference")
        ref_cpu = cpu_seconds() - ref_cpu0
        site = work / "site"
        from benchcert.tasks.render.site_fork import fork_workers

        workers = fork_workers(args.benchmarks * args.runs, args.processes)
        cold = _timed(f"cold build (every page rendered; --processes {args.processes}: {workers} process(es))",
                      lambda: build_site(arts, site, processes=args.processes), ref, ref_cpu)
        index = (site / "index.html").stat().st_size
        total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        add_nightly(arts, args.benchmarks, args.runs, args.models, args.report_kb)  # not timed: the audits write it
        warm = _timed("incremental build after a nightly (one new run per benchmark)",
                      lambda: build_site(arts, site), ref, ref_cpu)
        print(f"reference, copying the run files alone: {ref:.2f} s wall, {ref_cpu:.2f} CPU s")
        print(f"runs: {cold.runs} cold, {warm.runs} incremental of which {warm.reused} reused and "
              f"{warm.runs - warm.reused} rendered")
        print(f"index.html: {index / 1e6:.3f} MB (target < {TARGET_INDEX_BYTES / 1e6:g} MB: "
              f"{'met' if index < TARGET_INDEX_BYTES else 'NOT met'}); whole site {total / 1e6:.0f} MB")
        for name in ("checkpoints.html", "models.html"):
            print(f"{name}: {(site / '_views' / name).stat().st_size / 1e6:.3f} MB")
        series = next((site / "_views").glob("series-*.html"), None)
        if series is not None:
            print(f"training-run page: {series.stat().st_size / 1e6:.3f} MB")
        load1 = os.getloadavg()
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; load average before "
              f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} "
              "(2 cores shared: a busy machine inflates wall, not CPU)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
