"""What changed since the previous run, and the regression webhook (against a local HTTP server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from benchcert.tasks.audit.changes import run_changes
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping
from benchcert.tasks.schemas import Interval, ModelSummary, ScoreSummary, Summary


def _summary(scores: dict[str, float], run_id: str = "r2") -> Summary:
    def model(name, p):
        s = ScoreSummary(estimate=p, intervals=[Interval(method="clustered_subject", lower=p - 0.05, upper=p + 0.05,
                                                         half_width=0.05, alpha=0.05)])
        return ModelSummary(model=name, n_items=100, coverage=1, n_subjects=5, pooled=s, macro=s)

    return Summary(run_id=run_id, benchmark="b", created_at="t", alpha=0.05, variant="", n_items=100,
                   n_models=len(scores), n_subjects=5, n_domains=1, analyses=[],
                   models=[model(k, v) for k, v in scores.items()])


def test_changes_name_new_removed_and_moved_models():
    previous = _summary({"a": 0.5, "b": 0.7, "gone": 0.4}, "r1").model_dump(mode="json")
    ch = run_changes(_summary({"a": 0.52, "b": 0.6, "new": 0.3}), previous)
    assert ch.previous_run_id == "r1" and ch.new_models == ["new"] and ch.removed_models == ["gone"]
    assert {(m.model, m.metric, m.direction) for m in ch.moves} == {("b", "macro", "down"), ("b", "pooled", "down")}
    assert ch.regressions == ["b"]  # a moved by 0.02, inside its previous +/- 0.05 interval
    assert run_changes(_summary({"a": 0.5}), None) is None


@pytest.fixture()
def webhook():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/hook", received
    srv.shutdown()


@pytest.mark.usefixtures("prefect_harness")
def test_regression_posts_to_the_webhook(tmp_path, webhook):
    from benchcert.flows.audit import audit_flow
    from benchcert.tasks.audit.request import AuditRequest

    url, received = webhook
    db, arts = tmp_path / "s.duckdb", tmp_path / "arts"
    first = tmp_path / "first.csv"
    # 8 subjects x 10 items, m mostly right; then 8 new subjects where m is always wrong.
    first.write_text("model,item_id,subject,score\n" + "".join(
        f"m,{s}-{i},s{s},{int(i != 0)}\n" for s in range(8) for i in range(10)))
    second = tmp_path / "second.csv"
    second.write_text("model,item_id,subject,score\n" + "".join(
        f"m,{s}-{i},s{s},0\n" for s in range(8, 16) for i in range(10)))
    mapping = parse_mapping()
    assert ingest_file(db, first, benchmark="b", mapping=mapping).status == "ingested"
    request = AuditRequest(db=str(db), benchmark="b", artifacts_root=str(arts), webhook_url=url)
    run1 = audit_flow(request)
    assert run1["changes"] is None and received == []
    assert ingest_file(db, second, benchmark="b", mapping=mapping).status == "ingested"
    run2 = audit_flow(request)
    assert run2["changes"]["previous_run_id"] == run1["run_id"] and run2["changes"]["regressions"] == ["m"]
    (body,) = received
    assert body["event"] == "benchcert.regression" and body["regressions"] == ["m"]
    assert body["run_id"] == run2["run_id"] and body["moves"][0]["direction"] == "down"
