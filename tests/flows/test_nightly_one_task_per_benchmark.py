"""Issue 40: the nightly runs each benchmark as one Prefect task run (ingest and audit), no subflow and no
task run per step, and its artifacts are those of the audit run by plain functions."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest

from conftest import SMALL_CSV
from dask_support import artifacts, same_artifacts

MAPPING = '[map]\nitem_id = "question"\nsubject = "topic"\ndomain = "area"\nscore = "correct"\n'


def _inbox(root: Path) -> Path:
    inbox = root / "inbox"
    for name in ("alpha", "beta"):
        (inbox / name).mkdir(parents=True)
        (inbox / name / "mapping.toml").write_text(MAPPING)
        shutil.copy(SMALL_CSV, inbox / name / "a.csv")
    return inbox


def _run(out: dict, name: str) -> dict:
    entry = out["benchmarks"][name]
    run_dir = Path(entry["run_dir"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {"dir": run_dir, "id": entry["run_id"], "manifest": manifest}


@pytest.mark.parametrize("processes", [None, 2], ids=["one process", "two worker processes"])
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_is_one_task_run_per_benchmark_with_the_plain_audits_artifacts(tmp_path, processes):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter,
                                                FlowRunFilterId, FlowRunFilterParentFlowRunId)

    from benchcert.flows.nightly import nightly_flow
    from benchcert.flows.runs import run_audit
    from benchcert.tasks.audit.request import AuditRequest
    from benchcert.tasks.audit.steps import artifact_key, ingest_many
    from benchcert.tasks.ingest.mapping import parse_mapping

    inbox = _inbox(tmp_path)
    state = nightly_flow(str(inbox), str(tmp_path / "s.duckdb"), str(tmp_path / "arts"),
                         dashboard_dir=str(tmp_path / "dash"), processes=processes, return_state=True)
    assert state.is_completed()
    out = state.result()
    assert [e["audited"] for e in out["benchmarks"].values()] == [True, True]
    assert "changed" not in out["benchmarks"]["alpha"]  # (the task's own field stays inside the flow)

    # The reference: the same files ingested and audited by plain functions, in a store of its own.
    ref_db, ref_arts = tmp_path / "ref.duckdb", tmp_path / "ref-arts"
    for name in ("alpha", "beta"):
        mapping = parse_mapping(config=inbox / name / "mapping.toml")
        ingest_many(str(ref_db), [str(inbox / name / "a.csv")], name, mapping, False, 60)
        ref = run_audit("in_process", AuditRequest(db=str(ref_db), benchmark=name, artifacts_root=str(ref_arts)))
        got = _run(out, name)
        assert got["manifest"]["run_mode"] == "prefect" and ref["run_mode"] == "in_process"
        assert got["manifest"]["flow_run_id"] == str(state.state_details.flow_run_id)
        want = artifacts(Path(ref["run_dir"]), ref["run_id"], ref["created_at"])
        have = artifacts(got["dir"], got["id"], "")
        for a in (want, have):  # the mode, the store's path and the ingest's time name the run, not its results
            manifest = a["manifest.json"]
            manifest.pop("run_mode"), manifest["config"].pop("db")
            for source in manifest["sources"]:
                source.pop("ingested_at")
        same_artifacts(have, want)
    assert (tmp_path / "dash" / "index.html").is_file()

    flow_run_id = uuid.UUID(str(state.state_details.flow_run_id))
    with get_client(sync_client=True) as client:
        subflows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))
        for _ in range(60):  # task runs reach the API as events: wait for them a little
            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            if len(tasks) >= 3 and all(t.state and t.state.is_final() for t in tasks):
                break
            time.sleep(0.5)
        published = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    assert subflows == []
    assert sorted(t.name.rsplit("-", 1)[0] for t in tasks) == ["nightly-benchmark", "nightly-benchmark",
                                                               "rebuild-dashboard"]
    assert all(t.state.is_completed() for t in tasks)
    # The runs' Prefect artifacts are still published, from each benchmark's task run.
    keys = {artifact_key(b, what) for b in ("alpha", "beta") for what in ("models", "summary")}
    assert sorted(a.key for a in published) == sorted(keys)
    assert {a.task_run_id for a in published} <= {t.id for t in tasks if t.name.startswith("nightly-benchmark")}


def test_serve_passes_processes_to_the_nightly_deployment_only_when_asked(tmp_path):
    from benchcert.deployments.definitions import NIGHTLY, ServeOptions, build_deployments
    from benchcert.flows.cli import build_parser

    args = build_parser().parse_args(["serve", "--db", "s.duckdb", "--inbox", "in", "--artifacts", "a",
                                      "--processes", "2"])
    assert args.processes == 2
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(SystemExit) as err:
            build_parser().parse_args(["serve", "--db", "s.duckdb", "--inbox", "in", "--artifacts", "a",
                                       "--processes", bad])
        assert err.value.code == 2
    common = {"db": str(tmp_path / "s.duckdb"), "inbox": str(tmp_path / "in"), "artifacts_root": str(tmp_path / "a")}
    for processes, want in ((2, {"processes": 2}), (None, {})):
        (nightly,) = [d for d in build_deployments(ServeOptions(**common, processes=processes)) if d.name == NIGHTLY]
        assert {k: v for k, v in nightly.parameters.items() if k == "processes"} == want
