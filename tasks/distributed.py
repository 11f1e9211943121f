"""Audit work on a Dask cluster, through Prefect's own integration (prefect-dask).

The single-process audit stays the default. With a cluster (``--dask-address tcp://...``,
or a ``LocalCluster`` of ``--dask-workers N`` processes), the audit flow submits its
analyses as Prefect tasks to a :class:`prefect_dask.DaskTaskRunner`. A worker reads its
inputs from the Parquet export of the store (tasks/export.py), never from the DuckDB file
(one writing process per file), and returns the analysis output to the flow, which builds
the summary and report and writes the artifacts and the run record, as it does alone. The
matrices are the same (the export's loader is the store's loader over Parquet views), so
the artifacts are the same (tests/test_distributed.py).

Each worker process keeps the matrices of the benchmark it last read, so several analyses
of one benchmark on one worker read the export once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from benchcert.tasks.analyses import ANALYSES, AnalysisOutput, AuditConfig, run_analysis
from benchcert.tasks.export import export_manifest, open_export
from benchcert.tasks.matrices import BenchmarkMatrices, load_matrices, source_refs
from benchcert.tasks.perturbation import with_variant_counts

#: LocalCluster settings: one thread per worker process (the analyses are numpy-bound and
#: set their own BLAS threads; see stats/_blas.py); the scheduler's HTTP server on a free
#: port, so two local clusters on one machine never collide on 8787.
LOCAL_CLUSTER_KWARGS = {"processes": True, "threads_per_worker": 1, "dashboard_address": ":0"}


def _quiet_scheduler() -> None:
    # The scheduler of a LocalCluster runs in this process and logs every worker at INFO;
    # keep a user's own setting if they chose one.
    logger = logging.getLogger("distributed")
    if logger.level == logging.NOTSET or logger.level < logging.WARNING:
        logger.setLevel(logging.WARNING)


def dask_task_runner(address: str | None = None, workers: int | None = None):
    """A DaskTaskRunner for a running scheduler (``address``) or a new LocalCluster of ``workers``."""
    from prefect_dask import DaskTaskRunner

    if address and workers:
        raise ValueError("give a Dask scheduler address or a number of local workers, not both")
    if address:
        if not address.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
            raise ValueError(f"dask address must look like tcp://HOST:PORT; got {address!r}")
        return DaskTaskRunner(address=address)
    if not workers or workers < 1:
        raise ValueError(f"dask workers must be a positive integer; got {workers!r}")
    _quiet_scheduler()
    return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                          cluster_kwargs={"n_workers": int(workers), **LOCAL_CLUSTER_KWARGS})


@contextlib.contextmanager
def dask_cluster(address: str | None = None, workers: int | None = None):
    """Yield a scheduler address: ``address`` itself, or a LocalCluster of ``workers`` closed on exit."""
    if address:
        dask_task_runner(address=address)  # validates it
        yield address
        return
    if not workers or workers < 1:
        raise ValueError(f"dask workers must be a positive integer; got {workers!r}")
    from distributed import LocalCluster

    _quiet_scheduler()
    with LocalCluster(n_workers=int(workers), **LOCAL_CLUSTER_KWARGS) as cluster:
        yield cluster.scheduler_address


def read_benchmark_export(export_dir: str, benchmark: str,
                          variant: str | None) -> tuple[BenchmarkMatrices, pl.DataFrame, float]:
    """What :func:`benchcert.tasks.prefect_tasks.read_benchmark` reads, from the Parquet export."""
    start = time.perf_counter()
    con = open_export(export_dir, benchmark)
    try:
        m = with_variant_counts(con, load_matrices(con, benchmark, variant))
        sources = source_refs(con, benchmark)
    finally:
        con.close()
    _ = (m.scores, m.item_subject, m.subject_domain)
    return m, sources, time.perf_counter() - start


def read_subsets_export(export_dir: str, benchmark: str) -> list:
    from benchcert.tasks.subsets import load_subsets

    con = open_export(export_dir, benchmark)
    try:
        return load_subsets(con, benchmark)
    finally:
        con.close()


_cache_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _cached_inputs(export_dir: str, benchmark: str, variant: str | None, export_id: str):
    m, _, seconds = read_benchmark_export(export_dir, benchmark, variant)
    return m, read_subsets_export(export_dir, benchmark), seconds


def analysis_from_export(export_dir: str, benchmark: str, variant: str | None, name: str,
                         config: AuditConfig) -> AnalysisOutput:
    """Run analysis ``name`` on the benchmark as exported (what a Dask worker does)."""
    stamp = export_manifest(export_dir)["export_id"]
    with _cache_lock:
        m, subsets, _ = _cached_inputs(export_dir, benchmark, variant, stamp)
    fn = ANALYSES[name]
    if name == "subsample":
        # The store's recorded subsets come from the export too: config.db is never opened here.
        fn = functools.partial(fn, subsets=subsets)
    return run_analysis(name, fn, m, dataclasses.replace(config, db=None))


analysis_from_export_task = task(name="analysis", cache_policy=NO_CACHE)(analysis_from_export)
