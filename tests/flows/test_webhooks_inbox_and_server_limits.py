"""Issue 14: webhooks (http/https only, no redirects, an overall deadline, a truthful outcome),
checkpoint event paths confined to the inbox, and the dashboard server's idle timeout."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# Imported at collection: importing Prefect the first time configures logging, which would drop the
# handler caplog installs for a test (so the refusal test passed or failed with the file order).
from benchcert.flows.checkpoint import LogsPathRefused, allowed_logs_path
from benchcert.tasks.audit.changes import WebhookError, check_webhook_url, notify_webhook
from benchcert.tasks.schemas import RunChanges

from run_support import _summary


@pytest.mark.parametrize("url", ["file:///etc/passwd", "data:text/plain,hi", "ftp://example.org/x", "junk",
                                 "http://", "https://exa mple.org/", "javascript:alert(1)", "", "http://h:99999/"])
def test_only_http_and_https_urls_with_a_host_are_accepted(url):
    with pytest.raises(WebhookError):
        check_webhook_url(url)


def test_good_urls_pass():
    assert check_webhook_url("https://hooks.example/benchcert?x=1") and check_webhook_url("http://127.0.0.1:8/")


class _Server:
    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.hits: list[tuple[str, str, bytes]] = []
        self.httpd.hits = self.hits
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _Hook(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _record(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        self.server.hits.append((method, self.path, self.rfile.read(n) if n else b""))

    def do_POST(self):
        self._record("POST")
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()
        elif self.path == "/fail":
            self.send_response(500)
            self.end_headers()
        else:
            self.send_response(204)
            self.end_headers()

    def do_GET(self):
        self._record("GET")
        self.send_response(200)
        self.end_headers()


def _with_changes():
    s = _summary("b", "r1")
    return s.model_copy(update={"changes": RunChanges(previous_run_id="r0", new_models=[], removed_models=[],
                                                      moves=[], regressions=["<m>"])})


def test_webhook_outcomes_are_truthful_and_redirects_not_followed():
    srv = _Server(_Hook)
    try:
        assert notify_webhook(srv.url + "/ok", _with_changes(), "/x") == "webhook 204"
        out = notify_webhook(srv.url + "/redirect", _with_changes(), "/x")
        assert out.startswith("webhook failed") and "302" in out and "not followed" in out
        assert notify_webhook(srv.url + "/fail", _with_changes(), "/x") == "webhook failed: HTTP 500"
        assert [h[:2] for h in srv.hits] == [("POST", "/ok"), ("POST", "/redirect"), ("POST", "/fail")]
        assert b'"regressions": ["<m>"]' in srv.hits[0][2]
        assert notify_webhook("file:///etc/passwd", _with_changes(), "/x").startswith("webhook failed")
    finally:
        srv.close()


def test_webhook_deadline_holds_against_a_trickling_server():
    """The issue's server sent one byte every 6 s; the 10 s per-read timeout never fired. The
    delivery must give up with the deadline's error while the server is still sending."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    stop = threading.Event()
    line = b"HTTP/1.1 200 OK\r\n"
    sent = []

    def trickle():
        conn, _ = lst.accept()
        conn.recv(65536)
        for ch in line:
            if stop.wait(0.4):
                break
            try:
                conn.send(bytes([ch]))
            except OSError:
                break
            sent.append(ch)
        conn.close()

    threading.Thread(target=trickle, daemon=True).start()
    out = notify_webhook(f"http://127.0.0.1:{lst.getsockname()[1]}/", _with_changes(), "/x", timeout=1.5)
    sent_when_it_returned = len(sent)
    stop.set()
    lst.close()
    assert out.startswith("webhook failed") and "within the 1.5 s deadline" in out, out
    assert sent_when_it_returned < len(line), "the delivery waited for the whole status line"


def test_audit_cli_refuses_a_bad_webhook_before_any_work(capsys, tmp_path):
    from benchcert.flows.cli import main

    code = main(["audit", "--db", str(tmp_path / "none.duckdb"), "--benchmark", "b", "--webhook", "file:///etc/passwd"])
    assert code == 2 and "only http:// and https://" in capsys.readouterr().err


# --- checkpoint event paths ------------------------------------------------------------------------

def test_checkpoint_logs_outside_the_inbox_are_refused_without_reading(tmp_path, capfd, caplog):

    inbox = tmp_path / "inbox"
    (inbox / "b").mkdir(parents=True)
    secret = tmp_path / "secret.csv"
    secret.write_text("model,item_id,score\nTOPSECRET,q,1\n")
    (inbox / "b" / "link.csv").symlink_to(secret)
    inside = inbox / "b" / "ok.csv"
    inside.write_text("x")
    assert allowed_logs_path(str(inside), str(inbox), None) == inside.resolve()
    for bad in (str(secret), str(inbox / ".." / "secret.csv"), str(inbox / "b" / "link.csv"), "/etc/passwd"):
        with pytest.raises(LogsPathRefused) as err:
            allowed_logs_path(bad, str(inbox), None)
        assert "TOPSECRET" not in str(err.value) and "nothing was read" in str(err.value)
    # Where the warning goes depends on whether Prefect configured logging in this process
    # (stderr) or not (pytest's log capture): read both.
    logged = capfd.readouterr().err + caplog.text
    assert "TOPSECRET" not in logged and "refused" in logged
    assert allowed_logs_path(str(secret), str(inbox), [str(tmp_path)]) == secret.resolve()
    with pytest.raises(LogsPathRefused):
        allowed_logs_path(str(secret), None, None)  # nothing configured: nothing allowed


def test_dashboard_server_closes_idle_connections(tmp_path):
    from benchcert.tasks.render.dashboard import make_server

    (tmp_path / "index.html").write_text("<html></html>")
    server = make_server(tmp_path, port=0, quiet=True, idle_timeout=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # An idle server that kept them open would leave recv() to our own socket timeout,
        # which raises instead of returning b"".
        socks = [socket.create_connection(server.server_address, timeout=20) for _ in range(20)]
        for s in socks:
            assert s.recv(1) == b""  # closed by the server, not by us
        for s in socks:
            s.close()
    finally:
        server.shutdown()
        server.server_close()


def test_nul_and_bidi_controls_never_reach_report_html():
    from benchcert.tasks.render.escape import escape

    name = "gpt\x00-\u202eliame\u202c<b>"
    out = escape(name)
    assert "\x00" not in out and "\u202e" not in out and "\u202c" not in out and "<b>" not in out
    from benchcert.tasks.render.dashboard import escape as _esc  # the dashboard's escaper is the shared one

    assert _esc(name) == out


def test_serve_refuses_a_bad_webhook_before_serving(capsys, tmp_path, monkeypatch):
    from benchcert.flows.cli import main

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # never reached
    code = main(["serve", "--db", str(tmp_path / "s.duckdb"), "--inbox", str(tmp_path / "in"), "--artifacts",
                 str(tmp_path / "a"), "--webhook", "ftp://example.org/hook"])
    assert code == 2 and "only http:// and https://" in capsys.readouterr().err
    assert not (tmp_path / "in").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_checkpoint_flow_refuses_logs_outside_the_inbox(tmp_path):
    """The issue's reproduction: `notify-checkpoint --logs /some/path` made the served flow read it."""
    from benchcert.flows.checkpoint import LogsPathRefused, checkpoint_deployment_flow

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    secret = tmp_path / "secret.csv"
    secret.write_text("model,item_id,score\nTOPSECRET,q,2\n")
    with pytest.raises(LogsPathRefused) as err:
        checkpoint_deployment_flow("m", "b", str(secret), str(tmp_path / "s.duckdb"), str(tmp_path / "a"),
                                   inbox=str(inbox))
    assert "TOPSECRET" not in str(err.value)
    assert not (tmp_path / "s.duckdb").exists()  # nothing was ingested, no store was even created


def test_dashboard_server_caps_concurrent_connections_and_keeps_serving(tmp_path):
    import urllib.request

    from benchcert.tasks.render.dashboard import make_server

    (tmp_path / "index.html").write_text("<html>ok</html>")
    server = make_server(tmp_path, port=0, quiet=True, idle_timeout=30, max_connections=4)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        idle = [socket.create_connection(server.server_address, timeout=5) for _ in range(4)]
        time.sleep(0.3)
        extra = socket.create_connection(server.server_address, timeout=5)
        assert extra.recv(1) == b""  # closed on arrival: every slot is held
        extra.close()
        for s in idle:
            s.close()
        time.sleep(0.3)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url, timeout=5) as resp:  # slots freed: served again
            assert resp.status == 200 and b"ok" in resp.read()
    finally:
        server.shutdown()
        server.server_close()


# --- issue #26 ----------------------------------------------------------------------------------------

def test_checkpoint_logs_path_with_a_nul_byte_is_the_refusal(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    with pytest.raises(LogsPathRefused) as err:
        allowed_logs_path(str(inbox / "b\x00x.csv"), str(inbox), None)
    assert "nothing was read" in str(err.value)


def test_webhook_retries_fit_inside_the_one_deadline(monkeypatch):
    """Finding 10: a server that never answers held the audit for 43 s (three 10 s tries plus
    backoff); the whole delivery, retries included, now ends by the one deadline."""
    from benchcert.tasks.audit import changes
    from benchcert.tasks.audit.steps import plain_steps

    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)  # accepts connections (the kernel's backlog) and never answers
    monkeypatch.setattr(changes, "WEBHOOK_DEADLINE_S", 1.5)
    tries = _count_tries(monkeypatch)
    out = plain_steps().notify(f"http://127.0.0.1:{lst.getsockname()[1]}/", _with_changes(), "/x")
    lst.close()
    # The first try was given the whole deadline and spent it: no time was left for another.
    assert isinstance(out, str) and "after 1 try within the 1.5 s deadline" in out, out
    assert tries == [1.5]


def _count_tries(monkeypatch) -> list[float]:
    """The deadline handed to each try of a webhook delivery, in order."""
    from benchcert.tasks.audit import changes

    deadlines: list[float] = []
    post = changes.post_json

    def counted(url, body, *, deadline):
        deadlines.append(round(deadline, 1))
        return post(url, body, deadline=deadline)

    monkeypatch.setattr(changes, "post_json", counted)
    return deadlines


def test_webhook_retries_a_failure_within_the_deadline(monkeypatch):
    srv = _Server(_Hook)
    try:
        from benchcert.tasks.audit.changes import deliver_webhook

        tries = _count_tries(monkeypatch)
        out = deliver_webhook(srv.url + "/fail", _with_changes(), "/x", deadline=3.0)
        assert out.startswith("webhook failed: HTTP 500") and "within the 3 s deadline" in out
        assert 2 <= len(srv.hits) <= 3 and len(tries) == len(srv.hits)
        # each retry gets what is left of the one deadline (a 1 s pause after each failure), not a deadline of its own
        assert tries[0] == 3.0 and all(later <= earlier - 1 for earlier, later in zip(tries, tries[1:])), tries
    finally:
        srv.close()
