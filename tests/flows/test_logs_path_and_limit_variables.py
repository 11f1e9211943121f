"""Issue #39 probe findings in the flows: a checkpoint logs path that is a symlink loop, the limit
variables' checks (bounded, exit 2 naming the variable)."""

from __future__ import annotations

import pytest

# Imported at collection (see test_webhooks_inbox_and_server_limits.py: Prefect configures logging on first import).
from benchcert.flows.checkpoint import LogsPathRefused, allowed_logs_path


def test_checkpoint_logs_path_that_is_a_symlink_loop_in_the_inbox_is_the_refusal(tmp_path):
    inbox = tmp_path / "inbox"
    (inbox / "b").mkdir(parents=True)
    a, b = inbox / "b" / "a.csv", inbox / "b" / "b.csv"
    a.symlink_to(b)
    b.symlink_to(a)
    (inbox / "b" / "self.csv").symlink_to(inbox / "b" / "self.csv")
    (inbox / "b" / "loopdir").symlink_to(inbox / "b" / "loopdir")
    for path, what in ((a, "a symlink loop"), (inbox / "b" / "self.csv", "a symlink to itself"),
                       (inbox / "b" / "loopdir" / "x.csv", "a symlink loop")):
        with pytest.raises(LogsPathRefused) as err:
            allowed_logs_path(str(path), str(inbox), None)
        assert str(path) in str(err.value) and what in str(err.value) and "nothing was read" in str(err.value)


@pytest.mark.parametrize("raw", ["abc", "0", "1" * 30])
def test_a_bad_loop_blas_threads_variable_is_a_usage_error_naming_it(tmp_path, raw):
    """The variable is read when stats/ is first imported: a fresh process, as a user runs it."""
    import os
    import subprocess
    import sys

    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    table = tmp_path / "t.csv"
    table.write_text("model,item_id,score\nm1,q1,1\nm1,q2,0\nm2,q1,1\nm2,q2,1\n")
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, table, benchmark="b", mapping=parse_mapping()).status == "ingested"
    env = {**os.environ, "BENCHCERT_LOOP_BLAS_THREADS": raw}
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", "audit", "--db", str(db), "--benchmark", "b",
                        "--artifacts", str(tmp_path / "a")], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "BENCHCERT_LOOP_BLAS_THREADS" in r.stderr and "from 1 to" in r.stderr and "Traceback" not in r.stderr
