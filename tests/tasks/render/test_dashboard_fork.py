"""A cold dashboard build shared among forked processes (tasks/render/site_fork.py, issue #37): the same bytes as a
one-process build, every job's result in the jobs' order, a failing share fails the build and leaves nothing, and
the split is used only where it is safe (a process with no other thread) and pays (many runs)."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

import pytest

from benchcert.tasks.errors import UsageError
from benchcert.tasks.render import dashboard, site_fork
from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.site_fork import FORK_MIN_RUNS, fork_workers, run_split

from test_dashboard import RUNS, _write
from test_dashboard import arts  # noqa: F401  (the fixture: two benchmarks, one named like markup)

NOW = dt.datetime(2026, 11, 27, 6, 0, tzinfo=dt.timezone.utc)


def _files(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


@pytest.fixture
def forks(monkeypatch) -> list[int]:
    """Every fork this process makes (the child's pid), counted."""
    made, real = [], os.fork

    def counted():
        pid = real()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counted)
    return made


def test_a_forked_cold_build_writes_the_bytes_of_a_one_process_build(arts, tmp_path, monkeypatch, forks):
    for name in ("gsm8k", "arc", "hellaswag"):
        _write(arts, name, runs=RUNS[: 1 + len(name) % 3])
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 1)
    one = build_site(arts, tmp_path / "one", now=NOW)
    assert forks == []
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 3)
    split = build_site(arts, tmp_path / "split", now=NOW)
    assert len(forks) == 2  # two children beside the parent
    assert (split.pages, split.runs, split.problems) == (one.pages, one.runs, one.problems)
    got, want = _files(tmp_path / "split"), _files(tmp_path / "one")
    assert sorted(got) == sorted(want) and len(want) > 40
    assert [k for k in want if got[k] != want[k]] == []  # the site manifest and the kept records too
    # a rebuild of the forked site keeps every run, as of a one-process one
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 1)
    assert build_site(arts, tmp_path / "split", now=NOW).reused == one.runs


def test_run_split_returns_each_result_in_order_and_runs_in_several_processes(forks):
    jobs = list(range(9))
    done = run_split(jobs, lambda j: (2 * j, os.getpid()), weights=[j + 1 for j in jobs], workers=3,
                     parent=(lambda: "parent's own", 4))
    assert [r for r, _ in done.results] == [2 * j for j in jobs]
    pids = {pid for _, pid in done.results}
    assert len(forks) == 2 and pids == {os.getpid(), *forks}
    assert done.parent == "parent's own"
    # one worker: no fork, the same results
    assert run_split(jobs, lambda j: 2 * j, weights=[1] * 9, workers=1, parent=(lambda: 0, 0)).results == \
        [2 * j for j in jobs] and len(forks) == 2


def test_the_shares_balance_the_weights_with_the_parents_own_work():
    shares = site_fork._shares([200] * 10, 2, 400)
    assert sorted(i for s in shares for i in s) == list(range(10))
    assert [len(s) for s in shares] == [4, 6]  # the parent renders 400 units of its own beside its 4 jobs


def test_a_failing_child_fails_the_build_and_leaves_nothing(arts, tmp_path, monkeypatch, forks):
    parent, real = os.getpid(), dashboard._write_run

    def broken_in_a_child(*args, **kwargs):
        if os.getpid() != parent:
            raise OSError("disk full (planted)")
        return real(*args, **kwargs)

    monkeypatch.setattr(dashboard, "_write_run", broken_in_a_child)
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 2)
    with pytest.raises(OSError, match="disk full \\(planted\\)") as failed:  # as a one-process build fails
        build_site(arts, tmp_path / "site", now=NOW)
    assert len(forks) == 1
    assert "raised in a forked share" in "".join(failed.value.__notes__) and "broken_in_a_child" in \
        "".join(failed.value.__notes__)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifacts"]  # no site, no half-built folder


def test_the_parents_failure_waits_for_the_children_and_is_raised(forks):
    def job(j):
        if j == 0:
            raise ValueError("planted in the parent's share")
        return j

    with pytest.raises(ValueError, match="planted"):
        run_split([0, 1, 2], job, weights=[5, 1, 1], workers=2, parent=(lambda: None, 0))
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):  # reaped: no child left behind
        os.waitpid(forks[0], os.WNOHANG)


def test_the_split_only_when_asked_where_it_is_safe_and_pays():
    assert fork_workers(10 * FORK_MIN_RUNS, 1) == 1  # the default: one process
    assert fork_workers(FORK_MIN_RUNS - 1, 2) == 1
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert fork_workers(10 * FORK_MIN_RUNS, 2) == 1  # another thread: forking could leave its locks held
    finally:
        stop.set()
        other.join()
    if threading.active_count() == 1:  # (a pytest-xdist worker runs threads of its own)
        assert fork_workers(10 * FORK_MIN_RUNS, 64) == min(len(os.sched_getaffinity(0)), site_fork.MAX_WORKERS)


def test_processes_below_one_is_a_usage_error(arts, tmp_path):
    with pytest.raises(UsageError, match="processes must be >= 1; got 0"):
        build_site(arts, tmp_path / "site", processes=0)
