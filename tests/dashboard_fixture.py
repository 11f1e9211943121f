"""A dashboard fixture store: 3 benchmarks, a training run of 5 checkpoints with recorded verdicts, a regression,
a stale benchmark and a model named like markup. Shared by the dashboard's page tests and its browser tests.

Built with the audit's own functions (store -> matrices -> every registered analysis -> summary and report ->
stage and publish the run directory: a real audit minus the Prefect wrapper) and real recorded checkpoint
verdicts (tasks/compare/verdicts.checkpoint_verdict on the store), so every number a page shows can be checked
against the run's summary.json.

* benchmarks ``alpha``, ``beta``, ``gamma``: 4 subjects of 40 items in 2 domains;
* models ``org/base`` (the baseline), ``other/model``, a model named :data:`EVIL_MODEL`, and the training run
  ``org/ckpt@step-1000`` ... ``@step-5000`` (:data:`STEPS`), a little better at every step, except on ``beta``
  where step 5000 is much worse (:data:`REGRESSED`: its verdict is ``regressed``);
* two runs per benchmark: the first with steps 1000-3000 and their verdicts, the second with every model, the
  verdicts of steps 4000 and 5000 and the item analysis (audit --items); ``gamma``'s runs finished
  :data:`STALE_DAYS_AGO` days before the build;
* the suite :data:`SUITE` of the three benchmarks with a suite verdict of steps 4000 and 5000 among the artifacts.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from conftest import SMALL_MAP
from run_support import stage_and_publish

BENCHES = ("alpha", "beta", "gamma")
STEPS = (1000, 2000, 3000, 4000, 5000)
BASE = "org/base"
FAMILY = "org/ckpt"
EVIL_MODEL = '<script>console.error("xss")</script>'
REGRESSED = ("beta", f"{FAMILY}@step-5000")
STALE_DAYS_AGO = 10
#: A suite of the three benchmarks and the checkpoints it judged (a suite verdict each, tasks/artifacts/suites.py).
SUITE, SUITE_STEPS = "core", (4000, 5000)
#: The build's clock: every page that says "stale" is about this time.
NOW = dt.datetime(2026, 11, 27, 6, 0, tzinfo=dt.timezone.utc)


def _p(model: str, bench: str) -> float:
    if model == BASE:
        return 0.60
    if model.startswith(FAMILY + "@"):
        step = int(model.rsplit("-", 1)[1])
        return 0.20 if (bench, model) == REGRESSED else 0.55 + 0.04 * STEPS.index(step)
    return 0.50 if model == "other/model" else 0.40


def _csv(path: Path, bench: str, models: list[str], seed: int) -> Path:
    """Item-level logs: a shared item difficulty plus model noise, so paired gaps are tighter than unpaired."""
    rng = np.random.default_rng(seed)
    items = [(f"{bench}-s{s}-q{i}", f"s{s}", f"d{s % 2}") for s in range(4) for i in range(40)]
    u = np.random.default_rng(7 + BENCHES.index(bench)).random(len(items))
    lines = ["model,question,topic,area,correct"]
    quoted = {EVIL_MODEL: '"' + EVIL_MODEL.replace('"', '""') + '"'}
    for model in models:
        correct = (u + 0.15 * rng.standard_normal(len(items))) < _p(model, bench)
        lines += [f"{quoted.get(model, model)},{q},{t},{a},{int(c)}" for (q, t, a), c in zip(items, correct)]
    path.write_text("\n".join(lines) + "\n")
    return path


def audit(db: Path, benchmark: str, arts: Path, verdicts: list[dict], finished: dt.datetime, *,
          items: bool = False) -> Path:
    """The audit flow's steps without Prefect (see flows/audit.py and flows/bodies.py), writing one run directory
    that carries ``verdicts`` (checkpoint verdicts as tasks/compare/verdicts returns them)."""
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.audit import results
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.store import connection as store
    from benchcert.tasks.store.matrices import load_matrices, source_refs

    with store.open_store(db, write=False) as con:
        m = load_matrices(con, benchmark)
        sources = source_refs(con, benchmark)
    config = AuditConfig(baseline=None, options={"items": {"enabled": True}} if items else {})
    outputs = [run_analysis(name, fn, m, config) for name, fn in ANALYSES.items()]
    run_id = artifacts.new_run_id(finished)
    summary = results.build_summary(run_id=run_id, created_at=artifacts.iso(finished), matrices=m, config=config,
                                    outputs=outputs)
    if verdicts:
        summary = summary.model_copy(update={"verdicts": [results.verdict_entry(v) for v in verdicts]})
    fields = {"benchcert_version": "test", "run_id": run_id, "flow_run_id": None, "benchmark": benchmark,
              "status": "completed", "started_at": artifacts.iso(finished), "finished_at": artifacts.iso(finished),
              "config": {}, "sources": sources.to_dicts(), "timings_s": {}}
    return stage_and_publish(arts, summary=summary, manifest_fields=fields, tables=results.collect_tables(outputs),
                             report_html=results.build_report(summary, outputs, sources=sources))


def build(tmp: Path) -> tuple[Path, Path]:
    """Write the fixture's store and artifacts under ``tmp``; returns (store, artifacts root)."""
    from benchcert.tasks.compare.verdicts import checkpoint_verdict
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    db, arts = tmp / "store.duckdb", tmp / "artifacts"
    mapping = parse_mapping(SMALL_MAP)
    ckpts = [f"{FAMILY}@step-{s}" for s in STEPS]
    for b, bench in enumerate(BENCHES):
        age = dt.timedelta(days=STALE_DAYS_AGO) if bench == "gamma" else dt.timedelta(0)
        first = [BASE, "other/model", EVIL_MODEL, *ckpts[:3]]
        for k, (models, new) in enumerate([(first, ckpts[:3]), (ckpts[3:], ckpts[3:])]):
            path = _csv(tmp / f"{bench}-{k}.csv", bench, models, seed=100 * b + k)
            assert ingest_file(db, path, benchmark=bench, mapping=mapping).status == "ingested"
            verdicts = [checkpoint_verdict(db, bench, BASE, c).as_dict() for c in new]
            audit(db, bench, arts, verdicts, NOW - age - dt.timedelta(hours=2 - k), items=k == 1)
    suite_verdicts(db, arts)
    return db, arts


def suite_verdicts(db: Path, arts: Path) -> None:
    """The suite :data:`SUITE` of the three benchmarks judges :data:`SUITE_STEPS` against the baseline, and each
    suite verdict is written among the artifacts as the suite checkpoint writes it (flows/checkpoint_suite.py)."""
    from benchcert.tasks.artifacts.suites import write_suite_verdict
    from benchcert.tasks.compare.suite import SuiteRequest, compare_suite
    from benchcert.tasks.compare.suite_def import define

    suite = define(db, SUITE, BENCHES)
    for step in SUITE_STEPS:
        result = compare_suite(SuiteRequest(db=db, suite=suite, baseline=BASE, candidate=f"{FAMILY}@step-{step}"))
        write_suite_verdict(arts, {**result.as_dict(), "recorded_at": NOW.isoformat()})
