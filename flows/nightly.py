"""The nightly audit: ingest whatever is new in the inbox, audit every benchmark that changed.

Inbox layout: ``<inbox>/<benchmark>/<log files>``, optionally with ``mapping.toml`` (the
column mapping for that folder's files). A file already ingested with the same content
and settings is recognised by its SHA-256 and adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from benchcert.flows.audit import audit_flow
from benchcert.flows.bodies import audit_body
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.sources import expand_sources
from benchcert.flows.serve_log import announced
from benchcert.flows.steps import in_task_steps, rebuild_dashboard_task
from benchcert.tasks.audit.steps import ingest_many
from benchcert.tasks.audit.request import AuditRequest
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.errors import DataError

MAPPING_FILE = "mapping.toml"


def inbox_files(folder: Path) -> tuple[list[str], list[dict]]:
    files, unknown = expand_sources([str(folder)])
    files = [f for f in files if Path(f).name != MAPPING_FILE]
    unknown = [u for u in unknown if Path(u["path"]).name != MAPPING_FILE]
    return files, unknown


@flow(name="benchcert-nightly", log_prints=False, validate_parameters=False)
def nightly_flow(inbox: str, db: str, artifacts_root: str, alpha: float = 0.05, webhook_url: str | None = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT, dashboard_dir: str | None = None,
                 dask_address: str | None = None, dask_workers: int | None = None,
                 export_dir: str | None = None, processes: int | None = None) -> dict:
    """Ingest new logs per benchmark folder of ``inbox`` and audit the benchmarks that changed.

    Each benchmark is one task run (:func:`nightly_benchmark_task`: its ingest, then its audit),
    one after another in this process, or with ``processes`` = N > 1 on a pool of N worker
    processes (Prefect's ProcessPoolTaskRunner: several benchmarks' audits at once, on as many
    cores; their store accesses wait for each other on the store's lock, one at a time as ever).

    With ``dask_address`` (a running scheduler) or ``dask_workers`` (a LocalCluster started for
    the run), the benchmarks that changed are exported to Parquet (``export_dir``, default
    ``<artifacts_root>/.export``: a folder every worker can read) after all ingests, and audited
    in parallel, one audit per benchmark, each fanning its analyses out to the cluster
    (tasks/audit/distributed.py). This flow still writes every artifact and run record.

    The serve log gets a line when the run starts, and when it finishes (each audited benchmark with its run
    id) or fails (the error): :mod:`benchcert.flows.serve_log`.
    """
    with announced("benchcert-nightly", inbox=inbox) as outcome:
        out = _nightly(inbox, db, artifacts_root, alpha, webhook_url, lock_timeout, dashboard_dir, dask_address,
                       dask_workers, export_dir, processes)
        outcome["audited"] = ", ".join(f"{b}:{e['run_id']}" for b, e in out["benchmarks"].items()
                                       if e.get("audited")) or "none"
    return out


def _nightly(inbox: str, db: str, artifacts_root: str, alpha: float, webhook_url: str | None, lock_timeout: float,
             dashboard_dir: str | None, dask_address: str | None, dask_workers: int | None,
             export_dir: str | None, processes: int | None = None) -> dict:
    """:func:`nightly_flow`'s body."""
    from benchcert.tasks.ingest.adapters.limits import check_settings

    inbox_path = Path(inbox)
    if not inbox_path.is_dir():
        raise FileNotFoundError(f"inbox {inbox} is not a directory")
    # A limit variable with no usable value stops the run before any file is read (as the CLI does),
    # instead of refusing every file of every benchmark for it.
    check_settings()

    def request(benchmark: str) -> AuditRequest:
        return AuditRequest(db=db, benchmark=benchmark, artifacts_root=artifacts_root, alpha=alpha,
                            lock_timeout=lock_timeout, webhook_url=webhook_url)

    out: dict = {"inbox": str(inbox_path), "benchmarks": {}}
    parallel = bool(dask_address or dask_workers)
    pending: list[str] = []
    folders = sorted(p for p in inbox_path.iterdir() if p.is_dir() and not p.name.startswith("."))
    calls = [(str(f), request(f.name), not parallel) for f in folders]
    if processes is not None and processes > 1 and not parallel and len(calls) > 1:
        entries = _on_processes(calls, processes)
    else:
        entries = (_entry(lambda: nightly_benchmark_task(*call)) for call in calls)
    for folder, entry in zip(folders, entries):
        if entry.pop("changed", False) and parallel:
            pending.append(folder.name)
        out["benchmarks"][folder.name] = entry
    if pending:
        try:
            runs = _audit_on_dask([request(b) for b in pending], dask_address, dask_workers, export_dir)
        except Exception as exc:  # noqa: BLE001 - the export or the cluster failed: every pending audit
            runs = [exc] * len(pending)
        for benchmark, run in zip(pending, runs):
            entry = out["benchmarks"][benchmark]
            if isinstance(run, BaseException):
                entry["error"] = f"{type(run).__name__}: {run}"[:2000]
            else:
                entry.update(audited=True, run_id=run["run_id"], run_dir=run["run_dir"], changes=run.get("changes"),
                             webhook=run.get("webhook"))
    if dashboard_dir and any(e["audited"] for e in out["benchmarks"].values()):
        out["dashboard"] = rebuild_dashboard_task(artifacts_root, dashboard_dir)
    out["problems"] = nightly_problems(out)
    if out["problems"]:
        # The run fails (so the operator sees it) only after every benchmark it could handle was handled.
        raise NightlyProblems(f"{len(out['problems'])} problem(s) in {inbox}: " + "; ".join(out["problems"])[:4000])
    return out


def _entry(result) -> dict:
    """A benchmark's entry: ``result()``'s, or what it got to when it failed. One benchmark's bad
    mapping, bad file or failed audit never stops the others."""
    try:
        return result()
    except BenchmarkFailed as exc:
        return exc.entry
    except Exception as exc:  # noqa: BLE001 - reported by the flow, after every benchmark had its turn
        return {"files": [], "audited": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}


def _on_processes(calls: list[tuple], processes: int):
    """The benchmarks' task runs on a pool of ``processes`` worker processes; their entries in order."""
    from prefect.task_runners import ProcessPoolTaskRunner

    with ProcessPoolTaskRunner(max_workers=processes) as runner:
        futures = [runner.submit(nightly_benchmark_task, {"folder": folder, "request": req, "audit": audit})
                   for folder, req, audit in calls]
        for future in futures:
            yield _entry(future.result)


class BenchmarkFailed(Exception):
    """One benchmark of the nightly could not be ingested or audited; ``entry`` is what it got to
    (its files' reports and the error), for the run's report."""

    def __init__(self, entry: dict):
        super().__init__(entry)  # (its only argument: pickled back from a worker process whole)
        self.entry = entry

    def __str__(self) -> str:
        return str(self.entry.get("error"))


@task(name="nightly-benchmark", cache_policy=NO_CACHE)
def nightly_benchmark_task(folder: str, request: AuditRequest, audit: bool = True) -> dict:
    """One benchmark of the nightly as one task run: the new files of its inbox ``folder`` ingested
    (the store opened once, small files stored together: tasks/ingest/many.py), then, when rows were
    added and ``audit``, its audit, in this task run (flows/steps.py :func:`in_task_steps`: the same
    steps, artifacts and run record as the audit flow's, without a subflow and a task run per step).

    Returns the benchmark's entry of the nightly's output (``files``, ``audited``, ``run_id``, ...,
    and ``changed``: rows were added); raises :class:`BenchmarkFailed` with the entry so far.
    """
    path = Path(folder)
    entry: dict = {"files": [], "audited": False}
    try:
        mapping_path = path / MAPPING_FILE
        mapping = parse_mapping(config=mapping_path) if mapping_path.is_file() else parse_mapping()
        files, unknown = inbox_files(path)
        reports = [r.as_dict() for r in ingest_many(request.db, files, request.benchmark, mapping, False,
                                                    request.lock_timeout)]
        entry["files"] = reports + unknown
        entry["changed"] = any(r["status"] == "ingested" and r.get("rows_added", 0) > 0 for r in reports)
        if entry["changed"] and audit:
            run = audit_body(in_task_steps(), request)
            entry.update(audited=True, run_id=run["run_id"], run_dir=run["run_dir"], changes=run.get("changes"),
                         webhook=run.get("webhook"))
    except Exception as exc:
        entry.pop("changed", None)
        entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        raise BenchmarkFailed(entry) from exc
    return entry


class NightlyProblems(DataError):
    """Some files were refused or some benchmark could not be audited; the others were (the flow
    run fails with it, naming each problem)."""


def nightly_problems(out: dict) -> list[str]:
    """One line per refused file and per benchmark that could not be ingested or audited."""
    from benchcert.tasks.ingest.service import OK_STATUSES

    problems = []
    for bench, entry in out["benchmarks"].items():
        problems += [f"{bench}: {r['message']}" for r in entry["files"] if r["status"] not in OK_STATUSES]
        if "error" in entry:
            problems.append(f"{bench}: {entry['error']}")
    return problems


@task(name="audit-benchmark", cache_policy=NO_CACHE)
def audit_benchmark_task(request: AuditRequest, dask_address: str) -> dict:
    """One benchmark's audit (a subflow) whose analyses run on the Dask cluster at ``dask_address``."""
    from benchcert.tasks.audit.distributed import dask_task_runner

    flow_ = audit_flow.with_options(task_runner=dask_task_runner(address=dask_address))
    return flow_(request)


def _audit_on_dask(requests: list[AuditRequest], dask_address: str | None, dask_workers: int | None,
                   export_dir: str | None) -> list[dict]:
    """Export the requests' benchmarks (all of one store), then audit them concurrently (threads of
    this flow, work on the cluster), each reading the export."""
    from benchcert.tasks.audit.distributed import dask_cluster
    from benchcert.tasks.store.export import export_parquet

    first = requests[0]
    export_dir = export_dir or str(Path(first.artifacts_root) / ".export")
    export_parquet(first.db, export_dir, benchmarks=[r.benchmark for r in requests], lock_timeout=first.lock_timeout)
    with dask_cluster(dask_address, dask_workers) as address:
        futures = [audit_benchmark_task.submit(r.model_copy(update={"export_dir": export_dir}), address)
                   for r in requests]
        runs = []
        for f in futures:  # one failed audit is that benchmark's problem, not the others'
            try:
                runs.append(f.result())
            except Exception as exc:  # noqa: BLE001
                runs.append(exc)
        return runs
