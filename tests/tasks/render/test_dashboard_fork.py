"""A cold dashboard build shared among forked processes (tasks/render/site_fork.py, issue #37): the same bytes as a
one-process build, every job's result in the jobs' order, a failing share fails the build and leaves nothing, and
the split is used only where it is safe (a process with no other thread) and pays (many runs)."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path

import pytest

from benchcert.tasks.errors import UsageError
from benchcert.tasks.render import dashboard, site_fork
from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.site_fork import FORK_MIN_RUNS, finish, finish_quietly, fork_shares, fork_workers

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
    for name in ("gsm8k", "arc", "hellaswag", "broken"):
        _write(arts, name, runs=RUNS[: 1 + len(name) % 3])
    # problems in several shares, listed in the one-process order: a corrupt run, a benchmark with no readable run,
    # a run listed twice and an index entry without a benchmark name
    next((arts / "gsm8k").iterdir()).joinpath("summary.json").write_text("{not json")
    for run in (arts / "broken").iterdir():
        run.joinpath("manifest.json").unlink()
    index = json.loads((arts / "index.json").read_text())
    index["benchmarks"][0]["runs"].append(index["benchmarks"][0]["runs"][0])
    index["benchmarks"].insert(1, {"dir": "nowhere", "runs": ["x"]})
    (arts / "index.json").write_text(json.dumps(index))
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 1)
    one = build_site(arts, tmp_path / "one", now=NOW)
    assert forks == []
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 3)
    split = build_site(arts, tmp_path / "split", now=NOW)
    assert len(forks) == 2  # two children beside the parent
    assert (split.pages, split.runs, split.problems) == (one.pages, one.runs, one.problems)
    assert len(one.problems) == 4 and one.benchmarks == split.benchmarks == 5
    got, want = _files(tmp_path / "split"), _files(tmp_path / "one")
    assert sorted(got) == sorted(want) and len(want) > 40
    assert [k for k in want if got[k] != want[k]] == []  # the site manifest and the kept records too
    # a rebuild of the forked site keeps every run, as of a one-process one
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 1)
    assert build_site(arts, tmp_path / "split", now=NOW).reused == one.runs


def test_forked_shares_signal_their_early_output_and_return_their_results_in_order(forks, tmp_path):
    def work(share, signal):
        (tmp_path / f"early-{share}").write_text(str(os.getpid()))
        signal()
        return (2 * share, os.getpid())

    children = fork_shares([1, 2, 3], work)
    assert len(forks) == 3
    for share, child in zip([1, 2, 3], children):
        child.ready()  # its early file is there before its result
        assert (tmp_path / f"early-{share}").read_text() == str(child.pid)
    done = finish(children)
    assert [r for r, _ in done] == [2, 4, 6] and [p for _, p in done] == forks
    assert finish(children) == done  # each child reaped once, its result kept


def test_a_child_failing_before_its_early_output_raises_there(forks):
    def work(share, signal):
        if share == 0:
            raise ValueError("planted before the signal")
        signal()
        return share

    children = fork_shares([0, 1], work)
    with pytest.raises(ValueError, match="planted before the signal") as failed:
        children[0].ready()
    assert "raised in a forked share" in "".join(failed.value.__notes__)
    children[1].ready()
    with pytest.raises(ValueError, match="planted"):
        finish(children)
    for pid in forks:
        with pytest.raises(ChildProcessError):  # reaped: no child left behind
            os.waitpid(pid, os.WNOHANG)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_a_failing_fork_raises_its_own_error_and_leaves_no_pipe_or_child(forks, monkeypatch):
    """The fork's error (here EAGAIN: no process left) is what the caller sees, not a failure of a child forked
    before it; the failing pass's pipes are closed and the children forked so far reaped."""
    import errno

    counted = os.fork
    calls = []

    def fork_once():
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable (planted)")
        return counted()

    monkeypatch.setattr(os, "fork", fork_once)

    def work(share, signal):
        raise ValueError("the first child failed (planted)")

    open_fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="planted") as failed:
        fork_shares([0, 1, 2], work)
    assert failed.value.errno == errno.EAGAIN and len(forks) == 1
    assert set(os.listdir("/proc/self/fd")) == open_fds  # every pipe of both passes closed
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(forks[0], os.WNOHANG)


def test_the_shares_balance_the_weights_with_the_parents_own_work():
    split = site_fork.shares([200] * 10, 2, 400)
    assert sorted(i for s in split for i in s) == list(range(10))
    assert [len(s) for s in split] == [4, 6]  # the parent renders 400 units of its own beside its 4 jobs


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


def test_the_parents_failure_waits_for_the_children(forks):
    children = fork_shares([0, 1], lambda share, signal: share)
    try:
        raise ValueError("planted in the parent")
    except ValueError:
        finish_quietly(children)  # what the build does before raising its own exception
    assert len(forks) == 2
    for pid in forks:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_the_split_only_when_asked_where_it_is_safe_and_pays():
    assert fork_workers(10 * FORK_MIN_RUNS, 1) == 1  # asked for one process
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
        # the default (None): two processes where two cores may be used
        assert fork_workers(10 * FORK_MIN_RUNS, None) == min(len(os.sched_getaffinity(0)), 2)
        assert fork_workers(FORK_MIN_RUNS - 1, None) == 1
        assert fork_workers(10 * FORK_MIN_RUNS, 64) == min(len(os.sched_getaffinity(0)), site_fork.MAX_WORKERS)


def test_processes_below_one_is_a_usage_error(arts, tmp_path):
    with pytest.raises(UsageError, match="processes must be >= 1; got 0"):
        build_site(arts, tmp_path / "site", processes=0)


def _case_tree(tmp_path: Path, monkeypatch) -> Path:
    """An old tree holding both ``Case/`` and ``case/`` (written before new capitalised names were hashed)."""
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.artifacts.folders import safe_component
    from benchcert.tasks.artifacts.runs import new_run_id

    arts = tmp_path / "arts"
    with monkeypatch.context() as m:
        m.setattr(artifacts, "benchmark_folder", lambda root, name: safe_component(name))
        for b in ("Case", "case"):
            for _ in range(2):
                _publish_one(arts, b, new_run_id())
    return arts


def _case_insensitive(monkeypatch) -> None:
    """The site's benchmark folders made as on a case-insensitive disk (macOS, docs/artifacts.md): a new folder
    whose name folds onto an entry already there is refused."""
    real = dashboard._bench_folder

    def bench_folder(site: Path, folder: str, in_place: bool) -> Path:
        if not in_place and any(p.name.casefold() == folder.casefold() for p in site.iterdir()):
            raise FileExistsError(f"[case-insensitive disk] {site / folder}")
        return real(site, folder, in_place)

    monkeypatch.setattr(dashboard, "_bench_folder", bench_folder)


def _same_as_one_process(arts: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 1)
    one = build_site(arts, tmp_path / "one", now=NOW)
    monkeypatch.setattr(dashboard, "fork_workers", lambda n_runs, processes: 2)
    split = build_site(arts, tmp_path / "split", now=NOW)
    got, want = _files(tmp_path / "split"), _files(tmp_path / "one")
    assert (split.pages, split.runs, split.problems) == (one.pages, one.runs, one.problems)
    assert sorted(got) == sorted(want) and [k for k in want if got[k] != want[k]] == []
    assert len([p for p in (tmp_path / "one").iterdir() if p.is_dir() and not p.name.startswith("_")]) == 2
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []  # nothing left aside


def test_an_old_tree_whose_folders_fold_together_is_built_in_one_process(tmp_path, monkeypatch, forks):
    """Which benchmark keeps its folder when two fold together (``Case/`` and ``case/``) only the whole build
    decides: the listing says so before any fork, so shares never make both folders, which a case-insensitive
    disk would refuse (the build raised FileExistsError there)."""
    arts = _case_tree(tmp_path, monkeypatch)
    _case_insensitive(monkeypatch)
    _same_as_one_process(arts, tmp_path, monkeypatch)
    assert forks == []  # not split at all


def test_a_folder_reached_through_a_link_that_could_fold_onto_another_is_built_in_one_process(tmp_path, monkeypatch,
                                                                                              forks):
    """``case``'s own (hashed) folder is a link to ``Case/``: its runs resolve into ``Case/``, which is not its own,
    so its site folder is chosen by name (``case``, or hashed where ``Case`` took it): the entries' folders do not
    fold together, the two plain names do."""
    from benchcert.tasks.artifacts import runs as artifacts
    from benchcert.tasks.artifacts.folders import hashed_folder, safe_component
    from benchcert.tasks.artifacts.runs import new_run_id

    arts = tmp_path / "arts"
    for b in ("Case", "case"):
        with monkeypatch.context() as m:
            if b == "Case":  # an earlier version's plain folder; ``case``'s then hashed, as it folds onto it
                m.setattr(artifacts, "benchmark_folder", lambda root, name: safe_component(name))
            for _ in range(2):
                _publish_one(arts, b, new_run_id())
    link = arts / hashed_folder("case")
    assert sorted(p.name for p in arts.iterdir() if p.is_dir()) == sorted(["Case", link.name])
    for run in link.iterdir():
        run.rename(arts / "Case" / run.name)
    link.rmdir()
    link.symlink_to("Case")
    _case_insensitive(monkeypatch)
    _same_as_one_process(arts, tmp_path, monkeypatch)
    assert forks == []


def test_the_listing_splits_only_where_no_two_benchmarks_can_meet_in_a_folder(tmp_path):
    from benchcert.tasks.artifacts.folders import hashed_folder
    from benchcert.tasks.render.run_records import Listing

    def safe(*entries) -> bool:
        return dashboard._folders_split_safely(Listing(tmp_path, tmp_path / "index.json", list(entries)))

    def e(bench, folder):
        return {"benchmark": bench, "dir": folder, "runs": []}

    assert safe(e("mmlu", "mmlu"), e("Gsm8k", hashed_folder("Gsm8k")), e("mmlu", "mmlu"), {"dir": "x"}, "junk")
    assert not safe(e("Case", "Case"), e("case", "case"))  # an old tree's two plain folders
    assert not safe(e("Case", "Case"), e("case", hashed_folder("case")))  # the plain names fold together
    assert not safe(e("mmlu", "elsewhere"), e("arc", "arc"))  # not its own folder
    assert safe(e("Case", hashed_folder("Case")), e("arc", "arc"))


def test_shares_that_chose_folders_other_than_the_whole_builds_are_dropped(tmp_path, monkeypatch, forks):
    """Behind the listing's check, the split still compares its shares' folders with the whole build's choice
    and builds in one process when they differ (on a case-sensitive disk, where both folders could be made)."""
    arts = _case_tree(tmp_path, monkeypatch)
    monkeypatch.setattr(dashboard, "_folders_split_safely", lambda listing: True)
    _same_as_one_process(arts, tmp_path, monkeypatch)
    assert len(forks) == 1  # the split was tried, then dropped


def _publish_one(root: Path, bench: str, run_id: str) -> None:
    import polars as pl
    from run_support import _fields, _summary, stage_and_publish

    stage_and_publish(root, summary=_summary(bench, run_id), manifest_fields=_fields(bench, run_id,
                      "2026-11-01T00:00:00Z"), tables={"t": pl.DataFrame({"a": [1]})}, report_html="<html></html>")
