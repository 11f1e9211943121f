"""In-process and Prefect run modes: the same flow code, the same results, no Prefect where none is configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcert.flows.cli import main
from benchcert.flows.runs import IN_PROCESS, PREFECT, choose_mode, prefect_api_configured

from conftest import SMALL_CSV, SMALL_MAP

MAPS = [a for m in SMALL_MAP for a in ("--map", m)]
#: Fields that name the run or its time, and nothing else.
RUN_FIELDS = ("run_id", "created_at")


def _json(capsys, *argv) -> dict:
    code = main([str(a) for a in argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _content(run_dir: str) -> dict:
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in RUN_FIELDS}


@pytest.mark.usefixtures("prefect_harness")
def test_in_process_and_prefect_modes_write_the_same_summary(capsys, tmp_path):
    runs = {}
    for mode, flag in ((IN_PROCESS, "--in-process"), (PREFECT, "--prefect")):
        db, arts = tmp_path / f"{mode}.duckdb", tmp_path / f"arts-{mode}"
        ing = _json(capsys, "ingest", SMALL_CSV, "--db", db, "--benchmark", "b", *MAPS, "--json", flag)
        assert ing["run_mode"] == mode and ing["files"][0]["status"] == "ingested"
        out = _json(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", arts, "--json", flag)
        manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
        assert out["run_mode"] == manifest["run_mode"] == mode
        # A Prefect run names its flow run; an in-process run has none, and says so.
        assert (manifest["flow_run_id"] is not None) == (mode == PREFECT)
        runs[mode] = out
        # Recorded in the store's catalog either way.
        listed = _json(capsys, "runs", "--db", db, "--json")
        assert [r["run_id"] for r in listed] == [out["run_id"]] and listed[0]["status"] == "completed"
    a, b = _content(runs[IN_PROCESS]["run_dir"]), _content(runs[PREFECT]["run_dir"])
    assert a == b
    assert len(a["models"]) == 3  # not vacuous: the small log's three models
    tables = sorted(p.name for p in (Path(runs[IN_PROCESS]["run_dir"]) / "tables").iterdir())
    assert tables == sorted(p.name for p in (Path(runs[PREFECT]["run_dir"]) / "tables").iterdir())


def test_mode_follows_the_configured_api(monkeypatch, tmp_path):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert prefect_api_configured() is None and choose_mode() == IN_PROCESS
    assert choose_mode(True) == PREFECT
    (tmp_path / "profiles.toml").write_text('active = "srv"\n[profiles.srv]\nPREFECT_API_URL = "http://h:4200/api"\n'
                                           '[profiles.other]\n')
    assert prefect_api_configured() == "http://h:4200/api" and choose_mode() == PREFECT
    assert choose_mode(False) == IN_PROCESS
    monkeypatch.setenv("PREFECT_PROFILE", "other")
    assert choose_mode() == IN_PROCESS
    monkeypatch.setenv("PREFECT_API_URL", "http://x:1/api")
    assert choose_mode() == PREFECT


def test_in_process_commands_never_import_prefect(tmp_path):
    """A small ingest and its audit, in fresh processes without a Prefect API: Prefect is never imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    probe = ("import sys\n"
             "from benchcert.flows.cli import main\n"
             "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
             "assert not [m for m in sys.modules if m == 'prefect' or m.startswith('prefect.')], 'prefect imported'\n"
             "sys.exit(code)\n")
    db = tmp_path / "s.duckdb"
    for argv in (["--help"], ["ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", "b", *MAPS],
                 ["audit", "--db", str(db), "--benchmark", "b", "--artifacts", str(tmp_path / "a"), "--json"]):
        r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["run_mode"] == IN_PROCESS


def test_flow_parameters_are_serialised_as_prefect_serialises_them():
    """Oracle: benchcert's flows record JSON-like parameters themselves (no FastAPI import); the
    result equals Prefect's own serialisation (FastAPI's jsonable_encoder) value for value, and
    anything else is left to Prefect."""
    import enum
    from prefect.flows import Flow

    from benchcert.flows.audit import audit_flow
    from benchcert.flows.prefect_flow import JsonParameterFlow, json_parameter
    from benchcert.tasks.ingest.adapters.native import NativeMapping
    from benchcert.tasks.ingest.mapping import ColumnMapping
    from benchcert.tasks.audit.request import AuditRequest, CheckpointRequest

    class Colour(enum.Enum):
        red = "r"

    class Name(str):
        pass

    values = dict(db="a.duckdb", benchmark="b", alpha=0.05, variant=None, lock_timeout=600.0, n=3, flag=True,
                  hierarchy=["subject", "domain"], weights={"s1": 1.0, "s2": 0.5}, pair=(1, 2.5, "x"),
                  nested={"a": [{"b": (1, None)}], "c": {}}, mapping=ColumnMapping({"score": "s"}, format="csv"),
                  native=NativeMapping(columns={"a": "b"}, model="m", metric="acc"),
                  request=AuditRequest(db="a.duckdb", benchmark="b", hierarchy=["subject"], subject_weights={"s": 2},
                                       environments={"e": {"weights": {"x": 1.0}}}, all_pairs=True),
                  checkpoint=CheckpointRequest(model="m", logs="/l", audit=AuditRequest(db="a", benchmark="b"),
                                               allowed_logs=["/x"]),
                  # left to Prefect: not plain JSON
                  path=Path("/x/y"), colour=Colour.red, name=Name("n"), keys={1: "a"}, sa={"_sa_x": 1, "y": 2},
                  numbers={3, 1})
    assert type(audit_flow) is JsonParameterFlow
    got = audit_flow.serialize_parameters(values)
    want = Flow.serialize_parameters(audit_flow, values)
    assert got == want and list(got) == list(want)
    assert got["mapping"] == {"columns": {"score": "s"}, "format": "csv", "model": None,
                              "records": None, "replace_human_labels": False}  # not vacuous (records: --records,
    #                                                                    issue #26; --replace-human-labels, #39)
    assert got["request"]["hierarchy"] == ["subject"] and got["request"]["subject_weights"] == {"s": 2.0}
    assert got["checkpoint"]["audit"]["benchmark"] == "b" and got["checkpoint"]["allowed_logs"] == ["/x"]
    assert got["path"] == "/x/y" and got["colour"] == "r" and got["sa"] == {"y": 2}
    for odd in (values["path"], values["colour"], values["name"], values["keys"], values["sa"], values["numbers"]):
        with pytest.raises(Exception):
            json_parameter(odd)


@pytest.mark.usefixtures("prefect_harness")
def test_prefect_mode_audit_is_a_flow_run_with_its_parameters_and_no_fastapi(capsys, tmp_path):
    """A Prefect-mode audit in a fresh process: a real flow run on the API, its parameters recorded,
    its tasks run and recorded; FastAPI (0.2-0.6 s to import) and the ingest code are never imported."""
    import time
    import uuid

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_API_URL

    db = tmp_path / "s.duckdb"
    _json(capsys, "ingest", SMALL_CSV, "--db", db, "--benchmark", "b", *MAPS, "--json", "--in-process")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_API_URL=PREFECT_API_URL.value(), PREFECT_HOME=str(tmp_path / "prefect-home"))
    # As the program runs (main() reads sys.argv): the process ends right after Prefect's exit
    # handlers (flows/cli/__init__.py _before_exit), and the task runs below show that they delivered.
    probe = ("import sys\n"
             "from benchcert.flows.cli import main\n"
             "sys.argv = ['benchcert', *sys.argv[1:]]\n"
             "code = main()\n"
             "odd = [m for m in sys.modules if m.split('.')[0] == 'fastapi' or m == 'benchcert.tasks.ingest.service']\n"
             "assert not odd, odd\n"
             "sys.exit(code)\n")
    r = subprocess.run([sys.executable, "-c", probe, "audit", "--db", str(db), "--benchmark", "b", "--artifacts",
                        str(tmp_path / "a"), "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["run_mode"] == PREFECT
    manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
    flow_run_id = uuid.UUID(manifest["flow_run_id"])
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        assert run.state.is_completed()
        request = run.parameters["request"]  # the audit's one parameter (tasks/audit/request.py)
        assert request["db"] == str(db) and request["benchmark"] == "b"
        assert request["hierarchy"] == ["subject", "domain"] and request["alpha"] == 0.05
        # Task runs reach the API as events: wait for them a little.
        n_analyses = sum(k.startswith("analysis:") for k in out["timings_s"])
        for _ in range(60):
            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            if len(tasks) >= n_analyses + 4:
                break
            time.sleep(0.5)
        names = sorted(t.name.rsplit("-", 1)[0] for t in tasks)
    assert names.count("analysis") == n_analyses > 0
    assert {"load-matrices", "write-artifacts", "record-run", "publish-prefect-artifacts"} <= set(names)


def test_the_program_exits_with_its_code_and_all_its_output(tmp_path):
    """The benchcert program ends without the interpreter's teardown once its exit handlers ran
    (flows/cli/__init__.py _before_exit): the exit code and every byte of output still arrive, and an
    exit handler registered during the command still runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "PYTHONUNBUFFERED"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    probe = ("import atexit, sys\n"
             "from benchcert.flows import cli\n"
             "real = cli._main\n"
             "def _main(argv):\n"
             "    atexit.register(lambda: print('handler ran', file=sys.stderr))\n"
             "    code = real(argv)\n"
             "    for _ in range(20000):  # more than a pipe holds; the last part stays in Python's buffer\n"
             "        sys.stdout.write('xxxxxxxxxx')\n"
             "    sys.stdout.write('END')\n"
             "    return code\n"
             "cli._main = _main\n"
             "sys.argv = ['benchcert', *sys.argv[1:]]\n"
             "sys.exit(cli.main())\n")
    db = tmp_path / "s.duckdb"
    ok = subprocess.run([sys.executable, "-c", probe, "ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", "b",
                         *MAPS], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and ok.stdout.endswith("x" * 200000 + "END") and "stored: 1 file" in ok.stdout
    assert "handler ran" in ok.stderr
    missing = subprocess.run([sys.executable, "-c", probe, "audit", "--db", str(tmp_path / "none.duckdb"),
                              "--benchmark", "b"], capture_output=True, text=True, env=env, timeout=120)
    assert missing.returncode == 3 and "no such store" in missing.stderr and "handler ran" in missing.stderr
    # output that cannot be written (stdout on a full device) is not a success
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            # (a few lines, all still in Python's buffer when the command returns: the last flush fails)
            plain = ("import sys\nfrom benchcert.flows import cli\n"
                     "sys.argv = ['benchcert', *sys.argv[1:]]\nsys.exit(cli.main())\n")
            lost = subprocess.run([sys.executable, "-c", plain, "ingest", str(SMALL_CSV), "--db",
                                   str(tmp_path / "f.duckdb"), "--benchmark", "b", *MAPS], stdout=full,
                                  stderr=subprocess.PIPE, text=True, env=env, timeout=120)
        assert lost.returncode != 0, lost.stderr
