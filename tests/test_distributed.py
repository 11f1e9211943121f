"""The Dask path (prefect-dask DaskTaskRunner on a real distributed.LocalCluster of 2 worker
processes, started by the tests themselves and shared by the session: conftest.py dask_address;
no other service): the same artifacts as the single-process audit, and the nightly flow audits
benchmarks in parallel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from benchcert.tasks.export import export_parquet

#: Fields that name the run or its time: the only ones allowed to differ between the paths.
RUN_FIELDS = {"run_id", "flow_run_id", "started_at", "finished_at", "created_at", "timings_s", "run_dir"}
#: ... and the artifacts root, which the test chooses apart for the two runs.
RUN_FIELDS |= {"artifacts_root"}


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in RUN_FIELDS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _artifacts(run_dir: Path, run_id: str, started: str) -> dict:
    out = {}
    for p in sorted(run_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = str(p.relative_to(run_dir))
        if p.suffix == ".json":
            out[rel] = _strip(json.loads(p.read_text(encoding="utf-8")))
        elif p.suffix == ".parquet":
            out[rel] = pl.read_parquet(p)
        else:
            text = p.read_text(encoding="utf-8").replace(run_id, "RUN")
            out[rel] = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "TIME", text)
    return out


def _same_artifacts(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        if isinstance(a[k], pl.DataFrame):
            assert a[k].equals(b[k]), k
        else:
            assert a[k] == b[k], k


def _export_reads() -> int:
    from benchcert.tasks.distributed import _cached_inputs

    return _cached_inputs.cache_info().misses


def _block_reads() -> int:
    from benchcert.tasks.distributed import _cached_block

    return _cached_block.cache_info().misses


@pytest.mark.usefixtures("prefect_harness")
def test_local_cluster_audit_gives_the_single_process_artifacts(mmlu_db, dask_address, tmp_path):
    from benchcert.flows.audit import audit_flow
    from distributed import Client

    from benchcert.tasks.distributed import dask_task_runner

    single = audit_flow(str(mmlu_db), "mmlu_pro", str(tmp_path / "single"))
    export = tmp_path / "export"
    export_parquet(mmlu_db, export)
    # A LocalCluster of 2 worker processes (conftest.py), reached by address; the hierarchical fits and
    # the pairs go out in blocks of 10 models (3 blocks, 6 pairs of blocks).
    flow = audit_flow.with_options(task_runner=dask_task_runner(address=dask_address))
    dask = flow(str(mmlu_db), "mmlu_pro", str(tmp_path / "dask"), export_dir=str(export), dask_block_models=10)
    with Client(dask_address) as client:
        reads = client.run(_export_reads)
        block_reads = client.run(_block_reads)
    assert dask["n_models"] == 29
    # The analyses ran in the worker processes, and each worker that worked read the export.
    assert len(reads) == 2 and sum(reads.values()) >= 1
    assert sum(block_reads.values()) >= 3
    a = _artifacts(Path(single["run_dir"]), single["run_id"], single["created_at"])
    b = _artifacts(Path(dask["run_dir"]), dask["run_id"], dask["created_at"])
    _same_artifacts(a, b)


def _interval(run_dir: str) -> tuple[str, str]:
    m = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
    return m["started_at"], m["finished_at"]


@pytest.mark.usefixtures("prefect_harness")
def test_nightly_flow_on_a_local_cluster_audits_two_benchmarks_in_parallel(dask_address, tmp_path):
    import shutil

    from benchcert.flows.nightly import nightly_flow

    from conftest import MMLU_CSV, MMLU_MAP, SMALL_CSV

    inbox = tmp_path / "inbox"
    (inbox / "mmlu_pro").mkdir(parents=True)
    (inbox / "small").mkdir()
    shutil.copy(MMLU_CSV, inbox / "mmlu_pro" / MMLU_CSV.name)
    shutil.copy(MMLU_MAP, inbox / "mmlu_pro" / "mapping.toml")
    shutil.copy(SMALL_CSV, inbox / "small" / SMALL_CSV.name)
    (inbox / "small" / "mapping.toml").write_text(
        '[map]\nmodel = "model"\nitem_id = "question"\nsubject = "topic"\ndomain = "area"\nscore = "correct"\n')
    db, arts = tmp_path / "store.duckdb", tmp_path / "artifacts"
    out = nightly_flow(str(inbox), str(db), str(arts), dask_address=dask_address)
    runs = out["benchmarks"]
    assert runs["mmlu_pro"]["audited"] and runs["small"]["audited"]
    # Both audits were running at the same time: each started before the other finished.
    (s1, f1), (s2, f2) = _interval(runs["mmlu_pro"]["run_dir"]), _interval(runs["small"]["run_dir"])
    assert s1 < f2 and s2 < f1, (s1, f1, s2, f2)
    # Workers read the export, which holds what was audited.
    assert json.loads((arts / ".export" / "export.json").read_text())["benchmarks"] == ["mmlu_pro", "small"]
