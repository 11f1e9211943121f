"""An interrupted run leaves no process behind (issue #33).

Ctrl-C did not stop pytest (a flow interrupted mid-run retried for a minute to report its crash
to the Prefect server, which the same Ctrl-C had stopped), and killing it left the Prefect server
of the session running. Here a small suite that starts what the project's sessions start (this
project's conftest: its Prefect API and Dask LocalCluster fixtures, plus a child process of a
test) runs in a pytest of its own, serially and on xdist workers; once every test is inside a
flow run it gets Ctrl-C (SIGINT to its process group, as a terminal sends it), SIGINT to pytest
alone, or SIGTERM (``kill``). It must exit, the flow must have reached the server with its crash,
and no process it started may outlive it. Processes are found by a tag in their environment,
which every descendant inherits, so one whose parent died is found too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from conftest import TESTS

TAG = "BENCHCERT_INTERRUPT_PROBE"

SUITE_CONFTEST = """
import runpy
import sys

sys.path.insert(0, {tests!r})
# the project's conftest itself: its fixtures and hooks become this suite's
globals().update({{k: v for k, v in runpy.run_path({conftest!r}).items() if not k.startswith("__")}})
"""

SUITE_TEST = """
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect import flow, task


@task
def until_interrupted(marker):
    Path(marker).touch()
    while True:
        time.sleep(0.05)


@flow
def interrupted_mid_run(marker):
    until_interrupted(marker)


@pytest.fixture
def child():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    try:
        yield p
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("k", [0, 1])
def test_runs_until_interrupted(k, prefect_harness, dask_address, child):
    from distributed import Client

    with Client(dask_address) as client:
        assert client.submit(sum, [1, 2]).result() == 3
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    interrupted_mid_run(str(Path({markers!r}, f"{{worker}}-{{k}}")))
"""

CASES = {
    "ctrl-c": (signal.SIGINT, True, 0),
    "sigterm": (signal.SIGTERM, False, 0),
    "ctrl-c-xdist": (signal.SIGINT, True, 2),
    "sigint-to-controller-xdist": (signal.SIGINT, False, 2),
    "sigterm-xdist": (signal.SIGTERM, False, 2),
}
# Each case starts one or two Prefect servers and Dask clusters (20-40 CPU seconds): the default
# suite runs a SIGINT and a SIGTERM case, make study the rest.
IN_DEFAULT_SUITE = ("ctrl-c", "sigterm-xdist")


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            pass
    return found


def _reap(procs) -> None:
    # an orphan of the inner run may have been handed to this process (a subreaper)
    for p in procs:
        try:
            os.waitpid(p.pid, os.WNOHANG)
        except OSError:
            pass


def _live(procs) -> list[psutil.Process]:
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            pass
    return alive


def _progress(tag: str, log) -> tuple:
    """What moves while the interrupted run is still stopping: its processes (one starting or
    ending) and its log's size."""
    return tuple(sorted(p.pid for p in _tagged(tag))), log.stat().st_size


def _cpu(tag: str) -> float:
    """CPU seconds used so far by the run's live processes."""
    cpu = 0.0
    for p in _tagged(tag):
        try:
            cpu += sum(p.cpu_times()[:4])
        except psutil.Error:
            pass
    return cpu


def _described(procs) -> list[tuple]:
    """(pid, end of its command line) of each process still there, for a failure message."""
    out = []
    for p in procs:
        try:
            out.append((p.pid, " ".join(p.cmdline())[-80:]))
        except psutil.Error:
            pass
    return out


def _wait_stopped(proc: subprocess.Popen, tag: str, log, *, idle: float = 60.0, busy: float = 0.5,
                  cap: float = 600.0) -> float:
    """Wait for the interrupted pytest to exit while its stop makes progress; the seconds it took.

    A fixed timeout (180 s) takes a slow but progressing teardown on a loaded machine for a hang.
    Progress is a process of the run starting or ending, a log line (:func:`_progress`), or work:
    more than ``busy`` CPU seconds a second, on average over at least half of ``idle``, since the
    last such change. Some CPU use is no progress: a run that ignores the signal polls, and idle,
    the -n 2 suite's Prefect servers and Dask clusters used 0.20 CPU s a second (the serial one
    0.12; load 4.6). A run without progress for ``idle`` seconds has hung; one still stopping
    after ``cap`` seconds never ends. Real stops took 12-18 s, a change at least every 6 s (load
    4.6-8.8); a quiet stretch of over 60 s, seen twice, was a hang (:func:`_as_from_a_terminal`):
    2.05 CPU s in its last 60 s, the idle rate, no work.
    """
    start = last_change = time.monotonic()
    state, cpu_then = _progress(tag, log), _cpu(tag)
    while proc.poll() is None:
        time.sleep(0.5)
        now, new, cpu = time.monotonic(), _progress(tag, log), _cpu(tag)
        worked = now - last_change > idle / 2 and cpu - cpu_then > busy * (now - last_change)
        if new != state or worked:
            state, last_change, cpu_then = new, now, cpu
        if now - last_change > idle or now - start > cap:
            what = (f"no progress for {now - last_change:.0f} s ({now - start:.0f} s after the signal)"
                    if now - last_change > idle else f"still stopping {now - start:.0f} s after the signal")
            pytest.fail(f"pytest did not stop: {what}; {cpu - cpu_then:.2f} CPU s since the last change by "
                        f"{_described(_tagged(tag))}:\n{log.read_text()}")
    return time.monotonic() - start


def _wait_gone(procs, *, idle: float = 30.0) -> list[psutil.Process]:
    """Wait while ``procs`` are still exiting (a Dask worker whose parent went): until none is left,
    or until none has ended for ``idle`` seconds; the ones left. Not a fixed 10 s, which an exit on
    a loaded machine can outlast."""
    left = _live(procs)
    last_change = time.monotonic()
    while left and time.monotonic() - last_change < idle:
        time.sleep(0.2)
        now_left = _live(left)
        if len(now_left) < len(left):
            last_change = time.monotonic()
        left = now_left
    return left


def _wait_for(markers, n: int, proc: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + 600  # a wait for the suite to start on a loaded machine, not a bound on it
    while len(list(markers.iterdir())) < n:
        if proc.poll() is not None:
            pytest.fail(f"the suite ended before it was interrupted:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"the suite never started its tests:\n{log.read_text()}")
        time.sleep(0.2)


def _as_from_a_terminal() -> None:
    """SIGINT at its default, as pytest started at a terminal has it. A job a shell starts in
    the background (``make test &``) ignores SIGINT, and so does what it starts: the inner pytest
    then installed no handler of its own (the session's leaves a caller's choice alone), and in
    2 of 4 such runs its task was still looping after Ctrl-C (py-spy), a hang."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("case", [c if c in IN_DEFAULT_SUITE else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_an_interrupted_run_leaves_no_process_behind(case, tmp_path):
    signum, to_group, workers = CASES[case]
    suite, markers = tmp_path / "suite", tmp_path / "markers"
    suite.mkdir()
    markers.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "conftest.py").write_text(SUITE_CONFTEST.format(tests=str(TESTS), conftest=str(TESTS / "conftest.py")))
    (suite / "test_runs.py").write_text(SUITE_TEST.format(markers=str(markers)))
    tag = uuid.uuid4().hex
    log = tmp_path / "pytest.log"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s"]
    argv += ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    # not the outer run's xdist worker identity
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {TAG: tag}
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=suite, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_as_from_a_terminal)
    seen: list[psutil.Process] = []
    try:
        _wait_for(markers, max(workers, 1), proc, log)
        started = _tagged(tag)
        seen.extend(started)
        assert any("uvicorn" in " ".join(p.cmdline()) for p in started), [p.cmdline() for p in started]
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        took = _wait_stopped(proc, tag, log)
        # what is exiting already (a Dask worker whose parent went) is given the time it takes
        seen.extend(_tagged(tag))
        left = _wait_gone(seen)
        assert not left, (f"still running after pytest exited ({took:.0f} s after the signal): "
                          f"{[(p.pid, p.cmdline()) for p in left]}\n{log.read_text()}")
        # The flow, interrupted mid-run, reported its crash to a server still running (a server
        # that Ctrl-C had stopped first cost a minute of retries before pytest could stop).
        out = log.read_text()
        assert "Connection refused" not in out and "ConnectError" not in out, out
    finally:
        seen.extend(_tagged(tag))
        for p in seen:
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _reap(seen)


#: A run that ignores the signal: it neither exits nor gets anywhere, but polls and uses some CPU
#: (as the inner suite's task, Prefect servers and Dask heartbeats do).
POLLING = "import time\nwhile True:\n    sum(range(20000))\n    time.sleep(0.01)"
#: A stop that works a whole core (no process ending, no line) is progress until the cap.
WORKING = "while True:\n    pass"


@pytest.mark.parametrize("code,expected", [(POLLING, "no progress for"), (WORKING, "still stopping")])
def test_the_waits_after_the_signal_still_catch_a_hang(code, expected, tmp_path):
    # Polling (about 3% of a core) is a hang for _wait_stopped: counted as progress, its CPU kept
    # the former wait going to the cap. Working a core (at least a fifth of one at load 9) is
    # progress until the cap. Either is a survivor for _wait_gone.
    tag, log = uuid.uuid4().hex, tmp_path / "pytest.log"
    log.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", code], env=os.environ | {TAG: tag})
    try:
        assert [p.pid for p in _wait_gone([psutil.Process(proc.pid)], idle=1.0)] == [proc.pid]
        with pytest.raises(pytest.fail.Exception, match=expected):
            _wait_stopped(proc, tag, log, idle=3.0, busy=0.1, cap=6.0 if code is WORKING else 30.0)
    finally:
        proc.kill()
        proc.wait()
