"""`benchcert serve` ends on SIGTERM once its Prefect API is gone (issue #39 finding 3).

Prefect's graceful stop pauses the deployments' schedules through the API, and its client
retried each call for a minute or more: serve outlived SIGTERM. A real `prefect server start`
on a free loopback port, `benchcert serve` against it, the server stopped, then SIGTERM.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout  # a hang guard, not a timing claim
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{log.read_text()[-3000:] if log.exists() else ''}")


def _start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                            start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_serve_exits_on_sigterm_after_its_prefect_api_is_gone(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_SERVER_UI_ENABLED": "false"}
    server_log, serve_log = tmp_path / "server.log", tmp_path / "serve.log"
    server = _start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env,
                    server_log)
    serve = None
    try:
        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=2) as resp:
                    return resp.status == 200
            except OSError:
                return False

        _wait(healthy, 180, "the Prefect server", server_log)
        serve = _start([str(BIN / "benchcert"), "serve", "--db", str(tmp_path / "s.duckdb"), "--inbox",
                        str(tmp_path / "inbox"), "--artifacts", str(tmp_path / "artifacts"), "--poll", "1"],
                       env, serve_log)
        _wait(lambda: "being served" in serve_log.read_text(), 120, "benchcert serve", serve_log)
        time.sleep(2)  # let the runner install its SIGTERM handler and poll once
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
        _wait(lambda: not healthy(), 30, "the Prefect server to stop", server_log)
        time.sleep(3)  # serve now polls an API that is gone
        assert serve.poll() is None or "cannot reach the Prefect API" in serve_log.read_text(), serve_log.read_text()
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(60)  # hang guard: before the fix it was still alive minutes later
            except subprocess.TimeoutExpired:
                raise AssertionError(f"benchcert serve ignored SIGTERM\n{serve_log.read_text()[-3000:]}") from None
        assert serve.returncode is not None
    finally:
        if serve is not None:
            _kill(serve)
        _kill(server)
