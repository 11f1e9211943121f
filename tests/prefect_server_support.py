"""A real `prefect server start` on a free loopback port, and the processes run against it: what the
tests of `benchcert serve` share (tests/flows/test_deployments_server.py, test_serve_sigterm.py)."""

from __future__ import annotations

import contextlib
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(home: Path, port: int, **extra: str) -> dict:
    """The environment of a server and its clients: its own PREFECT_HOME, the port's API, no
    analytics and no UI; ``extra`` adds variables."""
    return {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_SERVER_UI_ENABLED": "false",
            **extra}


def start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    """``cmd`` in its own process group (so that it can be signalled as a whole), output to ``log``."""
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                            start_new_session=True)


def start_server(port: int, env: dict, log: Path) -> subprocess.Popen:
    return start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, log)


@contextlib.contextmanager
def serving(port: int, env: dict, work: Path, db: Path, inbox: Path, arts: Path, *options: str):
    """A Prefect server on ``port`` and ``benchcert serve`` (the store ``db``, ``inbox``, ``arts`` and
    ``options``) against it, each healthy before the block runs and stopped after it; yields the logs
    ``[work/server.log, work/serve.log]``."""
    server_log, serve_log = work / "server.log", work / "serve.log"
    srv = start_server(port, env, server_log)
    serve = None
    try:
        wait(lambda: healthy(port), 180, "the Prefect server", [server_log])
        serve = start([str(BIN / "benchcert"), "serve", "--db", str(db), "--inbox", str(inbox), "--artifacts",
                       str(arts), *options], env, serve_log)
        wait(lambda: "being served" in serve_log.read_text(), 120, "benchcert serve", [serve_log])
        yield [server_log, serve_log]
    finally:
        if serve is not None:
            stop(serve)
        stop(srv)


def healthy(port: int) -> bool:
    """Whether the server on ``port`` answers its health check."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait(predicate, timeout: float, what: str, logs: list[Path] = ()):
    """``predicate()``'s first true value; an AssertionError with the ``logs``' tails after ``timeout``
    seconds (a hang guard, not a timing claim)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
