"""The steps of a run as plain functions: no Prefect here.

``flows/steps.py`` wraps these as Prefect tasks (with retries on I/O) for runs
against a Prefect API; ``flows/runs.py`` calls them directly when no API is configured, so a
command typed at a terminal never waits for a Prefect server to start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: an ingest should not pay for scipy and the analyses
    import polars as pl

    from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
    from benchcert.tasks.store.matrices import BenchmarkMatrices


def read_benchmark(db: str | None, benchmark: str, variant: str | None, lock_timeout: float,
                   export_dir: str | None = None, out_of_core: bool = False,
                   block_models: int | None = None) -> tuple[BenchmarkMatrices, pl.DataFrame, float]:
    """Matrices and sources of one benchmark, from the store ``db`` or, with ``export_dir``, from its
    Parquet export (tasks/store/export.py: what Dask workers read; the same loaders, the same matrices).

    ``out_of_core``: the matrices without the score matrix (tasks/store/blocked.py), read from the
    store by blocks of ``block_models`` models when an analysis asks; the per-subject counts are
    computed here, block by block, and counted as reading."""
    import contextlib

    from benchcert.tasks.store import connection as store
    from benchcert.tasks.store.matrices import load_matrices, source_refs

    start = time.perf_counter()
    if export_dir is not None:
        from benchcert.tasks.store.export import open_export

        opened = contextlib.closing(open_export(export_dir, benchmark))
    else:
        opened = store.open_store(db, write=False, lock_timeout=lock_timeout)
    with opened as con:
        if out_of_core:
            if export_dir is not None:
                raise ValueError("an out-of-core audit reads the store, not an export")
            from benchcert.tasks.store.blocked import BLOCK_MODELS, load_blocked, store_opener

            m = load_blocked(con, benchmark, variant, store_opener(db, lock_timeout),
                             block_models=block_models or BLOCK_MODELS)
        else:
            m = load_matrices(con, benchmark, variant)
            from benchcert.tasks.audit.analyses import needs

            if needs("variant_counts"):  # an analysis declares it reads them (the perturbation tests)
                from benchcert.tasks.perturbation.service import with_variant_counts

                # Variant counts ride along only when the benchmark has >= 3 variants.
                m = with_variant_counts(con, m)
            if export_dir is None:
                m.store_inputs = store_inputs(con, m)
        sources = source_refs(con, benchmark)
    # Materialise the derived arrays here so their cost is counted as reading, once.
    _ = (m.subject_counts if out_of_core else m.scores, m.item_subject, m.subject_domain)
    return m, sources, time.perf_counter() - start


def store_inputs(con, m: BenchmarkMatrices) -> dict:
    """The inputs the registered analyses declare and otherwise read from the store themselves
    (contract.INPUTS: parse flags, option probabilities, recorded subsets), read on the connection the
    matrices were read on: the store is opened once for the analyses' inputs instead of once per input
    (about 0.03 CPU s each; docs/scale.md), and every input is of the same state of the store.

    An input that cannot be read here is left out: its analysis then reads it itself, as it would
    without this, and reports why it could not.
    """
    from benchcert.tasks.audit.analyses import needs

    out = {}
    for name, read in input_readers(con, m.benchmark, m.variant, m.models).items():
        if needs(name):
            try:
                out[name] = read()
            except Exception:  # (a DuckDB error of any kind: the analysis' own read names it in the run)
                continue
    return out


def input_readers(con, benchmark: str, variant: str, models) -> dict:
    """The reader of each store input (contract.INPUTS) on ``con``, a store's or an export's connection
    (tasks/store/export.py: the same tables, as views), for the benchmark's variant and ``models``."""
    from benchcert.tasks.store.option_probs import load_option_probs
    from benchcert.tasks.store.parse_flags import load_parse_flags
    from benchcert.tasks.subsample.subsets import load_subsets

    return {"parse_flags": lambda: load_parse_flags(con, benchmark, variant, list(models)),
            "option_probs": lambda: load_option_probs(con, benchmark, variant=variant, models=list(models))[0],
            "subsets": lambda: load_subsets(con, benchmark)}


def analysis(name: str, matrices: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis

    return run_analysis(name, ANALYSES[name], matrices, config)


def write_run_artifacts(root: str, summary, manifest_fields: dict, tables: dict, report_html: str) -> tuple[Path, float]:
    """Stage the run's files (hidden, locked); the flow publishes them once the run is recorded."""
    from benchcert.tasks.artifacts import runs as artifacts

    start = time.perf_counter()
    staged = artifacts.stage_run(root, summary=summary, manifest_fields=manifest_fields, tables=tables,
                                 report_html=report_html)
    return staged, time.perf_counter() - start


def record_run(db: str, lock_timeout: float, artifacts_root: str | None = None, **fields) -> float:
    """Record the run in the catalog; then, under the same lock, finish what a killed audit left
    under ``artifacts_root`` (a staged run it had recorded is published, others are removed)."""
    import polars as pl

    from benchcert.tasks.artifacts import runs as artifacts

    from benchcert.tasks.store import connection as store

    start = time.perf_counter()
    with store.open_store(db, write=True, lock_timeout=lock_timeout) as con:
        results = fields.pop("results", None)
        store.record_run(con, store.RunRecord(**fields), results)
        if artifacts_root is not None:
            recorded = set(store.list_runs(con).filter(pl.col("status") == "completed")["run_id"].to_list())
            artifacts.recover_stale(artifacts_root, recorded)
    return time.perf_counter() - start


def artifact_key(benchmark: str, what: str) -> str:
    """A stable Prefect artifact key (lowercase letters, digits, dashes) for a benchmark."""
    import hashlib
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", benchmark.lower()).strip("-")[:40] or "benchmark"
    digest = hashlib.sha256(benchmark.encode("utf-8")).hexdigest()[:6]
    return f"benchcert-{slug}-{digest}-{what}"


def notify(url: str, summary, run_dir: str) -> float:
    from benchcert.tasks.audit.changes import deliver_webhook

    start = time.perf_counter()
    status = deliver_webhook(url, summary, run_dir)  # its retries inside one deadline: none around it
    if status.startswith("webhook failed"):
        raise RuntimeError(status)  # the run is kept
    return time.perf_counter() - start


def rebuild_dashboard(artifacts_root: str, out_dir: str) -> str:
    from benchcert.tasks.render.dashboard import build_site

    report = build_site(artifacts_root, out_dir)
    return str(report.out)


def verdict(db: str, benchmark: str, baseline: str, candidate: str, alpha: float, lock_timeout: float,
            question: str = "items") -> dict:
    from benchcert.tasks.compare.verdicts import checkpoint_verdict

    return checkpoint_verdict(db, benchmark, baseline, candidate, alpha=alpha, record=True,
                              lock_timeout=lock_timeout, question=question).as_dict()


def is_transient(exc: BaseException) -> bool:
    """Worth another try: an I/O failure, not a mistake in the input (unknown benchmark or variant,
    bad data, a store that is locked or not a store: a UserError) which would fail the same way again,
    nor a bug (a ValueError, LookupError or TypeError of our own)."""
    from benchcert.tasks.errors import UserError

    return not isinstance(exc, (UserError, ValueError, LookupError, TypeError))


def ingest_many(db: str, paths: list[str], benchmark: str | None, mapping, allow_rejects: bool,
                lock_timeout: float, atomic: bool = False):
    from benchcert.tasks.ingest.many import ingest_files

    return ingest_files(db, paths, benchmark=benchmark, mapping=mapping, allow_rejects=allow_rejects,
                        lock_timeout=lock_timeout, atomic=atomic)


@dataclass(frozen=True)
class Steps:
    """The callables one run is made of: plain functions (in-process) or Prefect tasks.

    The flow bodies in flows/bodies.py call only these, so both modes run the same code.
    ``notify`` returns the webhook's seconds, or the reason (a string) when every try failed.
    """

    mode: str  # "in_process" | "prefect"
    load_matrices: Callable
    analysis: Callable
    write_artifacts: Callable
    record_run: Callable
    publish: Callable | None
    notify: Callable
    ingest_files: Callable  # (db, paths, benchmark, mapping, allow_rejects, lock_timeout, atomic=False)
    analyses_from_export: Callable | None  # the Dask fan-out (Prefect mode only)
    flow_run_id: Callable[[], str | None]


def _retrying(fn: Callable, retries: int, delay: float, condition: Callable[[BaseException], bool] = is_transient):
    """``fn`` tried up to ``retries`` more times on a transient failure, as the Prefect tasks are."""
    def call(*args, **kwargs):
        for attempt in range(retries + 1):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if attempt == retries or not condition(exc):
                    raise
                time.sleep(delay)
    return call


def plain_steps() -> Steps:
    """The steps as plain calls in this process, with the Prefect tasks' retry policy."""
    def notify_step(url, summary, run_dir):
        try:
            return notify(url, summary, run_dir)
        except Exception as exc:
            return str(exc)

    return Steps(mode="in_process", load_matrices=_retrying(read_benchmark, 2, 2.0), analysis=analysis,
                 write_artifacts=_retrying(write_run_artifacts, 2, 1.0), record_run=_retrying(record_run, 2, 2.0),
                 publish=None, notify=notify_step, ingest_files=ingest_many,
                 analyses_from_export=None,
                 flow_run_id=lambda: None)
