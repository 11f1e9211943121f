"""Deployments against a real local Prefect server, started and stopped by this module.

A `prefect server start` on a free loopback port, `benchcert serve` serving both
deployments, a checkpoint event from `benchcert notify-checkpoint`, a hand-triggered
nightly run after a new file lands in the inbox, and two concurrent audits on one store.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from benchcert.tasks.store.connection import open_store, query_pl

from conftest import SMALL_CSV
from prefect_server_support import BIN, free_port, server_env, serving, wait

MAPPING = '[map]\nitem_id = "question"\nsubject = "topic"\ndomain = "area"\nscore = "correct"\n'


def _runs(db: Path) -> list[dict]:
    with open_store(db, write=False, lock_timeout=60) as con:
        return query_pl(con, "SELECT run_id, benchmark, status FROM runs ORDER BY started_at").to_dicts()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("server")
    port = free_port()
    env = server_env(work / "prefect-home", port, PREFECT_LOGGING_LEVEL="INFO")
    inbox, arts, db = work / "inbox", work / "artifacts", work / "store.duckdb"
    (inbox / "small").mkdir(parents=True)
    (inbox / "small" / "mapping.toml").write_text(MAPPING)
    shutil.copy(SMALL_CSV, inbox / "small" / "a.csv")
    # a.csv is already in the store before serving: the nightly run must recognise it by its hash.
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    r = ingest_file(db, inbox / "small" / "a.csv", benchmark="small",
                    mapping=parse_mapping(config=inbox / "small" / "mapping.toml"))
    assert r.status == "ingested"

    with serving(port, env, work, db, inbox, arts, "--baseline", "m1", "--poll", "1", "--dashboard",
                 str(work / "dashboard"), "--allow-logs", str(work / "checkpoints")) as logs:
        yield {"env": env, "db": db, "inbox": inbox, "arts": arts, "logs": logs, "work": work}


def test_checkpoint_event_starts_an_audit_with_artifacts(server):
    ckpt = server["work"] / "checkpoints" / "ckpt.csv"  # an allowed folder outside the inbox (--allow-logs)
    ckpt.parent.mkdir(exist_ok=True)
    ckpt.write_text("model,question,topic,area,correct\n"
                    + "".join(f"org/m@step-1,q{i},{t},{a},1\n" for i, t, a in
                              [(1, "algebra", "stem"), (2, "algebra", "stem"), (3, "algebra", "stem"),
                               (4, "physics", "stem"), (6, "law", "humanities")]))
    before = len(_runs(server["db"]))
    out = subprocess.run([str(BIN / "benchcert"), "notify-checkpoint", "--model", "org/m@step-1", "--benchmark",
                          "small", "--logs", str(ckpt), "--json"], env=server["env"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["event"] == "benchcert.checkpoint.logged"
    runs = wait(lambda: [r for r in _runs(server["db"])[before:] if r["status"] == "completed"] or None,
                 240, "the checkpoint run", server["logs"])
    # A run is recorded, then published (flows/runs.py): index.json lists it a moment after the
    # catalog row is committed.
    run_id = runs[-1]["run_id"]
    index_file = server["arts"] / "index.json"
    wait(lambda: index_file.is_file() and [b["latest_run_id"] for b in json.loads(index_file.read_text())["benchmarks"]]
          == [run_id], 60, "index.json listing the run as the benchmark's latest", server["logs"])
    summary = json.loads((server["arts"] / "small" / run_id / "summary.json").read_text())
    assert "org/m@step-1" in {m["model"] for m in summary["models"]}
    assert summary["changes"] is None or "org/m@step-1" in summary["changes"]["new_models"]
    (verdict,) = summary["verdicts"]
    assert verdict["kind"] == "checkpoint" and verdict["model"] == "org/m@step-1" and verdict["baseline"] == "m1"
    assert verdict["verdict"] in ("improved", "regressed", "inconclusive") and verdict["detail"]["n_shared"] == 5
    site = server["work"] / "dashboard" / "index.html"
    wait(lambda: site.is_file() and run_id in site.read_text(), 120, "the dashboard rebuild", server["logs"])
    # The serve log says the run started and finished, with benchmark, model, run id and verdict (issue #37).
    serve_log = server["logs"][1]
    line = wait(lambda: next((x for x in serve_log.read_text().splitlines()
                              if x.startswith("benchcert serve: finished benchcert-checkpoint")), None),
                60, "the serve log's finished line", server["logs"])
    assert f'run_id="{run_id}"' in line and f'verdict="{verdict["verdict"]}"' in line
    assert 'benchmark="small" model="org/m@step-1"' in line
    assert any(x.startswith("benchcert serve: started benchcert-checkpoint") and 'model="org/m@step-1"' in x
               for x in serve_log.read_text().splitlines())


def test_nightly_run_ingests_only_the_new_file(server):
    with open_store(server["db"], write=False, lock_timeout=60) as con:
        sources_before = query_pl(con, "SELECT path FROM sources")["path"].to_list()
        responses_before = con.execute("SELECT count(*) FROM responses").fetchall()[0][0]
    new = server["inbox"] / "small" / "b.csv"
    new.write_text("model,question,topic,area,correct\nm4,q1,algebra,stem,1\nm4,q2,algebra,stem,0\n"
                   "m4,q4,physics,stem,1\nm4,q6,law,humanities,1\n")
    out = subprocess.run([str(BIN / "prefect"), "deployment", "run", "benchcert-nightly/nightly-audit", "--watch",
                          "--watch-timeout", "240"], env=server["env"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    with open_store(server["db"], write=False, lock_timeout=60) as con:
        sources = query_pl(con, "SELECT path FROM sources")["path"].to_list()
        responses = con.execute("SELECT count(*) FROM responses").fetchall()[0][0]
    added = [p for p in sources if p not in sources_before]
    assert added == [str(new)]  # a.csv was recognised by its hash and not read again
    assert responses == responses_before + 4


def test_two_concurrent_audits_both_complete_and_lose_nothing(server):
    with open_store(server["db"], write=False, lock_timeout=60) as con:
        responses_before = query_pl(con, "SELECT * FROM responses").sort("model", "item_id")
    before = len(_runs(server["db"]))
    procs = [subprocess.Popen([str(BIN / "benchcert"), "audit", "--db", str(server["db"]), "--benchmark", "small",
                               "--artifacts", str(server["arts"]), "--json"], env=server["env"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    run_ids = {json.loads(o)["run_id"] for o, _ in outs}
    runs = _runs(server["db"])[before:]
    assert {r["run_id"] for r in runs} == run_ids and all(r["status"] == "completed" for r in runs)
    with open_store(server["db"], write=False, lock_timeout=60) as con:
        after = query_pl(con, "SELECT * FROM responses").sort("model", "item_id")
    assert after.equals(responses_before)
    index = json.loads((server["arts"] / "index.json").read_text())
    assert run_ids <= set(index["benchmarks"][0]["runs"])
