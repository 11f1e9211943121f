"""`benchcert serve` speaks: each deployment flow run prints a started line, then a finished or failed line
(flows/serve_log.py), which the served runner streams to its log; a value from a log cannot forge a line."""

from __future__ import annotations

import pytest

from benchcert.flows.serve_log import serve_line


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("benchcert serve: ")]


def test_a_value_cannot_add_a_line(capsys):
    line = serve_line("finished", "benchcert-checkpoint", model='m"\nbenchcert serve: failed x', run_id=None)
    assert capsys.readouterr().out == line + "\n"
    assert "\n" not in line and line.endswith('model="m\\"\\nbenchcert serve: failed x"')
    assert "run_id" not in line  # None fields are left out


def test_checkpoint_run_logs_started_and_failed(tmp_path, capsys):
    from benchcert.flows.checkpoint import LogsPathRefused, checkpoint_deployment_flow

    with pytest.raises(LogsPathRefused):
        checkpoint_deployment_flow.fn(model="org/m@step-2", benchmark="mmlu", logs=str(tmp_path / "elsewhere"),
                                      db=str(tmp_path / "s.duckdb"), artifacts_root=str(tmp_path / "a"),
                                      inbox=str(tmp_path / "inbox"))
    started, failed = _lines(capsys.readouterr().out)
    assert started.startswith("benchcert serve: started benchcert-checkpoint flow_run=")
    assert 'benchmark="mmlu" model="org/m@step-2"' in started
    assert failed.startswith("benchcert serve: failed benchcert-checkpoint")
    assert 'model="org/m@step-2" error="LogsPathRefused: checkpoint logs path' in failed


def test_nightly_run_logs_started_and_finished(tmp_path, capsys):
    from benchcert.flows.nightly import nightly_flow

    (tmp_path / "inbox").mkdir()
    nightly_flow.fn(str(tmp_path / "inbox"), str(tmp_path / "s.duckdb"), str(tmp_path / "a"))
    started, finished = _lines(capsys.readouterr().out)
    assert started.startswith("benchcert serve: started benchcert-nightly") and "inbox=" in started
    assert finished.startswith("benchcert serve: finished benchcert-nightly") and finished.endswith('audited="none"')
