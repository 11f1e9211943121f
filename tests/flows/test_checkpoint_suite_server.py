"""notify-checkpoint --suite on a real local Prefect server (issue #35): one event, ONE flow run that
ingests and audits every benchmark of a 3-benchmark suite, ONE recorded suite verdict and ONE webhook,
whose payload a local receiver checks."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.store.connection import open_store, query_pl

from prefect_server_support import BIN, free_port, server_env, serving, wait

BENCHMARKS = ("alpha", "beta", "gamma")


class _Receiver(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(json.loads(self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()


def _csv(model: str, acc: float, seed: int) -> str:
    rng = np.random.default_rng(seed)
    sc = (rng.random(300) < acc).astype(int)
    return "model,item_id,subject,score\n" + "".join(f"{model},q{i},s{i % 5},{sc[i]}\n" for i in range(300))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    work = tmp_path_factory.mktemp("suite-server")
    db, inbox, arts, logs = work / "store.duckdb", work / "inbox", work / "artifacts", work / "checkpoints"
    inbox.mkdir()
    for j, b in enumerate(BENCHMARKS):  # the baseline's results, ingested before serving
        path = work / f"base-{b}.csv"
        path.write_text(_csv("base", 0.6, j))
        assert ingest_file(db, path, benchmark=b, mapping=parse_mapping()).status == "ingested"
    from benchcert.tasks.compare.suite_def import define

    define(db, "core", list(BENCHMARKS))
    # the checkpoint's logs: a sub-folder for one benchmark, a file for the others
    (logs / "ckpt" / "alpha").mkdir(parents=True)
    (logs / "ckpt" / "alpha" / "a.csv").write_text(_csv("org/m@step-2", 0.6, 10))
    (logs / "ckpt" / "beta.csv").write_text(_csv("org/m@step-2", 0.3, 11))  # much worse
    (logs / "ckpt" / "gamma.csv").write_text(_csv("org/m@step-2", 0.6, 12))
    hooks = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    hooks.bodies = []
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    port = free_port()
    env = server_env(work / "prefect-home", port, PREFECT_LOGGING_LEVEL="INFO")
    try:
        with serving(port, env, work, db, inbox, arts, "--baseline", "base", "--poll", "1", "--allow-logs", str(logs),
                     "--webhook", f"http://127.0.0.1:{hooks.server_address[1]}/hook") as log_files:
            yield {"env": env, "db": db, "logs": logs / "ckpt", "hooks": hooks, "log_files": log_files, "arts": arts}
    finally:
        hooks.shutdown()


_LIST_RUNS = """
import asyncio, json
from prefect.client.orchestration import get_client

async def main():
    async with get_client() as client:
        flows = {f.id: f.name for f in await client.read_flows()}
        runs = await client.read_flow_runs()
        print(json.dumps([[flows.get(r.flow_id), r.parent_task_run_id is not None, r.state_type.value]
                          for r in runs]))

asyncio.run(main())
"""


def _flow_runs(env) -> list[list]:
    """[flow name, is a sub-flow run, state] of every flow run the server holds."""
    out = subprocess.run([str(BIN / "python"), "-c", _LIST_RUNS], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_event_one_flow_run_one_suite_verdict_one_webhook(served):
    out = subprocess.run([str(BIN / "benchcert"), "notify-checkpoint", "--model", "org/m@step-2", "--suite", "core",
                          "--logs", str(served["logs"]), "--json"], env=served["env"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["suite"] == "core"
    hooks = served["hooks"]
    wait(lambda: hooks.bodies or None, 300, "the suite webhook", served["log_files"])
    (body,) = hooks.bodies  # one webhook for the whole suite
    assert body["event"] == "benchcert.suite_verdict" and body["model"] == "org/m@step-2"
    assert body["baseline"] == "base" and body["suite"] == "core" and body["look"] == 1
    assert [b["benchmark"] for b in body["benchmarks"]] == list(BENCHMARKS)
    assert body["regressed_somewhere"] is True and body["regressed"] == ["beta"]
    assert body["score"]["verdict"] in ("improved", "regressed", "inconclusive") and "regressed somewhere: YES" \
        in body["text"]
    assert all(b["run_id"] for b in body["benchmarks"])
    # the suite verdict is also among the artifacts, for the dashboard (tasks/artifacts/suites.py)
    from benchcert.tasks.artifacts.suites import read_suite_verdicts

    (doc,), problems = read_suite_verdicts(served["arts"])
    assert problems == [] and doc["candidate"] == "org/m@step-2" and doc["look"] == 1
    assert doc["score"] == body["score"] and doc["runs"] == {b["benchmark"]: b["run_id"] for b in body["benchmarks"]}
    with open_store(served["db"], write=False, lock_timeout=60) as con:
        runs = query_pl(con, "SELECT benchmark, status FROM runs").to_dicts()
        suite_looks = query_pl(con, "SELECT * FROM suite_verdicts").to_dicts()
        looks = query_pl(con, "SELECT benchmark, look FROM verdicts").to_dicts()
    assert sorted(r["benchmark"] for r in runs) == sorted(BENCHMARKS) and {r["status"] for r in runs} == {"completed"}
    assert len(suite_looks) == 1 and suite_looks[0]["regressed_somewhere"]
    assert sorted(x["benchmark"] for x in looks) == sorted(BENCHMARKS)
    # ONE flow run: the checkpoint deployment's, no audit sub-flow runs
    runs = [r for r in _flow_runs(served["env"]) if r[2] != "SCHEDULED"]  # the nightly's future runs aside
    assert runs == [["benchcert-checkpoint", False, "COMPLETED"]], runs
