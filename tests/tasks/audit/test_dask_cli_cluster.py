"""An audit on a Dask cluster whose scheduler and two workers are separate processes, started with
distributed's own command-line tools (``dask scheduler``, ``dask worker tcp://...``) on 127.0.0.1, as a
team runs one: ``benchcert audit --dask-address`` reaches it by address and writes the artifacts of the
single-process audit. The cluster's processes are stopped when the module ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SMALL_CSV, SMALL_MAP
from dask_support import artifacts, same_artifacts

DASK = Path(sys.executable).with_name("dask")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(DASK), *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=log.parent)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    """``dask scheduler`` and two ``dask worker`` processes (one worker process, one thread each)."""
    from distributed import Client

    home = tmp_path_factory.mktemp("dask-cli")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                    home / "scheduler.log")]
    try:
        for i in range(2):
            procs.append(_start(["worker", address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
                                 "--no-dashboard", "--name", f"w{i}", "--local-directory", str(home / f"w{i}")],
                                home / f"worker{i}.log"))
        # a hang guard, not a timing claim: on a loaded machine the workers take a while to register
        deadline = time.monotonic() + 180
        while True:
            try:
                with Client(address, timeout=10) as client:
                    client.wait_for_workers(2, timeout=max(1.0, deadline - time.monotonic()))
                    break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in home.glob("*.log"))
                    pytest.fail(f"the dask command-line cluster did not start\n{logs}")
                time.sleep(1)
        yield address, procs
    finally:
        for p in reversed(procs):
            _stop(p)


@pytest.mark.usefixtures("prefect_harness")
def test_audit_on_a_command_line_cluster_gives_the_single_process_artifacts(cli_cluster, tmp_path, capsys):
    from distributed import Client

    from benchcert.flows.cli import main

    address, procs = cli_cluster
    db = tmp_path / "store.duckdb"
    assert main(["ingest", str(SMALL_CSV), "--db", str(db), "--benchmark", "small", "--in-process",
                 *[a for m in SMALL_MAP for a in ("--map", m)]]) == 0
    # both audits run as Prefect flow runs (the session's API), on one process and on the cluster
    assert main(["audit", "--db", str(db), "--benchmark", "small", "--artifacts", str(tmp_path / "single"),
                 "--prefect"]) == 0
    assert main(["audit", "--db", str(db), "--benchmark", "small", "--artifacts", str(tmp_path / "dask"),
                 "--dask-address", address, "--dask-block-models", "2"]) == 0
    capsys.readouterr()
    # The analyses ran in the worker processes the command line started (each counts the tasks it
    # executed), and those two are still the cluster's only workers.
    with Client(address) as client:
        names = sorted(w["name"] for w in client.scheduler_info()["workers"].values())
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert names == ["w0", "w1"]
    assert sum(executed.values()) > 0
    assert all(p.poll() is None for p in procs)
    runs = {}
    for kind in ("single", "dask"):
        (run_dir,) = [p for p in (tmp_path / kind / "small").iterdir() if p.is_dir() and not p.name.startswith(".")]
        runs[kind] = artifacts(run_dir, run_dir.name, "")
    same_artifacts(runs["single"], runs["dask"])
