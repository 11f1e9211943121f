"""Issue #39 probe findings in the flows: a checkpoint logs path that is a symlink loop, the limit
variables' checks (bounded, exit 2 naming the variable)."""

from __future__ import annotations

import pytest

# Imported at collection (see test_hardening_network.py: Prefect configures logging on first import).
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
