"""Issue #26 finding 14: a full disk says disk full (ENOSPC) with the path; "unexpected error" is
kept for bugs."""

from __future__ import annotations

import errno
import json

import polars as pl

from benchcert.flows.cli import main
from benchcert.flows.cli.errors import report


def test_a_full_disk_during_ingest_says_disk_full_with_the_path(capsys, tmp_path, monkeypatch):
    import duckdb

    from benchcert.tasks.ingest import many, service

    def full(*args, **kwargs):
        raise duckdb.IOException(f'Could not write file "{tmp_path}/s.duckdb.wal": No space left on device')

    monkeypatch.setattr(service, "stage_and_insert", full)
    # A small file is stored with the others of its command first; a failed write there (rolled
    # back) sends it down the one-file path, which reports it.
    monkeypatch.setattr(many, "_write_run", full)
    src = tmp_path / "a.csv"
    src.write_text("model,item_id,score\nm,q1,1\n")
    code = main(["ingest", str(src), "--db", str(tmp_path / "s.duckdb"), "--benchmark", "b", "--json"])
    (f,) = json.loads(capsys.readouterr().out)["files"]
    assert code == 1
    assert "disk full (ENOSPC)" in f["message"] and str(src) in f["message"] and "s.duckdb.wal" in f["message"]
    assert "cannot be read" not in f["message"]


def test_a_full_disk_at_the_top_of_a_command_is_not_an_unexpected_error(capsys):
    code = report("audit", pl.exceptions.ComputeError("failed to write /tmp/x/part-0.parquet: No space left on device"))
    err = capsys.readouterr().err
    assert code == 1 and "disk full (ENOSPC)" in err and "unexpected" not in err
    code = report("ingest", OSError(errno.ENOSPC, "No space left on device", "/data/store.duckdb"))
    err = capsys.readouterr().err
    assert "disk full (ENOSPC) writing /data/store.duckdb" in err and "unexpected" not in err


def test_an_unreachable_prefect_api_is_named_not_unexpected(capsys, monkeypatch):
    import httpx

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    report("serve", httpx.ConnectError("All connection attempts failed"))
    err = capsys.readouterr().err
    assert "cannot reach the Prefect API at http://127.0.0.1:9/api" in err and "unexpected" not in err


def test_a_bug_is_still_an_unexpected_error(capsys):
    report("audit", KeyError("x"))
    assert "unexpected error: KeyError" in capsys.readouterr().err


def test_serve_with_the_prefect_api_down_names_it_through_the_command(tmp_path):
    """Finding 14 through the CLI: `benchcert serve` against a Prefect API nobody answers says so in
    the user's terms (the old message was "unexpected error: ConnectError")."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_HOME": str(tmp_path / "ph")}
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", "serve", "--db", str(tmp_path / "s.duckdb"),
                        "--artifacts", str(tmp_path / "a"), "--inbox", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    assert "cannot reach the Prefect API" in r.stderr and "unexpected error" not in r.stderr
