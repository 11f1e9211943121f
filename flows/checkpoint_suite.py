"""One checkpoint, one run: a checkpoint's logs for every benchmark of a suite -> ONE flow run that
ingests and audits every benchmark, records ONE suite verdict and sends ONE webhook.

Started by ``benchcert notify-checkpoint --model M --suite NAME --logs DIR`` (the event
``benchcert.checkpoint.logged`` with ``suite`` in its payload) through the checkpoint deployment.
``DIR`` holds one sub-folder or one file per benchmark, named for the benchmark (``DIR/mmlu/...`` or
``DIR/mmlu.jsonl``); each is ingested under that benchmark with the benchmark's inbox mapping, as the
single-benchmark checkpoint does. Each benchmark is audited with the audit body's steps as tasks of
this flow run (no sub-flow runs). With a baseline, the suite's answers are recorded
(:func:`benchcert.tasks.compare.suite.compare_suite`, ``record=True``: every benchmark's recorded
verdict as its next look, and the suite's look in ``suite_verdicts``), and the webhook gets one
notice: the suite answer and one line per benchmark (:func:`suite_notice`).
"""

from __future__ import annotations

from pathlib import Path

from benchcert.tasks.errors import DataError

__all__ = ["suite_checkpoint_body", "suite_notice", "benchmark_logs", "SUITE_EVENT_KIND"]

#: The webhook notice's ``event``.
SUITE_EVENT_KIND = "benchcert.suite_verdict"


def benchmark_logs(root: Path, benchmarks: tuple[str, ...]) -> dict[str, Path]:
    """Each benchmark's logs under ``root``: the sub-folder named for it, else the one file whose name
    without its extensions is the benchmark; DataError naming the benchmarks that have neither (or two)."""
    found, missing = {}, []
    files = [p for p in root.iterdir() if p.is_file()] if root.is_dir() else []
    for b in benchmarks:
        folder = root / b
        if folder.is_dir():
            found[b] = folder
            continue
        mine = [p for p in files if p.name.split(".")[0] == b]
        if len(mine) == 1:
            found[b] = mine[0]
        else:
            missing.append(b if not mine else f"{b} ({len(mine)} files)")
    if missing:
        raise DataError(f"checkpoint logs {root}: no sub-folder or single file for {missing}; put each benchmark's "
                        "logs in DIR/<benchmark>/ or DIR/<benchmark>.<ext>")
    return found


def suite_notice(result, runs: dict[str, str]) -> dict:
    """The webhook's body: the suite's answers and one line per benchmark (with its audit run)."""
    s = result.score
    head = (f"{result.candidate} vs {result.baseline} on suite {result.suite.name} ({len(result.lines)} benchmarks): "
            f"regressed somewhere: {'YES' if result.regressed_somewhere else 'no'}"
            + (f"; regressed: {', '.join(result.regressed)}" if result.regressed else "")
            + (f"; improved: {', '.join(result.improved)}" if result.improved else "")
            + ("" if s is None else f"; suite score {100 * s.estimate:+.2f} pp [{100 * s.lower:.2f}, "
               f"{100 * s.upper:.2f}] {s.verdict}"))
    lines = []
    for ln in result.lines:
        iv = ln.row.deciding_interval
        shown = "" if iv.lower is None else f" [{100 * iv.lower:.2f}, {100 * iv.upper:.2f}]"
        gap = "n/a" if ln.row.gap is None else f"{100 * ln.row.gap:+.2f} pp"
        lines.append({"benchmark": ln.benchmark, "verdict": ln.row.verdict, "suite_claim": ln.suite_claim,
                      "gap": ln.row.gap, "lower": iv.lower, "upper": iv.upper, "run_id": runs.get(ln.benchmark),
                      "text": f"{ln.benchmark}: {gap}{shown} {ln.row.verdict}"
                              + (f" (suite: {ln.suite_claim})" if ln.suite_claim else "")})
    return {"event": SUITE_EVENT_KIND, "model": result.candidate, "baseline": result.baseline,
            "suite": result.suite.name, "look": result.look, "alpha": result.alpha,
            "regressed_somewhere": result.regressed_somewhere, "improved": list(result.improved),
            "regressed": list(result.regressed), "score": result.score_dict(), "guarantees": result.guarantees,
            "text": head, "benchmarks": lines}


def suite_checkpoint_body(request, suite_name: str) -> dict:
    """The suite checkpoint (module docstring); ``request`` is the CheckpointRequest (its audit's
    benchmark is ignored: the suite names them)."""
    from benchcert.flows.bodies import audit_body
    from benchcert.flows.checkpoint_logs import allowed_logs_path, model_rows
    from benchcert.flows.nightly import MAPPING_FILE, inbox_files
    from benchcert.flows.steps import ingest_files_task, prefect_steps
    from benchcert.tasks.ingest.adapters.limits import check_settings
    from benchcert.tasks.ingest.mapping import ColumnMapping, parse_mapping

    check_settings()
    a = request.audit
    model, baseline = request.model, a.baseline
    suite = _suite(a.db, suite_name, model, baseline, a.lock_timeout)
    root = allowed_logs_path(request.logs, request.inbox, list(request.allowed_logs))
    where = benchmark_logs(root, suite.benchmarks)
    reports = {}
    for b, path in where.items():
        files, unknown = inbox_files(path) if path.is_dir() else ([str(path)], [])
        inbox_map = Path(request.inbox) / b / MAPPING_FILE if request.inbox else None
        colmap = (ColumnMapping(columns=dict(request.mapping)) if request.mapping else
                  parse_mapping(config=inbox_map) if inbox_map is not None and inbox_map.is_file() else parse_mapping())
        got = [r.as_dict() for r in ingest_files_task(a.db, files, b, colmap, False, a.lock_timeout)] + unknown
        bad = [r for r in got if r["status"] not in ("ingested", "unchanged")]
        if bad:
            raise ValueError(f"checkpoint logs of {b!r} not ingested: " + "; ".join(r["message"] for r in bad))
        if model_rows(a.db, b, model, a.lock_timeout) == 0:
            raise ValueError(f"the logs at {path} hold no responses of model {model!r} for benchmark {b!r}")
        reports[b] = got
    steps = prefect_steps()
    runs = {}
    for b in suite.benchmarks:  # one audit per benchmark, its steps tasks of this flow run; no webhook each
        run = audit_body(steps, a.model_copy(update={"benchmark": b, "webhook_url": None}))
        runs[b] = run["run_id"]
    out = {"model": model, "suite": suite.as_dict(), "files": reports, "runs": runs, "suite_verdict": None,
           "webhook": None}
    if baseline:
        from benchcert.tasks.compare.gate import GateOptions
        from benchcert.tasks.compare.suite import SuiteRequest, compare_suite

        result = compare_suite(SuiteRequest(db=Path(a.db), suite=suite, baseline=baseline, candidate=model,
                                            alpha=a.alpha, lock_timeout=a.lock_timeout, gate=GateOptions(),
                                            question=request.question, record=True))
        notice = suite_notice(result, runs)
        out["suite_verdict"] = notice
        if a.artifacts_root:  # beside the runs, for the dashboard's checkpoint grid (it never reads the store)
            import datetime as dt

            from benchcert.tasks.artifacts.runs import iso
            from benchcert.tasks.artifacts.suites import write_suite_verdict

            out["suite_artifact"] = str(write_suite_verdict(a.artifacts_root, {
                **result.as_dict(), "recorded_at": iso(dt.datetime.now(dt.timezone.utc)), "runs": runs}))
        if a.webhook_url:
            from benchcert.tasks.audit.changes import deliver_json

            out["webhook"] = deliver_json(a.webhook_url, notice)
    if request.dashboard_dir:
        from benchcert.flows.steps import rebuild_dashboard_task

        out["dashboard"] = rebuild_dashboard_task(a.artifacts_root, request.dashboard_dir)
    return out


def _suite(db, name: str, model: str, baseline: str | None, lock_timeout: float):
    from benchcert.tasks.compare.suite_def import resolve

    if name == "all":
        raise DataError("notify-checkpoint --suite all cannot name the benchmarks before the logs are read; "
                        "define the suite (benchcert suite define NAME B1 B2 ...)")
    return resolve(db, name, [model] + ([baseline] if baseline else []), lock_timeout=lock_timeout)
