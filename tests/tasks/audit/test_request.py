"""The audit's request (tasks/audit/request.py): validated once, frozen, the analyses' config and
the run record derived from it, and the same audit whichever entry point carries it."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.audit.request import AuditRequest, CheckpointRequest

from conftest import SMALL_CSV, SMALL_MAP


def test_defaults_give_the_default_config_and_run_record():
    r = AuditRequest(db=Path("/s.duckdb"), benchmark="b")
    assert r.db == "/s.duckdb" and r.artifacts_root == "artifacts" and r.hierarchy == ("subject", "domain")
    assert r.audit_config() == AuditConfig(db="/s.duckdb")
    assert r.run_config() == {"db": "/s.duckdb", "benchmark": "b", "alpha": 0.05, "variant": None,
                              "artifacts_root": "artifacts", "analyses": None, "hierarchy": ["subject", "domain"],
                              "subject_weights": None, "baseline": None, "webhook": False, "environments": None,
                              "all_pairs": False, "out_of_core": False}
    assert AuditRequest(db="s", benchmark="b", hierarchy=None).hierarchy == ("subject", "domain")
    assert AuditRequest(db="s", benchmark="b", out_of_core=True).run_config()["out_of_core"] is True


def test_settings_reach_the_analyses_config():
    r = AuditRequest(db="s", benchmark="b", alpha=0.1, variant="v", hierarchy=["subject"],
                     subject_weights={"x": 2, "y": 1}, baseline="m", environments={"e": {}}, all_pairs=True,
                     webhook_url="https://h.example/x")
    assert r.audit_config() == AuditConfig(alpha=0.1, variant="v", hierarchy=("subject",),
                                           subject_weights={"x": 2.0, "y": 1.0}, baseline="m", db="s",
                                           environments={"e": {}}, all_pairs=True)
    assert r.run_config()["webhook"] is True and "https" not in json.dumps(r.run_config())


@pytest.mark.parametrize("bad, message", [
    ({"alpha": 0.0}, "alpha must be in (0, 1)"), ({"alpha": 1.5}, "alpha must be in (0, 1)"),
    ({"hierarchy": ["domain"]}, "hierarchy must be"), ({"subject_weights": {"x": 0.0}}, "not all 0"),
    ({"subject_weights": {"x": -1.0, "y": 2.0}}, "must be >= 0"), ({"alhpa": 0.1}, "alhpa"),
])
def test_a_bad_request_is_refused_when_made(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AuditRequest(db="s", benchmark="b", **bad)


def test_a_refusal_does_not_echo_the_webhook_url():
    with pytest.raises(pydantic.ValidationError) as err:
        AuditRequest(db="s", benchmark="b", alpha=2.0, webhook_url="https://h.example/SECRET-TOKEN")
    assert "SECRET-TOKEN" not in str(err.value)


def test_frozen():
    r = AuditRequest(db="s", benchmark="b")
    with pytest.raises(pydantic.ValidationError):
        r.alpha = 0.1


def test_checkpoint_request_holds_an_audit_request():
    c = CheckpointRequest(model="m", logs=Path("/in/b/x.csv"), audit={"db": "s", "benchmark": "b"},
                          allowed_logs=None)
    assert c.audit == AuditRequest(db="s", benchmark="b") and c.logs == "/in/b/x.csv" and c.allowed_logs == ()
    assert CheckpointRequest.model_validate_json(c.model_dump_json()) == c


def test_in_process_and_flow_bodies_take_the_same_request(tmp_path):
    """The in-process runner and audit_body write the run the request describes."""
    from benchcert.flows.cli import main
    from benchcert.flows.runs import IN_PROCESS, run_audit

    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", "b",
                 *[a for m in SMALL_MAP for a in ("--map", m)], "--in-process"]) == 0
    request = AuditRequest(db=db, benchmark="b", artifacts_root=tmp_path / "a", alpha=0.1, hierarchy=["subject"])
    out = run_audit(IN_PROCESS, request)
    manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
    assert out["alpha"] == 0.1 and manifest["config"]["hierarchy"] == ["subject"]
    assert Path(out["run_dir"]).parent.parent == tmp_path / "a"


@pytest.mark.usefixtures("prefect_harness")
def test_checkpoint_flow_takes_a_request_and_refuses_logs_outside_its_folders(tmp_path):
    from benchcert.flows.checkpoint import LogsPathRefused, checkpoint_flow

    (tmp_path / "inbox").mkdir()
    (tmp_path / "elsewhere" / "b").mkdir(parents=True)
    (tmp_path / "elsewhere" / "b" / "x.csv").write_text("model,item_id,score\nTOPSECRET,q,2\n")
    audit = AuditRequest(db=tmp_path / "s.duckdb", benchmark="b", artifacts_root=tmp_path / "a")
    with pytest.raises(LogsPathRefused, match="refused") as err:
        checkpoint_flow(CheckpointRequest(model="m", logs=tmp_path / "elsewhere", inbox=tmp_path / "inbox",
                                          allowed_logs=[tmp_path / "a"], audit=audit))
    assert "TOPSECRET" not in str(err.value) and not (tmp_path / "s.duckdb").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_checkpoint_flow_stops_on_a_limit_variable_with_no_usable_value(tmp_path, monkeypatch):
    """As the CLI and the nightly flow: before any file is read, naming the variable and value."""
    from benchcert.flows.checkpoint import checkpoint_flow
    from benchcert.tasks.ingest.adapters.limits import LimitSettingError

    (tmp_path / "inbox" / "b").mkdir(parents=True)
    (tmp_path / "inbox" / "b" / "x.csv").write_text("model,item_id,score\nm,q,1\n")
    audit = AuditRequest(db=tmp_path / "s.duckdb", benchmark="b", artifacts_root=tmp_path / "a")
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", "-3")
    with pytest.raises(LimitSettingError, match="BENCHCERT_MAX_LINE_BYTES.*-3"):
        checkpoint_flow(CheckpointRequest(model="m", logs=tmp_path / "inbox" / "b", inbox=tmp_path / "inbox",
                                          audit=audit))
    assert not (tmp_path / "s.duckdb").exists()
