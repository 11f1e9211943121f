"""`benchcert serve` ends on SIGTERM once its Prefect API is gone (issue #39 finding 3).

Prefect's graceful stop pauses the deployments' schedules through the API, and its client
retried each call for a minute or more: serve outlived SIGTERM. A real `prefect server start`
on a free loopback port, `benchcert serve` against it, the server stopped, then SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from prefect_server_support import BIN, free_port, healthy, server_env, start, start_server, wait


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_serve_exits_on_sigterm_after_its_prefect_api_is_gone(tmp_path):
    port = free_port()
    env = server_env(tmp_path / "prefect-home", port)
    server_log, serve_log = tmp_path / "server.log", tmp_path / "serve.log"
    server = start_server(port, env, server_log)
    serve = None
    try:
        wait(lambda: healthy(port), 180, "the Prefect server", [server_log])
        serve = start([str(BIN / "benchcert"), "serve", "--db", str(tmp_path / "s.duckdb"), "--inbox",
                       str(tmp_path / "inbox"), "--artifacts", str(tmp_path / "artifacts"), "--poll", "1"],
                      env, serve_log)
        wait(lambda: "being served" in serve_log.read_text(), 120, "benchcert serve", [serve_log])
        time.sleep(2)  # let the runner install its SIGTERM handler and poll once
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
        wait(lambda: not healthy(port), 30, "the Prefect server to stop", [server_log])
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
